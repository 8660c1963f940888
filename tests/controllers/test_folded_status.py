"""The hub's copy of a propagated PersistentVolumeClaim shows what the members report, as Karmada
folds it: Bound once every member bound its own (the hub binds no claim itself, so it would stay
Pending)."""

from __future__ import annotations

from typing import Any

from controlplane.apis.constants import LABEL_BINDING
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, node_shape, propagation_policy, put_cluster, settled

BINDING_API = "work.gpufed.io/v1alpha1"
DUPLICATED = {"clusterAffinity": {"clusterNames": ["member1", "member2"]}, "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}


async def works_of(objects: ObjectStore, binding: str) -> dict[str, dict[str, Any]] | None:
    listed = await objects.list(objects.registry.require(BINDING_API, "Work"), label_selector=f"{LABEL_BINDING}={binding}")
    found = {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}
    return found if len(found) == 2 else None


async def report(objects: ObjectStore, work: dict[str, Any], status: dict[str, Any]) -> None:
    """What the agent writes back: Applied at the current generation and the member copy's status."""
    manifest = work["spec"]["workload"]["manifests"][0]
    group, _, version = manifest["apiVersion"].rpartition("/")
    identifier = {"group": group, "version": version, "kind": manifest["kind"], "namespace": "default",
                  "name": manifest["metadata"]["name"], "ordinal": 0}
    applied = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "all 1 manifest(s) applied",
               "lastTransitionTime": "2026-12-06T05:00:00Z", "observedGeneration": work["metadata"]["generation"]}
    body = {"conditions": [applied], "manifestStatuses": [{"identifier": identifier, "status": status, "health": "Healthy"}]}
    await objects.update_status(objects.registry.require(BINDING_API, "Work"), {**work, "status": body})


async def hub_status(objects: ObjectStore, kind: str, name: str) -> dict[str, Any]:
    obj = await objects.get(objects.registry.require("v1", kind), namespace="default", name=name)
    return obj.get("status") or {}


async def test_a_claim_is_bound_on_the_hub_once_every_member_bound_it(objects: ObjectStore, manager: ControllerManager) -> None:
    for cluster in ("member1", "member2"):
        await put_cluster(objects, cluster, node_shape(1, gpus=0), pods=[])
    await settled(manager)
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("claims", kind="PersistentVolumeClaim", api_version="v1", placement=DUPLICATED))
    await objects.create(objects.registry.require("v1", "PersistentVolumeClaim"), {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
    })
    works = await eventually(lambda: works_of(objects, "data-persistentvolumeclaim"), what="a Work per member")
    await report(objects, works["member1"], {"phase": "Bound", "capacity": {"storage": "10Gi"}})
    await report(objects, works["member2"], {"phase": "Pending"})

    async def phase(wanted: str) -> str | None:
        return wanted if (await hub_status(objects, "PersistentVolumeClaim", "data")).get("phase") == wanted else None

    await settled(manager)
    assert (await hub_status(objects, "PersistentVolumeClaim", "data")).get("phase") == "Pending"  # member2's is
    works = await works_of(objects, "data-persistentvolumeclaim") or {}
    await report(objects, works["member2"], {"phase": "Bound", "capacity": {"storage": "10Gi"}})
    await eventually(lambda: phase("Bound"), what="the hub's claim Bound")
