"""The admission controller's writes for Kueue's ``waitForPodsReady`` and requeuing.

In: Workloads (wire dicts) the admission cycle found timed out, done backing off or
reactivated, and the queued workloads they stand for. Out: the Workloads' status (and, past the
requeuing limit, ``spec.active: false``) as Kueue writes them, and Events:

* an admitted Workload whose pods were not ready in time is evicted — ``Evicted`` (reason
  ``PodsReadyTimeout``), its admission removed, ``QuotaReserved=False`` (``Pending``),
  ``Requeued=False`` (``PodsReadyTimeout``) and ``requeueState`` {count, requeueAt} — so its Job
  is suspended again and its binding and Works are deleted, as after a preemption; past
  ``backoffLimitCount`` it is deactivated instead (``Evicted`` with reason
  ``InactiveWorkloadRequeuingLimitExceeded``, no ``requeueState``);
* once ``requeueAt`` has passed: ``Requeued=True`` (``BackoffFinished``), ``requeueAt`` removed
  (the count stays), and the Workload is queued again;
* a deactivated Workload made active again: ``Requeued=True`` (``Reactivated``), ``requeueState``
  removed.

The decisions are :mod:`controlplane.admission.requeuing`'s (pure).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from controlplane.admission import objects as adm
from controlplane.admission import requeuing
from controlplane.admission.metrics import QueueMetrics
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.events import EventType
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.workloads import with_condition
from controlplane.objectclient import ResourceType

log = logging.getLogger(__name__)

DEACTIVATED_MESSAGE = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"


def _with_conditions(status: dict[str, Any], conditions: list[dict[str, Any]], *, now: str) -> None:
    current = status.get("conditions") or []
    for cond in conditions:
        current = with_condition(current, cond, now=now)
    status["conditions"] = current


def _evicted(reason: str, message: str) -> list[dict[str, Any]]:
    """The conditions of a Workload evicted and back in its queue (its admission removed)."""
    return [
        {"type": kueue.COND_EVICTED, "status": "True", "reason": reason, "message": message},
        {"type": kueue.COND_QUOTA_RESERVED, "status": "False", "reason": kueue.REASON_PENDING, "message": message},
        {"type": kueue.COND_ADMITTED, "status": "False", "reason": kueue.REASON_NO_RESERVATION,
         "message": "The workload has no reservation"},
        {"type": kueue.COND_REQUEUED, "status": "False", "reason": reason, "message": message},
    ]


class Requeuing:
    """Writes Kueue's PodsReady timeouts, requeuing backoff and reactivation on Workloads."""

    def __init__(self, ctx: ControllerContext, workload_rt: ResourceType, *, metrics: QueueMetrics | None = None) -> None:
        self.ctx = ctx
        self.rt = workload_rt
        self.settings = ctx.settings.wait_for_pods_ready
        self.metrics = metrics
        """Kueue's metrics: an eviction counts in ``kueue_evicted_workloads_total``."""

    async def record_pods_ready(self, wl: Mapping[str, Any], source: Mapping[str, Any]) -> None:
        """Keep an admitted Workload's ``PodsReady`` condition as its workload's status says."""
        if not self.settings.enabled or adm.admission_of(wl) is None:
            return
        ready = requeuing.pods_ready(source)
        if ready is None:
            return
        cond = requeuing.pods_ready_condition(ready)
        current = adm.condition(wl, kueue.COND_PODS_READY)
        if current is not None and all(current.get(k) == v for k, v in cond.items()):
            return
        updated = copy.deepcopy(dict(wl))
        _with_conditions(updated.setdefault("status", {}), [cond], now=self.ctx.now_text())
        await self.ctx.objects.update_status(self.rt, updated)

    async def time_out(self, wl: Mapping[str, Any]) -> dict[str, Any]:
        """Evict an admitted Workload whose pods were not ready in time (see the module docstring);
        return it as written."""
        ctx = self.ctx
        requeue = requeuing.requeue_after_timeout(wl, self.settings, now=ctx.now())
        queue = str((adm.admission_of(wl) or {}).get("clusterQueue") or "")
        updated = copy.deepcopy(dict(wl))
        if requeue.deactivated:
            updated["spec"]["active"] = False
            updated = await ctx.objects.update(self.rt, updated)
            reason, message = kueue.REASON_REQUEUING_LIMIT_EXCEEDED, DEACTIVATED_MESSAGE
            event = EventReason.EVICTED_REQUEUING_LIMIT
        else:
            reason, message = kueue.REASON_PODS_READY_TIMEOUT, f"Exceeded the PodsReady timeout {adm.key_of(wl)}"
            event = EventReason.EVICTED_PODS_READY_TIMEOUT
        status = updated.setdefault("status", {})
        status.pop("admission", None)
        if requeue.state is None:
            status.pop("requeueState", None)
        else:
            status["requeueState"] = requeue.state
        _with_conditions(status, _evicted(reason, message), now=ctx.now_text())
        written = await ctx.objects.update_status(self.rt, updated)
        log.info("Workload %s evicted: %s (%s)", adm.key_of(wl), message, requeue.state or "deactivated")
        if self.metrics is not None and queue:
            self.metrics.evicted(queue, reason=reason)
        await record_event(ctx, written, type=EventType.NORMAL, reason=event, message=message)
        return written

    async def release(self, wl: Mapping[str, Any]) -> dict[str, Any]:
        """A Workload whose backoff is over, or that was made active again, may be queued again:
        ``Requeued=True``; return it as written."""
        updated = copy.deepcopy(dict(wl))
        status = updated.setdefault("status", {})
        held = adm.condition(wl, kueue.COND_REQUEUED) or {}
        if held.get("reason") == kueue.REASON_REQUEUING_LIMIT_EXCEEDED:
            status.pop("requeueState", None)
            cond = {"type": kueue.COND_REQUEUED, "status": "True", "reason": "Reactivated",
                    "message": "The workload was reactivated"}
        else:
            (status.get("requeueState") or {}).pop("requeueAt", None)
            cond = {"type": kueue.COND_REQUEUED, "status": "True", "reason": kueue.REASON_BACKOFF_FINISHED,
                    "message": "The workload backoff was finished"}
        _with_conditions(status, [cond], now=self.ctx.now_text())
        written = await self.ctx.objects.update_status(self.rt, updated)
        log.info("Workload %s queued again: %s", adm.key_of(wl), cond["message"])
        return written
