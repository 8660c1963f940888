"""The simulated member's RayJob controller (ray.io/v1, minimal), as one pure reconcile function.

In: a RayJob and the pods it owns; out: :class:`~simulator.controllers.base.Changes`
over those pods: the pods of its RayCluster (:func:`~.raycluster.ray_pods`), whose head
runs to completion (its duration, annotated with :data:`ANNOTATION_RUN_TO_COMPLETION`
for the kubelet) and then the workers are removed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.apis.templatehash import template_hash
from simulator.controllers.base import Changes, changed, is_active, is_terminating, phase
from simulator.controllers.raycluster import ray_pods

#: Set by the RayJob controller on the head pod: the kubelet ends it after its duration.
ANNOTATION_RUN_TO_COMPLETION: Final = "sim.gpufed.io/run-to-completion"


def reconcile_rayjob(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random
) -> Changes:
    spec = job.get("spec") or {}
    name = job["metadata"]["name"]
    status_old = job.get("status") or {}
    done = status_old.get("jobDeploymentStatus") in ("Complete", "Failed")
    head = next(
        (
            p
            for p in pods
            if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "head" and not is_terminating(p)
        ),
        None,
    )
    head_phase = phase(head) if head is not None else None
    finished = done or head_phase in ("Succeeded", "Failed")
    annotations = dict((job.get("metadata") or {}).get("annotations") or {})
    head_annotations = {ANNOTATION_RUN_TO_COMPLETION: "true"}
    for key in ("sim.gpufed.io/duration", "sim.gpufed.io/gpu-utilization"):
        if key in annotations:
            head_annotations[key] = annotations[key]
    if finished:
        changes = Changes(delete=[p["metadata"]["name"] for p in pods if is_active(p)])
    else:
        changes, _ = ray_pods(
            job, name, spec.get("rayClusterSpec") or {}, pods, rng, head_annotations=head_annotations
        )
    status: dict[str, Any] = {"rayClusterName": name, "jobId": f"{name}-{template_hash(spec)[:5]}"}
    if done:
        status.update(
            {
                k: status_old[k]
                for k in ("jobStatus", "jobDeploymentStatus", "startTime", "endTime")
                if k in status_old
            }
        )
    elif head_phase == "Succeeded":
        status.update(jobStatus="SUCCEEDED", jobDeploymentStatus="Complete", endTime=now)
    elif head_phase == "Failed":
        status.update(jobStatus="FAILED", jobDeploymentStatus="Failed", endTime=now)
    elif head_phase == "Running":
        status.update(jobStatus="RUNNING", jobDeploymentStatus="Running")
    else:
        status.update(jobStatus="PENDING", jobDeploymentStatus="Initializing")
    if "startTime" not in status:
        status["startTime"] = status_old.get("startTime") or now
    changes.status = changed(status_old, status)
    return changes
