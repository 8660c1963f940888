"""Burst replicas come back to the cheaper tier: added there first, removed from the cloud once ready.

The scheduler controller on an in-process hub store; the member agents' reports and Work
statuses are written as an agent would (fleet.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.constants import ANNOTATION_ABANDONED, ANNOTATION_MOVES, ANNOTATION_REBALANCE
from controlplane.apis.timestamps import format_time
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from gpufed.commands.explain import render_explanation

from .conftest import FAST
from .fleet import A100, TIERED, deployment, eventually, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"
REBALANCE = {"minSavingPerHour": 1, "minMoveIntervalSeconds": 0, "maxSurge": "100%"}


def later(seconds: float) -> str:
    return format_time(datetime.now(UTC) + timedelta(seconds=seconds))


async def binding_of(objects: ObjectStore, workload: str, *, kind: str = "deployment") -> dict[str, Any] | None:
    rt = objects.registry.require(WORK_API, "ResourceBinding")
    try:
        return await objects.get(rt, namespace="default", name=f"{workload}-{kind}")
    except errors.NotFound:
        return None


async def placed(objects: ObjectStore, workload: str, *, kind: str = "deployment") -> dict[str, int] | None:
    binding = await binding_of(objects, workload, kind=kind)
    clusters = ((binding or {}).get("spec") or {}).get("clusters")
    return {t["name"]: t["replicas"] for t in clusters} if clusters else None


async def report_ready(
    objects: ObjectStore, cluster: str, workload: str, ready: int, *, unschedulable: int = 0, at: datetime | None = None
) -> None:
    """The member's Work status: the Deployment applied with ``ready`` replicas ready (and
    ``unschedulable`` pods its scheduler cannot place), reported ``at`` (now if not given)."""
    rt = objects.registry.require(WORK_API, "Work")

    async def work_wanting_ready() -> dict[str, Any] | None:
        try:
            work = await objects.get(rt, namespace=f"gpufed-es-{cluster}", name=f"default-{workload}-deployment")
        except errors.NotFound:
            return None
        return work if work["spec"]["workload"]["manifests"][0]["spec"]["replicas"] >= ready else None

    work = await eventually(work_wanting_ready, what=f"the Work in {cluster}")
    replicas = work["spec"]["workload"]["manifests"][0]["spec"]["replicas"]
    entry = {
        "identifier": {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "default", "name": workload, "ordinal": 0},
        "status": {"replicas": replicas, "readyReplicas": ready},
        "health": "Healthy" if ready >= replicas else "Unhealthy",
    }
    if unschedulable:
        entry["unschedulable"] = {"pods": unschedulable}
    status = {
        "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
                        "lastTransitionTime": later(0) if at is None else format_time(at), "observedGeneration": work["metadata"]["generation"]}],
        "manifestStatuses": [entry],
    }
    await objects.update_status(rt, {**work, "status": status})


async def events_of(objects: ObjectStore, reason: str) -> list[str]:
    """The message of each occurrence of ``reason`` (an Event recorded again counts again)."""
    listed = await objects.list(objects.registry.require("v1", "Event"), namespace="default")
    return [str(e.get("message")) for e in listed.items if e.get("reason") == reason
            for _ in range(int(e.get("count") or 1))]


def placed_as(objects: ObjectStore, wanted: dict[str, int]) -> Callable[[], Awaitable[dict[str, int] | None]]:
    """A probe for ``eventually``: web's placement once it is ``wanted``."""

    async def probe() -> dict[str, int] | None:
        now = await placed(objects, "web")
        return now if now == wanted else None

    return probe


async def burst_then_free(
    objects: ObjectStore,
    manager: ControllerManager,
    *,
    onprem_price: float = 1.2,
    replicas: int = 4,
    rebalance: dict[str, Any] | None = None,
    placement: dict[str, Any] | None = None,
    **policy: Any,
) -> None:
    """web's replicas run in the cloud (on-prem was full); then on-prem reports 4 free GPUs.
    ``rebalance`` is the policy's tieredOverflow.rebalance (default REBALANCE); ``placement``
    replaces the tiered placement; ``policy`` more spec fields."""
    await put_cluster(objects, "onprem", node_shape(1, gpus=0), pricing={A100: onprem_price}, pods=[])
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.1}, pods=[])
    await settled(manager)
    if placement is None:
        tiered = {"tieredOverflow": {"rebalance": rebalance if rebalance is not None else REBALANCE}}
        placement = {"replicaScheduling": {**TIERED["replicaScheduling"], **tiered}}
    rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(rt, propagation_policy("tiered", placement=placement, **policy))
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=replicas))
    assert await eventually(lambda: placed(objects, "web"), what="web placed") == {"cloud": replicas}
    await report_ready(objects, "cloud", "web", replicas)
    await settled(manager)
    await put_cluster(objects, "onprem", node_shape(1, gpus=4), pricing={A100: onprem_price}, report_time=later(30), pods=[])


async def test_burst_replicas_return_once_ready_on_prem(objects: ObjectStore, manager: ControllerManager) -> None:
    # On-prem frees 4 GPUs: 4 replicas are added there first; the cloud keeps its 4.
    await burst_then_free(objects, manager)
    await eventually(placed_as(objects, {"cloud": 4, "onprem": 4}), what="4 replicas added on-prem")
    binding = await binding_of(objects, "web")
    assert binding is not None
    assert json.loads(binding["metadata"]["annotations"][ANNOTATION_REBALANCE])["target"] == "onprem"
    workload = await objects.get(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="web")
    assert "Moving:      4 replica(s) cloud \u2192 onprem" in render_explanation(workload, binding)

    # Not ready yet on-prem: the cloud copy stays.
    await report_ready(objects, "onprem", "web", 2)
    await settled(manager)
    assert await placed(objects, "web") == {"cloud": 4, "onprem": 4}

    # Ready: the cloud copy goes, the move is an Event and a note on the binding.
    await report_ready(objects, "onprem", "web", 4)
    await eventually(placed_as(objects, {"onprem": 4}), what="the cloud copy removed")
    binding = await binding_of(objects, "web")
    assert binding is not None
    annotations = binding["metadata"]["annotations"]
    assert ANNOTATION_REBALANCE not in annotations
    text = "moved 4 replicas cloud \u2192 onprem: saves $11.60/h"
    [record] = json.loads(annotations[ANNOTATION_MOVES])
    assert record["message"] == text
    assert (record["source"], record["target"], record["replicas"], record["gpusPerReplica"]) == ("cloud", "onprem", 4, 1.0)
    assert text in await eventually(lambda: events_of(objects, "ReplicasMoved"), what="the move's Event")
    workload = await objects.get(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="web")
    assert f"Last move:   {text}" in render_explanation(workload, binding)


async def test_no_move_below_the_minimum_saving(objects: ObjectStore, manager: ControllerManager) -> None:
    await burst_then_free(objects, manager, onprem_price=3.9)
    await settled(manager)
    assert await placed(objects, "web") == {"cloud": 4}  # 4 x $0.20/h is below $1/h


class MovableClock:
    """The controllers' clock from now on; the test moves it forward."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_a_surge_never_ready_in_time_is_abandoned(objects: ObjectStore) -> None:
    # On-prem takes the 4 added replicas but never reports them ready within the 60 s timeout.
    clock = MovableClock()
    rebalance = {**REBALANCE, "minMoveIntervalSeconds": 3600, "surgeTimeoutSeconds": 60}
    async with ControllerManager(objects, settings=FAST, clock=clock) as manager:
        await burst_then_free(objects, manager, rebalance=rebalance)
        await eventually(placed_as(objects, {"cloud": 4, "onprem": 4}), what="4 replicas added on-prem")
        await report_ready(objects, "onprem", "web", 1)
        await settled(manager)
        assert await placed(objects, "web") == {"cloud": 4, "onprem": 4}  # still within the timeout
        clock.now += timedelta(seconds=61)
        # The next look is past the timeout. The report is stamped with the moved clock: one the
        # same as the last (within its second) is no change, and the look would wait for the
        # scheduler's periodic maintenance instead.
        await report_ready(objects, "onprem", "web", 1, at=clock.now)
        # The added replicas go; the cloud keeps its 4 ready ones.
        await eventually(placed_as(objects, {"cloud": 4}), what="the added replicas removed")
        messages = await eventually(lambda: events_of(objects, "MoveAbandoned"), what="the abandon's Event")
        assert messages == [
            "abandoned moving 4 replica(s) cloud \u2192 onprem: they were not ready in onprem within 60s; "
            "the added replicas were removed"
        ]
        binding = await binding_of(objects, "web")
        assert binding is not None
        annotations = binding["metadata"]["annotations"]
        assert ANNOTATION_REBALANCE not in annotations and ANNOTATION_MOVES not in annotations
        assert ANNOTATION_ABANDONED in annotations
        # The minimum interval counts from the abandon: no new surge at once, though on-prem has room.
        await settled(manager)
        assert await placed(objects, "web") == {"cloud": 4}
        assert await events_of(objects, "ReplicasMoved") == []


async def test_a_surge_the_target_cannot_place_is_abandoned_at_once(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    # On-prem's scheduler cannot place the 4 added replicas: no waiting for the 600 s timeout,
    # and they are not moved elsewhere either (the cloud already runs the workload's 4).
    await burst_then_free(objects, manager, rebalance={**REBALANCE, "minMoveIntervalSeconds": 3600})
    await eventually(placed_as(objects, {"cloud": 4, "onprem": 4}), what="4 replicas added on-prem")
    await report_ready(objects, "onprem", "web", 0, unschedulable=4)
    await eventually(placed_as(objects, {"cloud": 4}), what="the added replicas removed")
    messages = await eventually(lambda: events_of(objects, "MoveAbandoned"), what="the abandon's Event")
    assert messages == ["abandoned moving 4 replica(s) cloud \u2192 onprem: onprem cannot place them; the added replicas were removed"]
    await settled(manager)
    assert await placed(objects, "web") == {"cloud": 4}


async def test_a_restart_mid_move_finishes_it_once(objects: ObjectStore) -> None:
    async with ControllerManager(objects, settings=FAST) as first:
        await burst_then_free(objects, first)
        await eventually(placed_as(objects, {"cloud": 4, "onprem": 4}), what="4 replicas added on-prem")
        await settled(first)

    # A new hub term, with the on-prem replicas not ready yet: the move waits, nothing doubles.
    async with ControllerManager(objects, settings=FAST) as second:
        await settled(second)
        assert await placed(objects, "web") == {"cloud": 4, "onprem": 4}
        await report_ready(objects, "onprem", "web", 4)
        await eventually(placed_as(objects, {"onprem": 4}), what="the cloud copy removed after the restart")
        await settled(second)
        binding = await binding_of(objects, "web")
        assert binding is not None
        assert len(json.loads(binding["metadata"]["annotations"][ANNOTATION_MOVES])) == 1
        assert await placed(objects, "web") == {"onprem": 4}


async def test_a_surge_whose_status_write_was_lost_is_still_the_moves(objects: ObjectStore) -> None:
    """The surge's spec is stored but its status write is not (a Conflict the hub did not get
    past, a crash between the two): the binding shows a spec newer than its ``observedGeneration``.
    The next term must carry the move on, not decide afresh and drop the cloud copy unannounced."""
    async with ControllerManager(objects, settings=FAST) as first:
        await burst_then_free(objects, first)
        await eventually(placed_as(objects, {"cloud": 4, "onprem": 4}), what="4 replicas added on-prem")
        await settled(first)
    binding = await binding_of(objects, "web")
    assert binding is not None
    lagging = {**binding["status"], "observedGeneration": binding["metadata"]["generation"] - 1}
    await objects.update_status(objects.registry.require(WORK_API, "ResourceBinding"), {**binding, "status": lagging})

    async with ControllerManager(objects, settings=FAST) as second:
        await settled(second)
        assert await placed(objects, "web") == {"cloud": 4, "onprem": 4}  # on-prem not ready yet
        await report_ready(objects, "onprem", "web", 4)
        await eventually(placed_as(objects, {"onprem": 4}), what="the cloud copy removed once on-prem is ready")
        messages = await eventually(lambda: events_of(objects, "ReplicasMoved"), what="the move's Event")
        assert "moved 4 replicas cloud \u2192 onprem: saves $11.60/h" in messages


async def test_the_decision_status_survives_another_writers_status_update(objects: ObjectStore) -> None:
    """The status controller writes the binding's status between the scheduler's read and its
    write: the scheduler's fields are written on the fresh copy, the other writer's kept."""
    from controlplane.controllers.context import ControllerContext
    from controlplane.scheduler.controller.writing import update_binding_status

    ctx = ControllerContext(objects, settings=FAST)
    rt = ctx.binding_rt
    stale = await objects.create(rt, {
        "apiVersion": WORK_API, "kind": "ResourceBinding", "metadata": {"name": "web-deployment", "namespace": "default"},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}},
    })
    await objects.update_status(rt, {**stale, "status": {"aggregatedStatus": [{"clusterName": "cloud", "applied": True}]}})

    decisions = iter(range(1, 100))

    def decided(status: dict[str, Any]) -> None:
        status["observedGeneration"] = stale["metadata"]["generation"]
        status["lastScheduledTime"] = later(60 * next(decisions))  # each decision a change

    written = await update_binding_status(ctx, stale, decided)
    assert written["status"]["observedGeneration"] == stale["metadata"]["generation"]
    assert written["status"]["aggregatedStatus"] == [{"clusterName": "cloud", "applied": True}]

    # A spec changed meanwhile is the next decision's: that Conflict is raised.
    current = await binding_of(objects, "web")
    assert current is not None
    await objects.update(rt, {**current, "spec": {**current["spec"], "replicas": 3}})
    try:
        await update_binding_status(ctx, current, decided)
    except errors.Conflict:
        pass
    else:
        raise AssertionError("a status write over a changed spec must raise Conflict")
