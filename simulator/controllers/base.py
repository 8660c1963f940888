"""What every simulated workload controller shares: the reconcile contract and pod helpers.

The agent and the hub judge a member by what its controllers write: pods with
ownerReferences and the status fields the real controllers keep. Each kind's module
(``deployment.py``, ``replicaset.py``, ``statefulset.py``, ``job.py``, ``kubeflow.py``,
``raycluster.py``, ``rayjob.py``) has one pure reconcile function that takes one workload,
the children it owns and "now", and returns a :class:`Changes`: what to create, update,
delete, and the new status. :mod:`simulator.controllers.registry` maps each kind to its
function.

In here: :class:`Changes`, the condition types and reasons, kube's pod-template hash and
random name suffixes, building a pod from a template (:func:`new_pod`), reading a pod's
phase and readiness, condition bookkeeping, and the status helpers: zero-valued status
counters are omitted (:func:`compact`), as the real controllers' ``omitempty`` does, and
a status that differs only in timestamps is not written (:func:`changed`). Children whose
owner is gone are garbage: :func:`orphaned` says which.
Pure: no I/O; randomness comes from the caller's generator.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controlplane.apis.templatehash import SAFE_ALPHABET


class ConditionType(StrEnum):
    AVAILABLE = "Available"
    REPLICA_FAILURE = "ReplicaFailure"
    PROGRESSING = "Progressing"
    COMPLETE = "Complete"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    CREATED = "Created"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"


class Reason(StrEnum):
    MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
    MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"
    NEW_REPLICA_SET_AVAILABLE = "NewReplicaSetAvailable"
    REPLICA_SET_UPDATED = "ReplicaSetUpdated"
    COMPLETIONS_REACHED = "CompletionsReached"
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
    JOB_SUSPENDED = "JobSuspended"
    FAILED_CREATE = "FailedCreate"
    DEPLOYMENT_PAUSED = "DeploymentPaused"


@dataclass(slots=True)
class Changes:
    """What one reconcile wants written."""

    #: New children (pods; ReplicaSets for a Deployment).
    create: list[dict[str, Any]] = field(default_factory=list)
    #: Children to write back changed (compare-and-swap on their resourceVersion).
    update: list[dict[str, Any]] = field(default_factory=list)
    #: Names of children to delete (same namespace as the workload).
    delete: list[str] = field(default_factory=list)
    #: The full new ``status``, or None when unchanged.
    status: dict[str, Any] | None = None


def random_suffix(rng: random.Random, length: int = 5) -> str:
    return "".join(rng.choice(SAFE_ALPHABET) for _ in range(length))


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid") or "") or None
    return None


def orphaned(pods: Iterable[Mapping[str, Any]], live_uids: set[str]) -> list[Mapping[str, Any]]:
    """Pods whose controller owner no longer exists (the garbage collector deletes them)."""
    out = []
    for pod in pods:
        uid = controller_uid(pod)
        if (
            uid is not None
            and uid not in live_uids
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            out.append(pod)
    return out


def new_pod(
    owner: Mapping[str, Any],
    template: Mapping[str, Any],
    *,
    name: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    hostname: str | None = None,
    generate_name: str | None = None,
) -> dict[str, Any]:
    """A pod of ``owner`` from ``template``. ``generate_name``: the prefix kube's controller would
    let the API server draw the name from (a ReplicaSet's, a Job's pods carry it); the name is
    drawn here all the same, so that expectations know it before the create."""
    meta = owner["metadata"]
    template_meta = template.get("metadata") or {}
    pod_labels = dict(template_meta.get("labels") or {})
    pod_labels.update(labels or {})
    pod_annotations = dict(template_meta.get("annotations") or {})
    pod_annotations.update(annotations or {})
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    if hostname is not None:
        spec.setdefault("hostname", hostname)
    pod_meta: dict[str, Any] = {
        "name": name,
        "namespace": meta.get("namespace") or "default",
        "labels": pod_labels,
        "ownerReferences": [owner_reference(owner)],
    }
    if generate_name is not None:
        pod_meta["generateName"] = generate_name
    if pod_annotations:
        pod_meta["annotations"] = pod_annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": _qos(spec)},
    }


def _qos(spec: Mapping[str, Any]) -> str:
    containers = spec.get("containers") or []
    requests_any = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        if limits or requests:
            requests_any = True
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits.get(name)) != limits.get(name):
                guaranteed = False
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if requests_any else "BestEffort"


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def is_active(pod: Mapping[str, Any]) -> bool:
    return not is_terminating(pod) and phase(pod) in ("Pending", "Running")


def _created(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("creationTimestamp") or "")


def newest_first(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(pods, key=lambda p: (_created(p), p["metadata"]["name"]), reverse=True)


#: The time a condition was last updated at, by kind: ``lastUpdateTime`` (Deployment, Kubeflow's
#: jobs) or ``lastProbeTime`` (Job: kube's JobCondition has no ``lastUpdateTime``).
UPDATE_TIMES = ("lastUpdateTime", "lastProbeTime")


def condition(
    kind: str,
    status: bool | str,
    reason: str,
    message: str,
    now: str,
    old: Sequence[Mapping[str, Any]],
    *,
    updated_at: str = "lastUpdateTime",
) -> dict[str, Any]:
    """A condition that keeps ``lastTransitionTime`` while its status (``True``/``False``, or a
    string such as ``"Unknown"``) does not change, and its ``updated_at`` time while its message
    does not."""
    text = status if isinstance(status, str) else ("True" if status else "False")
    previous = next((c for c in old if c.get("type") == kind), None)
    transition = now
    if previous is not None and previous.get("status") == text:
        transition = str(previous.get("lastTransitionTime") or now)
    return {
        "type": kind,
        "status": text,
        updated_at: now if previous is None or previous.get("message") != message else previous.get(updated_at, now),
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    }


def compact(status: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v for k, v in status.items() if not (isinstance(v, int) and not isinstance(v, bool) and v == 0)
    }


def put_present(status: dict[str, Any], **values: Any) -> None:
    """Set the ``values`` that are set (not None, not empty), in order: the controllers omit the others."""
    status.update((key, value) for key, value in values.items() if value)


def changed(old: Mapping[str, Any] | None, new: dict[str, Any]) -> dict[str, Any] | None:
    if old is not None and _strip_times(old) == _strip_times(new):
        return None
    return new


def _strip_times(status: Mapping[str, Any]) -> Any:
    out = dict(status)
    if "conditions" in out:
        out["conditions"] = [
            {k: v for k, v in c.items() if k not in UPDATE_TIMES} for c in out["conditions"] or []
        ]
    out.pop("lastReconcileTime", None)
    return out


def generation(obj: Mapping[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 1)


def spec_replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def oldest_first(objs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(objs, key=lambda o: (_created(o), o["metadata"]["name"]))
