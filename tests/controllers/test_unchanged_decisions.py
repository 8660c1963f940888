"""A decision that changes nothing writes nothing: no new ``lastScheduledTime`` alone.

A Deployment the fleet cannot hold now (but could once GPUs free up) stays unplaced, and the
scheduler tries it again on every retry and capacity report; each attempt that decides the same
must leave the binding as stored (same resourceVersion), or every unplaced workload would cost
etcd a write per retry.
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster, settled

WORK_API = "work.gpufed.io/v1alpha1"


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


async def binding(objects: ObjectStore, name: str) -> dict[str, Any]:
    rt = objects.registry.require(WORK_API, "ResourceBinding")
    try:
        return await objects.get(rt, namespace="default", name=f"{name}-deployment")
    except errors.NotFound:
        return {}


async def test_an_unplaced_binding_decided_again_the_same_is_not_rewritten(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    busy = node_shape(1, gpus=2)
    busy["allocatable"]["nvidia.com/gpu"] = 8  # 6 of 8 in use: 4 GPUs fit a node, not now
    await put_cluster(objects, "onprem", busy)
    await settled(manager)
    await create(objects, propagation_policy("tiered"))
    await create(objects, deployment("waits", replicas=1, gpus=4))

    async def unplaced() -> dict[str, Any] | None:
        found = await binding(objects, "waits")
        conditions = (found.get("status") or {}).get("conditions") or ()
        scheduled = next((c for c in conditions if c["type"] == "Scheduled"), None)
        return found if scheduled and scheduled["status"] == "False" and scheduled["reason"] == "Unschedulable" else None

    first = await eventually(unplaced, what="the binding's Unschedulable condition")
    assert first["status"].get("lastScheduledTime")
    await settled(manager)
    stored = await binding(objects, "waits")

    scheduler = manager.scheduler
    assert scheduler is not None
    for _ in range(3):  # what a retry or a capacity report does: decide it again
        await scheduler.reconcile(("default", "waits-deployment"))
    await settled(manager)
    again = await binding(objects, "waits")
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"], (
        stored["status"], again["status"]
    )
