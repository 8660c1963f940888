"""The binding's ``SchedulePriorityResolved`` condition, which the detector writes with the
priority its policy's ``schedulePriority`` resolved to (:mod:`schedulepriority`)."""

from __future__ import annotations

import logging
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.views import BindingView
from controlplane.apis.work_v1alpha1 import ConditionType
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.schedulepriority import PriorityResolution
from controlplane.controllers.workloads import with_condition

log = logging.getLogger(__name__)


async def set_priority_condition(
    ctx: ControllerContext,
    binding: dict[str, Any],
    priority: PriorityResolution | None,
    *,
    workload: dict[str, Any],
) -> None:
    """``SchedulePriorityResolved`` on the binding: set while its policy has ``schedulePriority``,
    removed when it has none. A priority that cannot be resolved is also a Warning Event on
    the workload (once per change of the condition)."""
    view = BindingView(binding)
    conditions = view.conditions
    ctype = str(ConditionType.SCHEDULE_PRIORITY_RESOLVED)
    current = view.condition(ctype)
    if priority is None:
        if current is None:
            return
        kept = [dict(cond) for cond in conditions if cond.get("type") != ctype]
        await ctx.objects.update_status(
            ctx.binding_rt, {**binding, "status": {**view.status, "conditions": kept}}
        )
        return
    wanted = {
        "type": ctype,
        "status": "True" if priority.resolved else "False",
        "reason": str(priority.reason),
        "message": priority.message,
    }
    if current is not None and all(current.get(k) == v for k, v in wanted.items()):
        return
    status = {**view.status, "conditions": with_condition(conditions, wanted, now=ctx.now_text())}
    await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})
    if not priority.resolved:
        log.warning("binding %s/%s: %s", view.metadata.get("namespace"), view.name, priority.message)
        await record_event(
            ctx,
            workload,
            type=EventType.WARNING,
            reason=EventReason.SCHEDULE_PRIORITY_UNRESOLVED,
            message=priority.message,
        )


__all__ = ["set_priority_condition"]
