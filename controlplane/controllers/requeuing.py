"""The admission controller's writes for Kueue's ``waitForPodsReady`` and requeuing.

In: Workloads (wire dicts) the admission cycle found timed out, done backing off or
reactivated, and the queued workloads they stand for. Out: the Workloads' status (and, past the
requeuing limit, ``spec.active: false``) as Kueue writes them, and Events:

* an admitted Workload whose pods were not ready in time is evicted — ``Evicted`` (reason
  ``PodsReadyTimeout``), its admission removed, ``QuotaReserved=False`` (``Pending``),
  ``Requeued=False`` (``PodsReadyTimeout``) and ``requeueState`` {count, requeueAt} — so its Job
  is suspended again and its binding and Works are deleted, as after a preemption; past
  ``backoffLimitCount`` it is deactivated instead, in Kueue's (0.10 and later) steps: the
  condition ``DeactivationTarget`` (reason ``RequeuingLimitExceeded``), then ``spec.active:
  false``, then the eviction (``Evicted`` and ``Requeued=False`` with reason
  ``DeactivatedDueToRequeuingLimitExceeded``, the Event
  ``EvictedDueToDeactivatedDueToRequeuingLimitExceeded``), which removes ``DeactivationTarget``
  and ``requeueState``;
* an active Workload that carries ``DeactivationTarget=True``, whoever wrote it, is made inactive
  (``spec.active: false``, :meth:`Requeuing.make_inactive`), as Kueue's workload controller does;
* a Workload whose ``spec.active`` is false (set by hand, or by the steps above) and that is not
  evicted yet is evicted as Kueue's workload controller does it (:meth:`Requeuing.deactivate`):
  reason ``Deactivated`` ("The workload is deactivated"), or ``DeactivatedDueTo<the
  DeactivationTarget's reason>`` ("... due to <its message>"); holding quota, its admission is
  removed, ``Requeued=False`` with that reason, and the Event ``EvictedDueTo<reason>``; pending,
  only ``Evicted`` is written, as Kueue does;
* once ``requeueAt`` has passed: ``Requeued=True`` (``BackoffFinished``), ``requeueAt`` removed
  (the count stays), and the Workload is queued again;
* a deactivated Workload made active again: ``Requeued=True`` (``Reactivated``), ``requeueState``
  removed;
* a Workload a stopped queue drained, once the queue runs again: ``Requeued=True``
  (:func:`controlplane.admission.stopping.restarted`).

The evictions are written by :func:`controlplane.controllers.workloadevicting.evict`.

The decisions are :mod:`controlplane.admission.requeuing`'s (pure).
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from controlplane.admission import checks, requeuing
from controlplane.admission import objects as adm
from controlplane.admission.metrics import QueueMetrics
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.timestamps import parse_time
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason
from controlplane.controllers.workloadevicting import evict, set_conditions
from controlplane.objectclient import ResourceType

log = logging.getLogger(__name__)

def _seconds_since(now: dt.datetime, stamp: str) -> float:
    try:
        return (now - parse_time(stamp)).total_seconds()
    except ValueError:  # no such time: nothing to measure from
        return 0.0


DEACTIVATION_CAUSE = "exceeding the maximum number of re-queuing retries"
DEACTIVATED = "The workload is deactivated"


def deactivation(wl: Mapping[str, Any]) -> tuple[str, str]:
    """The reason and message of a deactivated Workload's eviction (Kueue's workload
    controller): ``Deactivated``, or the cause its ``DeactivationTarget`` condition names."""
    target = adm.condition(wl, kueue.COND_DEACTIVATION_TARGET)
    if target is None:
        return kueue.REASON_DEACTIVATED, DEACTIVATED
    return (f"{kueue.REASON_DEACTIVATED}DueTo{target.get('reason', '')}",
            f"{DEACTIVATED} due to {target.get('message', '')}")


class Requeuing:
    """Writes Kueue's PodsReady timeouts, requeuing backoff and reactivation on Workloads."""

    def __init__(self, ctx: ControllerContext, workload_rt: ResourceType, *, metrics: QueueMetrics | None = None) -> None:
        self.ctx = ctx
        self.rt = workload_rt
        self.settings = ctx.settings.wait_for_pods_ready
        self.metrics = metrics
        """Kueue's metrics: an eviction counts in ``kueue_evicted_workloads_total``."""

    async def record_pods_ready(self, wl: dict[str, Any], ready: bool | None) -> dict[str, Any]:
        """Keep an admitted Workload's ``PodsReady`` condition as its workload's pods are ``ready``
        (:mod:`controlplane.admission.podsready`; None: a kind not timed); return it as written."""
        if not self.settings.enabled or adm.admission_of(wl) is None or ready is None:
            return wl
        current = adm.condition(wl, kueue.COND_PODS_READY)
        cond = requeuing.pods_ready_condition(ready, current)
        if current is not None and all(current.get(k) == v for k, v in cond.items()):
            return wl
        updated = copy.deepcopy(wl)
        set_conditions(updated.setdefault("status", {}), [cond], now=self.ctx.now_text())
        written = await self.ctx.objects.update_status(self.rt, updated)
        if self.metrics is not None and cond.get("status") == "True" and (current or {}).get("status") != "True":
            now = self.ctx.now()
            self.metrics.ready(
                str((adm.admission_of(wl) or {}).get("clusterQueue") or ""),
                queued_seconds=_seconds_since(now, requeuing.queued_since(wl)),
                admitted_seconds=_seconds_since(now, str((adm.condition(wl, kueue.COND_ADMITTED) or {}).get("lastTransitionTime") or "")),
                local_queue=adm.local_queue_of(wl),
            )
        return written

    async def time_out(self, wl: Mapping[str, Any]) -> dict[str, Any]:
        """Evict an admitted Workload whose pods were not ready in time (see the module docstring);
        return it as written."""
        ctx = self.ctx
        requeue = requeuing.requeue_after_timeout(wl, self.settings, now=ctx.now())
        queue = str((adm.admission_of(wl) or {}).get("clusterQueue") or "")
        updated = copy.deepcopy(dict(wl))
        if requeue.deactivated:
            target = {"type": kueue.COND_DEACTIVATION_TARGET, "status": "True", "reason": kueue.REASON_REQUEUING_LIMIT,
                      "message": DEACTIVATION_CAUSE}
            set_conditions(updated.setdefault("status", {}), [target], now=ctx.now_text())
            updated = await ctx.objects.update_status(self.rt, updated)
            return await self.deactivate(await self.make_inactive(updated))
        reason, message = kueue.REASON_PODS_READY_TIMEOUT, f"Exceeded the PodsReady timeout {adm.key_of(wl)}"

        def requeue_state(status: dict[str, Any]) -> None:
            status["requeueState"] = requeue.state

        written = await evict(ctx, self.rt, updated, reason=reason, message=message,
                              event=EventReason.EVICTED_PODS_READY_TIMEOUT, edit=requeue_state)
        if self.metrics is not None and queue:
            self.metrics.evicted(queue, reason=reason, local_queue=adm.local_queue_of(wl))
        return written

    async def make_inactive(self, wl: Mapping[str, Any]) -> dict[str, Any]:
        """``spec.active: false`` on an active Workload that carries ``DeactivationTarget=True``
        (written by any controller), as Kueue's workload controller does; return it as written."""
        log.info("Workload %s deactivated: %s", adm.key_of(wl),
                 (adm.condition(wl, kueue.COND_DEACTIVATION_TARGET) or {}).get("message", ""))
        return await self.ctx.objects.update(self.rt, {**wl, "spec": {**wl["spec"], "active": False}})

    async def deactivate(self, wl: Mapping[str, Any]) -> dict[str, Any]:
        """Evict a Workload whose ``spec.active`` is false and that is not evicted yet, as Kueue's
        workload controller does (see the module docstring); return it as written."""
        reason, message = deactivation(wl)
        queue = str((adm.admission_of(wl) or {}).get("clusterQueue") or "")

        def forget_requeuing(status: dict[str, Any]) -> None:
            status.pop("requeueState", None)
            status["conditions"] = [c for c in status.get("conditions") or ()
                                    if c.get("type") != kueue.COND_DEACTIVATION_TARGET]

        if not queue:  # pending: nothing to release, no Event (Kueue reports holders' evictions only)
            updated = copy.deepcopy(dict(wl))
            status = updated.setdefault("status", {})
            now = self.ctx.now_text()
            set_conditions(status, [{"type": kueue.COND_EVICTED, "status": "True", "reason": reason, "message": message}], now=now)
            if status.get("admissionChecks"):
                status["admissionChecks"] = checks.reset_on_eviction(checks.states_of(updated), now=now)
            forget_requeuing(status)
            written = await self.ctx.objects.update_status(self.rt, updated)
            log.info("Workload %s deactivated while pending: %s", adm.key_of(wl), message)
            return written
        written = await evict(self.ctx, self.rt, wl, reason=reason, message=message, edit=forget_requeuing)
        if self.metrics is not None:
            self.metrics.evicted(queue, reason=reason, local_queue=adm.local_queue_of(wl))
        return written

    async def release(self, wl: Mapping[str, Any], *, restarted: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A Workload whose backoff is over, that was made active again, or whose stopped queue
        drained it and runs again (``restarted``: its condition), may be queued again:
        ``Requeued=True``; return it as written."""
        updated = copy.deepcopy(dict(wl))
        status = updated.setdefault("status", {})
        held = adm.condition(wl, kueue.COND_REQUEUED) or {}
        if restarted is not None:
            cond = dict(restarted)
        elif requeuing.was_deactivated(str(held.get("reason") or "")):
            status.pop("requeueState", None)
            cond = {"type": kueue.COND_REQUEUED, "status": "True", "reason": "Reactivated",
                    "message": "The workload was reactivated"}
        else:
            (status.get("requeueState") or {}).pop("requeueAt", None)
            cond = {"type": kueue.COND_REQUEUED, "status": "True", "reason": kueue.REASON_BACKOFF_FINISHED,
                    "message": "The workload backoff was finished"}
        set_conditions(status, [cond], now=self.ctx.now_text())
        written = await self.ctx.objects.update_status(self.rt, updated)
        log.info("Workload %s queued again: %s", adm.key_of(wl), cond["message"])
        return written
