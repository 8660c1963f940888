"""A binding that cannot be fully placed is looked at again (every capacity report, every
retry): a look that decides what the binding already says writes nothing. Each look used to
rewrite the binding's status (its ``lastScheduledTime``): an etcd write per unplaced binding per
look, and Conflicts for clients updating it."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster, settled


async def test_a_look_that_decides_the_same_writes_nothing(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "small", node_shape(1, gpus=1))
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"), propagation_policy("all"))
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=2))
    rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")

    async def unplaced() -> dict[str, Any] | None:
        try:
            binding = await objects.get(rt, namespace="default", name="web-deployment")
        except errors.NotFound:
            return None
        conditions = {c["type"]: c for c in (binding.get("status") or {}).get("conditions") or ()}
        scheduled = conditions.get("Scheduled")
        return binding if scheduled is not None and scheduled["status"] == "False" else None

    await eventually(unplaced, what="web not fully placed")
    await settled(manager)
    before = await objects.get(rt, namespace="default", name="web-deployment")
    scheduler = manager.scheduler
    assert scheduler is not None
    for _ in range(3):
        await scheduler.reconcile(("default", "web-deployment"))
    after = await objects.get(rt, namespace="default", name="web-deployment")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], after["status"]
    assert after["status"] == before["status"]
