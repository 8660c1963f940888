"""The simulated member's Job controller (batch/v1), as one pure reconcile function.

In: a Job and the pods it owns; out: :class:`~simulator.controllers.base.Changes` over
those pods. It keeps parallelism/completions/backoffLimit/suspend (a lowered parallelism deletes
the surplus pods); status
active/ready/succeeded/failed/startTime/completionTime, conditions Complete,
Failed (BackoffLimitExceeded) and Suspended.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from simulator.controllers.base import (
    Changes,
    ConditionType,
    Reason,
    changed,
    compact,
    condition,
    is_active,
    is_ready,
    new_pod,
    phase,
    put_present,
    random_suffix,
)

LABEL_JOB_NAME: Final = "batch.kubernetes.io/job-name"
LABEL_CONTROLLER_UID: Final = "batch.kubernetes.io/controller-uid"


def reconcile_job(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random
) -> Changes:
    meta = job["metadata"]
    spec = job.get("spec") or {}
    name = meta["name"]
    parallelism = int(spec["parallelism"]) if spec.get("parallelism") is not None else 1
    completions: int | None = int(spec["completions"]) if spec.get("completions") is not None else None
    if completions is None and spec.get("parallelism") is None:
        completions = 1
    backoff_limit = int(spec["backoffLimit"]) if spec.get("backoffLimit") is not None else 6
    suspended = bool(spec.get("suspend"))
    status_old = job.get("status") or {}
    old_conditions = list(status_old.get("conditions") or [])
    finished = any(
        c.get("type") in (ConditionType.COMPLETE, ConditionType.FAILED) and c.get("status") == "True"
        for c in old_conditions
    )
    active = [p for p in pods if is_active(p)]
    succeeded = sum(1 for p in pods if phase(p) == "Succeeded")
    failed = sum(1 for p in pods if phase(p) == "Failed")
    changes = Changes()
    conditions = [c for c in old_conditions if c.get("type") != ConditionType.SUSPENDED]
    start_time = status_old.get("startTime")
    completion_time = status_old.get("completionTime")
    if not finished:
        done = succeeded >= completions if completions is not None else succeeded > 0 and not active
        stop: tuple[ConditionType, Reason, str] | None = None
        if failed > backoff_limit:
            stop = (ConditionType.FAILED, Reason.BACKOFF_LIMIT_EXCEEDED, "Job has reached the specified backoff limit")
        elif done:
            stop = (ConditionType.COMPLETE, Reason.COMPLETIONS_REACHED, "Reached expected number of succeeded pods")
            completion_time = now
        elif suspended:
            stop = (ConditionType.SUSPENDED, Reason.JOB_SUSPENDED, "Job suspended")
        if stop is not None:
            # Failed, complete or suspended: the active pods go, and a condition says why.
            ctype, reason, message = stop
            changes.delete.extend(p["metadata"]["name"] for p in active)
            conditions.append(condition(ctype, True, reason, message, now, old_conditions, updated_at="lastProbeTime"))
            active = []
        else:
            if start_time is None:
                start_time = now
            if completions is not None:
                want = min(parallelism, completions - succeeded)
            else:
                want = parallelism if succeeded == 0 else 0
            if len(active) > want:
                # A lowered parallelism: kube's manageJob deletes the surplus, pods not ready (then
                # the newest) first, as its ActivePods order ranks them.
                newest = sorted(active, key=lambda p: str(p["metadata"].get("creationTimestamp") or ""), reverse=True)
                surplus = {p["metadata"]["name"] for p in sorted(newest, key=is_ready)[: len(active) - want]}
                changes.delete.extend(sorted(surplus))
                active = [p for p in active if p["metadata"]["name"] not in surplus]
            uid = meta.get("uid", "")
            for _ in range(max(0, want - len(active))):
                changes.create.append(
                    new_pod(
                        job,
                        spec.get("template") or {},
                        name=f"{name}-{random_suffix(rng)}",
                        generate_name=f"{name}-",
                        labels={
                            LABEL_JOB_NAME: name,
                            "job-name": name,
                            LABEL_CONTROLLER_UID: uid,
                            "controller-uid": uid,
                        },
                    )
                )
    status: dict[str, Any] = compact(
        {
            "active": len(active) + len(changes.create),
            "ready": sum(1 for p in active if is_ready(p)),
            "succeeded": succeeded,
            "failed": failed,
        }
    )
    status["ready"] = sum(1 for p in active if is_ready(p))
    status["uncountedTerminatedPods"] = {}
    put_present(status, startTime=start_time, completionTime=completion_time, conditions=conditions)
    changes.status = changed(status_old, status)
    return changes
