"""The scheduler controller's writes: a decision into the binding, and what goes with it.

In: a binding (wire dict), the :class:`~controlplane.scheduler.core.outcome.ScheduleResult`
decided for it and what the decision changed (replicas moved, failover evictions, replicas
waiting for room). Out: the binding's ``spec.clusters`` (and, where an alternative GPU shape
won, the ``scheduler.gpufed.io/gpu-shapes`` annotation the binding controller reads; where
replicas are steered away from GPU models, ``scheduler.gpufed.io/gpu-steering``; where they
are packed toward nodes already running GPU work, ``scheduler.gpufed.io/packing-hints``) and new
``spec.gracefulEvictionTasks`` entries; in status the ``Scheduled`` condition with its reason,
the per-cluster ``explanation``, ``schedulerObservingAffinityName`` and ``observedGeneration``;
the Events of :mod:`controlplane.scheduler.controller.recording`; and the workload's own
``Schedulable`` condition (False with the NeverFits message while no node could ever hold one
of its pods, gone once one could).

The decision is reserved before its spec write: while the write is in flight the other workers
decide too, and must not promise the same capacity again; a write that fails takes it back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from controlplane.apis.apps_karmada_v1alpha1 import requested_after_last_decision
from controlplane.apis.constants import ANNOTATION_GPU_STEERING, ANNOTATION_PACKING_HINTS
from controlplane.apis.explanations import compacted, expanded
from controlplane.apis.timestamps import format_micro_time
from controlplane.apis.views import BindingView, ObjectView
from controlplane.apis.work_v1alpha1 import ConditionType, ScheduledReason
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.failover import EvictionCause, eviction_task, with_tasks
from controlplane.controllers.workloads import WorkloadConditionType, find_condition, with_condition
from controlplane.controllers.works import (
    ANNOTATION_GPU_SHAPES,
    ChosenShape,
    decode_packing,
    decode_steering,
    encode_per_cluster,
    encode_shapes,
)
from controlplane.objectclient import errors
from controlplane.scheduler.controller.explaining import (
    WAITING_PREFIX,
    explain_evictions,
    explain_waiting,
    refreshed_explanation,
)
from controlplane.scheduler.controller.recording import record_decision, record_evictions, record_rescheduled
from controlplane.scheduler.controller.reserving import ReservationKeeper
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduledCondition, ScheduleResult
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot

# The binding's status is shared: the status controller writes its aggregatedStatus and
# FullyApplied condition while the scheduler writes Scheduled, explanation and observedGeneration.
STATUS_WRITE_ATTEMPTS: Final = 5


async def update_binding_status(
    ctx: ControllerContext, binding: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Write ``change`` applied to the binding's status and return the stored binding.

    A Conflict with a write that left the spec as it was (the status controller's, a label's)
    re-reads the binding and applies ``change`` again: the scheduler's status fields never wait
    for a requeue, which would see the new spec next to the old ``observedGeneration`` and
    decide once more. A spec changed meanwhile is the next decision's, so that Conflict is raised.
    """
    current = binding
    for attempt in range(STATUS_WRITE_ATTEMPTS):
        status = copy.deepcopy(current.get("status") or {})
        change(status)
        if status == (current.get("status") or {}):
            return current
        try:
            return await ctx.objects.update_status(ctx.binding_rt, {**current, "status": status})
        except errors.Conflict:
            meta = current.get("metadata") or {}
            fresh = await ctx.get(ctx.binding_rt, meta.get("namespace"), str(meta.get("name")))
            same_spec = fresh is not None and (fresh.get("metadata") or {}).get("generation") == meta.get("generation")
            if fresh is None or not same_spec or attempt == STATUS_WRITE_ATTEMPTS - 1:
                raise
            current = fresh
    return current


def kept_per_cluster(
    before: Mapping[str, tuple[str, ...]],
    decided: Mapping[str, tuple[str, ...]],
    request: BindingRequest,
    result: ScheduleResult,
) -> dict[str, tuple[str, ...]]:
    """The steering or packing hints to write: ``decided`` for clusters that get their first
    replicas; a cluster that already runs some keeps what its Work has (``before``; a changed pod
    template would restart a Deployment's pods, and a Job's template cannot change)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, replicas in result.clusters.items():
        if not replicas:
            continue
        if request.previous.get(name):
            if name in before:
                out[name] = before[name]
        elif name in decided:
            out[name] = decided[name]
    return out


def kept_steering(
    binding: Mapping[str, Any], request: BindingRequest, result: ScheduleResult
) -> dict[str, tuple[str, ...]]:
    """The steering to write (:func:`kept_per_cluster`)."""
    return kept_per_cluster(decode_steering(binding), result.steering, request, result)


def kept_packing(
    binding: Mapping[str, Any], request: BindingRequest, result: ScheduleResult
) -> dict[str, tuple[str, ...]]:
    """The packing hints to write (:func:`kept_per_cluster`)."""
    return kept_per_cluster(decode_packing(binding), result.packing, request, result)


async def write_decision(
    ctx: ControllerContext,
    keeper: ReservationKeeper,
    binding: dict[str, Any],
    request: BindingRequest,
    result: ScheduleResult,
    *,
    moved: Mapping[str, int],
    evicted: Mapping[str, EvictionCause] | None = None,
    previous: Mapping[str, int] | None = None,
    waiting: Mapping[str, int] | None = None,
    why: str | None = None,
    announced: bool = False,
    placement_written: Callable[[Mapping[str, Any]], None] | None = None,
) -> Mapping[str, Any]:
    """Write ``result`` as the binding's decision, record its Events and return the binding as
    stored (``binding`` itself when nothing changed); ``announced``: the caller records the move's
    own ``ReplicasMoved`` Event (a return, rebalancing.py). ``placement_written`` is called with the
    stored binding when a new placement (spec) is written, with its status in the same write, so
    that the caller knows that write's watch event when it comes."""
    view = BindingView(binding)
    spec = view.spec
    evicted = evicted or {}
    clusters = result.target_clusters()
    now = ctx.now()
    added = [
        eviction_task(cause, replicas=(previous or {}).get(name, 0), now=now) for name, cause in sorted(evicted.items())
    ]
    tasks = with_tasks(spec.get("gracefulEvictionTasks"), added) if added else spec.get("gracefulEvictionTasks")
    shapes = {
        name: ChosenShape(shape.resource_map, dict(shape.node_selector)) for name, shape in result.chosen_shapes.items()
    }
    annotation = encode_shapes(shapes)
    steered = encode_per_cluster(kept_steering(binding, request, result))
    packed = encode_per_cluster(kept_packing(binding, request, result))
    annotations = dict(view.annotations)
    # An absent list and an empty one say the same: no write turns one into the other.
    previous_clusters = spec.get("clusters") or []
    placed: dict[str, Any] | None = None  # the binding with the new placement, when it changes
    if (
        previous_clusters != clusters
        or annotations.get(ANNOTATION_GPU_SHAPES) != annotation
        or annotations.get(ANNOTATION_GPU_STEERING) != steered
        or annotations.get(ANNOTATION_PACKING_HINTS) != packed
        or added
    ):
        placed = copy.deepcopy(binding)
        placed["spec"]["clusters"] = clusters
        if tasks:
            placed["spec"]["gracefulEvictionTasks"] = tasks
        for key, value in (
            (ANNOTATION_GPU_SHAPES, annotation),
            (ANNOTATION_GPU_STEERING, steered),
            (ANNOTATION_PACKING_HINTS, packed),
        ):
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        if annotations:
            placed["metadata"]["annotations"] = annotations
        else:
            placed["metadata"].pop("annotations", None)

    explanation = [entry.to_wire() for entry in result.explanation]
    explain_waiting(explanation, waiting or {}, grace=ctx.settings.unschedulable_grace_seconds)
    explain_evictions(explanation, evicted=evicted, tasks=BindingView(placed or binding).eviction_tasks)
    old_condition = find_condition((binding.get("status") or {}).get("conditions"), ConditionType.SCHEDULED)
    new_condition = result.condition.to_wire()

    def decided(status: dict[str, Any], stored: Mapping[str, Any]) -> None:
        """The decision's status fields, for ``stored`` (the binding as its spec now stands)."""
        before = copy.deepcopy(status)
        status["conditions"] = with_condition(status.get("conditions"), new_condition, now=ctx.now_text())
        status["explanation"] = compacted(explanation)
        if result.affinity_name:
            status["schedulerObservingAffinityName"] = result.affinity_name
        else:
            status.pop("schedulerObservingAffinityName", None)
        status["observedGeneration"] = (stored.get("metadata") or {}).get("generation")
        # A decision that changes nothing (an unplaced binding tried again, the same verdicts)
        # is not written: the time moves with a decision, or for a requested fresh placement.
        if (
            placed is not None
            or status != before
            or "lastScheduledTime" not in status
            or requested_after_last_decision(BindingView(stored).spec, status)
        ):
            status["lastScheduledTime"] = format_micro_time(now)

    stored: Mapping[str, Any]
    if placed is None:
        stored = await update_binding_status(ctx, binding, lambda status: decided(status, binding))
    else:
        def placed_status(stored: dict[str, Any]) -> dict[str, Any]:
            status = copy.deepcopy(stored.get("status") or {})
            decided(status, stored)
            return status

        # Reserve before the write: while it is in flight the other workers decide too, and
        # must not promise the same capacity again. A write that fails takes it back.
        saved = keeper.reservations.of_binding(request.key)
        keeper.reserve(request, result, moved=moved, previous=previous or {}, now=now)
        try:
            # The placement and its decision in one write (one revision, one watch event).
            updated = await ctx.objects.update_with_status(ctx.binding_rt, placed, status_of=placed_status)
        except BaseException:
            keeper.reservations.restore(request.key, saved)
            raise
        if placement_written is not None:
            placement_written(updated)
        stored = updated
    await record_decision(ctx, binding, old_condition, new_condition, previous_clusters, clusters, moved)
    if not moved and not evicted and not announced:
        await record_rescheduled(ctx, binding, previous or {}, result.clusters, clusters, why=why)
    if evicted:
        await record_evictions(ctx, binding, evicted, clusters)
    return stored


async def write_waiting(ctx: ControllerContext, binding: dict[str, Any], waiting: Mapping[str, int]) -> None:
    """Say in the binding's explanation that unschedulable replicas wait for room elsewhere."""
    status = copy.deepcopy(binding.get("status") or {})
    explanation = [
        {**entry, "reasons": [r for r in entry.get("reasons") or () if not r.startswith(WAITING_PREFIX)]}
        for entry in expanded(status.get("explanation") or ())
    ]
    explain_waiting(explanation, waiting, grace=ctx.settings.unschedulable_grace_seconds)
    status["explanation"] = compacted(explanation)
    if status != BindingView(binding).status:
        await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})


async def write_refreshed_explanation(
    ctx: ControllerContext,
    binding: dict[str, Any],
    request: BindingRequest,
    snapshots: Mapping[str, ClusterSnapshot],
    *,
    reservations: Reservations,
    now: datetime,
    cache: SchedulerCache,
    decided: ScheduleResult | None = None,
) -> None:
    """Store the fleet's verdicts as they are now for a binding whose decision stands; ``decided``:
    the decision just made of ``request`` over ``snapshots`` as they are (not made again)."""
    if decided is None:
        ordered = [snapshots[name] for name in sorted(snapshots)]
        decided = schedule(request, ordered, reservations=reservations, now=now, cache=cache)
    status = copy.deepcopy(binding.get("status") or {})
    explanation = refreshed_explanation(
        status.get("explanation") or (),
        [entry.to_wire() for entry in decided.explanation],
        placed=request.previous,
    )
    if explanation != status.get("explanation"):
        status["explanation"] = explanation
        await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})


async def write_error(ctx: ControllerContext, binding: dict[str, Any], message: str) -> None:
    await write_condition(ctx, binding, ScheduledCondition(False, ScheduledReason.SCHEDULER_ERROR, message))


async def write_condition(ctx: ControllerContext, binding: dict[str, Any], decided: ScheduledCondition) -> None:
    """Write the binding's ``Scheduled`` condition alone (only when it changes)."""
    status = copy.deepcopy(binding.get("status") or {})
    status["conditions"] = with_condition(status.get("conditions"), decided.to_wire(), now=ctx.now_text())
    if status != BindingView(binding).status:
        await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})


async def set_schedulable(ctx: ControllerContext, workload: Mapping[str, Any], decided: ScheduledCondition) -> None:
    """Write the workload's ``Schedulable`` condition as ``decided`` says (only when it changes)."""
    rt = ctx.registry.for_kind(str(workload.get("apiVersion")), str(workload.get("kind")))
    if rt is None or not rt.has_status:
        return
    status = ObjectView(workload).status
    conditions = status.get("conditions") or []
    current = find_condition(conditions, WorkloadConditionType.SCHEDULABLE)
    if decided.reason is ScheduledReason.NEVER_FITS:
        wanted = {
            "type": str(WorkloadConditionType.SCHEDULABLE),
            "status": "False",
            "reason": str(ScheduledReason.NEVER_FITS),
            "message": decided.message,
        }
        if current is not None and all(current.get(k) == v for k, v in wanted.items()):
            return
        new_conditions = with_condition(conditions, wanted, now=ctx.now_text())
    elif current is None:
        return
    else:
        new_conditions = [c for c in conditions if c.get("type") != WorkloadConditionType.SCHEDULABLE]
    await ctx.objects.update_status(rt, {**copy.deepcopy(dict(workload)), "status": {**status, "conditions": new_conditions}})
