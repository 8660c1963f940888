"""Karmada's CRD defaults (each ``default=`` of ``tests/data/karmada_crd_fields.txt``) where kube
puts a CRD's: an object created without them (or with nulls there) is stored and read back with
every default whose parent object exists, one stored without them is served with them (kube
defaults what it reads from etcd), and the hub's OpenAPI v2 and v3 publish each default on its
field, as kube publishes a CRD's (``kubectl explain`` and clients see them)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver import codec
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.openapi.upstream import UpstreamDefinitions
from controlplane.apiserver.resources import Registry
from controlplane.hub import hub_registry

from .karmada_crd_fields import ServedSchema, upstream_kinds

Client = TestClient[Any, Any]
#: Each kind with CRD defaults, as a Karmada user may write it: every parent of a default present,
#: no default set (the spec's own fields are defaulted under ``spec``).
SKELETONS: dict[str, dict[str, Any]] = {
    "PropagationPolicy": {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "bare", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "propagateDeps": True,
            "failover": {"application": {"decisionConditions": {}}},
            "placement": {"replicaScheduling": {}},
        },
    },
    "ClusterPropagationPolicy": {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "bare"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "Namespace", "name": "team"}],
            "propagateDeps": True,
            "failover": {"application": {"decisionConditions": {}}},
            "placement": {"replicaScheduling": {}},
        },
    },
    "CronFederatedHPA": {
        "apiVersion": "autoscaling.karmada.io/v1alpha1",
        "kind": "CronFederatedHPA",
        "metadata": {"name": "bare", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "rules": [{"name": "night", "schedule": "0 22 * * *", "targetReplicas": 1}],
        },
    },
}


def _crd_defaults() -> dict[str, list[tuple[str, Any]]]:
    kinds = upstream_kinds(UpstreamDefinitions.load().definitions)
    out: dict[str, list[tuple[str, Any]]] = {}
    for (_, kind), fields in kinds.items():
        defaults = [(f.path, f.default_value) for f in fields if f.default is not None]
        if defaults:
            out[kind] = defaults
    return out


CRD_DEFAULTS = _crd_defaults()


def _steps(path: str) -> list[str]:
    return path.replace("[]", ".[]").split(".")


def _at(obj: Any, path: str) -> Any:
    """The value at a data-file path (an array's first item for ``[]``)."""
    for step in _steps(path):
        obj = obj[0] if step == "[]" else obj.get(step)
    return obj


def _nulled(obj: dict[str, Any], path: str) -> None:
    *parents, last = _steps(path)
    for step in parents:
        obj = obj[0] if step == "[]" else obj[step]
    obj[last] = None


def _url(doc: dict[str, Any], *, name: bool = False) -> str:
    rt = hub_registry().require(doc["apiVersion"], doc["kind"])
    namespace = doc["metadata"].get("namespace")
    scope = f"namespaces/{namespace}/" if namespace else ""
    tail = f"/{doc['metadata']['name']}" if name else ""
    return f"/apis/{doc['apiVersion']}/{scope}{rt.plural}{tail}"


@pytest.fixture
def api_registry() -> Registry:
    return hub_registry()


def test_every_kind_with_crd_defaults_is_exercised() -> None:
    assert set(CRD_DEFAULTS) == set(SKELETONS)
    assert sum(map(len, CRD_DEFAULTS.values())) == 7 + 7 + 3


@pytest.mark.parametrize("kind", sorted(SKELETONS))
async def test_an_object_without_the_defaults_is_stored_with_the_crds(api: Client, kind: str) -> None:
    for nulls in (False, True):
        doc = copy.deepcopy(SKELETONS[kind])
        doc["metadata"]["name"] = f"bare-{str(nulls).lower()}"
        if nulls:  # a null is unset: kube's structural defaulting fills it
            for path, _ in CRD_DEFAULTS[kind]:
                _nulled(doc, path)
        created = await api.post(_url(doc), json=doc)
        assert created.status == 201, await created.text()
        read = await (await api.get(_url(doc, name=True))).json()
        for answer in (await created.json(), read):
            assert {path: _at(answer, path) for path, _ in CRD_DEFAULTS[kind]} == dict(CRD_DEFAULTS[kind])
    # An update that drops them gets them again.
    read["spec"] = copy.deepcopy(SKELETONS[kind]["spec"])
    updated = await api.put(_url(read, name=True), json=read)
    assert updated.status == 200, await updated.text()
    assert {path: _at(await updated.json(), path) for path, _ in CRD_DEFAULTS[kind]} == dict(
        CRD_DEFAULTS[kind]
    )


@pytest.mark.parametrize("kind", sorted(SKELETONS))
async def test_an_object_stored_without_the_defaults_is_served_with_them(
    objects: ObjectStore, api: Client, kind: str
) -> None:
    doc = copy.deepcopy(SKELETONS[kind])
    doc["metadata"] |= {"uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1}
    rt = objects.registry.require(doc["apiVersion"], doc["kind"])
    stored = {**doc, "apiVersion": rt.storage_api_version}
    await objects.store.create(
        rt.key(namespace=doc["metadata"].get("namespace"), name="bare"), codec.encode(stored)
    )
    read = await (await api.get(_url(doc, name=True))).json()
    assert {path: _at(read, path) for path, _ in CRD_DEFAULTS[kind]} == dict(CRD_DEFAULTS[kind])


async def test_no_parent_is_made_up_for_a_default(api: Client) -> None:
    """kube defaults a field only where its parent object exists: a policy without ``failover``
    or ``replicaScheduling`` gets neither."""
    doc = copy.deepcopy(SKELETONS["PropagationPolicy"])
    del doc["spec"]["failover"], doc["spec"]["placement"]["replicaScheduling"]
    created = await api.post(_url(doc), json=doc)
    assert created.status == 201, await created.text()
    spec = (await created.json())["spec"]
    assert "failover" not in spec and spec["placement"] == {}
    assert spec["priority"] == 0


def _kind_schema(definitions: dict[str, Any], group_version: str, kind: str) -> ServedSchema:
    group, version = group_version.split("/")
    for name, definition in definitions.items():
        if {"group": group, "version": version, "kind": kind} in definition.get(
            "x-kubernetes-group-version-kind", ()
        ):
            return ServedSchema(name, definitions)
    raise AssertionError(f"no definition of {kind}")


@pytest.mark.parametrize("kind", sorted(SKELETONS))
async def test_openapi_v2_and_v3_publish_each_default(hub: Client, kind: str) -> None:
    group_version = SKELETONS[kind]["apiVersion"]
    v2 = await (await hub.get("/openapi/v2")).json()
    v3 = await (await hub.get(f"/openapi/v3/apis/{group_version}")).json()
    # v3 names its parts #/components/schemas/..., v2 #/definitions/...: read both alike.
    v3_definitions = json.loads(
        json.dumps(v3["components"]["schemas"]).replace("#/components/schemas/", "#/definitions/")
    )
    for definitions in (v2["definitions"], v3_definitions):
        served = _kind_schema(definitions, group_version, kind)
        published = {path: (served.node(path) or {}).get("default") for path, _ in CRD_DEFAULTS[kind]}
        assert published == dict(CRD_DEFAULTS[kind])
