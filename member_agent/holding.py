"""The agent's hold on a Work status that usually lasts moments (issue 19: one status write
per rollout where the member is quick).

In: a Work's newly computed status and the time. Out: whether to write it now, or how long
to hold it back. A status that says *applied, replicas starting* (Applied True, some
manifest Unhealthy, no pod the member cannot place and no reclaimed node) is held for up to
``window`` seconds from the first such status since the Work's last other one: a workload
that becomes ready within the window costs the hub one write (the ready state) instead of
two. Whatever the Work shows when the window ends is written then, so a Work that stays
unhealthy is reported ``window`` seconds late at most. Anything else (an apply that failed,
a healthy Work, pods that do not fit, a reclaim) is written at once and ends the hold. The
hub's status controller holds the same state (``controlplane.controllers.status``). A status
written after a hold keeps the condition times of the statuses held before it
(:meth:`StatusHold.carry_transitions`).

Pure: the caller passes the clock's reading and schedules the pass at the end of the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The window's default, seconds (``gpufed agent --status-hold``).
DEFAULT_HOLD_SECONDS = 1.0


def starting(status: Mapping[str, Any]) -> bool:
    """Whether ``status`` says the Work is applied and its objects are only not healthy yet."""
    applied = next((c for c in status.get("conditions") or [] if c.get("type") == "Applied"), None)
    if applied is None or applied.get("status") != "True":
        return False
    manifests = status.get("manifestStatuses") or []
    if any(m.get("unschedulable") or m.get("reclaimed") for m in manifests):
        return False  # the scheduler acts on these: no hold
    return any(m.get("health") == "Unhealthy" for m in manifests)


@dataclass(slots=True)
class StatusHold:
    """When each Work's held status started; ``window`` 0 holds nothing."""

    window: float = DEFAULT_HOLD_SECONDS
    _since: dict[str, float] = field(default_factory=dict)
    # Per Work, since its last written status: when each (condition type, status) was first seen.
    _transitions: dict[str, dict[tuple[str, str], str]] = field(default_factory=dict)

    def carry_transitions(self, key: str, status: Mapping[str, Any]) -> dict[str, Any]:
        """``status`` with each condition's ``lastTransitionTime`` as first seen in a status of
        ``key`` held back since the last one written, when the condition had the same status
        then: the Work became Applied when it was applied, not when its hold ended (the hub
        compares capacity reports with that time). Call :meth:`written` once it is written."""
        seen = self._transitions.setdefault(key, {})
        conditions = []
        for cond in status.get("conditions") or ():
            mark = (str(cond.get("type")), str(cond.get("status")))
            stamp = cond.get("lastTransitionTime")
            first = seen.setdefault(mark, stamp) if stamp else seen.get(mark)
            # RFC 3339 times in UTC with whole seconds compare in time order as strings.
            if first and (not stamp or first < stamp):
                cond = {**cond, "lastTransitionTime": first}
            conditions.append(cond)
        now = {(str(c.get("type")), str(c.get("status"))) for c in conditions}
        self._transitions[key] = {mark: stamp for mark, stamp in seen.items() if mark in now}
        return {**status, "conditions": conditions}

    def written(self, key: str) -> None:
        """A status of ``key`` was written (or found unchanged): its conditions' times are stored."""
        self._transitions.pop(key, None)

    def delay(self, key: str, status: Mapping[str, Any], *, now: float) -> float | None:
        """Seconds to hold ``status`` of Work ``key`` back; None: write it now."""
        if self.window <= 0 or not starting(status):
            self._since.pop(key, None)
            return None
        left = self._since.setdefault(key, now) + self.window - now
        return left if left > 0 else None

    def expire(self, key: str) -> None:
        """The window of ``key`` is over (its timer fired): its status is written as it is."""
        if key in self._since:
            self._since[key] = -math.inf

    def forget(self, key: str) -> None:
        """The Work is gone."""
        self._since.pop(key, None)
        self._transitions.pop(key, None)
