"""The per-kind interpreter contract and the helpers its implementations share.

The hub treats workloads generically: the detector asks "how many replicas, needing
what, as one gang or not", the binding controller asks for "this object with N replicas
(and this GPU shape) for one cluster", the status controller asks "merge these member
statuses" and "is this member healthy", the dependencies controller asks "which
ConfigMaps, Secrets... do the pods reference". :class:`KindInterpreter` is that contract; one
small module per kind implements it (``deployment.py``, ``job.py``, ``kubeflow.py``…),
and :mod:`controlplane.interpreter.registry` finds the right one by (API group, kind).

Objects go in and come out as plain JSON-compatible dicts; inputs are never mutated.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from controlplane.apis.untyped import Obj, as_int
from controlplane.apis.work_v1alpha1 import Health
from controlplane.interpreter.dependencies import Dependency, pod_template_dependencies, sorted_dependencies
from controlplane.interpreter.health import generic_health, observed_generation_behind, spec_of, status_of
from controlplane.interpreter.requirements import (
    ReplicaRequirements,
    requirements,
    set_gpu_request,
)

__all__ = [
    "Component",
    "Dependency",
    "FinishedPhase",
    "GangOfRoles",
    "Health",
    "KindInterpreter",
    "MemberStatuses",
    "PodSetSlot",
    "PodTemplateKind",
    "SplitAware",
    "keep_finished",
    "stamp_finish",
]

MemberStatuses = Sequence[tuple[str, Mapping[str, Any] | None]]
"""(cluster name, the member object's ``.status``) pairs, one per cluster running a share."""

class FinishedPhase(StrEnum):
    """The terminal phase of a run-to-completion workload (Job, PyTorchJob, MPIJob, RayJob)."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class Component:
    """One role of a multi-role workload (PyTorchJob Master/Worker, a Ray worker group)."""

    name: str
    replicas: int
    requirements: ReplicaRequirements

    def to_spec(self) -> Obj:
        """The ResourceBinding ``spec.components[]`` form."""
        return {
            "name": self.name,
            "replicas": self.replicas,
            "replicaRequirements": self.requirements.to_spec(),
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Component:
        return cls(
            name=str(spec["name"]),
            replicas=int(spec.get("replicas") or 0),
            requirements=ReplicaRequirements.from_spec(spec.get("replicaRequirements")),
        )


@runtime_checkable
class KindInterpreter(Protocol):
    """What the hub knows about one workload kind."""

    group: str
    kind: str

    def replicas(self, obj: Obj) -> int:
        """Total pods the workload runs (all roles of a multi-role kind)."""
        ...

    def components(self, obj: Obj) -> list[Component]:
        """The roles of a multi-role kind; ``[]`` for single-template kinds."""
        ...

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        """Per-replica requirements of the main pod template (the worker role for multi-role kinds)."""
        ...

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        """A new object that runs ``replicas`` pods: one cluster's share."""
        ...

    def is_gang(self, obj: Obj) -> bool:
        """Whether the workload must land whole in one cluster."""
        ...

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        """The hub object's ``.status`` merged from the members' statuses."""
        ...

    def health_of(self, observed: Obj) -> Health:
        """Health of one member's copy, from the observed object: its ``spec``, its
        ``metadata.generation`` and its ``status`` where known (:mod:`controlplane.interpreter.health`).
        The agent judges the whole live object by it, the hub what it knows of it."""
        ...

    def health(self, status: Mapping[str, Any] | None) -> Health:
        """Health of one member's copy from its ``.status`` alone (:meth:`health_of` on an
        object of which only the status is known); Unknown without a status."""
        ...

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        """The terminal phase ``status`` (the hub's merged one, or one member's) says the workload
        reached, None while it runs or for kinds that never finish (Deployment, StatefulSet,
        RayCluster). A finished workload is never moved, re-placed or run again."""
        ...

    def between_runs(self, status: Mapping[str, Any] | None) -> bool:
        """Whether one member's copy of a gang, by its ``.status``, is between runs: not started
        (no pod running yet) or restarting after a failed attempt, and not finished. Only then may
        the hub move the gang whole; False for kinds that cannot tell (they never move)."""
        ...

    def with_gpu_request(self, obj: Obj, resources: Mapping[str, int | str]) -> Obj:
        """A new object whose GPU containers request ``resources`` (alternative GPU shape)."""
        ...

    def dependencies(self, obj: Obj) -> list[Dependency]:
        """The ConfigMaps, Secrets, ServiceAccount and PersistentVolumeClaims the workload's pod
        templates (every role's) reference, unique and ordered; ``propagateDeps`` sends them
        along (:mod:`controlplane.interpreter.dependencies`)."""
        ...


@runtime_checkable
class SplitAware(Protocol):
    """A kind whose copy in one cluster depends on the whole split, not only on the cluster's
    replicas (a StatefulSet's partition: :mod:`controlplane.interpreter.statefulset`)."""

    def with_split(self, obj: Obj, *, cluster: str, split: Mapping[str, int]) -> Obj:
        """``obj`` (the hub's object, its ``spec.replicas`` the hub's) as ``cluster`` must run it
        when ``split`` (cluster name to replicas, every cluster of the placement) divides it; the
        cluster's replicas are set apart (:meth:`KindInterpreter.with_replicas`)."""
        ...


TemplateSlot = tuple[dict[str, Any], str]
"""(parent dict, key) where a pod template lives, so a copy can be rewritten in place."""

PodSetSlot = tuple[str, TemplateSlot]
"""(role name, slot): one pod set of a workload and where its pod template lives."""


class PodTemplateKind:
    """Shared behaviour for kinds that embed pod templates; subclasses name where they are."""

    group: str = ""
    kind: str = ""

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        raise NotImplementedError

    def components(self, obj: Obj) -> list[Component]:
        return []

    def pod_set_slots(self, obj: Obj) -> list[PodSetSlot]:
        """Each role's pod template by the role's name (:meth:`components`; a single-template
        kind's one template is ``main``): where Kueue starts and restores each pod set."""
        slots = self.template_slots(obj)
        return [("main", slots[0])] if len(slots) == 1 and not self.components(obj) else []

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        slots = self.template_slots(obj)
        if not slots:
            return ReplicaRequirements()
        parent, key = slots[-1]
        return requirements(parent.get(key))

    def is_gang(self, obj: Obj) -> bool:
        return False

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        return None

    def between_runs(self, status: Mapping[str, Any] | None) -> bool:
        return False

    def health_of(self, observed: Obj) -> Health:
        return generic_health(observed)

    def health(self, status: Mapping[str, Any] | None) -> Health:
        return Health.UNKNOWN if status is None else self.health_of({"kind": self.kind, "status": status})

    def with_gpu_request(self, obj: Obj, resources: Mapping[str, int | str]) -> Obj:
        out = copy.deepcopy(obj)
        for parent, key in self.template_slots(out):
            if parent.get(key):
                parent[key] = set_gpu_request(parent[key], resources)
        return out

    def dependencies(self, obj: Obj) -> list[Dependency]:
        found: set[Dependency] = set()
        for parent, key in self.template_slots(obj):
            found |= pod_template_dependencies(parent.get(key))
        return sorted_dependencies(found)


class GangOfRoles(PodTemplateKind):
    """A multi-role kind placed whole in one cluster (JobSet, PyTorchJob, MPIJob, RayCluster,
    RayJob, LeaderWorkerSet): its pods are the pods of its roles (:meth:`components`)."""

    def replicas(self, obj: Obj) -> int:
        return sum(c.replicas for c in self.components(obj))

    def is_gang(self, obj: Obj) -> bool:
        return True


class ReplicatedTemplateKind(PodTemplateKind):
    """A kind that runs ``spec.replicas`` copies of ``spec.template`` (Deployment, StatefulSet).

    A cluster's share is the same object with ``spec.replicas`` set to that share; the hub's
    status sums ``replica_fields`` over the members and merges their conditions.
    """

    replica_fields: tuple[str, ...] = ()
    #: The replica fields the kind's Go type writes when 0 (no ``omitempty``); the others are left
    #: out at 0, as kube's encoding of the status leaves them (``unavailableReplicas: 0`` is not shown).
    kept_at_zero: frozenset[str] = frozenset()
    #: Condition types that are True on the hub as soon as one member says so.
    any_true_conditions: frozenset[str] = frozenset()
    #: The status count of replicas that serve (``readyReplicas``, a Deployment's ``availableReplicas``).
    serving_field = "readyReplicas"

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        spec = obj.get("spec")
        return [(spec, "template")] if isinstance(spec, dict) and "template" in spec else []

    def replicas(self, obj: Obj) -> int:
        return as_int((obj.get("spec") or {}).get("replicas"), 1)

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        out = copy.deepcopy(obj)
        out.setdefault("spec", {})["replicas"] = replicas
        return out

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}
        out: Obj = {k: v for k, v in sum_fields(present, self.replica_fields).items() if v or k in self.kept_at_zero}
        generation = (obj.get("metadata") or {}).get("generation")
        if generation is not None and len(present) == len(member_statuses):
            out["observedGeneration"] = generation
        put_conditions(out, member_statuses, any_true=self.any_true_conditions)
        return out

    def health_of(self, observed: Obj) -> Health:
        """Unknown while the status is about an earlier generation; Healthy when ``spec.replicas``
        (default 1) replicas serve (:attr:`serving_field`) and those the update strategy wants
        updated (:meth:`updated_wanted`) are (``updatedReplicas``, when the kind reports it), or
        none are asked for; Unhealthy otherwise. Without the spec,
        the replicas asked for are those the status counts (``status.replicas``), and an empty
        status says nothing yet (Unknown)."""
        status = status_of(observed)
        if observed_generation_behind(observed):
            return Health.UNKNOWN
        spec = spec_of(observed)
        if spec is not None:
            replicas = as_int(spec.get("replicas"), 1)
        elif not status:
            return Health.UNKNOWN
        else:
            replicas = as_int(status.get("replicas"))
        if replicas == 0:
            return Health.HEALTHY
        serving = as_int(status.get(self.serving_field)) >= replicas
        wanted = self.updated_wanted(spec, replicas)
        updated = as_int(status.get("updatedReplicas"), replicas) >= wanted
        return Health.HEALTHY if serving and updated else Health.UNHEALTHY

    def updated_wanted(self, spec: Mapping[str, Any] | None, replicas: int) -> int:
        """How many of ``replicas`` must be updated (``updatedReplicas``) for the copy to be
        healthy: all of them, unless the kind's update strategy (``spec``, None when unknown)
        keeps some at the old template."""
        return replicas


class Finishing(Protocol):
    """The part of an interpreter :func:`keep_finished` needs."""

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None: ...


def keep_finished(interpreter: Finishing, current: Obj, merged: Obj) -> Obj:
    """The hub status to write: ``merged`` (from the members), unless ``current`` already says
    the workload finished. A terminal phase is final, as in kube's Job controller: a member that
    later reports its copy differently (recreated pods, a Work gone after a move) never turns a
    Succeeded or Failed workload back into a running one, nor one terminal phase into the other."""
    return current if interpreter.finished(current) is not None else merged


def stamp_finish(interpreter: Finishing, status: Obj, *, now: str) -> Obj:
    """``status`` as the hub first writes it finished: each True condition that says so (a Job's
    ``Complete`` or ``Failed``) has ``now``, the hub's time, as its ``lastTransitionTime``, as
    Karmada's control plane stamps a Job's. The members' own times stay in their statuses; the
    hub's clock, not theirs, says when the hub workload finished, which its ttl-after-finished
    controller counts from (:mod:`controlplane.controllers.finishedjobs`)."""
    if interpreter.finished(status) is None:
        return status
    conditions = []
    for cond in status.get("conditions") or ():
        if cond.get("status") == "True" and interpreter.finished({"conditions": [cond]}) is not None:
            cond = {**cond, "lastTransitionTime": now}
        conditions.append(cond)
    return {**status, "conditions": conditions}


def reported(member_statuses: MemberStatuses) -> list[Mapping[str, Any]]:
    """The statuses the members reported, in cluster order (a member without one is left out)."""
    return [s for _, s in member_statuses if s is not None]


def sum_fields(statuses: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> dict[str, int]:
    """Element-wise sums of integer status fields (absent counts as 0)."""
    return {f: sum(as_int(s.get(f)) for s in statuses) for f in fields}


def nonzero_sums(statuses: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> dict[str, int]:
    """:func:`sum_fields` without the zero sums: counts a status leaves out when they are 0
    (``omitempty``), as a Job's ``active``/``succeeded``/``failed``."""
    return {f: total for f, total in sum_fields(statuses, fields).items() if total}


def sum_by_name(statuses: Sequence[Mapping[str, Any]], field: str, counts: Sequence[str]) -> list[dict[str, Any]]:
    """The entries of the list ``field`` of each status (``{name, <counts>...}``: a JobSet's
    ``replicatedJobsStatus``, a TrainJob's ``jobsStatus``) summed by name, in first-seen order;
    an entry without a name is left out."""
    by_name: dict[str, dict[str, Any]] = {}
    for status in statuses:
        for entry in status.get(field) or ():
            if not isinstance(entry, Mapping) or not entry.get("name"):
                continue
            merged = by_name.setdefault(str(entry["name"]), {"name": str(entry["name"])})
            for count in counts:
                merged[count] = as_int(merged.get(count)) + as_int(entry.get(count))
    return list(by_name.values())


def merge_conditions(
    member_statuses: MemberStatuses,
    *,
    any_true: frozenset[str] = frozenset(),
    metav1: bool = False,
) -> list[Obj]:
    """One condition per type across members.

    A type in ``any_true`` (Failed, ReplicaFailure…) is True as soon as one member says so;
    every other type is True only when all members say True, False when any says False,
    Unknown otherwise (including a member that does not report it). The message names
    the clusters behind a non-True result (an Unknown one also those that do not report the
    type); lastTransitionTime is the latest of the members that agree with the result, else of
    those that report the type. The reason is the agreeing members' one, ``Aggregated`` when they
    give several or none, ``NotReported`` for an Unknown that only missing reports make: every
    merged condition has the type, status, reason and transition time a ``metav1.Condition`` needs.
    A kind whose conditions are ``metav1.Condition`` s (``metav1``: JobSet's, LeaderWorkerSet's)
    gets its message even when empty, as Go writes one (``message`` is never omitted) and as the
    kind's CRD schema requires it; the others' is left out then (``omitempty``).
    """
    present = [(name, s) for name, s in member_statuses if s is not None]
    types: list[str] = []
    per_member: list[tuple[str, dict[str, Mapping[str, Any]]]] = []
    for name, status in present:
        conds = {str(c.get("type")): c for c in status.get("conditions") or () if c.get("type")}
        per_member.append((name, conds))
        types.extend(t for t in conds if t not in types)
    out: list[Obj] = []
    for ctype in types:
        values = [(name, conds.get(ctype)) for name, conds in per_member]
        states = [str(c.get("status")) if c else "Unknown" for _, c in values]
        if ctype in any_true:
            result = (
                "True"
                if "True" in states
                else ("False" if states and all(s == "False" for s in states) else "Unknown")
            )
        elif states and all(s == "True" for s in states):
            result = "True"
        elif "False" in states:
            result = "False"
        else:
            result = "Unknown"
        agreeing = [(name, c) for (name, c), s in zip(values, states, strict=True) if s == result and c]
        cond: Obj = {"type": ctype, "status": result}
        missing = [name for name, c in values if c is None] if result == "Unknown" else []
        reasons = {str(c.get("reason")) for _, c in agreeing if c.get("reason")}
        if len(reasons) == 1:
            cond["reason"] = reasons.pop()
        else:
            cond["reason"] = "NotReported" if missing and not agreeing else "Aggregated"
        messages = [f"{name}: {c.get('message')}" for name, c in agreeing if c.get("message")]
        messages += [f"{name}: not reported" for name in missing]
        if messages or metav1:
            cond["message"] = "; ".join(messages)
        times = [str(c["lastTransitionTime"]) for _, c in agreeing if c.get("lastTransitionTime")] or [
            str(c["lastTransitionTime"]) for _, c in values if c and c.get("lastTransitionTime")
        ]
        if times:
            cond["lastTransitionTime"] = max(times)
        out.append(cond)
    return out


def put_conditions(
    out: Obj, member_statuses: MemberStatuses, *, any_true: frozenset[str] = frozenset(), metav1: bool = False
) -> None:
    """Set ``out["conditions"]`` to the members' conditions merged (:func:`merge_conditions`),
    unless they have none (the hub status then has no ``conditions``)."""
    conditions = merge_conditions(member_statuses, any_true=any_true, metav1=metav1)
    if conditions:
        out["conditions"] = conditions


def condition_true(status: Mapping[str, Any] | None, ctype: str) -> bool | None:
    """True/False when ``status.conditions`` has ``ctype`` as True/False, None when absent or Unknown."""
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            value = cond.get("status")
            return True if value == "True" else (False if value == "False" else None)
    return None


def finished_by_conditions(status: Mapping[str, Any] | None, *, succeeded: str) -> FinishedPhase | None:
    """FAILED while the ``Failed`` condition is True (it wins), SUCCEEDED while ``succeeded``
    (Job's ``Complete``, a Kubeflow job's ``Succeeded``) is, None otherwise."""
    if condition_true(status, "Failed"):
        return FinishedPhase.FAILED
    if condition_true(status, succeeded):
        return FinishedPhase.SUCCEEDED
    return None


def suspended_condition(
    suspend: Any, status: Mapping[str, Any] | None, *, suspended: tuple[str, str], resumed: tuple[str, str]
) -> dict[str, str] | None:
    """The ``Suspended`` condition a job controller keeps for its job's suspend flag: True with
    ``suspended``'s reason and message while ``suspend`` is true; False with ``resumed``'s once it
    is not but the condition was True; None otherwise (never suspended). The caller leaves out a
    finished job, whose conditions its controller leaves alone."""
    if suspend is True:
        return {"type": "Suspended", "status": "True", "reason": suspended[0], "message": suspended[1]}
    if condition_true(status, "Suspended"):
        return {"type": "Suspended", "status": "False", "reason": resumed[0], "message": resumed[1]}
    return None


def scale_counts(counts: Sequence[int], target: int) -> list[int]:
    """Split ``target`` over roles proportionally to ``counts`` (largest remainder, ties to the first)."""
    if target <= 0:
        return [0 for _ in counts]
    total = sum(counts)
    if not counts:
        return []
    if total <= 0:
        return [target, *[0 for _ in counts[1:]]]
    quotas = [c * target / total for c in counts]
    out = [math.floor(q) for q in quotas]
    order = sorted(range(len(counts)), key=lambda i: (-(quotas[i] - out[i]), i))
    for i in order[: target - sum(out)]:
        out[i] += 1
    return out


def extreme_time(values: Sequence[Any], pick: Callable[[Sequence[str]], str]) -> str | None:
    """min/max of RFC3339 timestamps (string order is time order for one zone, Z)."""
    present = [str(v) for v in values if v]
    return pick(present) if present else None
