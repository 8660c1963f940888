"""kube's HPA scaling behaviour (``pkg/controller/podautoscaler/horizontal.go``): stabilization
windows, scaling policies and the replica bounds, with the conditions they set.

In: the proposed replica count, the current one, the autoscaler's bounds and ``behavior``, and
the autoscaler's :class:`History` (recent recommendations and scale events, kept in memory by
the controller, as kube keeps them). Out: :class:`Normalized`, the replica count to set with the
``AbleToScale`` and ``ScalingLimited`` conditions kube sets on the way. Without ``behavior`` kube's
older rules apply: a downscale window (``--horizontal-pod-autoscaler-downscale-stabilization``,
5 minutes) and a scale-up limit of twice the current replicas (at least 4). Pure; the clock is an
argument.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

#: ``--horizontal-pod-autoscaler-downscale-stabilization``'s default, in seconds.
DOWNSCALE_STABILIZATION_SECONDS = 300
#: kube's ``scaleUpLimitFactor`` and ``scaleUpLimitMinimum`` (no ``behavior``).
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0
_INT32_MAX, _INT32_MIN = 2**31 - 1, -(2**31)
#: The longest window or period a behaviour may name (validation's maxima): older entries go.
_KEPT = timedelta(seconds=3600)


@dataclass(frozen=True, slots=True)
class Condition:
    status: str
    reason: str
    message: str


@dataclass
class History:
    """One autoscaler's recent recommendations and scale events (kube's ``recommendations``,
    ``scaleUpEvents`` and ``scaleDownEvents``), bounded by the longest window a behaviour allows."""

    recommendations: list[tuple[datetime, int]] = field(default_factory=list)
    scale_ups: list[tuple[datetime, int]] = field(default_factory=list)
    scale_downs: list[tuple[datetime, int]] = field(default_factory=list)
    started: bool = False
    """Whether the first sync's current replicas were recorded (:meth:`record_initial`)."""

    def record_initial(self, now: datetime, current: int) -> None:
        """kube's ``recordInitialRecommendation``: the replicas the target has when the autoscaler
        is first looked at count as a recommendation, so a first scale-down waits out the window."""
        if not self.started:
            self.started = True
            self.recommendations.append((now, current))

    def record_scale(self, now: datetime, *, current: int, desired: int) -> None:
        """kube's ``storeScaleEvent``: the change, on the side it went."""
        if desired > current:
            self.scale_ups.append((now, desired - current))
        elif desired < current:
            self.scale_downs.append((now, current - desired))
        self.prune(now)

    def prune(self, now: datetime) -> None:
        cutoff = now - _KEPT
        for entries in (self.recommendations, self.scale_ups, self.scale_downs):
            entries[:] = [entry for entry in entries if entry[0] >= cutoff]


@dataclass(frozen=True, slots=True)
class Normalized:
    replicas: int
    able_to_scale: Condition
    scaling_limited: Condition


def _rules(behavior: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    rules = (behavior or {}).get(key)
    return rules if isinstance(rules, Mapping) else {}


def _record(history: History, now: datetime, desired: int, *, cutoffs: tuple[datetime, ...]) -> None:
    """Record ``desired``, over the oldest entry out of every window (kube reuses one such slot)."""
    for index, (moment, _) in enumerate(history.recommendations):
        if all(moment < cutoff for cutoff in cutoffs):
            history.recommendations[index] = (now, desired)
            return
    history.recommendations.append((now, desired))


def _stabilized_without_behavior(history: History, now: datetime, desired: int) -> int:
    """kube's ``stabilizeRecommendation``: the highest recommendation of the downscale window."""
    cutoff = now - timedelta(seconds=DOWNSCALE_STABILIZATION_SECONDS)
    recommendation = desired
    for moment, value in history.recommendations:
        if moment > cutoff:
            recommendation = max(recommendation, value)
    _record(history, now, desired, cutoffs=(cutoff,))
    return recommendation


def _stabilized(history: History, now: datetime, *, current: int, desired: int, up_window: int,
                down_window: int) -> tuple[int, Condition]:
    """kube's ``stabilizeRecommendationWithBehaviors``."""
    up_cutoff, down_cutoff = now - timedelta(seconds=up_window), now - timedelta(seconds=down_window)
    up, down = desired, desired
    for moment, value in history.recommendations:
        if moment > up_cutoff:
            up = min(value, up)
        if moment > down_cutoff:
            down = max(value, down)
    recommendation = min(max(current, up), down)
    _record(history, now, desired, cutoffs=(up_cutoff, down_cutoff))
    if desired >= current:
        return recommendation, Condition("True", "ScaleUpStabilized",
                                         "recent recommendations were lower than current one, applying the lowest recent recommendation")
    return recommendation, Condition("True", "ScaleDownStabilized",
                                     "recent recommendations were higher than current one, applying the highest recent recommendation")


def _change_in_period(period_seconds: int, events: list[tuple[datetime, int]], now: datetime) -> int:
    cutoff = now - timedelta(seconds=period_seconds)
    return sum(change for moment, change in events if moment > cutoff)


def scale_limit(rules: Mapping[str, Any], history: History, now: datetime, *, current: int, up: bool) -> int:
    """kube's ``calculateScaleUpLimitWithScalingRules`` (``up``) and
    ``calculateScaleDownLimitWithBehaviors``: the furthest the policies let the replicas go now."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    smallest_change = select == "Min"
    result = (_INT32_MAX if smallest_change else _INT32_MIN) if up else (_INT32_MIN if smallest_change else _INT32_MAX)
    for policy in rules.get("policies") or ():
        period = int(policy.get("periodSeconds") or 0)
        start = current - _change_in_period(period, history.scale_ups, now) + _change_in_period(period, history.scale_downs, now)
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposed = start + value if up else start - value
        elif up:
            proposed = math.ceil(start * (1 + value / 100))
        else:
            proposed = int(start * (1 - value / 100))
        pick_lower = smallest_change if up else not smallest_change
        result = min(result, proposed) if pick_lower else max(result, proposed)
    return result


def _within_rate(rules_up: Mapping[str, Any], rules_down: Mapping[str, Any], history: History, now: datetime, *,
                 current: int, desired: int, min_replicas: int, max_replicas: int) -> tuple[int, str, str]:
    """kube's ``convertDesiredReplicasWithBehaviorRate``."""
    if desired > current:
        limit = max(scale_limit(rules_up, history, now, current=current, up=True), current)
        if max_replicas > limit:
            allowed, reason, message = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
        else:
            allowed, reason, message = max_replicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
        if desired > allowed:
            return allowed, reason, message
    elif desired < current:
        limit = min(scale_limit(rules_down, history, now, current=current, up=False), current)
        if min_replicas < limit:
            allowed, reason, message = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
        else:
            allowed, reason, message = min_replicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
        if desired < allowed:
            return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def _within_rules(*, current: int, desired: int, min_replicas: int, max_replicas: int) -> tuple[int, str, str]:
    """kube's ``convertDesiredReplicasWithRules`` (no ``behavior``)."""
    limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
    if max_replicas > limit:
        allowed, reason, message = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
    else:
        allowed, reason, message = max_replicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
    if desired < min_replicas:
        return min_replicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    if desired > allowed:
        return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


_READY = Condition("True", "ReadyForNewScale", "recommended size matches current size")


def normalize(
    history: History,
    now: datetime,
    *,
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    behavior: Mapping[str, Any] | None,
) -> Normalized:
    """kube's ``normalizeDesiredReplicas`` (no ``behavior``) or ``normalizeDesiredReplicasWithBehaviors``."""
    history.prune(now)
    if behavior is None:
        stabilized = _stabilized_without_behavior(history, now, desired)
        able = _READY if stabilized == desired else Condition(
            "True", "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
        replicas, reason, message = _within_rules(
            current=current, desired=stabilized, min_replicas=min_replicas, max_replicas=max_replicas)
    else:
        up, down = _rules(behavior, "scaleUp"), _rules(behavior, "scaleDown")
        down_window = down.get("stabilizationWindowSeconds")
        stabilized, changed = _stabilized(
            history, now, current=current, desired=desired,
            up_window=int(up.get("stabilizationWindowSeconds") or 0),
            down_window=DOWNSCALE_STABILIZATION_SECONDS if down_window is None else int(down_window),
        )
        able = changed if stabilized != desired else _READY
        replicas, reason, message = _within_rate(
            up, down, history, now, current=current, desired=stabilized,
            min_replicas=min_replicas, max_replicas=max_replicas)
    limited = Condition("False" if replicas == stabilized else "True", reason, message)
    return Normalized(replicas, able, limited)
