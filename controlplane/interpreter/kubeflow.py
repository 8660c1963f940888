"""Shared interpreter for Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob,
JAXJob, MPIJob), one instance per row of :data:`~controlplane.apis.kubeflow.TRAINING_KINDS`.

All embed one replica spec per role (``spec.<kind's field>: {Master: {...}, Worker: {...}}`` with
``replicas``, default 1, and ``template``), are gangs (all pods must start together or the job
hangs), and report ``status.replicaStatuses[role] = {active, succeeded, failed}`` plus
conditions Created/Running/Restarting/Succeeded/Failed. Roles come in the kind's order (Kueue's
pod sets: TFJob's Chief, Master, PS, Worker, Evaluator), a role the kind does not name last.
Gangs are placed whole, so ``with_replicas`` normally returns a copy; asked for another total
it keeps every other role and gives the difference to the Worker role.

:func:`suspension_condition` is the ``Suspended`` condition the training operator keeps for a
``kubeflow.org/v1`` job's ``spec.runPolicy.suspend``; the hub sets it on a job it holds.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.apis.kubeflow import GROUP, TrainingKind, ordered_roles
from controlplane.apis.untyped import Obj, as_int
from controlplane.interpreter.base import (
    Component,
    FinishedPhase,
    GangOfRoles,
    Health,
    MemberStatuses,
    PodSetSlot,
    TemplateSlot,
    condition_true,
    extreme_time,
    finished_by_conditions,
    put_conditions,
    reported,
    suspended_condition,
)
from controlplane.interpreter.health import health_by_conditions, status_of
from controlplane.interpreter.requirements import ReplicaRequirements, requirements

ROLE_COUNTS = ("active", "succeeded", "failed")


def suspension_condition(job: Mapping[str, Any]) -> dict[str, str] | None:
    """The ``Suspended`` condition the training operator's job controller gives a
    ``kubeflow.org/v1`` job for ``spec.runPolicy.suspend``: True, reason ``<Kind>Suspended``
    ("PyTorchJob NAME is suspended."), while suspended; False, reason ``<Kind>Resumed``, once it
    is not but was; None when there is nothing to say (never suspended, finished, or another
    version, whose operator words it otherwise)."""
    status = job.get("status") or {}
    if job.get("apiVersion") != "kubeflow.org/v1" or finished_by_conditions(status, succeeded="Succeeded") is not None:
        return None
    kind, name = str(job.get("kind")), str((job.get("metadata") or {}).get("name"))
    return suspended_condition(
        ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"), status,
        suspended=(f"{kind}Suspended", f"{kind} {name} is suspended."), resumed=(f"{kind}Resumed", f"{kind} {name} is resumed."),
    )


class KubeflowJobInterpreter(GangOfRoles):
    group = GROUP

    def __init__(self, training: TrainingKind) -> None:
        self.training = training
        self.kind = training.kind
        self.worker_role = training.worker

    def _roles(self, obj: Obj) -> dict[str, dict[str, Any]]:
        """The job's roles (those with a replica spec), in the kind's order."""
        specs = (obj.get("spec") or {}).get(self.training.specs_field) or {}
        roles = {str(k): v for k, v in specs.items() if isinstance(v, dict)}
        return {name: roles[name] for name in ordered_roles(self.training, list(roles))}

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        return [slot for _, slot in self.pod_set_slots(obj)]

    def pod_set_slots(self, obj: Obj) -> list[PodSetSlot]:
        return [(name, (role, "template")) for name, role in self._roles(obj).items() if "template" in role]

    def components(self, obj: Obj) -> list[Component]:
        return [
            Component(
                name=name,
                replicas=as_int(role.get("replicas"), 1),
                requirements=requirements(role.get("template")),
            )
            for name, role in self._roles(obj).items()
        ]

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        roles = self._roles(obj)
        role = roles.get(self.worker_role) or next(iter(roles.values()), None)
        return requirements((role or {}).get("template"))

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        out = copy.deepcopy(obj)
        roles = self._roles(out)
        fixed = sum(as_int(r.get("replicas"), 1) for name, r in roles.items() if name != self.worker_role)
        worker = roles.get(self.worker_role)
        if worker is not None and replicas != self.replicas(obj):
            worker["replicas"] = max(0, replicas - fixed)
        return out

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}
        replica_statuses: dict[str, dict[str, int]] = {}
        for status in present:
            for role, counts in (status.get("replicaStatuses") or {}).items():
                merged = replica_statuses.setdefault(str(role), {})
                for field in ROLE_COUNTS:
                    merged[field] = merged.get(field, 0) + as_int((counts or {}).get(field))
        out: Obj = {"replicaStatuses": replica_statuses}
        put_conditions(out, member_statuses, any_true=frozenset({"Failed", "Restarting"}))
        for field, pick in (("startTime", min), ("completionTime", max), ("lastReconcileTime", max)):
            value = extreme_time([s.get(field) for s in present], pick)
            if value:
                out[field] = value
        return out

    def health_of(self, observed: Obj) -> Health:
        """By the operator's conditions (:func:`~controlplane.interpreter.health.health_by_conditions`),
        which come some time after the apply: Unknown until they do."""
        return health_by_conditions(status_of(observed), awaited=True)

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        return finished_by_conditions(status, succeeded="Succeeded")

    def between_runs(self, status: Mapping[str, Any] | None) -> bool:
        """Not finished, and either restarting after a failed attempt (the operator's
        ``Restarting`` condition, which it sets with ``Running`` False) or not started: not
        ``Running`` and no pod of any role active."""
        if self.finished(status) is not None:
            return False
        if condition_true(status, "Restarting"):
            return True
        if condition_true(status, "Running"):
            return False
        roles = (status or {}).get("replicaStatuses") or {}
        return not any(as_int((counts or {}).get("active")) for counts in roles.values() if isinstance(counts, Mapping))
