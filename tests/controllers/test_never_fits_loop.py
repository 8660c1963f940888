"""A request no node of the fleet could ever hold gets told so once, and waits for the fleet.

A Deployment asking 64 GPUs per pod where the largest node has 8: the binding's Scheduled
condition says NeverFits, the workload gets a ``Schedulable=False`` condition and a
FailedScheduling Event with the same message, and the scheduler looks at it again only when
the fleet's capacity changes (a capacity report with other free GPUs changes nothing).
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, deployment, eventually, node_shape, propagation_policy, put_cluster, settled

WORK_API = "work.gpufed.io/v1alpha1"
MESSAGE = "can never fit: needs 64 nvidia.com/gpu in one pod; the largest node in the fleet has 8"


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


async def scheduled(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    try:
        binding = await objects.get(objects.registry.require(WORK_API, "ResourceBinding"), namespace="default",
                                    name=f"{name}-deployment")
    except errors.NotFound:
        return None
    for cond in (binding.get("status") or {}).get("conditions") or ():
        if cond["type"] == "Scheduled":
            return dict(cond)
    return None


async def schedulable(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    hub = await objects.get(objects.registry.require("apps/v1", "Deployment"), namespace="default", name=name)
    for cond in (hub.get("status") or {}).get("conditions") or ():
        if cond["type"] == "Schedulable":
            return dict(cond)
    return None


async def warnings(objects: ObjectStore) -> list[str]:
    listed = await objects.list(objects.registry.require("v1", "Event"), namespace="default")
    return [e["message"] for e in listed.items if e["reason"] == "FailedScheduling"]


def count_decisions(manager: ControllerManager, name: str) -> list[tuple[str, str]]:
    """The keys the scheduler reconciles from now on that are ``name``'s binding (a spy on its loop)."""
    scheduler = manager.scheduler
    assert scheduler is not None
    seen: list[tuple[str, str]] = []
    reconcile = scheduler.loop._reconcile

    async def counting(key: tuple[str, str]) -> float | None:
        if key[1] == f"{name}-deployment":
            seen.append(key)
        return await reconcile(key)

    scheduler.loop._reconcile = counting
    return seen


async def test_a_request_that_can_never_fit_says_so_and_waits_for_capacity(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await put_cluster(objects, "cloud", node_shape(4, gpus=4), provider="aws", pricing={A100: 4.1})
    await settled(manager)
    await create(objects, propagation_policy("tiered"))
    await create(objects, deployment("huge", replicas=2, gpus=64))

    async def never() -> dict[str, Any] | None:
        cond = await scheduled(objects, "huge")
        return cond if cond and cond.get("reason") == "NeverFits" else None

    cond = await eventually(never, what="the binding's NeverFits condition")
    assert cond["status"] == "False" and cond["message"] == MESSAGE
    workload_cond = await eventually(lambda: schedulable(objects, "huge"), what="the workload's Schedulable condition")
    assert (workload_cond["status"], workload_cond["reason"], workload_cond["message"]) == ("False", "NeverFits", MESSAGE)
    assert [m for m in await warnings(objects) if MESSAGE in m], await warnings(objects)

    # Reports that change only what is free do not bring it back (no retry storm); the condition
    # and the Event stay as they were.
    await settled(manager)
    looked_at = count_decisions(manager, "huge")
    for minute in range(1, 6):
        busier = node_shape(2, gpus=minute % 3)
        busier["allocatable"]["nvidia.com/gpu"] = 8
        await put_cluster(objects, "onprem", busier, report_time=f"2024-05-01T10:0{minute}:00Z")
        await settled(manager)
    assert looked_at == [], f"looked at again {len(looked_at)} time(s) without a capacity change"
    assert len([m for m in await warnings(objects) if MESSAGE in m]) == 1
    assert (await schedulable(objects, "huge")) == workload_cond

    # A node big enough joins the fleet: it is placed, and the workload's condition goes.
    await put_cluster(objects, "cloud", node_shape(4, gpus=4), node_shape(2, gpus=64), provider="aws",
                      pricing={A100: 4.1}, report_time="2024-05-01T10:07:00Z")

    async def placed() -> bool:
        cond = await scheduled(objects, "huge")
        return bool(cond and cond["status"] == "True")

    await eventually(placed, what="the 64-GPU pods placed once a 64-GPU node exists")

    async def condition_gone() -> bool:
        return await schedulable(objects, "huge") is None

    await eventually(condition_gone, what="the workload's Schedulable condition removed")
