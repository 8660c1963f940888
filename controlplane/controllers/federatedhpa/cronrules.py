"""When a CronFederatedHPA's rules fire, and the execution history Karmada records for them.

In: a rule (``name``, ``schedule``, ``timeZone``, ``suspend``, history limits), its entry of
``status.executionHistories``, the time now and the local time zone (a rule's without a
``timeZone``, or with ``Local``, as Go's ``time.Local`` is Karmada's controller's). Out: :class:`RulePlan` -- whether the rule is
due (and for which scheduled time) and when it fires next -- and the history with one more
execution, newest first, cut to the rule's ``successfulHistoryLimit`` / ``failedHistoryLimit``.

The next time a rule fires is kept in its history's ``nextExecutionTime`` (none while the rule
is suspended), so a hub that restarts, or a new leader, fires what was due and no rule twice.
A schedule that changed (the recorded time is not one the schedule gives) is planned afresh
from now. A rule the hub was down for fires once, late, for its last scheduled time, as
Karmada's scheduler runs a job that is due. Pure; the clock is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

from controlplane.apis.autoscaling_karmada_v1alpha1 import DEFAULT_HISTORY_LIMIT
from controlplane.apis.timestamps import format_time, parse_time_or_none


@dataclass(frozen=True, slots=True)
class RulePlan:
    due: datetime | None
    """The scheduled time to execute now, or None."""
    next: datetime | None
    """When the rule fires next (after ``due`` when it is due); None while suspended."""


def _zone(rule: Mapping[str, Any], local: tzinfo) -> tzinfo:
    """Go's ``time.LoadLocation`` of the rule's ``timeZone``; ``local`` without one."""
    name = rule.get("timeZone")
    if not isinstance(name, str) or name == "Local":
        return local
    return UTC if name in ("", "UTC") else ZoneInfo(name)


def next_time(rule: Mapping[str, Any], after: datetime, *, local: tzinfo = UTC) -> datetime:
    """The first time after ``after`` that the rule's schedule gives, in its time zone."""
    start = after.astimezone(_zone(rule, local))
    found: datetime = croniter(str(rule.get("schedule") or ""), start).get_next(datetime)
    return found.astimezone(UTC)


def plan(rule: Mapping[str, Any], history: Mapping[str, Any] | None, now: datetime, *,
         local: tzinfo = UTC) -> RulePlan:
    """Whether ``rule`` is due at ``now`` and when it fires next (see the module docstring)."""
    if rule.get("suspend") is True:
        return RulePlan(None, None)
    recorded = parse_time_or_none((history or {}).get("nextExecutionTime"))
    if recorded is None or next_time(rule, recorded - timedelta(seconds=1), local=local) != recorded:
        return RulePlan(None, next_time(rule, now, local=local))
    if recorded > now:
        return RulePlan(None, recorded)
    return RulePlan(recorded, next_time(rule, now, local=local))


def _limit(rule: Mapping[str, Any], key: str) -> int:
    value = rule.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else DEFAULT_HISTORY_LIMIT


def recorded(
    rule: Mapping[str, Any],
    history: Mapping[str, Any] | None,
    *,
    next_execution: datetime | None,
    execution: Mapping[str, Any] | None = None,
    failed: bool = False,
) -> dict[str, Any]:
    """The rule's history with ``nextExecutionTime`` set and ``execution`` (a successful or a
    failed one) added first, its list then cut to its limit, as Karmada cuts it: only the list an
    execution is added to (a lowered limit takes effect at the rule's next such execution)."""
    out: dict[str, Any] = {"ruleName": rule.get("name")}
    if next_execution is not None:
        out["nextExecutionTime"] = format_time(next_execution)
    for key, limit_key in (("successfulExecutions", "successfulHistoryLimit"), ("failedExecutions", "failedHistoryLimit")):
        entries = list((history or {}).get(key) or ())
        if execution is not None and failed == (key == "failedExecutions"):
            entries = [dict(execution), *entries][: _limit(rule, limit_key)]
        if entries:
            out[key] = entries
    return out


def in_status_order(old: Sequence[Mapping[str, Any]], new: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules' ``new`` histories (by rule name) as Karmada keeps ``executionHistories``: those
    the status had in its order (a removed rule's left out), a new rule's after them."""
    left = dict(new)
    out = [left.pop(name) for name in (h.get("ruleName") for h in old) if isinstance(name, str) and name in left]
    return out + list(left.values())
