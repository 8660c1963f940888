"""``metadata.generation`` where kube keeps one and nowhere else, on both stores (memory and
etcd): a ConfigMap, Secret or Service has none; a Deployment's starts at 1 and moves with its
spec only; a custom resource's moves with anything but its metadata and status. A request
never moves it; a create of a kind without one keeps what it gives, as kube's does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apiserver import codec, errors
from controlplane.apiserver.crd.types import custom_types
from controlplane.apiserver.kinds import builtin_kind_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.resources import Registry
from controlplane.storage import interface as storage
from tests.apiserver.test_crds import CRD

from .kinds import deployment


def _trainers_with_status() -> dict[str, Any]:
    """test_crds' Trainer (a status subresource) with a status in its schema."""
    crd = copy.deepcopy(CRD)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["status"] = {"type": "object", "properties": {"phase": {"type": "string"}}}
    return crd


def _sweeps_without_status_subresource() -> dict[str, Any]:
    """The Trainer CRD as a Sweep kind whose version has no status subresource."""
    crd = _trainers_with_status()
    crd["metadata"]["name"] = "sweeps.ml.example.com"
    crd["spec"]["names"] = {"plural": "sweeps", "kind": "Sweep"}
    del crd["spec"]["versions"][0]["subresources"]
    return crd


@pytest.fixture
async def objects_with_crs(store: storage.Store) -> ObjectStore:
    """The object layer over each store kind, serving the core and workload kinds and two custom
    resources (Trainer, with a status subresource; Sweep, without one)."""
    objects = ObjectStore(store, Registry(
        core_resources(), workload_resources(), builtin_kind_resources(), custom_types(_trainers_with_status()),
        custom_types(_sweeps_without_status_subresource()),
    ))
    await objects.bootstrap()
    return objects


def _rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


PLAIN: list[tuple[dict[str, Any], Any]] = [
    (
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": {"a": "1"}},
        lambda obj: obj["data"].update(a="2"),
    ),
    (
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}, "stringData": {"t": "x"}},
        lambda obj: obj.update(data={"t": "eQ=="}),
    ),
    (
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "default"},
         "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}},
        lambda obj: obj["spec"]["ports"].append({"name": "metrics", "port": 9090}),
    ),
]


@pytest.mark.parametrize(("obj", "edit"), PLAIN, ids=["ConfigMap", "Secret", "Service"])
async def test_a_kind_kube_keeps_no_generation_for_has_none(
    objects_with_crs: ObjectStore, obj: dict[str, Any], edit: Any
) -> None:
    objects = objects_with_crs
    rt = _rt(objects, obj["apiVersion"], obj["kind"])
    created = await objects.create(rt, copy.deepcopy(obj))
    assert "generation" not in created["metadata"]
    changed = copy.deepcopy(created)
    edit(changed)
    updated = await objects.update(rt, changed)
    assert updated["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    assert "generation" not in updated["metadata"]
    patched = await objects.patch(
        rt, namespace="default", name=obj["metadata"]["name"], patch_type=PatchType.MERGE,
        patch={"metadata": {"labels": {"team": "a"}}},
    )
    stored = await objects.get(rt, namespace="default", name=obj["metadata"]["name"])
    assert "generation" not in patched["metadata"] and "generation" not in stored["metadata"]


async def test_a_deployment_generation_starts_at_one_and_moves_with_its_spec_only(objects_with_crs: ObjectStore) -> None:
    objects = objects_with_crs
    rt = _rt(objects, "apps/v1", "Deployment")
    created = await objects.create(rt, {**deployment("web"), "metadata": {"name": "web", "namespace": "default", "generation": 7}})
    assert created["metadata"]["generation"] == 1  # its strategy sets it, whatever the request said
    relabeled = await objects.update(rt, {**created, "metadata": {**created["metadata"], "labels": {"team": "a"}}})
    assert relabeled["metadata"]["generation"] == 1
    status = await objects.update_status(rt, {**relabeled, "status": {"replicas": 1}})
    assert status["metadata"]["generation"] == 1
    scaled = await objects.update(rt, {**status, "spec": {**status["spec"], "replicas": 3}})
    assert scaled["metadata"]["generation"] == 2
    # A request's own generation never moves it.
    asked = await objects.update(rt, {**scaled, "metadata": {**scaled["metadata"], "generation": 40}})
    assert asked["metadata"]["generation"] == 2
    # Its annotations do (kube's strategy: the controller copies them to the ReplicaSets).
    annotated = await objects.patch(
        rt, namespace="default", name="web", patch_type=PatchType.MERGE, patch={"metadata": {"annotations": {"a": "b"}}},
    )
    assert annotated["metadata"]["generation"] == 3


def _trainer(model: str) -> dict[str, Any]:
    return {"apiVersion": "ml.example.com/v1", "kind": "Trainer",
            "metadata": {"name": "t", "namespace": "default"}, "spec": {"model": model}}


async def test_a_custom_resource_generation_moves_with_anything_but_metadata_and_status(
    objects_with_crs: ObjectStore,
) -> None:
    objects = objects_with_crs
    rt = _rt(objects, "ml.example.com/v1", "Trainer")
    created = await objects.create(rt, _trainer("llama"))
    assert created["metadata"]["generation"] == 1
    annotated = await objects.update(rt, {**created, "metadata": {**created["metadata"], "annotations": {"n": "1"}}})
    assert annotated["metadata"]["generation"] == 1
    status = await objects.update_status(rt, {**annotated, "status": {"phase": "Running"}})
    assert status["metadata"]["generation"] == 1
    changed = await objects.update(rt, {**status, "spec": {"model": "mistral"}})
    assert changed["metadata"]["generation"] == 2


async def test_a_create_of_a_kind_without_one_keeps_the_generation_it_gives(objects_with_crs: ObjectStore) -> None:
    objects = objects_with_crs
    rt = _rt(objects, "v1", "ConfigMap")
    given = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default", "generation": 5}}
    created = await objects.create(rt, given)
    assert created["metadata"]["generation"] == 5
    updated = await objects.update(rt, {**created, "metadata": {**created["metadata"], "generation": 9}, "data": {"a": "1"}})
    assert updated["metadata"]["generation"] == 5
    with pytest.raises(errors.Invalid) as caught:
        await objects.create(rt, {**given, "metadata": {**given["metadata"], "name": "d", "generation": -1}})
    assert [c.message for c in caught.value.causes] == ["Invalid value: -1: must be greater than or equal to 0"]
    with pytest.raises(errors.BadRequest) as refused:  # kube's decoder refuses what is not a number
        await objects.create(rt, {**given, "metadata": {**given["metadata"], "name": "d", "generation": "1"}})
    assert "metadata.generation of type int64" in refused.value.message
    with pytest.raises(errors.BadRequest) as refused:  # nor a number beyond an int64
        await objects.create(rt, {**given, "metadata": {**given["metadata"], "name": "d", "generation": 2**63}})
    assert refused.value.message.endswith(
        "json: cannot unmarshal number 9223372036854775808 into Go struct field ObjectMeta.metadata.generation of type int64"
    )


async def test_a_configmap_an_older_hub_stored_with_a_generation_keeps_it_unmoved(
    objects_with_crs: ObjectStore, store: storage.Store
) -> None:
    objects = objects_with_crs
    rt = _rt(objects, "v1", "ConfigMap")
    older = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}, "metadata": {
        "name": "old", "namespace": "default", "uid": "u-1", "generation": 1,
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }}
    await store.create(rt.key(namespace="default", name="old"), codec.encode(older))
    current = await objects.get(rt, namespace="default", name="old")
    updated = await objects.update(rt, {**current, "data": {"a": "2"}})
    assert updated["data"] == {"a": "2"} and updated["metadata"]["generation"] == 1


async def test_a_custom_resource_without_a_status_subresource_counts_its_status(
    objects_with_crs: ObjectStore,
) -> None:
    """kube's custom resource strategy leaves status out of the comparison only where the status
    subresource is on: without it, status is content like the rest."""
    objects = objects_with_crs
    rt = _rt(objects, "ml.example.com/v1", "Sweep")
    created = await objects.create(rt, {**_trainer("llama"), "kind": "Sweep"})
    assert created["metadata"]["generation"] == 1
    with_status = await objects.update(rt, {**created, "status": {"phase": "Running"}})
    assert with_status["status"] == {"phase": "Running"}
    assert with_status["metadata"]["generation"] == 2


async def test_an_endpoint_slice_generation_moves_with_its_labels_too(objects_with_crs: ObjectStore) -> None:
    objects = objects_with_crs
    rt = _rt(objects, "discovery.k8s.io/v1", "EndpointSlice")
    created = await objects.create(rt, {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.7"]}], "ports": [{"port": 80}],
    })
    assert created["metadata"]["generation"] == 1
    annotated = await objects.patch(
        rt, namespace="default", name="web-1", patch_type=PatchType.MERGE, patch={"metadata": {"annotations": {"a": "b"}}},
    )
    assert annotated["metadata"]["generation"] == 1
    relabeled = await objects.patch(
        rt, namespace="default", name="web-1", patch_type=PatchType.MERGE, patch={"metadata": {"labels": {"x": "y"}}},
    )
    assert relabeled["metadata"]["generation"] == 2


async def test_the_first_deletion_mark_bumps_a_generation_the_object_has(objects_with_crs: ObjectStore) -> None:
    """kube's markAsDeleting: the delete that sets the deletionTimestamp on an object a finalizer
    keeps moves its generation (when it has one), so a controller that compares generations sees
    it; a second delete leaves it; a kind without one gets none."""
    objects = objects_with_crs
    rt = _rt(objects, "apps/v1", "Deployment")
    held = {"name": "web", "namespace": "default", "finalizers": ["example.com/hold"]}
    await objects.create(rt, {**deployment("web"), "metadata": held})
    marked = await objects.delete(rt, namespace="default", name="web")
    assert not marked.deleted
    assert marked.object["metadata"]["generation"] == 2
    assert (await objects.get(rt, namespace="default", name="web"))["metadata"]["generation"] == 2
    again = await objects.delete(rt, namespace="default", name="web")
    assert again.object["metadata"]["generation"] == 2
    configmaps = _rt(objects, "v1", "ConfigMap")
    await objects.create(configmaps, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**held, "name": "c"}})
    kept = await objects.delete(configmaps, namespace="default", name="c")
    assert "generation" not in kept.object["metadata"] and kept.object["metadata"]["deletionTimestamp"]


def test_a_converted_kinds_generation_compares_its_specs_without_converting_its_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A v1beta2 Workload's generation follows its spec: its status (a topology assignment's slices,
    listed domain by domain at v1beta1) is not converted only to be compared."""
    from controlplane.apis import kueue_conversion
    from controlplane.apiserver.kinds.kueue import WORKLOAD_V1BETA2
    from controlplane.apiserver.objects.merging import spec_changed

    def expanded(assignment: dict[str, Any], expand: bool = True) -> Any:
        raise AssertionError("the status was converted")

    monkeypatch.setattr(kueue_conversion, "domains_from_slices", expanded)
    topology = {"levels": ["rack"], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "r"}]}]}
    old = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "generation": 1},
        "spec": {"queueName": "q"},
        "status": {"admission": {"podSetAssignments": [{"name": "main", "topologyAssignment": topology}]}},
    }
    assert not spec_changed(WORKLOAD_V1BETA2, old, {**old, "status": {}})
    assert spec_changed(WORKLOAD_V1BETA2, old, {**old, "spec": {"queueName": "other"}})
