"""JobSet (jobset.x-k8s.io/v1alpha2): ``spec.replicatedJobs[]``, each ``replicas`` copies of a
Job template; the Jobs of a JobSet run one distributed training together.

Each replicated Job is a role (a :class:`Component`) whose pods are ``replicas`` times the Job's
pods at once (``parallelism``, default 1, capped by ``completions``). A JobSet is a gang: all its
Jobs land in one cluster, as its workers must reach each other (JobSet's headless Service).
The hub's status sums each replicated Job's ``ready``/``succeeded``/``failed``/``active``/
``suspended`` counts by name, keeps the highest ``restarts``, and merges the conditions
(Failed True when any member failed; Completed only when all completed); ``terminalState`` is
Failed when any member's is, Completed when all are.

:func:`suspension_condition` is the ``Suspended`` condition the JobSet controller keeps for
``spec.suspend``; the hub sets it on a JobSet it holds (no member runs it, so no member's status
says so).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

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
    put_conditions,
    reported,
    sum_by_name,
    suspended_condition,
)
from controlplane.interpreter.health import health_by_conditions, status_of
from controlplane.interpreter.job import job_pods
from controlplane.interpreter.requirements import ReplicaRequirements, requirements

JOB_COUNTS = ("ready", "succeeded", "failed", "active", "suspended")


def finished_phase(status: Mapping[str, Any] | None) -> FinishedPhase | None:
    """Failed or succeeded by the ``Failed`` / ``Completed`` condition or ``terminalState``; None while it runs."""
    if condition_true(status, "Failed") or (status or {}).get("terminalState") == "Failed":
        return FinishedPhase.FAILED
    if condition_true(status, "Completed") or (status or {}).get("terminalState") == "Completed":
        return FinishedPhase.SUCCEEDED
    return None


def suspension_condition(jobset: Mapping[str, Any]) -> dict[str, str] | None:
    """The ``Suspended`` condition the JobSet controller gives ``jobset`` for its ``spec.suspend``
    (``suspendJobs`` / ``resumeJobsIfNecessary``): True, reason ``SuspendedJobs`` ("jobset is
    suspended"), while suspended; False, reason ``ResumeJobs`` ("jobset is resumed"), once it is
    not but was; None when there is nothing to say (never suspended, or finished: the controller
    leaves a finished JobSet's conditions alone)."""
    status = jobset.get("status") or {}
    if finished_phase(status) is not None:
        return None
    suspend = (jobset.get("spec") or {}).get("suspend")
    return suspended_condition(
        suspend, status, suspended=("SuspendedJobs", "jobset is suspended"), resumed=("ResumeJobs", "jobset is resumed")
    )


def _replicated_jobs(obj: Obj) -> list[dict[str, Any]]:
    jobs = (obj.get("spec") or {}).get("replicatedJobs")
    return [j for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []


def _job_spec(replicated: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((replicated.get("template") or {}).get("spec")) or {}


class JobSetInterpreter(GangOfRoles):
    group = "jobset.x-k8s.io"
    kind = "JobSet"

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        return [slot for _, slot in self.pod_set_slots(obj)]

    def pod_set_slots(self, obj: Obj) -> list[PodSetSlot]:
        out: list[PodSetSlot] = []
        for index, replicated in enumerate(_replicated_jobs(obj)):
            spec = (replicated.get("template") or {}).get("spec")
            if isinstance(spec, dict) and "template" in spec:
                out.append((str(replicated.get("name") or f"job-{index}"), (spec, "template")))
        return out

    def components(self, obj: Obj) -> list[Component]:
        return [
            Component(
                name=str(replicated.get("name") or f"job-{index}"),
                replicas=as_int(replicated.get("replicas"), 1) * job_pods(_job_spec(replicated)),
                requirements=requirements(_job_spec(replicated).get("template")),
            )
            for index, replicated in enumerate(_replicated_jobs(obj))
        ]

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        components = self.components(obj)
        if not components:
            return ReplicaRequirements()
        return max(components, key=lambda c: c.replicas).requirements

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        return copy.deepcopy(obj)

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}
        out: Obj = {}
        if jobs := sum_by_name(present, "replicatedJobsStatus", JOB_COUNTS):
            out["replicatedJobsStatus"] = jobs
        restarts = max(as_int(s.get("restarts")) for s in present)
        if restarts:
            out["restarts"] = restarts
        put_conditions(out, member_statuses, any_true=frozenset({"Failed"}), metav1=True)
        states = [str(s.get("terminalState") or "") for s in reported(member_statuses)]
        if "Failed" in states:
            out["terminalState"] = "Failed"
        elif states and len(present) == len(member_statuses) and all(s == "Completed" for s in states):
            out["terminalState"] = "Completed"
        return out

    def health_of(self, observed: Obj) -> Health:
        """Unhealthy once failed, Healthy once completed (both as :meth:`finished` tells them:
        the ``Failed`` / ``Completed`` condition or ``terminalState``), else by the conventional
        conditions (:func:`~controlplane.interpreter.health.health_by_conditions`): Healthy
        without conditions yet."""
        status = status_of(observed)
        finished = self.finished(status)
        if finished is not None:
            return Health.UNHEALTHY if finished is FinishedPhase.FAILED else Health.HEALTHY
        return health_by_conditions(status)

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        return finished_phase(status)
