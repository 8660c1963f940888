"""Replicas a member cannot place move as soon as a fresh report confirms there is no room, and a
new leader keeps the promises of the one before.

The 1,000-workload bench saw 2-GPU workloads wait the whole unschedulable grace period (120 s)
although the member's next capacity report already showed there was no room for them; and a
hub restart forgot every reservation, so the next decisions could promise the same GPUs again.
Each test here fails without its fix.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import (
    A100,
    bound_pod,
    deployment,
    eventually,
    node_shape,
    propagation_policy,
    put_cluster,
    settled,
)
from .test_capacity_promises import WORK_API, create, later, placed, report_applied, work_in

pytestmark = pytest.mark.waiting

LONG_GRACE = replace(FAST, unschedulable_grace_seconds=600.0)
"""The grace period is long here: a move within the test's time is a move without waiting for it."""


@pytest.fixture
async def long_grace(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=LONG_GRACE) as running:
        yield running


async def explanation_of(objects: ObjectStore, workload: str, cluster: str) -> list[str]:
    rt = objects.registry.require(WORK_API, "ResourceBinding")
    binding = await objects.get(rt, namespace="default", name=f"{workload}-deployment")
    entry: dict[str, Any] = next(
        (e for e in (binding.get("status") or {}).get("explanation") or () if e["cluster"] == cluster), {}
    )
    return list(entry.get("reasons") or ())


async def big_placed_on_prem(objects: ObjectStore, manager: ControllerManager) -> dict[str, Any]:
    """A 2-GPU replica placed on-prem (room for it there, and in the cloud): its Work."""
    await put_cluster(objects, "onprem", node_shape(1, gpus=2), pods=[])
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.1}, pods=[])
    await settled(manager)
    await create(objects, propagation_policy("tiered"))
    await create(objects, deployment("big", replicas=1, gpus=2))
    assert await eventually(lambda: placed(objects, "big"), what="big placed") == {"onprem": 1}
    work: dict[str, Any] = await eventually(lambda: work_in(objects, "onprem", "big"), what="big's Work")
    return work


async def big_waits_on_prem(objects: ObjectStore, manager: ControllerManager) -> None:
    """A 2-GPU replica placed on-prem whose member reports it cannot place it."""
    work = await big_placed_on_prem(objects, manager)
    await report_applied(objects, work, workload="big", unschedulable=1)
    await settled(manager)


NO_ROOM = node_shape(1, gpus=1)  # the member spread other pods: one GPU left, no 2-GPU hole

REPORTS = [
    # (id, the on-prem member's next report: shapes, seconds after the apply, pods listed, moves at once)
    ("a fresh report without room moves at once", NO_ROOM, 30, [], True),
    ("a fresh report with room leaves it to the grace period", node_shape(1, gpus=2), 30, [], False),
    ("a report taken before the apply confirms nothing", NO_ROOM, -30, [], False),
    ("a report without a pod list cannot rule out a rollout", NO_ROOM, 30, None, False),
    ("the binding's own old pods still bound: a rollout frees them soon", NO_ROOM, 30, [bound_pod("big", gpus=2)], False),
]


@pytest.mark.parametrize(
    ("shape", "offset", "pods", "moves"), [r[1:] for r in REPORTS], ids=[r[0] for r in REPORTS]
)
async def test_a_report_confirming_no_room_moves_unschedulable_replicas_without_the_grace(
    objects: ObjectStore,
    long_grace: ControllerManager,
    shape: dict[str, Any],
    offset: float,
    pods: list[dict[str, Any]] | None,
    moves: bool,
) -> None:
    await big_waits_on_prem(objects, long_grace)
    await put_cluster(objects, "onprem", shape, report_time=later(offset), pods=pods)
    if moves:
        assert await eventually(
            lambda: _moved_to_cloud(objects), what="big moved to the cloud without the grace period"
        )
        reasons = await explanation_of(objects, "big", "onprem")
        assert any("1 replica(s) unschedulable" in r and "moved elsewhere" in r for r in reasons), reasons
        # The cluster left behind is not described as having no nodes: it has one, and says so.
        assert not any("0/0 nodes" in r for r in reasons), reasons
        assert any("on its 1 Ready node(s)" in r for r in reasons), reasons
    else:
        await settled(long_grace)
        assert await placed(objects, "big") == {"onprem": 1}


async def _moved_to_cloud(objects: ObjectStore) -> bool:
    return await placed(objects, "big") == {"cloud": 1}


LISTED_REPORTS = [
    # (id, seconds from the apply to the report, the workloads it lists unschedulable, moves at once)
    ("a later report that lists the pods: taken after their trouble", 30, {"big": 1}, True),
    ("a report of the apply's own second that lists the pods", 0, {"big": 1}, True),
    ("a later report that does not list them", 30, None, False),
    ("a report of the apply's own second that does not list them", 0, None, False),
    ("a report listing another workload's pods", 30, {"other": 1}, False),
    ("a report taken before the apply, listing the pods", -30, {"big": 1}, False),
]


@pytest.mark.parametrize(
    ("offset", "listed", "moves"), [r[1:] for r in LISTED_REPORTS], ids=[r[0] for r in LISTED_REPORTS]
)
async def test_a_report_received_before_the_work_status_confirms_no_room_when_it_lists_the_pods(
    objects: ObjectStore, long_grace: ControllerManager, offset: float, listed: dict[str, int] | None, moves: bool
) -> None:
    """The agent reports a second after the pods' change; its Work status naming them can reach
    the hub later, and both carry whole seconds. A full member then sends no report until its
    periodic one (30 s), so a report that itself lists the pods must confirm there is no room."""
    work = await big_placed_on_prem(objects, long_grace)
    applied = later(0)
    report = applied if offset == 0 else later(offset)
    await put_cluster(objects, "onprem", NO_ROOM, report_time=report, pods=[], unschedulable=listed)
    await settled(long_grace)
    await report_applied(objects, work, workload="big", unschedulable=1, at=applied)
    if moves:
        assert await eventually(lambda: _moved_to_cloud(objects), what="big moved without the grace period")
    else:
        await settled(long_grace)
        assert await placed(objects, "big") == {"onprem": 1}


async def test_a_move_after_the_grace_period_explains_itself_with_the_real_nodes(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    # FAST's short grace period: the report says there is room, the member still cannot place
    # the pod, so it moves once the grace period is over; the cluster's explanation says why.
    await big_waits_on_prem(objects, manager)
    assert await eventually(lambda: _moved_to_cloud(objects), what="big moved after the grace period")
    reasons = await explanation_of(objects, "big", "onprem")
    assert any(f"for more than {FAST.unschedulable_grace_seconds:g}s: moved elsewhere" in r for r in reasons), reasons
    assert not any("0/0 nodes" in r for r in reasons), reasons


RESTARTS = [
    # (id, on-prem free GPUs and pods listed at the restart, where the second workload goes)
    ("first's pod not reported bound: its GPUs stay promised", 4, [], {"cloud": 1}),
    ("first's pod reported bound: the report counts it, nothing is reserved again", 4, [bound_pod("first", gpus=4)],
     {"onprem": 1}),
]


async def first_term_places_first(objects: ObjectStore) -> None:
    """One hub term: ``first`` (4 GPUs) placed on-prem and its Work applied, then the term ends."""
    await put_cluster(objects, "onprem", node_shape(1, gpus=4), pods=[])
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.1}, pods=[])
    await create(objects, propagation_policy("tiered"))
    async with ControllerManager(objects, settings=FAST) as first_term:
        await settled(first_term)
        await create(objects, deployment("first", replicas=1, gpus=4))
        assert await eventually(lambda: placed(objects, "first"), what="first placed") == {"onprem": 1}
        work = await eventually(lambda: work_in(objects, "onprem", "first"), what="first's Work")
        await report_applied(objects, work, workload="first")
        await settled(first_term)


@pytest.mark.parametrize(("free", "pods", "second"), [r[1:] for r in RESTARTS], ids=[r[0] for r in RESTARTS])
async def test_a_new_leader_keeps_the_promises_of_the_old_one(
    objects: ObjectStore, free: int, pods: list[dict[str, Any]], second: dict[str, int]
) -> None:
    await first_term_places_first(objects)
    # The hub restarts (or another replica takes over); the member reports as before.
    await put_cluster(objects, "onprem", node_shape(1, gpus=free), report_time=later(30), pods=pods)
    async with ControllerManager(objects, settings=FAST) as second_term:
        await settled(second_term)
        await create(objects, deployment("second", replicas=1, gpus=4))
        assert await eventually(lambda: placed(objects, "second"), what="second placed") == second


async def test_a_derived_promise_goes_once_a_report_shows_the_pods_bound(objects: ObjectStore) -> None:
    await first_term_places_first(objects)
    async with ControllerManager(objects, settings=FAST) as second_term:
        await settled(second_term)
        await put_cluster(objects, "onprem", node_shape(1, gpus=4), report_time=later(30), pods=[])
        await settled(second_term)
        await create(objects, deployment("second", replicas=1, gpus=4))
        assert await eventually(lambda: placed(objects, "second"), what="second placed") == {"cloud": 1}
        # The usual rules: a report shows the pod bound, then the GPUs free again: the next
        # workload gets them.
        await put_cluster(
            objects, "onprem", node_shape(1, gpus=0), report_time=later(60), pods=[bound_pod("first", gpus=4)]
        )
        await settled(second_term)
        await put_cluster(objects, "onprem", node_shape(1, gpus=4), report_time=later(90), pods=[])
        await settled(second_term)
        await create(objects, deployment("third", replicas=1, gpus=4))
        assert await eventually(lambda: placed(objects, "third"), what="third placed") == {"onprem": 1}
