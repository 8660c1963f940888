"""A pod group's Workload as its Pods run, as Kueue's pod controller keeps it: its
``status.reclaimablePods`` counts each role's succeeded Pods and the quota they held goes to the
next Workload; a failed Pod waiting for its replacement sets ``WaitingForReplacementPods`` (the
group keeps its quota), cleared once replaced; a serving group (``pod-group-serving``) never
finishes nor reclaims; a Pod not retriable in its group (``retriable-in-group: "false"``) finishes
the group once none runs; with ``pod-group-fast-admission`` the Workload is made, for the total
count, before all the Pods exist."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, settled
from .test_admission import KUEUE, condition, create, get
from .test_admission_pod_groups import POD, _admitted, _ungated, group_pod, group_workload, pod, team

pytestmark = pytest.mark.waiting

SERVING = "kueue.x-k8s.io/pod-group-serving"
FAST = "kueue.x-k8s.io/pod-group-fast-admission"
RETRIABLE = "kueue.x-k8s.io/retriable-in-group"


def annotated(created: dict[str, Any], **annotations: str) -> dict[str, Any]:
    created["metadata"]["annotations"].update(annotations)
    return created


async def phase(objects: ObjectStore, name: str, value: str) -> None:
    current = await pod(objects, name)
    await objects.update_status(objects.registry.require(*POD), {**current, "status": {**current.get("status", {}), "phase": value}})


async def started(objects: ObjectStore, *names: str) -> None:
    await eventually(lambda: _admitted(objects), what="the group admitted")
    for name in names:
        await eventually(lambda n=name: _ungated(objects, n), what=f"{name} ungated")


async def test_succeeded_pods_are_reclaimable_and_their_quota_admits_the_next_workload(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await team(objects, manager, gpus=3)
    for name in ("g0", "g1", "g2"):
        await create(objects, group_pod(name))
    await started(objects, "g0", "g1", "g2")
    await create(objects, group_pod("solo", group="other", total="1"))

    async def reserved() -> dict[str, Any] | None:
        wl = await group_workload(objects, "other")
        return wl if condition(wl, "QuotaReserved").get("status") == "True" else None

    await eventually(lambda: group_workload(objects, "other"), what="the other group's Workload")
    await settled(manager)
    assert await reserved() is None  # the 3 GPUs are the first group's
    await phase(objects, "g0", "Succeeded")

    async def reclaimable() -> list[dict[str, Any]] | None:
        return ((await group_workload(objects)) or {}).get("status", {}).get("reclaimablePods")

    role = (await pod(objects, "g0"))["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]
    assert await eventually(reclaimable, what="reclaimablePods") == [{"name": role, "count": 1}]
    await eventually(reserved, what="the other group admitted in the quota g0 left")
    assert condition(await group_workload(objects), "Finished") == {}


async def test_a_failed_pod_waits_for_its_replacement_and_the_group_keeps_its_quota(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await team(objects, manager, gpus=2)
    for name in ("g0", "g1"):
        await create(objects, group_pod(name, total="2"))
    await started(objects, "g0", "g1")
    await phase(objects, "g0", "Failed")

    async def waiting(status: str) -> dict[str, Any] | None:
        wl = await group_workload(objects)
        return wl if condition(wl, "WaitingForReplacementPods").get("status") == status else None

    wl = await eventually(lambda: waiting("True"), what="WaitingForReplacementPods=True")
    cond = condition(wl, "WaitingForReplacementPods")
    assert (cond["reason"], cond["message"]) == ("PodsFailed", "Some Failed pods need replacement")
    assert condition(wl, "Admitted").get("status") == "True" and "reclaimablePods" not in wl["status"]

    await create(objects, group_pod("g2", total="2"))
    wl = await eventually(lambda: waiting("False"), what="WaitingForReplacementPods=False")
    cond = condition(wl, "WaitingForReplacementPods")
    assert (cond["reason"], cond["message"]) == ("PodsReady", "No pods need replacement")
    await eventually(lambda: _ungated(objects, "g2"), what="the replacement ungated with the group's admission")


async def test_a_serving_group_never_finishes_nor_reclaims(objects: ObjectStore, manager: ControllerManager) -> None:
    await team(objects, manager, gpus=2)
    for name in ("s0", "s1"):
        await create(objects, annotated(group_pod(name, total="2"), **{SERVING: "true"}))
    await started(objects, "s0", "s1")
    for name in ("s0", "s1"):
        await phase(objects, name, "Succeeded")
    await settled(manager)
    wl = await group_workload(objects)
    assert wl is not None and condition(wl, "Finished") == {}
    assert "reclaimablePods" not in wl["status"]
    assert condition(wl, "Admitted").get("status") == "True"


async def test_a_pod_not_retriable_in_its_group_finishes_the_group_once_none_runs(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await team(objects, manager, gpus=2)
    await create(objects, annotated(group_pod("g0", total="2"), **{RETRIABLE: "false"}))
    await create(objects, group_pod("g1", total="2"))
    await started(objects, "g0", "g1")
    await phase(objects, "g0", "Failed")
    await settled(manager)
    assert condition(await group_workload(objects), "Finished") == {}  # g1 still runs
    await phase(objects, "g1", "Succeeded")

    async def finished() -> dict[str, Any] | None:
        wl = await group_workload(objects)
        return wl if condition(wl, "Finished").get("status") == "True" else None

    done = condition(await eventually(finished, what="the group finished"), "Finished")
    assert (done["reason"], done["message"]) == ("Succeeded", "Pods succeeded: 1/2.")


async def test_fast_admission_makes_the_workload_before_all_the_pods_exist(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await team(objects, manager, gpus=3)
    await create(objects, annotated(group_pod("f0"), **{FAST: "true"}))
    wl = await eventually(lambda: group_workload(objects), what="the group's Workload from its first Pod")
    role = (await pod(objects, "f0"))["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [(role, 3)]
    await started(objects, "f0")
    await create(objects, annotated(group_pod("f1"), **{FAST: "true"}))
    await eventually(lambda: _ungated(objects, "f1"), what="a later Pod of the group started")
    wl = await get(objects, KUEUE, "Workload", "grp")
    assert wl is not None and sorted(r["name"] for r in wl["metadata"]["ownerReferences"]) == ["f0", "f1"]
