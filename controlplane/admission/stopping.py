"""Kueue's stop policies on ClusterQueues and LocalQueues, at the hub. Pure; no I/O.

``spec.stopPolicy`` of a ClusterQueue or a LocalQueue: ``None`` (the default) admits; ``Hold``
admits nothing new and keeps what runs; ``HoldAndDrain`` also evicts the queue's admitted
Workloads (``Evicted`` and ``Requeued=False`` with reason ``LocalQueueStopped`` or
``ClusterQueueStopped``; the LocalQueue's reason first, as Kueue checks it first). A stopped
LocalQueue's waiting Workloads are out of line (``Inadmissible``, "LocalQueue <name> is
inactive"); a stopped ClusterQueue is inactive (see :func:`controlplane.admission.objects.cluster_queue`).
Once the queue is ``None`` again its drained Workloads are ``Requeued=True``
(``LocalQueueRestarted``, ``ClusterQueueRestarted``) and queued again.

Also the queues' ``Active`` condition, with Kueue's reasons and messages.

In: ClusterQueue, LocalQueue and Workload wire dicts. Out: values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controlplane.admission.objects import condition
from controlplane.apis import kueue_v1beta1 as kueue

NONE: Final = "None"
HOLD_AND_DRAIN: Final = "HoldAndDrain"


def stop_policy(queue: Mapping[str, Any] | None) -> str:
    """A ClusterQueue's or LocalQueue's ``spec.stopPolicy`` (``None`` when unset)."""
    value = ((queue or {}).get("spec") or {}).get("stopPolicy")
    return str(value) if value else NONE


def is_stopped(queue: Mapping[str, Any] | None) -> bool:
    return stop_policy(queue) != NONE


@dataclass(frozen=True)
class Drain:
    """Why an admitted Workload is evicted now: its queue's ``HoldAndDrain``."""

    reason: str
    message: str


def drain(local_queue: Mapping[str, Any] | None, cluster_queue: Mapping[str, Any] | None) -> Drain | None:
    """The eviction of an admitted Workload of ``local_queue`` (and ``cluster_queue``, the one
    it holds quota of), None when neither is ``HoldAndDrain``."""
    if stop_policy(local_queue) == HOLD_AND_DRAIN:
        return Drain(kueue.REASON_LOCAL_QUEUE_STOPPED, "The LocalQueue is stopped")
    if stop_policy(cluster_queue) == HOLD_AND_DRAIN:
        return Drain(kueue.REASON_CLUSTER_QUEUE_STOPPED, "The ClusterQueue is stopped")
    return None


def restarted(
    workload: Mapping[str, Any], local_queue: Mapping[str, Any] | None, cluster_queue: Mapping[str, Any] | None
) -> dict[str, str] | None:
    """``Requeued=True`` for a Workload a stopped queue drained, once that queue admits again
    (None: it was not drained, or its queue is still stopped)."""
    requeued = condition(workload, kueue.COND_REQUEUED) or {}
    if requeued.get("status") != "False":
        return None
    reason = requeued.get("reason")
    if reason == kueue.REASON_LOCAL_QUEUE_STOPPED and local_queue is not None and not is_stopped(local_queue):
        return {"type": kueue.COND_REQUEUED, "status": "True", "reason": kueue.REASON_LOCAL_QUEUE_RESTARTED,
                "message": "The LocalQueue was restarted after being stopped"}
    if reason == kueue.REASON_CLUSTER_QUEUE_STOPPED and cluster_queue is not None and not is_stopped(cluster_queue):
        return {"type": kueue.COND_REQUEUED, "status": "True", "reason": kueue.REASON_CLUSTER_QUEUE_RESTARTED,
                "message": "The ClusterQueue was restarted after being stopped"}
    return None


def waiting_in_stopped(local_queue: Mapping[str, Any], queue_name: str) -> str | None:
    """Why a waiting Workload of a stopped ``local_queue`` is not a candidate (None: not stopped)."""
    return f"LocalQueue {queue_name} is inactive" if is_stopped(local_queue) else None


def cluster_queue_active(
    cluster_queue: Mapping[str, Any], missing_flavors: Sequence[str], inactive_reason: str | None,
    missing_checks: Sequence[str] = (), inactive_checks: Sequence[str] = (),
) -> dict[str, str]:
    """A ClusterQueue's ``Active`` condition: being deleted (Kueue's ``Terminating``, whatever
    else), stopped, missing ResourceFlavors, missing or
    inactive AdmissionChecks, or another reason the admission core holds it inactive
    (``inactive_reason``, e.g. a cohort cycle)."""
    if (cluster_queue.get("metadata") or {}).get("deletionTimestamp"):
        return {"type": kueue.COND_ACTIVE, "status": "False", "reason": "Terminating",
                "message": "Can't admit new workloads; clusterQueue is terminating"}
    reasons: list[str] = []
    messages: list[str] = []
    if is_stopped(cluster_queue):
        reasons.append("Stopped")
        messages.append("is stopped")
    if missing_flavors:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): [{' '.join(missing_flavors)}]")
    if missing_checks:
        reasons.append("AdmissionCheckNotFound")
        messages.append(f"references missing AdmissionCheck(s): [{' '.join(missing_checks)}]")
    if inactive_checks:
        reasons.append("AdmissionCheckInactive")
        messages.append(f"references inactive AdmissionCheck(s): [{' '.join(inactive_checks)}]")
    if not reasons and inactive_reason is not None:
        reasons.append("Unknown")
        messages.append(inactive_reason)
    if not reasons:
        return {"type": kueue.COND_ACTIVE, "status": "True", "reason": "Ready", "message": "Can admit new workloads"}
    return {"type": kueue.COND_ACTIVE, "status": "False", "reason": reasons[0],
            "message": f"Can't admit new workloads: {', '.join(messages)}."}


def local_queue_active(local_queue: Mapping[str, Any], cluster_queue_active: Mapping[str, Any] | None) -> dict[str, str]:
    """A LocalQueue's ``Active`` condition, from its stop policy and its ClusterQueue's ``Active``
    condition (None: the ClusterQueue does not exist)."""
    if is_stopped(local_queue):
        return {"type": kueue.COND_ACTIVE, "status": "False", "reason": "Stopped", "message": "LocalQueue is stopped"}
    if cluster_queue_active is None:
        return {"type": kueue.COND_ACTIVE, "status": "False", "reason": "ClusterQueueDoesNotExist",
                "message": "Can't submit new workloads to clusterQueue"}
    if cluster_queue_active.get("status") == "True":
        return {"type": kueue.COND_ACTIVE, "status": "True", "reason": "Active",
                "message": "Can submit new workloads to localQueue"}
    return {"type": kueue.COND_ACTIVE, "status": "False", "reason": "ClusterQueueIsInactive",
            "message": "Can't submit new workloads to clusterQueue"}
