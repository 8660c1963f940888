"""Kueue's ``ReclaimablePods`` of a queued job: the Pods of a running job that will not run again,
whose quota its Workload's ``status.reclaimablePods`` gives back to waiting workloads
(:func:`controlplane.admission.objects.admitted_of` counts only the Pods not reclaimable).

In: the hub's job, its status as the interpreter aggregates it from the members (a Job's
``status.succeeded``, a JobSet's ``replicatedJobsStatus[].succeeded``, a TrainJob's
``jobsStatus[].succeeded``, the TrainJob read with its runtime). Out: the Workload's
``reclaimablePods`` (one entry per pod set), as Kueue's integrations of those kinds compute them,
and the Workload's status with them when they changed. Kueue's Kubeflow, MPIJob, RayJob and
RayCluster integrations report none, and neither does the hub for them. Pure; no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.admission import podsets
from controlplane.admission.objects import reclaimable_pods
from controlplane.apis.trainer import is_train_job
from controlplane.apis.trainer_runtime import replicated_jobs, resolved_runtime
from controlplane.apis.untyped import as_int
from controlplane.interpreter.job import job_pods

#: Kueue's ``DefaultPodSetName``: a Job's only pod set.
MAIN = "main"


def of_job(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Kueue's Job ``ReclaimablePods``: none for a Job of ``parallelism`` 1 or with no Pod
    succeeded; else, with ``remaining`` = ``completions`` (default: ``parallelism``) less the
    succeeded Pods, the ``parallelism - remaining`` Pods that will not run again once fewer
    completions remain than Pods run at once."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    parallelism = as_int(spec.get("parallelism"), 1)
    succeeded = as_int(status.get("succeeded"))
    if parallelism == 1 or succeeded == 0:
        return []
    remaining = as_int(spec.get("completions"), parallelism) - succeeded
    if remaining >= parallelism:
        return []
    return [{"name": MAIN, "count": parallelism - remaining}]


def of_jobset(jobset: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Kueue's JobSet ``ReclaimablePods``: per replicated Job with some of its Jobs succeeded (no
    more than its ``replicas``), the Pods of those Jobs (each Job's ``parallelism``, capped by its
    ``completions``)."""
    statuses = {str(s.get("name")): s for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or ()
                if isinstance(s, Mapping)}
    out: list[dict[str, Any]] = []
    for replicated in (jobset.get("spec") or {}).get("replicatedJobs") or ():
        if not isinstance(replicated, Mapping) or (status := statuses.get(str(replicated.get("name")))) is None:
            continue
        succeeded = as_int(status.get("succeeded"))
        if 0 < succeeded <= as_int(replicated.get("replicas"), 1):
            per_job = job_pods(((replicated.get("template") or {}).get("spec")) or {})
            out.append({"name": podsets.pod_set_name(str(replicated["name"])), "count": succeeded * per_job})
    return out


def of_trainjob(trainjob: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Kueue's TrainJob ``ReclaimablePods``, read with its runtime
    (:func:`~controlplane.apis.trainer_runtime.with_runtime`): none while ``status.jobsStatus`` is
    empty; else as for its JobSet, per replicated Job of the runtime whose entry in ``jobsStatus``
    has some child Jobs succeeded (no more than its ``replicas``), the Pods of those Jobs (the
    trainer step's Job runs the TrainJob's nodes). None (nothing to change) for a TrainJob with
    child Jobs read without its runtime: Kueue cannot build its JobSet then."""
    statuses = {str(s.get("name")): s for s in (trainjob.get("status") or {}).get("jobsStatus") or ()
                if isinstance(s, Mapping)}
    if not statuses:
        return []
    runtime = resolved_runtime(trainjob)
    if runtime is None:
        return None
    out: list[dict[str, Any]] = []
    for job in replicated_jobs(trainjob, runtime):
        succeeded = as_int((statuses.get(job.name) or {}).get("succeeded"))
        if 0 < succeeded <= job.replicas:
            out.append({"name": podsets.pod_set_name(job.name), "count": succeeded * job.per_replica})
    return out


def of(source: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The reclaimable Pods of a queued job; None for a kind whose Kueue integration reports none."""
    api_version, kind = str(source.get("apiVersion") or ""), source.get("kind")
    if (api_version, kind) == ("batch/v1", "Job"):
        return of_job(source)
    if api_version.split("/")[0] == "jobset.x-k8s.io" and kind == "JobSet":
        return of_jobset(source)
    if is_train_job(source):
        return of_trainjob(source)
    return None


def with_pods(workload: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Kueue's ``UpdateReclaimablePods``: the Workload's status with ``pods`` as its
    ``reclaimablePods`` (none: the field gone), or None when they are already its own (Kueue's
    ``ReclaimablePodsAreEqual``: the same count per pod set, in any order)."""
    if reclaimable_pods(workload) == {p["name"]: p["count"] for p in pods}:
        return None
    status = copy.deepcopy(dict(workload.get("status") or {}))
    if pods:
        status["reclaimablePods"] = [dict(p) for p in pods]
    else:
        status.pop("reclaimablePods", None)
    return status


def status_with(workload: Mapping[str, Any], source: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Workload's status with its job's reclaimable Pods; None when they did not change, or
    the kind reports none."""
    pods = of(source)
    return None if pods is None else with_pods(workload, pods)


__all__ = ["MAIN", "of", "of_job", "of_jobset", "of_trainjob", "status_with", "with_pods"]
