"""The operators' kinds are typed as their CRDs type them: every field of the upstream CRDs
(``tests/data/operator_crd_fields.txt``, path by path) is declared by the schema the hub serves,
with a type that takes what the CRD takes, and nothing is kept open that the CRD does not keep
open. So a misspelt field is what a cluster with the CRD installed makes of it: refused under
``fieldValidation=Strict`` (``strict decoding error: unknown field "spec.replicatedJobz"``),
dropped with a warning under ``Warn``, refused by server-side apply (``field not declared in
schema``); the upstream samples (``tests/data/operator_samples.yaml``) apply unchanged."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.openapi.catalog import SchemaCatalog
from controlplane.apiserver.openapi.structural import structural_schema
from controlplane.apiserver.openapi.upstream import UpstreamDefinitions
from controlplane.apiserver.resources import Registry

from .karmada_crd_fields import OPEN, VALUE_RULES, Field, ServedSchema, upstream_kinds
from .test_openapi import catalog, registry, upstream  # noqa: F401 (fixtures: the hub's registry and schemas)

Client = TestClient[Any, Any]
DATA = Path(__file__).resolve().parents[1] / "data" / "operator_crd_fields.txt"
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "operator_samples.yaml"
KINDS = re.findall(r"^\[kind (\S+) (\w+)", DATA.read_text(), re.MULTILINE)
APPLY = {"Content-Type": "application/apply-patch+yaml"}


def _resource(registry: Registry, group_version: str, kind: str) -> Any:  # noqa: F811
    return next(rt for rt in registry if (rt.api_version, rt.kind) == (group_version, kind))


@pytest.mark.parametrize(("group_version", "kind"), KINDS, ids=[kind for _, kind in KINDS])
def test_every_field_of_the_operators_crd_is_declared_with_its_type(
    registry: Registry, upstream: UpstreamDefinitions, catalog: SchemaCatalog,  # noqa: F811
    group_version: str, kind: str,
) -> None:
    fields = upstream_kinds(upstream.definitions, DATA.read_text())[(group_version, kind)]
    rt = _resource(registry, group_version, kind)
    served = ServedSchema(catalog.kind(rt).name, catalog.definitions([rt]))
    assert len(fields) >= 30
    assert [p for f in fields for p in served.problems(f)] == []


_UNNAMED_RULE = ("JobSet's mutating webhook names an unnamed failure policy rule (failurePolicyRuleN) before the CRD's "
                 "check; the hub runs no such webhook, so it does not require the name it would fill")
_REDIS = ("the hub also serves the later releases' embedded RocksDB backend (backend, storage), which needs no "
          "Redis address")
#: Where the served schema differs from the CRD on purpose: (kind, path, rule) -> why.
DELIBERATE: dict[tuple[str, str, str], str] = {
    ("JobSet", "spec.failurePolicy.rules[]", "required"): _UNNAMED_RULE,
    ("TrainingRuntime", "spec.template.spec.failurePolicy.rules[]", "required"): _UNNAMED_RULE,
    ("ClusterTrainingRuntime", "spec.template.spec.failurePolicy.rules[]", "required"): _UNNAMED_RULE,
    ("RayCluster", "spec.gcsFaultToleranceOptions", "required"): _REDIS,
    ("RayJob", "spec.rayClusterSpec.gcsFaultToleranceOptions", "required"): _REDIS,
}


def _rule_differences(field: Field, node: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(rule, what differs) for each of the CRD's value rules the served ``node`` does not have as
    the CRD has it: its required fields, its enum, its default and bounds, either way."""
    if sorted(node.get("required", ())) != sorted(field.required):
        yield "required", f"{field.path}: requires {sorted(node.get('required', ()))}, the CRD {sorted(field.required)}"
    if sorted(map(str, node.get("enum", ()))) != sorted(field.enum):
        yield "enum", f"{field.path}: enum {node.get('enum')}, the CRD's {list(field.enum)}"
    wanted = field.rules()
    for rule in VALUE_RULES:
        if node.get(rule) != wanted.get(rule):
            yield rule, f"{field.path}: {rule} {node.get(rule)!r}, the CRD's {wanted.get(rule)!r}"


@pytest.mark.parametrize(("group_version", "kind"), KINDS, ids=[kind for _, kind in KINDS])
def test_the_crds_requirements_enums_defaults_and_bounds_are_the_served_ones(
    registry: Registry, upstream: UpstreamDefinitions, catalog: SchemaCatalog,  # noqa: F811
    group_version: str, kind: str,
) -> None:
    """Every ``required``, ``enum``, ``default`` and bound of the CRD is in the served schema (so
    kube's structural validation and defaulting enforce it), and the served schema has none the
    CRD lacks, but the differences :data:`DELIBERATE` names (each of which must still be one)."""
    fields = upstream_kinds(upstream.definitions, DATA.read_text())[(group_version, kind)]
    rt = _resource(registry, group_version, kind)
    served = ServedSchema(catalog.kind(rt).name, catalog.definitions([rt]))
    found: dict[tuple[str, str, str], str] = {}
    for f in fields:
        node = served.node(f.path)
        if node is not None and node is not OPEN:
            found.update({(kind, f.path, rule): text for rule, text in _rule_differences(f, node)})
    assert sum(bool(f.required or f.enum or f.rules()) for f in fields if not f.path.endswith("]")) >= 1
    assert {key: text for key, text in found.items() if key not in DELIBERATE} == {}
    assert {key for key in DELIBERATE if key[0] == kind} <= set(found)


def _open_paths(node: Any, path: str = "") -> Iterator[str]:
    """Where a structural schema keeps unknown fields, but in an embedded ObjectMeta (kube's own)."""
    if not isinstance(node, dict):
        return
    if node.get("x-kubernetes-preserve-unknown-fields") and not path.endswith("metadata"):
        yield path
    for prop, sub in (node.get("properties") or {}).items():
        if path or prop != "metadata":
            yield from _open_paths(sub, f"{path}.{prop}" if path else prop)
    yield from _open_paths(node.get("items"), path + "[]")
    yield from _open_paths(node.get("additionalProperties"), path + "{}")


@pytest.mark.parametrize(("group_version", "kind"), KINDS, ids=[kind for _, kind in KINDS])
def test_nothing_is_kept_open_that_the_crd_does_not_keep_open(group_version: str, kind: str) -> None:
    group, version = group_version.split("/")
    schema = structural_schema(group, version, kind)
    assert schema is not None
    assert list(_open_paths(schema)) == []


def _with_crd_defaults(obj: dict[str, Any], registry: Registry) -> dict[str, Any]:  # noqa: F811
    """``obj`` as stored: with its CRD's defaults filled where it leaves a field out (the schema's
    ``default`` values, checked one by one in test_operator_defaults.py)."""
    defaults = _resource(registry, obj["apiVersion"], obj["kind"]).defaults
    assert defaults is not None
    defaults(obj)
    return obj


def _url(obj: dict[str, Any], registry: Registry) -> str:  # noqa: F811
    rt = _resource(registry, obj["apiVersion"], obj["kind"])
    return f"/apis/{obj['apiVersion']}/{'namespaces/default/' if rt.namespaced else ''}{rt.plural}"


def jobset() -> dict[str, Any]:
    return next(s for s in yaml.safe_load_all(SAMPLES.read_text()) if s["kind"] == "JobSet")


def lws() -> dict[str, Any]:
    return next(s for s in yaml.safe_load_all(SAMPLES.read_text()) if s["kind"] == "LeaderWorkerSet")


def rayjob() -> dict[str, Any]:
    return next(s for s in yaml.safe_load_all(SAMPLES.read_text()) if s["kind"] == "RayJob")


#: (object, where the typo goes, the misspelt field's path), a typo at the top, in ``spec``, deeper.
def pytorchjob() -> dict[str, Any]:
    return dict(yaml.safe_load((Path(__file__).resolve().parents[2] / "e2e/manifests/pytorchjob.yaml").read_text()))


def runtime() -> dict[str, Any]:
    template = {"spec": {"replicatedJobs": [{"name": "node", "template": jobset()["spec"]["replicatedJobs"][0]["template"]}]}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": {"name": "torch"},
            "spec": {"mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": "auto"}}, "template": template}}


TYPOS = [
    (jobset, ("spex",), "spex"),
    (jobset, ("spec", "replicatedJobz"), "spec.replicatedJobz"),
    (jobset, ("spec", "failurePolicy", "maxRestartz"), "spec.failurePolicy.maxRestartz"),
    (lws, ("spec", "leaderWorkerTemplate", "sise"), "spec.leaderWorkerTemplate.sise"),
    (lws, ("spec", "replicaz"), "spec.replicaz"),
    (pytorchjob, ("spec", "pytorchReplicaSpecz"), "spec.pytorchReplicaSpecz"),
    (pytorchjob, ("spec", "runPolicy", "suspendd"), "spec.runPolicy.suspendd"),
    (pytorchjob, ("spec", "pytorchReplicaSpecs", "Worker", "replicaz"), "spec.pytorchReplicaSpecs.Worker.replicaz"),
    (runtime, ("spec", "mlPolicy", "torch", "numProcPerNodez"), "spec.mlPolicy.torch.numProcPerNodez"),
    (runtime, ("spec", "template", "spec", "replicatedJobz"), "spec.template.spec.replicatedJobz"),
    (rayjob, ("spec", "entrypointt"), "spec.entrypointt"),
    (rayjob, ("spec", "rayClusterSpec", "headGroupSpec", "serviceTyp"), "spec.rayClusterSpec.headGroupSpec.serviceTyp"),
]
TYPO_IDS = [path for _, _, path in TYPOS]


def _with_typo(make: Any, where: tuple[str, ...]) -> dict[str, Any]:
    obj = make()
    if obj["kind"] != "ClusterTrainingRuntime":
        obj["metadata"]["namespace"] = "default"
    node = obj
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = 3
    return obj


@pytest.mark.parametrize(("make", "where", "path"), TYPOS, ids=TYPO_IDS)
async def test_a_misspelt_field_is_refused_under_strict(
    hub: Client, registry: Registry, make: Any, where: tuple[str, ...], path: str,  # noqa: F811
) -> None:
    obj = _with_typo(make, where)
    await assert_refused_under_strict(hub, _url(obj, registry), obj, path)


async def assert_refused_under_strict(hub: Client, url: str, obj: dict[str, Any], path: str) -> None:
    """A create of ``obj`` at the collection ``url`` under Strict is kube's 400 naming the
    unknown field at ``path``, and nothing is stored."""
    kind, version = obj["kind"], obj["apiVersion"].split("/")[1]
    answer = await hub.post(f"{url}?fieldValidation=Strict", json=obj)
    assert answer.status == 400, await answer.text()
    assert (await answer.json())["message"] == (
        f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: unknown field "{path}"'
    )
    assert (await hub.get(f"{url}/{obj['metadata']['name']}")).status == 404


@pytest.mark.parametrize(("make", "where", "path"), TYPOS, ids=TYPO_IDS)
async def test_a_misspelt_field_is_dropped_with_a_warning_under_warn(
    hub: Client, registry: Registry, make: Any, where: tuple[str, ...], path: str,  # noqa: F811
) -> None:
    obj = _with_typo(make, where)
    answer = await hub.post(f"{_url(obj, registry)}?fieldValidation=Warn", json=obj)
    assert answer.status == 201, await answer.text()
    assert answer.headers.getall("Warning") == [f'299 - "unknown field \\"{path}\\""']
    stored = await (await hub.get(f"{_url(obj, registry)}/{obj['metadata']['name']}")).json()
    node = obj
    for key in where[:-1]:
        node = node[key]
    del node[where[-1]]
    _with_crd_defaults(obj, registry)
    assert {"spec": stored.get("spec"), **{k: stored[k] for k in where[:1] if k in stored}} == {
        "spec": obj.get("spec"), **{k: obj[k] for k in where[:1] if k in obj}}


@pytest.mark.parametrize(("make", "where", "path"), TYPOS, ids=TYPO_IDS)
async def test_server_side_apply_refuses_a_misspelt_field(
    hub: Client, registry: Registry, make: Any, where: tuple[str, ...], path: str,  # noqa: F811
) -> None:
    obj = _with_typo(make, where)
    url = f"{_url(obj, registry)}/{obj['metadata']['name']}?fieldManager=ci"
    answer = await hub.patch(url, data=yaml.safe_dump(obj), headers=APPLY)
    assert answer.status == 422, await answer.text()
    assert f".{path}: field not declared in schema" in (await answer.json())["message"]
    assert (await hub.get(f"{_url(obj, registry)}/{obj['metadata']['name']}")).status == 404


ROOT = Path(__file__).resolve().parents[2]
#: Every object of an operator's kind the project applies (its e2e manifests and examples), and the
#: upstream samples kept for this test.
SAMPLE_FILES = (SAMPLES, ROOT / "e2e/manifests/pytorchjob.yaml", ROOT / "e2e/manifests/finished/jobs.yaml",
                ROOT / "e2e/manifests/placement/train.yaml", ROOT / "policies/examples/training-gang-whole.yaml")
OPERATOR_KINDS = {kind for _, kind in KINDS}
SAMPLE_OBJECTS = [(f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc)
                  for path in SAMPLE_FILES for doc in yaml.safe_load_all(path.read_text())
                  if doc and doc["kind"] in OPERATOR_KINDS]


def test_the_samples_hold_every_kind_of_the_list() -> None:
    assert {doc["kind"] for _, doc in SAMPLE_OBJECTS} >= {"JobSet", "LeaderWorkerSet", "PyTorchJob", "MPIJob",
                                                          "RayCluster", "RayJob"}


@pytest.mark.parametrize("sample", [doc for _, doc in SAMPLE_OBJECTS], ids=[name for name, _ in SAMPLE_OBJECTS])
async def test_the_samples_apply_unchanged_under_strict(hub: Client, registry: Registry, sample: dict[str, Any]) -> None:  # noqa: F811
    sample = {**sample, "metadata": {**sample["metadata"], "namespace": "default"}}
    url = f"{_url(sample, registry)}/{sample['metadata']['name']}?fieldManager=ci&fieldValidation=Strict"
    answer = await hub.patch(url, data=yaml.safe_dump(sample), headers=APPLY)
    assert answer.status == 201, await answer.text()
    assert answer.headers.getall("Warning", []) == []
    created = await hub.post(f"{_url(sample, registry)}?fieldValidation=Strict",
                             json={**sample, "metadata": {**sample["metadata"], "name": "again"}})
    assert created.status == 201, await created.text()
    assert (await created.json())["spec"] == _with_crd_defaults(copy.deepcopy(sample), registry)["spec"]


async def test_a_misspelt_status_field_is_refused_under_strict_and_dropped_under_warn(
    hub: Client, registry: Registry,  # noqa: F811
) -> None:
    obj = {**jobset(), "metadata": {"name": "js", "namespace": "default"}}
    created = await hub.post(_url(obj, registry), json=obj)
    assert created.status == 201, await created.text()
    url = f"{_url(obj, registry)}/js/status"
    stored = await created.json()
    stored["status"] = {"restarts": 1, "restartz": 2}
    refused = await hub.put(f"{url}?fieldValidation=Strict", json=stored)
    assert refused.status == 400, await refused.text()
    assert (await refused.json())["message"] == (
        'JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: unknown field "status.restartz"'
    )
    written = await hub.put(f"{url}?fieldValidation=Warn", json=stored)
    assert written.status == 200, await written.text()
    assert written.headers.getall("Warning") == ['299 - "unknown field \\"status.restartz\\""']
    assert (await written.json())["status"] == {"restarts": 1}
