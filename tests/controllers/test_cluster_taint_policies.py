"""Karmada's ClusterTaintPolicy at the hub: a targeted cluster gets the policy's taints while its
conditions match ``addOnConditions`` and loses them once they match ``removeOnConditions``;
other clusters and other taints stay as they are; karmada-webhook's refusals (through the
object store, as every write)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.hubregistry import hub_registry
from controlplane.storage import MemoryStore

from .conftest import FAST
from .fleet import eventually, node_shape, put_cluster, settled

API = "policy.karmada.io/v1alpha1"
CLUSTER_API = "cluster.gpufed.io/v1alpha1"


def taint_policy(name: str, *taints: dict[str, Any], clusters: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "addOnConditions": [{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}],
        "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
        "taints": list(taints),
    }
    if clusters is not None:
        spec["targetClusters"] = {"clusterNames": clusters}
    return {"apiVersion": API, "kind": "ClusterTaintPolicy", "metadata": {"name": name}, "spec": spec}


async def set_ready(objects: ObjectStore, name: str, status: str) -> None:
    rt = objects.registry.require(CLUSTER_API, "Cluster")
    cluster = await objects.get(rt, name=name)
    conditions = [{"type": "Ready", "status": status, "reason": "Test", "message": "t", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    await objects.update_status(rt, {**cluster, "status": {**cluster.get("status", {}), "conditions": conditions}})


async def taint_keys(objects: ObjectStore, name: str) -> list[str]:
    cluster = await objects.get(objects.registry.require(CLUSTER_API, "Cluster"), name=name)
    return [t["key"] for t in (cluster.get("spec") or {}).get("taints") or ()]


async def test_a_policy_taints_a_targeted_cluster_while_it_is_not_ready(objects: ObjectStore, manager: ControllerManager) -> None:
    for name in ("gpu-a", "gpu-b"):
        await put_cluster(objects, name, node_shape(1, gpus=8))
    rt = objects.registry.require(API, "ClusterTaintPolicy")
    await objects.create(rt, taint_policy("not-ready", {"key": "example.com/not-ready", "effect": "NoSchedule"}, clusters=["gpu-a"]))
    await settled(manager)
    assert await taint_keys(objects, "gpu-a") == []  # Ready: nothing to add

    await set_ready(objects, "gpu-a", "False")
    await set_ready(objects, "gpu-b", "False")

    async def tainted() -> list[str] | None:
        keys = await taint_keys(objects, "gpu-a")
        return keys if "example.com/not-ready" in keys else None

    await eventually(tainted, what="gpu-a tainted by the policy")
    await settled(manager)
    assert "example.com/not-ready" not in await taint_keys(objects, "gpu-b")  # not targeted
    cluster = await objects.get(objects.registry.require(CLUSTER_API, "Cluster"), name="gpu-a")
    added = next(t for t in cluster["spec"]["taints"] if t["key"] == "example.com/not-ready")
    assert added["effect"] == "NoSchedule" and added["timeAdded"]

    await set_ready(objects, "gpu-a", "True")

    async def untainted() -> bool:
        return "example.com/not-ready" not in await taint_keys(objects, "gpu-a")

    await eventually(untainted, what="the policy's taint removed once gpu-a is Ready")


async def test_a_deleted_policy_leaves_its_taints(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "gpu-a", node_shape(1, gpus=8))
    rt = objects.registry.require(API, "ClusterTaintPolicy")
    await objects.create(rt, taint_policy("not-ready", {"key": "example.com/not-ready", "effect": "NoSchedule", "value": "x"}))
    await set_ready(objects, "gpu-a", "Unknown")

    async def tainted() -> bool:
        return "example.com/not-ready" in await taint_keys(objects, "gpu-a")

    await eventually(tainted, what="gpu-a tainted")
    await objects.delete(rt, name="not-ready")
    # The controller reads the policies from its informer: a condition change it handles before
    # the deletion's event reaches that informer is still handled with the policy (as Karmada's,
    # from its cache). The deletion is seen first here, as the test means.
    await settled(manager)
    await set_ready(objects, "gpu-a", "True")
    await settled(manager)
    assert "example.com/not-ready" in await taint_keys(objects, "gpu-a")


@pytest.mark.parametrize(("taints", "message"), [
    ([{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule", "value": "v"}],
     'admission webhook "clustertaintpolicy.karmada.io" denied the request: spec.taints[0]: Duplicate value: '
     '"Duplicate taint with the same key(k) and effect(NoSchedule) is not allowed"'),
    ([{"key": "k", "effect": "NoExecute"}],
     'admission webhook "clustertaintpolicy.karmada.io" denied the request: spec.taints[0]: Forbidden: Configuring taint '
     "with NoExecute effect is not allowed, this capability must be explicitly enabled by administrators through "
     "command-line flags"),
])
async def test_karmadas_webhook_refusals(objects: ObjectStore, taints: list[dict[str, Any]], message: str) -> None:
    rt = objects.registry.require(API, "ClusterTaintPolicy")
    with pytest.raises(errors.WebhookDenied) as denied:
        await objects.create(rt, taint_policy("refused", *taints))
    assert str(denied.value) == message
    assert (denied.value.code, denied.value.to_status()["reason"]) == (403, "Forbidden")


async def test_the_hubs_switch_admits_no_execute_taints_and_the_policy_adds_them() -> None:
    async with MemoryStore() as store:
        objects = ObjectStore(store, hub_registry(allow_no_execute_taint_policy=True), garbage_collection=True)
        await objects.bootstrap()
        async with ControllerManager(objects, settings=FAST) as manager:
            await put_cluster(objects, "gpu-a", node_shape(1, gpus=8))
            rt = objects.registry.require(API, "ClusterTaintPolicy")
            policy = taint_policy("evict", {"key": "k", "effect": "NoExecute"}, {"key": "k", "effect": "NoExecute"})
            with pytest.raises(errors.WebhookDenied) as denied:  # a taint listed twice is still refused
                await objects.create(rt, policy)
            assert "NoExecute effect is not allowed" not in str(denied.value)
            await objects.create(rt, taint_policy("evict", {"key": "k", "effect": "NoExecute"}))
            await settled(manager)
            await set_ready(objects, "gpu-a", "False")

            async def tainted() -> list[dict[str, Any]] | None:
                cluster = await objects.get(objects.registry.require(CLUSTER_API, "Cluster"), name="gpu-a")
                taints = [t for t in (cluster.get("spec") or {}).get("taints") or () if t["key"] == "k"]
                return taints or None

            assert [t["effect"] for t in await eventually(tainted, what="gpu-a tainted NoExecute")] == ["NoExecute"]


async def test_a_policy_needs_a_taint_and_keeps_any_operator(objects: ObjectStore) -> None:
    """As Karmada's CRD: taints are required, a match condition's operator is any string (one other
    than In and NotIn never matches: tests/apiserver/test_karmada_crd_fields.py)."""
    rt = objects.registry.require(API, "ClusterTaintPolicy")
    with pytest.raises(errors.Invalid) as invalid:
        await objects.create(rt, taint_policy("empty"))
    assert "spec.taints" in str(invalid.value.to_status()), invalid.value.to_status()
    odd = taint_policy("odd", {"key": "k", "effect": "NoSchedule"})
    odd["spec"]["addOnConditions"][0]["operator"] = "Exists"
    assert (await objects.create(rt, odd))["spec"]["addOnConditions"][0]["operator"] == "Exists"
