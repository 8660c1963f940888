"""Job (batch/v1): ``spec.parallelism`` pods at a time; a gang only when marked as one.

Replicas are the pods that run at once: ``parallelism`` (default 1), capped by
``completions`` when that is smaller. A cluster's share of ``n`` pods gets
``parallelism = n`` and ``completions = ceil(completions * n / replicas)``: completions
scale with the share, rounded up so the members together never complete less work than
asked (at most one extra completion per cluster). ``completionMode: Indexed`` jobs get
per-cluster indices 0..completions-1; mark them as gangs when indices must be global.

A Job is a gang when annotated ``gpufed.io/gang: "true"``, or when it (or its pod
template) carries a coscheduling pod-group label together with a min-member count > 1.
The hub's status sums active/ready/succeeded/failed/terminating; it is Complete only
when every member's share is Complete, Failed as soon as one member's share Failed. A member's
share is unhealthy once it Failed.

:func:`suspension_condition` is the ``Suspended`` condition kube's Job controller keeps for a
Job's ``spec.suspend``; the hub sets it on a Job it holds (no member runs it, so no member's
status says so).

:func:`ttl_expiry` is when a finished Job with ``spec.ttlSecondsAfterFinished`` is due for
deletion, as kube's ttl-after-finished controller computes it (the simulated members' and the
hub's controllers both use it).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from controlplane.apis.constants import ANNOTATION_GANG
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.apis.untyped import Obj, as_int
from controlplane.interpreter.base import (
    FinishedPhase,
    Health,
    MemberStatuses,
    PodTemplateKind,
    TemplateSlot,
    condition_true,
    extreme_time,
    finished_by_conditions,
    nonzero_sums,
    put_conditions,
    reported,
    suspended_condition,
)
from controlplane.interpreter.health import conditions_of, status_of

COUNT_FIELDS = ("active", "ready", "succeeded", "failed", "terminating")
FAILURE_CONDITIONS = frozenset({"Failed", "FailureTarget"})

POD_GROUP_LABELS = (
    "scheduling.x-k8s.io/pod-group",  # scheduler-plugins coscheduling
    "pod-group.scheduling.sigs.k8s.io",  # coscheduling, legacy lightweight form
    "pod-group.scheduling.sigs.k8s.io/name",
    "scheduling.k8s.io/group-name",  # Volcano
)
MIN_MEMBER_KEYS = (
    "pod-group.scheduling.sigs.k8s.io/min-available",
    "scheduling.x-k8s.io/min-member",
    "gpufed.io/min-member",
)


def _meta_maps(meta: Mapping[str, Any] | None) -> dict[str, str]:
    meta = meta or {}
    return {**(meta.get("annotations") or {}), **(meta.get("labels") or {})}


def job_pods(spec: Mapping[str, Any]) -> int:
    """The pods a Job ``spec`` runs at once: ``parallelism`` (default 1), capped by
    ``completions`` when that is smaller."""
    parallelism = as_int(spec.get("parallelism"), 1)
    completions = spec.get("completions")
    return min(parallelism, as_int(completions)) if completions is not None else parallelism


def suspension_condition(job: Mapping[str, Any]) -> dict[str, str] | None:
    """The ``Suspended`` condition kube's Job controller gives ``job`` for its ``spec.suspend``
    (``syncJob``): True, reason ``JobSuspended``, while it is suspended; False, reason
    ``JobResumed``, once it is not but was; None when there is nothing to say (never suspended,
    or finished: kube leaves a finished Job's conditions alone)."""
    status = job.get("status") or {}
    if finished_by_conditions(status, succeeded="Complete") is not None:
        return None
    suspend = (job.get("spec") or {}).get("suspend")
    return suspended_condition(suspend, status, suspended=("JobSuspended", "Job suspended"), resumed=("JobResumed", "Job resumed"))


def ttl_expiry(job: Mapping[str, Any]) -> datetime | None:
    """When ``job`` is due for deletion: ``spec.ttlSecondsAfterFinished`` after the
    ``lastTransitionTime`` of its ``Complete`` or ``Failed`` condition that is True (kube's
    ``jobFinishTime``). None when it has no TTL, has not finished, or does not say when it did."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    if not isinstance(ttl, int) or isinstance(ttl, bool):
        return None
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            finished = parse_time_or_none(cond.get("lastTransitionTime"))
            return None if finished is None else finished + timedelta(seconds=ttl)
    return None


class JobInterpreter(PodTemplateKind):
    group = "batch"
    kind = "Job"

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        spec = obj.get("spec")
        return [(spec, "template")] if isinstance(spec, dict) and "template" in spec else []

    def replicas(self, obj: Obj) -> int:
        return job_pods(obj.get("spec") or {})

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        total = self.replicas(obj)
        out = copy.deepcopy(obj)
        spec = out.setdefault("spec", {})
        completions = spec.get("completions")
        spec["parallelism"] = replicas
        if completions is not None and replicas != total:
            spec["completions"] = math.ceil(as_int(completions) * replicas / total) if total else 0
        return out

    def is_gang(self, obj: Obj) -> bool:
        meta = _meta_maps(obj.get("metadata"))
        if str(meta.get(ANNOTATION_GANG, "")).lower() == "true":
            return True
        template_meta = _meta_maps(((obj.get("spec") or {}).get("template") or {}).get("metadata"))
        for source in (meta, template_meta):
            if any(source.get(k) for k in POD_GROUP_LABELS) and any(
                as_int(source.get(k)) > 1 for k in MIN_MEMBER_KEYS
            ):
                return True
        return False

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}
        out: Obj = nonzero_sums(present, COUNT_FIELDS)
        start = extreme_time([s.get("startTime") for s in present], min)
        if start:
            out["startTime"] = start
        put_conditions(out, member_statuses, any_true=FAILURE_CONDITIONS)
        if condition_true(out, "Complete"):
            end = extreme_time([s.get("completionTime") for s in present], max)
            if end:
                out["completionTime"] = end
        return out

    def health_of(self, observed: Obj) -> Health:
        """Unhealthy once the ``Failed`` condition is True, or ``FailureTarget`` (kube 1.31+: the
        Job will fail once its pods are gone, and ``Failed`` follows), Healthy before (a Job that
        runs or waits to run is as it should be)."""
        conditions = conditions_of(status_of(observed))
        failing = "True" in (conditions.get("Failed"), conditions.get("FailureTarget"))
        return Health.UNHEALTHY if failing else Health.HEALTHY

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        return finished_by_conditions(status, succeeded="Complete")

    def between_runs(self, status: Mapping[str, Any] | None) -> bool:
        """Not finished, no pod ready (``status.ready``; pods pending or none created) and none
        succeeded: not started, or retrying after failed pods (``status.failed``) with no
        completion to lose."""
        if self.finished(status) is not None:
            return False
        status = status or {}
        return not as_int(status.get("ready")) and not as_int(status.get("succeeded"))
