"""Kueue's ``PodsReady`` per integration: whether a queued workload's pods are all ready, read
from its hub status (the members' statuses as its interpreter folds them). Pure; no I/O.

Each rule is the one of Kueue's integration of the kind (its ``GenericJob.PodsReady``):

* batch/v1 Job: ``ready + succeeded`` reach its pods at once (``parallelism``, capped by
  ``completions``; a partially admitted Job runs with the admitted ``parallelism``);
* JobSet: the replicated Jobs' ``ready + succeeded`` Jobs (``replicatedJobsStatus``, summed over
  the members) equal the Jobs it runs (the sum of ``spec.replicatedJobs[].replicas``);
* TrainJob: as for its JobSet, the ``ready + succeeded`` child Jobs of ``status.jobsStatus``
  (one entry per replicated Job, the initializers' included, summed over the members) equal the
  Jobs its runtime runs (the sum of the runtime's ``replicatedJobs[].replicas``); a TrainJob read
  without its runtime is not ready (Kueue's rule fails to build its JobSet);
* the Kubeflow jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob): the training
  operator's ``Running`` condition is True;
* RayCluster: ``status.state`` is ``ready``; RayJob: its cluster's, ``status.rayClusterStatus.state``;
* LeaderWorkerSet: Kueue admits each group as a pod group whose Pods must all be ready; the hub
  admits the whole LeaderWorkerSet, so all of them: ``readyReplicas`` (groups whose leader and
  workers are all ready) reach ``spec.replicas``;
* Pod: its ``Ready`` condition is True; a hub Pod's status is folded as Karmada folds it (its
  phase and container statuses, no conditions), so without the condition: ``Running`` with every
  container ready; a pod group: every Pod of the group is (or has succeeded);
* Deployment and StatefulSet (Kueue admits their Pods, one by one or as a group): ``readyReplicas``
  reach ``spec.replicas``.

Any other kind is not timed (None).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from controlplane.apis.kubeflow import GROUP as KUBEFLOW_GROUP
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.trainer import GROUP as TRAINER_GROUP
from controlplane.apis.trainer import TRAIN_JOB
from controlplane.apis.trainer_runtime import replicated_jobs, resolved_runtime
from controlplane.apis.untyped import as_int
from controlplane.interpreter.base import condition_true
from controlplane.interpreter.job import job_pods
from controlplane.interpreter.registry import group_of

Obj = Mapping[str, Any]
#: KubeRay's ``ClusterState`` of a cluster whose pods are all up.
RAY_READY: Final = "ready"


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


def job(obj: Obj) -> bool:
    status = _status(obj)
    return as_int(status.get("ready")) + as_int(status.get("succeeded")) >= job_pods(_spec(obj))


def replicas_ready(obj: Obj) -> bool:
    """Deployment, StatefulSet, LeaderWorkerSet: ``readyReplicas`` reach ``spec.replicas`` (default 1)."""
    return as_int(_status(obj).get("readyReplicas")) >= as_int(_spec(obj).get("replicas"), 1)


def _jobs_ready(statuses: Any) -> int:
    """The child Jobs ready or succeeded in a list of per-replicated-Job counts."""
    return sum(as_int(s.get("ready")) + as_int(s.get("succeeded")) for s in statuses or () if isinstance(s, Mapping))


def jobset(obj: Obj) -> bool:
    wanted = sum(as_int(r.get("replicas"), 1) for r in _spec(obj).get("replicatedJobs") or () if isinstance(r, Mapping))
    return _jobs_ready(_status(obj).get("replicatedJobsStatus")) == wanted


def trainjob(obj: Obj) -> bool:
    """A TrainJob read with its runtime (:func:`~controlplane.apis.trainer_runtime.with_runtime`)."""
    runtime = resolved_runtime(obj)
    if runtime is None:
        return False
    wanted = sum(job.replicas for job in replicated_jobs(obj, runtime))
    return _jobs_ready(_status(obj).get("jobsStatus")) == wanted


def kubeflow(obj: Obj) -> bool:
    return condition_true(_status(obj), "Running") is True


def ray_cluster(obj: Obj) -> bool:
    return _status(obj).get("state") == RAY_READY


def ray_job(obj: Obj) -> bool:
    return (_status(obj).get("rayClusterStatus") or {}).get("state") == RAY_READY


def pod(obj: Obj) -> bool:
    status = _status(obj)
    ready = condition_true(status, "Ready")
    if ready is not None:
        return ready
    containers = [c for c in status.get("containerStatuses") or () if isinstance(c, Mapping)]
    return status.get("phase") == "Running" and bool(containers) and all(c.get("ready") is True for c in containers)


def pod_group(pods: Sequence[Obj]) -> bool:
    """Kueue's rule for a pod group: every Pod of it is ready (none: not ready). A Pod that has
    succeeded counts as ready: its ``Ready`` turned False as it ended, for which Kueue evicts no
    group once its pods were ready (``PodsReady`` stays True, or in later versions waits for a
    recovery timed only with ``recoveryTimeout``): a Pod that ended is no failure to recover from."""
    return bool(pods) and all(pod(p) or _status(p).get("phase") == "Succeeded" for p in pods)


RULES: Final[dict[tuple[str, str], Callable[[Obj], bool]]] = {
    ("batch", "Job"): job,
    ("apps", "Deployment"): replicas_ready,
    ("apps", "StatefulSet"): replicas_ready,
    ("jobset.x-k8s.io", "JobSet"): jobset,
    (TRAINER_GROUP, TRAIN_JOB): trainjob,
    **{(KUBEFLOW_GROUP, kind): kubeflow for kind in TRAINING_KINDS},
    ("ray.io", "RayCluster"): ray_cluster,
    ("ray.io", "RayJob"): ray_job,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): replicas_ready,
    ("", "Pod"): pod,
}


def pods_ready(workload: Obj) -> bool | None:
    """Whether all of a queued workload's pods are ready (or, for the kinds whose rule counts
    them, succeeded), from its hub status; None for a kind with no rule. A TrainJob is read with
    its runtime (the admission controller's resolved copy)."""
    rule = RULES.get((group_of(str(workload.get("apiVersion") or "")), str(workload.get("kind") or "")))
    return rule(workload) if rule is not None else None
