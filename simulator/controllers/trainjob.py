"""The simulated member's Kubeflow Trainer controller (trainer.kubeflow.org/v1alpha1 TrainJob),
as one pure function over the TrainJob, its runtime and the pods it owns.

The trainer builds a JobSet from the TrainJob and its runtime and JobSet runs its Jobs; the
simulation skips the two objects in between and makes the trainer step's pods itself
(:func:`~controlplane.apis.trainer_runtime.trainer_nodes`): ``numNodes`` pods
``<name>-<job>-0-<index>`` (the Job ``<name>-<job>-0``, as JobSet names it, and its completion
index) of the runtime's trainer pod template with the TrainJob's ``spec.trainer`` written in, so
``resourcesPerNode`` is what they ask. With ``podGroupPolicy`` set they form a gang (the
coscheduling plugin's ``scheduling.x-k8s.io/pod-group`` label and its min-member annotation).
A pod without ``restartPolicy`` gets ``OnFailure``, as JobSet's webhook defaults it.

Status, as the trainer writes it: ``Created`` True (``JobsCreationSucceeded``, "Succeeded to
create Jobs") once the pods are made; ``Complete`` True (the JobSet's ``AllJobsCompleted``,
"jobset completed successfully") once every node succeeded; ``Failed`` True (``FailedJobs``,
"jobset failed due to one or more job failures") once one failed; ``Suspended`` while
``spec.suspend`` holds it (no pod is made). ``jobsStatus`` has one entry per replicated Job of
the runtime, in its order, as the trainer copies its JobSet's ``replicatedJobsStatus``: the
trainer Job's (child Job counts: ``active`` while a node is pending or running, ``ready`` once
all run, then ``succeeded`` or ``failed``), and the others' (the initializers, which the
simulation does not run: the trainer step waits for them, so they count as succeeded Jobs, all
their ``replicas``, once the nodes are made; ``suspended`` while the TrainJob is). A finished
TrainJob never gets a new pod.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.apis.trainer_runtime import LABEL_ANCESTOR, TrainerNodes, replicated_jobs, trainer_nodes
from simulator.controllers.base import (
    Changes,
    ConditionType,
    changed,
    condition,
    is_terminating,
    new_pod,
    phase,
)
from simulator.scheduling.model import ANNOTATION_MIN_MEMBER, LABEL_POD_GROUP

LABEL_JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
LABEL_REPLICATED_JOB: Final = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"


def node_pod_name(trainjob: str, job: str, index: int) -> str:
    return f"{trainjob}-{job}-0-{index}"


def _node_pod(trainjob: Mapping[str, Any], nodes: TrainerNodes, index: int) -> dict[str, Any]:
    name = str(trainjob["metadata"]["name"])
    labels = {
        LABEL_JOBSET_NAME: name,
        LABEL_REPLICATED_JOB: nodes.job,
        LABEL_COMPLETION_INDEX: str(index),
        LABEL_ANCESTOR: "trainer",
    }
    annotations: dict[str, str] = {}
    if nodes.gang:
        labels[LABEL_POD_GROUP] = name
        annotations[ANNOTATION_MIN_MEMBER] = str(nodes.count)
    pod_name = node_pod_name(name, nodes.job, index)
    pod = new_pod(trainjob, nodes.template, name=pod_name, labels=labels, annotations=annotations,
                  hostname=pod_name)
    if "restartPolicy" not in (nodes.template.get("spec") or {}):
        pod["spec"]["restartPolicy"] = "OnFailure"
    return pod


def reconcile_trainjob(
    trainjob: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random,
    runtime: Mapping[str, Any],
) -> Changes:
    name = str(trainjob["metadata"]["name"])
    nodes = trainer_nodes(trainjob, runtime)
    status_old = trainjob.get("status") or {}
    old_conditions = list(status_old.get("conditions") or [])
    conditions = list(old_conditions)

    def put(kind: str, value: bool, reason: str, message: str) -> None:
        nonlocal conditions
        new = condition(kind, value, reason, message, now, old_conditions)
        new.pop("lastUpdateTime", None)  # metav1.Condition has none
        conditions = [c for c in conditions if c.get("type") != kind] + [new]

    def is_true(kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)

    finished_before = is_true(ConditionType.COMPLETE) or is_true(ConditionType.FAILED)
    by_name = {str(p["metadata"]["name"]): p for p in pods if not is_terminating(p)}
    mine = [by_name.get(node_pod_name(name, nodes.job, i)) for i in range(nodes.count)]
    phases = [phase(p) if p is not None else None for p in mine]
    failed = any(p == "Failed" for p in phases)
    succeeded = bool(phases) and all(p == "Succeeded" for p in phases)
    suspended = (trainjob.get("spec") or {}).get("suspend") is True
    changes = Changes()
    if suspended and not finished_before:
        put(ConditionType.SUSPENDED, True, "Suspended", "TrainJob is suspended")
        changes.delete.extend(sorted(by_name))
    elif not finished_before and not failed and not succeeded:
        if is_true(ConditionType.SUSPENDED):
            put(ConditionType.SUSPENDED, False, "Resumed", "TrainJob is resumed")
        changes.create.extend(_node_pod(trainjob, nodes, i) for i, p in enumerate(mine) if p is None)
        put(ConditionType.CREATED, True, "JobsCreationSucceeded", "Succeeded to create Jobs")
    if not finished_before and failed:
        put(ConditionType.FAILED, True, "FailedJobs", "jobset failed due to one or more job failures")
    elif not finished_before and succeeded:
        put(ConditionType.COMPLETE, True, "AllJobsCompleted", "jobset completed successfully")
    running = [p for p in phases if p in ("Pending", "Running")]
    held = suspended and not finished_before
    trainer_entry = {
        "name": nodes.job,
        "ready": int(bool(phases) and all(p in ("Running", "Succeeded") for p in phases) and not succeeded),
        "succeeded": int(is_true(ConditionType.COMPLETE)),
        "failed": int(is_true(ConditionType.FAILED)),
        "active": int(bool(running) and not failed),
        "suspended": int(held),
    }
    entries = [trainer_entry if job.name == nodes.job else _initializer_entry(job.name, job.replicas, held=held)
               for job in replicated_jobs(trainjob, runtime)]
    if not any(entry is trainer_entry for entry in entries):
        entries.append(trainer_entry)
    changes.status = changed(status_old, {**status_old, "conditions": conditions, "jobsStatus": entries})
    return changes


def _initializer_entry(name: str, replicas: int, *, held: bool) -> dict[str, Any]:
    """A replicated Job the trainer step waits for: its Jobs succeeded once the nodes run, all
    suspended while the TrainJob is."""
    return {"name": name, "ready": 0, "succeeded": 0 if held else replicas, "failed": 0, "active": 0,
            "suspended": replicas if held else 0}
