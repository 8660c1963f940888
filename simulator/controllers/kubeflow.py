"""The simulated member's Kubeflow training job controllers (kubeflow.org/v1: PyTorchJob, TFJob,
XGBoostJob, PaddleJob, JAXJob, MPIJob), as one pure function driven by
:data:`~controlplane.apis.kubeflow.TRAINING_KINDS`.

In: a job and the pods it owns; out:
:class:`~simulator.controllers.base.Changes` over those pods. Pods are
``<name>-<role>-<i>`` (``<name>-master-0``, ``<name>-ps-1``...) / ``<name>-launcher``, with
``training.kubeflow.org/*`` labels and the gang label ``scheduling.x-k8s.io/pod-group``
(+ min-member annotation, see :mod:`simulator.scheduling.model`); status replicaStatuses and
conditions Created/Running/Succeeded/Failed. The job succeeds when its chief does (the kind's
first chief role the job has: Master, Launcher, TFJob's Chief else Master; a TFJob without one:
its worker 0, unless ``successPolicy: AllWorkers``), or without one when all its pods have; it is
Running while its chief runs, or without one while all its pods do. Pods
get the kind's default ``restartPolicy`` when their role and template set none. A finished job
(its status, or its pods: the chief Succeeded, a pod Failed) never gets a new pod, as the
training operator and MPI operator do; its pods are deleted as ``runPolicy.cleanPodPolicy`` says (All / Running =
Pending and Running / None; the simulated MPIJob defaults to Running, the others to None).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from controlplane.apis.constants import LABEL_TRAINING_JOB_NAME, LABEL_TRAINING_OPERATOR_NAME
from controlplane.apis.kubeflow import TRAINING_KINDS, TrainingKind, chief_of, ordered_roles
from simulator.controllers.base import (
    Changes,
    ConditionType,
    changed,
    compact,
    condition,
    is_terminating,
    new_pod,
    phase,
    put_present,
)
from simulator.scheduling.model import ANNOTATION_MIN_MEMBER, LABEL_POD_GROUP

LABEL_TRAINING_TYPE: Final = "training.kubeflow.org/replica-type"
LABEL_TRAINING_INDEX: Final = "training.kubeflow.org/replica-index"
LABEL_TRAINING_ROLE: Final = "training.kubeflow.org/job-role"


class CleanPodPolicy(StrEnum):
    """``runPolicy.cleanPodPolicy``: which pods the operator deletes once the job finished."""

    ALL = "All"
    RUNNING = "Running"
    """Pending and Running pods (a Pending one would start later and run for nothing)."""
    NONE = "None"


#: When the job sets none. The operators default to None; the simulated MPIJob defaults to
#: Running, so its workers (which never end by themselves) free their GPUs.
_DEFAULT_CLEAN_POD_POLICY: Final = {"MPIJob": CleanPodPolicy.RUNNING}


def clean_pod_policy(job: Mapping[str, Any], default: CleanPodPolicy) -> CleanPodPolicy:
    """The job's ``spec.runPolicy.cleanPodPolicy`` (or the legacy ``spec.cleanPodPolicy``)."""
    spec = job.get("spec") or {}
    value = (spec.get("runPolicy") or {}).get("cleanPodPolicy") or spec.get("cleanPodPolicy")
    return CleanPodPolicy(value) if value in tuple(CleanPodPolicy) else default


def _to_clean(pods: Mapping[str, Mapping[str, Any]], policy: CleanPodPolicy) -> list[str]:
    """Names of the pods a finished job's ``policy`` deletes."""
    if policy is CleanPodPolicy.NONE:
        return []
    if policy is CleanPodPolicy.ALL:
        return sorted(pods)
    return sorted(n for n, p in pods.items() if phase(p) in ("Pending", "Running"))


def _chief(job: Mapping[str, Any], training: TrainingKind, replica_specs: Mapping[str, Any]) -> tuple[str | None, int]:
    """The role whose success ends the job and how many of its pods count (from index 0): the
    kind's chief role, every pod of it; else, for a TFJob under its default success policy, worker
    0; else (None, 0): the job ends when all its pods have."""
    chief = chief_of(training, dict(replica_specs))
    if chief is not None:
        return chief, int((replica_specs[chief] or {}).get("replicas", 1))
    success_policy = (job.get("spec") or {}).get("successPolicy") or ""
    if training.worker0_ends and training.worker in replica_specs and success_policy != "AllWorkers":
        return training.worker, 1
    return None, 0


def _finished_by_pods(job: str, chief: tuple[str | None, int], pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the pods alone (terminating ones included) show the job finished: a chief that
    Succeeded, or any pod that Failed. Read before creating any pod, so a status write the cache
    has not shown yet never makes a finished job start pods again."""
    by_name = {str(p["metadata"]["name"]): p for p in pods}
    if any(phase(p) == "Failed" for p in by_name.values()):
        return True
    role, count = chief
    if role is None:
        return False
    chiefs = (by_name.get(_kubeflow_pod_name(job, role, i)) for i in range(count))
    return any(p is not None and phase(p) == "Succeeded" for p in chiefs)


def _kubeflow_pod_name(job: str, replica_type: str, index: int) -> str:
    if replica_type.lower() == "launcher":
        return f"{job}-launcher"
    return f"{job}-{replica_type.lower()}-{index}"


def reconcile_kubeflow_job(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random
) -> Changes:
    kind = str(job["kind"])
    training = TRAINING_KINDS[kind]
    meta = job["metadata"]
    name = meta["name"]
    namespace = meta.get("namespace") or "default"
    specs: Mapping[str, Any] = (job.get("spec") or {}).get(training.specs_field) or {}
    replica_specs = {role: specs[role] for role in ordered_roles(training, list(specs))}
    chief, chief_count = _chief(job, training, replica_specs)
    total = sum(int((rs or {}).get("replicas", 1)) for rs in replica_specs.values())
    status_old = job.get("status") or {}
    old_conditions = list(status_old.get("conditions") or [])
    finished = any(
        c.get("type") in (ConditionType.SUCCEEDED, ConditionType.FAILED) and c.get("status") == "True"
        for c in old_conditions
    )
    # As the operators do: a finished job (by its status, or by its pods) gets no new pod.
    creates = not finished and not _finished_by_pods(name, (chief, chief_count), pods)
    by_name = {p["metadata"]["name"]: p for p in pods if not is_terminating(p)}
    changes = Changes()
    replica_statuses: dict[str, dict[str, Any]] = {}
    chief_done = False
    workers_done = True
    failed_any = False
    all_running = True
    chief_running = False
    for replica_type, replica_spec in replica_specs.items():
        count = int((replica_spec or {}).get("replicas", 1))
        counts = {"active": 0, "succeeded": 0, "failed": 0}
        for index in range(count):
            pod_name = _kubeflow_pod_name(name, replica_type, index)
            pod = by_name.get(pod_name)
            is_chief = replica_type == chief and index < chief_count
            if pod is None:
                all_running = False
                workers_done = False
                if creates:
                    template = dict((replica_spec or {}).get("template") or {})
                    labels = {
                        LABEL_TRAINING_JOB_NAME: name,
                        LABEL_TRAINING_OPERATOR_NAME: training.operator,
                        LABEL_TRAINING_TYPE: replica_type.lower(),
                        LABEL_TRAINING_INDEX: str(index),
                        LABEL_POD_GROUP: name,
                    }
                    if is_chief:
                        labels[LABEL_TRAINING_ROLE] = replica_type.lower()
                    pod_new = new_pod(
                        job,
                        template,
                        name=pod_name,
                        labels=labels,
                        annotations={ANNOTATION_MIN_MEMBER: str(total)},
                        hostname=pod_name,
                    )
                    restart = (replica_spec or {}).get("restartPolicy")
                    if restart in ("Always", "OnFailure", "Never"):
                        pod_new["spec"]["restartPolicy"] = restart
                    elif restart == "ExitCode":
                        pod_new["spec"]["restartPolicy"] = "Never"
                    elif "restartPolicy" not in (template.get("spec") or {}):
                        pod_new["spec"]["restartPolicy"] = training.default_restart_policy
                    changes.create.append(pod_new)
                continue
            current = phase(pod)
            if current == "Running":
                counts["active"] += 1
                if is_chief:
                    chief_running = True
            else:
                all_running = False
            if current == "Succeeded":
                counts["succeeded"] += 1
                if is_chief:
                    chief_done = True
            elif not is_chief:
                workers_done = False
            if current == "Failed":
                counts["failed"] += 1
                failed_any = True
        replica_statuses[replica_type] = compact(counts) | {
            "selector": f"{LABEL_TRAINING_JOB_NAME}={name},{LABEL_TRAINING_OPERATOR_NAME}={training.operator},"
            f"{LABEL_TRAINING_TYPE}={replica_type.lower()}"
        }
    has_chief = chief is not None
    succeeded = chief_done if has_chief else (workers_done and bool(replica_specs))
    conditions = list(old_conditions)

    def put(kind_: str, value: bool, reason: str, message: str) -> None:
        nonlocal conditions
        new = condition(kind_, value, reason, message, now, old_conditions)
        conditions = [c for c in conditions if c.get("type") != kind_] + [new]

    if not any(c.get("type") == ConditionType.CREATED for c in conditions):
        put(ConditionType.CREATED, True, f"{kind}Created", f"{kind} {name} is created.")
    start_time = status_old.get("startTime")
    completion_time = status_old.get("completionTime")
    policy = clean_pod_policy(job, _DEFAULT_CLEAN_POD_POLICY.get(kind, CleanPodPolicy.NONE))
    if finished:
        changes.delete.extend(_to_clean(by_name, policy))
    else:
        if failed_any:
            put(ConditionType.RUNNING, False, f"{kind}Failed", f"{kind} {namespace}/{name} has failed.")
            put(
                ConditionType.FAILED,
                True,
                f"{kind}Failed",
                f"{kind} {namespace}/{name} has failed because a pod failed.",
            )
            completion_time = now
            changes.delete.extend(_to_clean(by_name, policy))
        elif succeeded:
            reason, message = f"{kind}Succeeded", f"{kind} {namespace}/{name} successfully completed."
            put(ConditionType.RUNNING, False, reason, message)
            put(ConditionType.SUCCEEDED, True, reason, message)
            completion_time = now
            changes.delete.extend(_to_clean(by_name, policy))
        elif (chief_running if has_chief else all_running) and by_name:
            put(ConditionType.RUNNING, True, f"{kind}Running", f"{kind} {namespace}/{name} is running.")
            if start_time is None:
                start_time = now
    status: dict[str, Any] = {"conditions": conditions, "replicaStatuses": replica_statuses}
    put_present(status, startTime=start_time, completionTime=completion_time)
    changes.status = changed(status_old, status)
    return changes
