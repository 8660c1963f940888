"""Kueue's job reconciler's words on a queued job: why it stops a started job, and the messages of
the Events it records on the job (``jobframework/reconciler.go``, ``events.go``).

In: a queued job's Workload (wire dict; None when it has none). Out: :class:`Stop` (Kueue's
``StopReason`` and the message of the Event ``Stopped``) and the messages of the Events
``CreatedWorkload``, ``UpdatedWorkload``, ``DeletedWorkload``, ``Started``, ``FinishedWorkload`` and
``UpdatedAdmissionCheck``. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from controlplane.admission.checks import states_of
from controlplane.admission.objects import admission_of, condition, is_true, key_of
from controlplane.apis import kueue_v1beta1 as kueue

MISSING_WORKLOAD: Final = "Missing Workload; unable to restore pod templates"
NOT_ADMITTED: Final = "Not admitted by cluster queue"
WORKLOAD_DELETED: Final = "Workload is deleted"


@dataclass(frozen=True)
class Stop:
    """Why Kueue stops a job: its ``StopReason`` (a stopped Pod's ``TerminationTarget`` reason) and
    the message of the condition and of the job's Event ``Stopped``."""

    reason: str
    message: str


def stop_of_started(workload: Mapping[str, Any] | None) -> Stop | None:
    """Why Kueue's job reconciler stops a started job whose Workload is ``workload``, in its order:
    none (``NoMatchingWorkload``), being deleted (``WorkloadDeleted``), evicted
    (``WorkloadEvictedDueTo<Evicted's reason>``, its message), not admitted (``NotAdmitted``).
    None: it runs on. The caller has left out a finished Workload (it stops nothing)."""
    if workload is None:
        return Stop("NoMatchingWorkload", MISSING_WORKLOAD)
    if (workload.get("metadata") or {}).get("deletionTimestamp"):
        return Stop("WorkloadDeleted", WORKLOAD_DELETED)
    evicted = condition(workload, kueue.COND_EVICTED) or {}
    if evicted.get("status") == "True":
        return Stop(f"WorkloadEvictedDueTo{evicted.get('reason', '')}", str(evicted.get("message", "")))
    if admission_of(workload) is None or not is_true(workload, kueue.COND_ADMITTED):
        return Stop("NotAdmitted", NOT_ADMITTED)
    return None


def created(workload: Mapping[str, Any]) -> str:
    """``CreatedWorkload``."""
    return f"Created Workload: {key_of(workload)}"


def updated(workload: Mapping[str, Any]) -> str:
    """``UpdatedWorkload``: a held job's pod sets changed, and its Workload (no quota yet) with them."""
    return f"Updated not matching Workload for suspended job: {key_of(workload)}"


def deleted(workload: Mapping[str, Any]) -> str:
    """``DeletedWorkload``: a Workload holding quota no longer matches its job, and is deleted."""
    return f"Deleted not matching Workload: {key_of(workload)}"


def started(workload: Mapping[str, Any]) -> str:
    """``Started``: the job is unsuspended (a Pod ungated) with its admission."""
    return f"Admitted by clusterQueue {(admission_of(workload) or {}).get('clusterQueue', '')}"


def finished(workload: Mapping[str, Any]) -> str:
    """``FinishedWorkload``."""
    return f"Workload '{key_of(workload)}' is declared finished"


def admission_checks_message(workload: Mapping[str, Any]) -> str:
    """``UpdatedAdmissionCheck``: each ``Pending`` check with a message, ``<check>: <message>``,
    joined by ``; `` (empty: nothing to say)."""
    return "; ".join(f"{s.get('name')}: {s.get('message')}" for s in states_of(workload)
                     if s.get("state") == "Pending" and s.get("message"))


__all__ = [
    "MISSING_WORKLOAD", "NOT_ADMITTED", "WORKLOAD_DELETED", "Stop", "admission_checks_message", "created", "deleted", "finished",
    "started", "stop_of_started", "updated",
]
