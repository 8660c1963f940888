"""The admission controller's one way to evict an admitted Kueue Workload, whatever the cause.

In: an admitted Workload (wire dict) and why it goes — preempted, its pods not ready in time,
its queue drained (``HoldAndDrain``). Out: one status write as Kueue leaves the Workload once its
job has stopped — ``Evicted=True`` (the cause's reason and message), ``status.admission``
removed, ``QuotaReserved=False`` (``Pending``), ``Admitted=False`` (``NoReservation``),
``Requeued`` (True when it is back in line at once, False while something holds it out) and any
conditions of the cause (``Preempted``), its admission checks back to ``Pending``
(:func:`controlplane.admission.checks.reset_on_eviction`) — and an Event ``EvictedDueTo<reason>``
(or the cause's own). The queued workload's Job is then suspended again and the detector removes its binding
(:class:`controlplane.controllers.admissiongate.AdmissionGate`), so its pods stop in every member.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controlplane.admission import checks
from controlplane.admission import objects as adm
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.events import EventType
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.workloads import with_condition
from controlplane.objectclient import ResourceType

log = logging.getLogger(__name__)


def set_conditions(status: dict[str, Any], conditions: Iterable[Mapping[str, Any]], *, now: str) -> None:
    """``status.conditions`` with each of ``conditions`` set (see :func:`with_condition`)."""
    current = status.get("conditions") or []
    for cond in conditions:
        current = with_condition(current, cond, now=now)
    status["conditions"] = current


def evicted_conditions(reason: str, message: str, *, requeued: bool, requeued_reason: str | None = None) -> list[dict[str, Any]]:
    """The conditions of a Workload evicted for ``reason`` (its admission removed)."""
    return [
        {"type": kueue.COND_EVICTED, "status": "True", "reason": reason, "message": message},
        {"type": kueue.COND_QUOTA_RESERVED, "status": "False", "reason": kueue.REASON_PENDING, "message": message},
        {"type": kueue.COND_ADMITTED, "status": "False", "reason": kueue.REASON_NO_RESERVATION,
         "message": "The workload has no reservation"},
        {"type": kueue.COND_REQUEUED, "status": "True" if requeued else "False",
         "reason": requeued_reason or reason, "message": message},
    ]


async def evict(
    ctx: ControllerContext,
    rt: ResourceType,
    workload: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    event: EventReason | None = None,
    event_type: EventType = EventType.NORMAL,
    event_message: str | None = None,
    requeued: bool = False,
    also: Iterable[Mapping[str, Any]] = (),
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Evict ``workload`` (see the module docstring) and return it as written. ``also``: further
    conditions of the cause; ``edit``: a last change to the status (``requeueState``)."""
    updated = copy.deepcopy(dict(workload))
    status = updated.setdefault("status", {})
    status.pop("admission", None)
    now = ctx.now_text()
    set_conditions(status, [*evicted_conditions(reason, message, requeued=requeued), *also], now=now)
    if status.get("admissionChecks"):
        status["admissionChecks"] = checks.reset_on_eviction(checks.states_of(updated), now=now)
    if edit is not None:
        edit(status)
    written = await ctx.objects.update_status(rt, updated)
    log.info("Workload %s evicted (%s): %s", adm.key_of(workload), reason, message)
    await record_event(ctx, written, type=event_type, reason=event or f"{kueue.COND_EVICTED}DueTo{reason}",
                       message=event_message or message)
    return written


async def unreserve(
    ctx: ControllerContext, rt: ResourceType, workload: Mapping[str, Any], *, reason: str, message: str,
) -> dict[str, Any]:
    """Kueue's ``UnsetQuotaReservationWithCondition`` of a Workload that holds quota but is not
    admitted (its checks pending): ``status.admission`` removed, ``QuotaReserved=False`` with
    ``reason`` and ``message``, ``Admitted=False`` (``NoReservation``); no eviction, no Event.
    Return it as written."""
    updated = copy.deepcopy(dict(workload))
    status = updated.setdefault("status", {})
    status.pop("admission", None)
    set_conditions(status, [
        {"type": kueue.COND_QUOTA_RESERVED, "status": "False", "reason": reason, "message": message},
        {"type": kueue.COND_ADMITTED, "status": "False", "reason": kueue.REASON_NO_RESERVATION,
         "message": "The workload has no reservation"},
    ], now=ctx.now_text())
    written = await ctx.objects.update_status(rt, updated)
    log.info("Workload %s lost its quota reservation: %s", adm.key_of(workload), message)
    return written
