"""A Kueue pod group placed as one gang: its Pods' requests in, one gang and each Pod's share out.

Kueue admits a pod group (label ``kueue.x-k8s.io/pod-group-name``) as one Workload, and
MultiKueue runs that Workload in one worker cluster, whole. The hub does the same: the group's
Pods, each its own binding of one replica, are decided together as one gang
(:func:`group_request`: one role per distinct request, so each role keeps its own shape), and
the gang's decision is then split back into one decision per Pod (:func:`member_result`): the
cluster that holds the whole group, or none, with the group's explanation. No I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.explanation import ClusterExplanation
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import GANG_HOLDS, ScheduledCondition, ScheduleResult


def pod_name(request: BindingRequest) -> str:
    """The Pod a member's binding is for (bindings are named ``<pod>-pod``)."""
    return request.key.rpartition("/")[2].removesuffix("-pod")


def _gpus(requirements: ReplicaRequirements) -> int:
    return sum(amount for name, amount in requirements.resources if is_gpu_resource(name))


def group_request(key: str, members: Sequence[BindingRequest]) -> BindingRequest:
    """One gang of every member's pods: a role per distinct per-pod request (named for its first
    binding, members in key order), placed by the first member's placement and GPU shapes (the
    policy that claims the group's Pods)."""
    ordered = sorted(members, key=lambda m: m.key)
    roles: dict[ReplicaRequirements, list[BindingRequest]] = {}
    for member in ordered:
        roles.setdefault(member.requirements, []).append(member)
    components = tuple(
        Component(
            name=f"role of {pod_name(same[0])}",
            replicas=sum(m.replicas for m in same),
            requirements=requirements,
        )
        for requirements, same in roles.items()
    )
    largest = max(components, key=lambda c: _gpus(c.requirements))
    first = ordered[0]
    return BindingRequest(
        key=key,
        replicas=sum(c.replicas for c in components),
        requirements=largest.requirements,
        placement=first.placement,
        gang=True,
        components=components,
        gpu_shapes=first.gpu_shapes,
    )


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def group_condition(result: ScheduleResult, *, group: str, pods: int) -> ScheduledCondition:
    """The ``Scheduled`` condition every Pod of the group gets from the group's decision (a
    NeverFits decision keeps its reason and its ``can never fit: ...`` message, the group named)."""
    if result.condition.reason is ScheduledReason.NEVER_FITS:
        return ScheduledCondition(False, result.condition.reason, f"pod group {group}: {result.condition.message}")
    if result.condition.status and result.clusters:
        (cluster,) = result.clusters
        return ScheduledCondition(
            True, result.condition.reason, f"pod group {group}: scheduled with its {_pods(pods)} to {cluster}"
        )
    return ScheduledCondition(
        False,
        result.condition.reason,
        f"pod group {group}: no cluster can hold its {_pods(pods)}: {result.condition.message}",
    )


def member_result(result: ScheduleResult, member: BindingRequest, *, group: str, pods: int) -> ScheduleResult:
    """The group's decision for one of its Pods: the group's cluster (or none), the Pod's own
    requirements with the cluster's GPU shape applied, and the group's explanation."""
    condition = group_condition(result, group=group, pods=pods)
    clusters = {name: member.replicas for name in result.clusters} if condition.status else {}
    shapes = {name: shape for name, shape in result.chosen_shapes.items() if name in clusters}
    requirements = {
        name: shapes[name].apply(member.requirements) if name in shapes else member.requirements for name in clusters
    }
    holds = f"holds the whole pod group ({_pods(pods)})"

    def explain() -> list[ClusterExplanation]:
        return [
            dataclasses.replace(
                entry,
                replicas=clusters.get(entry.cluster, 0),
                reasons=tuple(holds if reason == GANG_HOLDS else reason for reason in entry.reasons),
            )
            for entry in result.explanation
        ]

    return ScheduleResult(
        clusters=clusters,
        shapes={name: shape.resource_map for name, shape in shapes.items()},
        condition=condition,
        affinity_name=result.affinity_name,
        explanation=None,
        unplaced=0 if clusters else member.replicas,
        requirements=requirements,
        chosen_shapes=shapes,
        explain=explain,
    )


def follower_result(result: ScheduleResult, *, group: str, home: Sequence[str]) -> ScheduleResult:
    """A decision for a later Pod of a group whose other Pods run in ``home`` (the only clusters it
    was decided over), with a condition that says it follows them."""
    where = ", ".join(sorted(home))
    if result.condition.status:
        condition = ScheduledCondition(
            True, result.condition.reason, f"pod group {group}: scheduled to {where}, where its other pods run"
        )
    else:
        condition = ScheduledCondition(
            False,
            result.condition.reason,
            f"pod group {group}: its other pods run in {where}, which cannot hold this pod: {result.condition.message}",
        )
    return ScheduleResult(
        clusters=result.clusters,
        shapes=result.shapes,
        condition=condition,
        affinity_name=result.affinity_name,
        explanation=None,
        unplaced=result.unplaced,
        requirements=result.requirements,
        chosen_shapes=result.chosen_shapes,
        explain=lambda: result.explanation,
    )
