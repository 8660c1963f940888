"""The scheduler controller's side of requests that can never fit (the decision itself is the
pure :mod:`controlplane.scheduler.core.neverfit`).

In: a decision the scheduler made, the cluster snapshots it made it on, the hub workload. Out:
the NeverFits decision (the binding's ``Scheduled`` condition), the workload's own
``Schedulable`` condition (False with the same message while no node could ever hold one of its
pods, gone once one could), and the *capacity facts* of a cluster: what of its report can change
whether a pod could ever run there. A binding that never fits is looked at again only when those
facts change somewhere in the fleet, not on every capacity report.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.workloads import WorkloadConditionType, find_condition, with_condition
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.scheduling import ScheduledCondition, ScheduleResult
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape


def capacity_facts(snapshot: ClusterSnapshot) -> frozenset[Any]:
    """What of a cluster's report can change whether a pod could ever run there: its nodes'
    labels, taints and allocatable resources (not what is free now)."""

    def facts(shape: NodeShape) -> Any:
        return (tuple(sorted(shape.labels.items())), shape.taints, tuple(sorted(shape.allocatable.items())))

    return frozenset(facts(shape) for shape in snapshot.shapes)


def never_fit_result(request: BindingRequest, result: ScheduleResult, message: str) -> ScheduleResult:
    """``result`` (which placed nothing) as a NeverFits decision: its explanation, the condition saying why."""
    condition = ScheduledCondition(False, ScheduledReason.NEVER_FITS, message)
    return ScheduleResult({}, {}, condition, result.affinity_name, result.explanation, request.replicas)


async def set_schedulable(ctx: ControllerContext, workload: Mapping[str, Any], decided: ScheduledCondition) -> None:
    """Write the workload's ``Schedulable`` condition as ``decided`` says (only when it changes)."""
    rt = ctx.registry.for_kind(str(workload.get("apiVersion")), str(workload.get("kind")))
    if rt is None or not rt.has_status:
        return
    status = workload.get("status") or {}
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
