"""The admission controller's writes for Kueue's admission checks (the rules are in
:mod:`controlplane.admission.checks`).

In: a Workload that holds quota, and its ClusterQueue. Out: its ``status.admissionChecks`` kept
to the checks its ClusterQueue names for its flavors (a new one ``Pending``), ``Admitted=True``
(and an Event ``Admitted``) once all are ``Ready``; a check in ``Retry`` evicts it (reason
``AdmissionCheck``) back to its queue at once, or with ``requeueAfterSeconds`` held out of it
(``Requeued=False``, ``requeueState.requeueAt``) that long; one ``Rejected`` deactivates it
(``spec.active: false``) and evicts it, with a Warning Event ``AdmissionCheckRejected``. The
states themselves are the checks' controllers' to set (``kubectl patch --subresource=status``
does as well).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from controlplane.admission import checks, requeuing
from controlplane.admission import objects as adm
from controlplane.admission.metrics import QueueMetrics
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.events import EventType
from controlplane.apis.timestamps import format_time
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.workloadevicting import evict, set_conditions
from controlplane.objectclient import ResourceType

log = logging.getLogger(__name__)


class AdmissionChecking:
    """Follows the admission checks of the Workloads that hold quota (see the module docstring)."""

    def __init__(
        self, ctx: ControllerContext, workload_rt: ResourceType, *,
        assume: Callable[[dict[str, Any]], dict[str, Any]], waited: Callable[[Mapping[str, Any]], float],
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.ctx = ctx
        self.rt = workload_rt
        self._assume = assume
        """The admission controller's record of its own writes until its informer has them."""
        self._waited = waited
        """Seconds a Workload waited in its queue (Kueue's admission wait time)."""
        self.metrics = metrics

    async def follow(self, wl: dict[str, Any], cluster_queue: Mapping[str, Any] | None) -> bool:
        """Keep a quota-holding Workload's checks and ``Admitted`` condition; True when a check
        evicted it (its quota is free)."""
        admission = adm.admission_of(wl)
        if admission is None:
            return False
        names = checks.check_names(cluster_queue, admission) if cluster_queue is not None else set()
        states = checks.states_of(wl)
        if not names and not states and adm.is_true(wl, kueue.COND_ADMITTED):
            return False  # the usual case: no checks, admitted with its quota
        now = self.ctx.now_text()
        synced = checks.synced_states(states, names, now=now)
        if (verdict := checks.verdict(synced)) is not None:
            await self._evict(wl, verdict, str(admission.get("clusterQueue") or ""))
            return True
        admitted = checks.admitted_condition(wl, synced)
        if synced == states and admitted is None:
            return False
        updated = copy.deepcopy(wl)
        status = updated.setdefault("status", {})
        if synced:
            status["admissionChecks"] = synced
        else:
            status.pop("admissionChecks", None)
        if admitted is not None:
            # Admitted with its job suspended: the PodsReady timeout counts from now.
            pods_ready = admitted["status"] == "True" and self.ctx.settings.wait_for_pods_ready.enabled
            set_conditions(status, [admitted, *([requeuing.pods_ready_condition(False)] if pods_ready else [])], now=now)
        written = self._assume(await self.ctx.objects.update_status(self.rt, updated))
        if admitted is not None and admitted["status"] == "True":
            queue = str(admission.get("clusterQueue") or "")
            log.info("Workload %s admitted by ClusterQueue %s: its admission checks are ready", adm.key_of(wl), queue)
            await record_event(self.ctx, written, type=EventType.NORMAL, reason=EventReason.ADMITTED,
                               message=f"Admitted by ClusterQueue {queue}")
            if self.metrics is not None:
                self.metrics.admitted(queue, waited_seconds=self._waited(wl), local_queue=adm.local_queue_of(wl), reserved=False)
        return False

    async def _evict(self, wl: dict[str, Any], verdict: checks.Verdict, queue: str) -> None:
        updated = copy.deepcopy(wl)
        if verdict.deactivate:
            updated["spec"]["active"] = False
            updated = await self.ctx.objects.update(self.rt, updated)
            written = await evict(self.ctx, self.rt, updated, reason=verdict.reason, message=verdict.message,
                                  event=EventReason.ADMISSION_CHECK_REJECTED, event_type=EventType.WARNING,
                                  event_message=verdict.event_message)
        else:
            # Kueue's requeueAfterSeconds: held out of its queue (``Requeued=False``) until requeueAt.
            until = format_time(self.ctx.now() + timedelta(seconds=verdict.requeue_after)) if verdict.requeue_after else None

            def requeue_at(status: dict[str, Any]) -> None:
                if until is not None:
                    status["requeueState"] = {**(status.get("requeueState") or {}), "requeueAt": until}

            written = await evict(self.ctx, self.rt, updated, reason=verdict.reason, message=verdict.message,
                                  event=EventReason.EVICTED_ADMISSION_CHECK, requeued=until is None, edit=requeue_at)
        self._assume(written)
        if self.metrics is not None and queue:
            self.metrics.evicted(queue, reason=verdict.reason, local_queue=adm.local_queue_of(wl))
