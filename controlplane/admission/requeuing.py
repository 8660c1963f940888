"""Kueue's ``waitForPodsReady`` and requeuing strategy, at the hub. Pure; no I/O.

An admitted workload whose pods are not all ready (or succeeded) within the timeout, or that had
them all ready and waits longer than ``recoveryTimeout`` for them again (``PodsReady`` False with
reason ``WaitForRecovery``), is evicted (``Evicted``, reason ``PodsReadyTimeout``) and goes back to its queue after a backoff: Kueue's
``requeuingStrategy`` with ``backoffBaseSeconds`` (60), ``backoffMaxSeconds`` (3600) and
``backoffLimitCount`` (unlimited). The n-th eviction waits ``base * 2^(n-1)`` seconds, at most
``max`` (Kueue adds a jitter of 0.01 %; the hub does not, so the times are exact). The Workload
records it in ``status.requeueState`` (``count``, ``requeueAt``) and the condition ``Requeued``
(False with reason ``PodsReadyTimeout`` while it waits, True with reason ``BackoffFinished``
after). Past ``backoffLimitCount`` the Workload is deactivated instead (``spec.active: false``;
``Evicted`` with reason ``DeactivatedDueToRequeuingLimitExceeded``, as Kueue 0.10 and later).
Back in its queue it counts, at equal priority, from its eviction (``timestamp: Eviction``, Kueue's
default) or from its creation (``Creation``).

In: its Workload (wire dict), the hub's :class:`WaitForPodsReady` settings and the time; whether
its pods are ready is :func:`controlplane.admission.podsready.pods_ready`'s, per kind. Out: values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from controlplane.admission.checks import REASON_ADMISSION_CHECK
from controlplane.admission.objects import condition
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kueue_views import WorkloadView
from controlplane.apis.timestamps import format_time, parse_time_or_none
from controlplane.apis.untyped import json_int

DEFAULT_TIMEOUT_SECONDS: Final = 300
DEFAULT_BACKOFF_BASE_SECONDS: Final = 60
DEFAULT_BACKOFF_MAX_SECONDS: Final = 3600


class RequeuingTimestamp(StrEnum):
    """Kueue's ``requeuingStrategy.timestamp``: what a Workload evicted by the PodsReady timeout
    counts from in its queue, at equal priority."""

    EVICTION = "Eviction"
    """The ``Evicted`` condition's time: it goes behind what waited before (Kueue's default)."""
    CREATION = "Creation"
    """Its creation, as if it had never been admitted."""


@dataclass(frozen=True)
class WaitForPodsReady:
    """Kueue's ``waitForPodsReady`` configuration, as the hub's flags set it."""

    timeout_seconds: int = 0
    """How long an admitted workload may run without all its pods ready (0: not checked, as
    Kueue's ``waitForPodsReady.enable: false``; Kueue's timeout when enabled is 300)."""
    backoff_base_seconds: int = DEFAULT_BACKOFF_BASE_SECONDS
    backoff_max_seconds: int = DEFAULT_BACKOFF_MAX_SECONDS
    backoff_limit_count: int | None = None
    """Evictions after which the Workload is deactivated instead of requeued (None: never)."""
    timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION
    recovery_timeout_seconds: int | None = None
    """How long a workload whose pods were all ready and lost readiness (``PodsReady`` False,
    ``WaitForRecovery``) may wait for them (Kueue's ``recoveryTimeout``; None: for ever, as Kueue
    without it)."""

    @property
    def enabled(self) -> bool:
        return self.timeout_seconds > 0


def backoff_seconds(count: int, *, base: int, maximum: int) -> int:
    """The wait before the ``count``-th requeue: ``base * 2^(count-1)``, at most ``maximum``."""
    if count < 1:
        return 0
    # Doubling past the cap is pointless (and 2^count of a large count is a huge number).
    wait = base
    for _ in range(count - 1):
        if wait >= maximum:
            break
        wait *= 2
    return min(wait, maximum)


_RECOVERING: Final = (kueue.REASON_WAIT_FOR_RECOVERY, kueue.REASON_RECOVERED)


def pods_ready_condition(ready: bool, current: Mapping[str, Any] | None = None) -> dict[str, str]:
    """An admitted Workload's ``PodsReady`` condition after ``current`` (Kueue's
    ``generatePodsReadyCondition``): ready, ``Started`` (``Recovered`` after waiting for recovery);
    not ready, ``WaitForRecovery`` once they were ready (and while waiting), else ``WaitForStart``."""
    reason = (current or {}).get("reason")
    if ready:
        return {"type": kueue.COND_PODS_READY, "status": "True",
                "reason": kueue.REASON_RECOVERED if reason in _RECOVERING else kueue.REASON_STARTED,
                "message": "All pods reached readiness and the workload is running"}
    if (current or {}).get("status") == "True" or reason == kueue.REASON_WAIT_FOR_RECOVERY:
        return {"type": kueue.COND_PODS_READY, "status": "False", "reason": kueue.REASON_WAIT_FOR_RECOVERY,
                "message": "At least one pod has failed, waiting for recovery"}
    return {"type": kueue.COND_PODS_READY, "status": "False", "reason": kueue.REASON_WAIT_FOR_START,
            "message": "Not all pods are ready or succeeded"}


def ready_deadline(workload: Mapping[str, Any], settings: WaitForPodsReady) -> datetime | None:
    """When an admitted Workload whose pods are not ready times out (None: not counting — the
    check is off, it is not admitted, or its pods are ready). Counted from its admission, or from
    when its pods stopped being ready if that came later; one waiting for its pods' recovery
    (``WaitForRecovery``) times out ``recovery_timeout_seconds`` after it began waiting, and
    never without one, as Kueue (``admittedNotReadyWorkload``)."""
    if not settings.enabled:
        return None
    admitted = condition(workload, kueue.COND_ADMITTED)
    if admitted is None or admitted.get("status") != "True" or not WorkloadView(workload).admission:
        return None
    ready = condition(workload, kueue.COND_PODS_READY)
    if ready is not None and ready.get("status") == "True":
        return None
    if ready is not None and ready.get("reason") == kueue.REASON_WAIT_FOR_RECOVERY:
        waiting = parse_time_or_none(ready.get("lastTransitionTime"))
        if settings.recovery_timeout_seconds is None or waiting is None:
            return None
        return waiting + timedelta(seconds=settings.recovery_timeout_seconds)
    since = parse_time_or_none(admitted.get("lastTransitionTime"))
    if ready is not None and (not_ready_since := parse_time_or_none(ready.get("lastTransitionTime"))) is not None:
        since = max(since, not_ready_since) if since is not None else not_ready_since
    return since + timedelta(seconds=settings.timeout_seconds) if since is not None else None


def recovering_since(workload: Mapping[str, Any]) -> str | None:
    """When an admitted Workload began waiting for its pods' recovery (``PodsReady`` False with
    reason ``WaitForRecovery``: its recovery clock), None when it is not waiting."""
    ready = condition(workload, kueue.COND_PODS_READY)
    if ready is None or ready.get("reason") != kueue.REASON_WAIT_FOR_RECOVERY:
        return None
    return str(ready.get("lastTransitionTime") or "")


@dataclass(frozen=True)
class Requeue:
    """What a PodsReady timeout does to a Workload: requeued with ``state`` (``requeueState``),
    or deactivated (``state`` None) past the limit."""

    state: dict[str, Any] | None

    @property
    def deactivated(self) -> bool:
        return self.state is None


def requeue_after_timeout(workload: Mapping[str, Any], settings: WaitForPodsReady, *, now: datetime) -> Requeue:
    """The requeue of a Workload evicted by the PodsReady timeout now (Kueue's
    ``triggerDeactivationOrBackoffRequeue``)."""
    state = (workload.get("status") or {}).get("requeueState") or {}
    count = json_int(state.get("count")) + 1
    if settings.backoff_limit_count is not None and count > settings.backoff_limit_count:
        return Requeue(None)
    wait = backoff_seconds(count, base=settings.backoff_base_seconds, maximum=settings.backoff_max_seconds)
    return Requeue({"count": count, "requeueAt": format_time(now + timedelta(seconds=wait))})


def requeue_at(workload: Mapping[str, Any]) -> datetime | None:
    """When an active Workload held out of its queue by ``Requeued=False`` may be queued again:
    ``requeueAt`` after a PodsReady timeout or a check's ``Retry`` with ``requeueAfterSeconds``, at once after a deactivation (it is active again);
    None when it is not held."""
    requeued = condition(workload, kueue.COND_REQUEUED)
    if requeued is None or requeued.get("status") != "False":
        return None
    if was_deactivated(str(requeued.get("reason") or "")):
        return datetime.min.replace(tzinfo=UTC)
    if requeued.get("reason") not in (kueue.REASON_PODS_READY_TIMEOUT, REASON_ADMISSION_CHECK):
        return None
    return parse_time_or_none(WorkloadView(workload).requeue_state.get("requeueAt")) or datetime.min.replace(tzinfo=UTC)


def was_deactivated(reason: str) -> bool:
    """Whether an eviction (or ``Requeued=False``) reason is a deactivation's: Kueue's
    ``Deactivated`` or ``DeactivatedDueTo<cause>``, or its names before 0.10 (``InactiveWorkload…``),
    which Workloads written then still carry."""
    return reason == kueue.REASON_DEACTIVATED or reason.startswith((f"{kueue.REASON_DEACTIVATED}DueTo", "InactiveWorkload"))


def queue_order_timestamp(workload: Mapping[str, Any], timestamp: RequeuingTimestamp) -> str:
    """The time a Workload counts from in its queue at equal priority (Kueue's
    ``GetQueueOrderTimestamp``): with ``Eviction``, the ``Evicted`` condition's time while it is
    True with reason ``PodsReadyTimeout``; else its creation. A preemption (or a drain) keeps the
    creation time, as in Kueue: the workload did nothing wrong."""
    if timestamp is RequeuingTimestamp.EVICTION:
        evicted = condition(workload, kueue.COND_EVICTED)
        if (
            evicted is not None and evicted.get("status") == "True"
            and evicted.get("reason") == kueue.REASON_PODS_READY_TIMEOUT and evicted.get("lastTransitionTime")
        ):
            return str(evicted["lastTransitionTime"])
    return WorkloadView(workload).creation_timestamp


def queued_since(workload: Mapping[str, Any]) -> str:
    """When a Workload was last queued: its ``Requeued`` condition's time, else its creation
    (Kueue's ``QueuedWaitTime``, which its ready-time metrics count from)."""
    requeued = condition(workload, kueue.COND_REQUEUED) or {}
    return str(requeued.get("lastTransitionTime") or WorkloadView(workload).creation_timestamp)


def is_active(workload: Mapping[str, Any]) -> bool:
    """Whether a Workload takes part in admission (``spec.active``, default true)."""
    return WorkloadView(workload).is_active
