"""Whether a binding's pods can never fit in the fleet, whatever frees up: the request is too big.

In: a :class:`~controlplane.scheduler.core.framework.BindingRequest` and the fleet's
:class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot` list. Out: None when some node
could hold one pod of it were that node empty, else a :class:`NeverFits` with a message a
person can act on ("can never fit: needs 64 nvidia.com/gpu in one pod; the largest node in the
fleet has 8").

A pod fits a node *ever* when the node passes the pod's nodeSelector (GPU model included),
required node affinity and taints, and the node's **allocatable** resources (not its free
ones) cover the request: a whole-GPU count above any node's GPUs, a MIG profile no node is
partitioned into, a time-sliced share (``nvidia.com/gpu.shared``) in a fleet without time
slicing, a GPU model no node has. Each alternative GPU shape of the policy counts: the request
never fits only when none of them can. A gang's pods must all fit in one cluster at once, were its
nodes empty (a Kueue pod group of 8 one-GPU Pods never fits a fleet whose largest cluster has 4
GPUs in all, though each Pod alone fits any node). Waiting will
not help such a request (only a change of the fleet's capacity can): the scheduler says so once
instead of retrying, and the waste accounting does not count the GPUs it cannot use as
fragmented. Clusters that report no nodes are left out; with none reporting, nothing is decided.

Also here: the NeverFits decision made of a schedule that placed nothing
(:func:`never_fit_result`), and a cluster's *capacity facts* (:func:`capacity_facts`): what of
its report can change whether a pod could ever run there. The scheduler controller looks at a
binding that never fits again only when those facts change somewhere in the fleet, not on every
capacity report. And which bindings wait for room (:func:`waits_for_room`): those a capacity
report that shows more room should send back to the scheduler. Pure; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.quantity import format_quantity
from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import RESOURCE_PODS, ReplicaRequirements
from controlplane.scheduler.core.estimating import node_eligible
from controlplane.scheduler.core.estimator import can_ever_run
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.gangs import gang_fit
from controlplane.scheduler.core.outcome import ScheduledCondition, ScheduleResult
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

PREFIX = "can never fit: "


@dataclass(frozen=True, slots=True)
class NeverFits:
    """Why no node of the fleet could ever hold one pod of the request."""

    message: str


def _options(request: BindingRequest) -> list[tuple[Component, ...]]:
    """Per GPU shape the request may take (its own first), the pods that must all fit in one
    cluster: each role of a gang, else one pod of the template."""
    roles = request.gang_components() if request.gang else (
        Component(name="pod", replicas=1, requirements=request.requirements),
    )
    shapes = [None, *request.gpu_shapes]
    return [
        tuple(
            Component(name=c.name, replicas=c.replicas, requirements=shape.apply(c.requirements) if shape else c.requirements)
            for c in roles
        )
        for shape in shapes
    ]


def never_fits(request: BindingRequest, clusters: Sequence[ClusterSnapshot]) -> NeverFits | None:
    """None when some cluster could run the request (every pod of a gang at once) on empty nodes."""
    reporting = [c for c in clusters if c.shapes]
    if not reporting:
        return None
    options = _options(request)
    each_alone = False  # every pod of a gang fits some cluster alone, but not all of them together
    for roles in options:
        for cluster in reporting:
            if all(can_ever_run(cluster, c.requirements) for c in roles):
                if not request.gang or _holds_together(cluster, roles):
                    return None
                each_alone = True
    if each_alone:
        return NeverFits(PREFIX + _why_together(options[0], reporting))
    return NeverFits(PREFIX + _why([c.requirements for c in options[0]], reporting))


def _emptied(cluster: ClusterSnapshot) -> ClusterSnapshot:
    """``cluster`` with every node as free as it could ever be (its allocatable resources)."""
    shapes = []
    for shape in cluster.shapes:
        names = {*shape.allocatable, *shape.free}
        empty = {name: max(shape.allocatable.get(name, 0), shape.free.get(name, 0)) for name in names}
        shapes.append(shape.with_free(empty, shape.count))
    return cluster.with_shapes(tuple(shapes))


def _holds_together(cluster: ClusterSnapshot, roles: tuple[Component, ...]) -> bool:
    fits, _ = gang_fit(_emptied(cluster), roles)
    return fits


def _why_together(roles: Sequence[Component], clusters: Sequence[ClusterSnapshot]) -> str:
    """The first resource the gang's pods need more of together than any cluster has, in words."""
    pods = sum(c.replicas for c in roles)
    totals: dict[str, int] = {}
    for role in roles:
        for name, amount in role.requirements.resources:
            totals[name] = totals.get(name, 0) + amount * role.replicas
    for name, total in sorted(totals.items(), key=lambda kv: (not is_gpu_resource(kv[0]), kv[0])):
        largest = max(
            sum(
                s.count * max(s.allocatable.get(name, 0), s.free.get(name, 0))
                for s in cluster.shapes
                if any(node_eligible(s, role.requirements) for role in roles)
            )
            for cluster in clusters
        )
        if largest < total:
            return (
                f"its {pods} pods need {format_quantity(name, total)} {name} together; "
                f"the largest cluster has {format_quantity(name, largest)}"
            )
    return f"its {pods} pods do not fit together in any one cluster, even on empty nodes"


def _why(roles: Sequence[ReplicaRequirements], clusters: Sequence[ClusterSnapshot]) -> str:
    """The first resource one pod asks more of than any eligible node has, in words."""
    for req in roles:
        eligible = [s for c in clusters for s in c.shapes if node_eligible(s, req)]
        where = "in the fleet"
        if req.node_selector:
            where = "matching " + ",".join(f"{k}={v}" for k, v in req.node_selector)
        if not eligible:
            return f"no node in the fleet matches its node selection and tolerations ({where})"
        for name, amount in sorted(req.resources, key=lambda kv: (not is_gpu_resource(kv[0]), kv[0])):
            largest = max(max(s.allocatable.get(name, 0), s.free.get(name, 0)) for s in eligible)
            if any(s.invalid_mig for s in eligible) and is_gpu_resource(name):
                largest = max(
                    (max(s.allocatable.get(name, 0), s.free.get(name, 0)) for s in eligible if not s.invalid_mig),
                    default=0,
                )
            if largest >= amount:
                continue
            need = f"needs {format_quantity(name, amount)} {name} in one pod"
            if largest == 0:
                return f"{need}; no node {where} offers {name}"
            return f"{need}; the largest node {where} has {format_quantity(name, largest)}"
        if any(RESOURCE_PODS in s.allocatable for s in eligible) and all(
            s.allocatable.get(RESOURCE_PODS, 1) < 1 for s in eligible
        ):
            return f"no node {where} takes another pod"
    return "no node in the fleet could hold one pod of it, even empty (node selection and resources together)"


def capacity_facts(snapshot: ClusterSnapshot) -> frozenset[Any]:
    """What of a cluster's report can change whether a pod, or a gang's pods at once, could ever
    run there: its nodes' labels, taints and allocatable resources, and how many nodes have each
    (not what is free now)."""

    def facts(shape: NodeShape) -> Any:
        return (tuple(sorted(shape.labels.items())), shape.taints, tuple(sorted(shape.allocatable.items())))

    counts: Counter[Any] = Counter()
    for shape in snapshot.shapes:
        counts[facts(shape)] += shape.count
    return frozenset(counts.items())


def never_fit_result(request: BindingRequest, result: ScheduleResult, message: str) -> ScheduleResult:
    """``result`` (which placed nothing) as a NeverFits decision: its explanation, the condition saying why."""
    condition = ScheduledCondition(False, ScheduledReason.NEVER_FITS, message)
    return ScheduleResult({}, {}, condition, result.affinity_name, result.explanation, request.replicas)


def waits_for_room(scheduled: Mapping[str, Any] | None) -> bool:
    """Whether a binding whose ``Scheduled`` condition is ``scheduled`` waits for room: its last
    decision left replicas unplaced for want of room now. One that never fits waits for the
    fleet's capacity facts instead, and one with no decision yet waits for its first, which its
    own event has queued: sending it back on every capacity report would only queue it again
    (at 50 applies a second, thousands of new bindings, each queued again by every one of 100
    members' reports, kept the scheduler busy with nothing but that)."""
    return (
        scheduled is not None
        and scheduled.get("status") != "True"
        and scheduled.get("reason") != ScheduledReason.NEVER_FITS
    )
