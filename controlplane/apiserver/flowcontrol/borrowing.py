"""Seats lent and borrowed between priority levels, as kube's config controller does it
(apf_controller.go ``updateBorrowingLocked``): pure, no I/O; the caller passes the time.

Each level has a nominal limit (its share of the server's seats), may lend ``lendablePercent`` of it
(its lower limit is the rest) and borrow ``borrowingLimitPercent`` of it (its upper limit; without
one, as many as the server has). Every :data:`ADJUSTMENT_SECONDS` each level's seat demand (seats
in use plus seats asked for by waiting requests) over the period gives its high watermark,
time-weighted average and standard deviation, and a smoothed demand (``max(avg + stdev, 0.977 x the
previous + 0.023 x (avg + stdev))``; a period of no time, as when the configuration changes twice at
once, gives its high watermark alone); the nominal limits' sum is then shared so that each level gets
its smoothed demand (at least kube's ``MinTarget``) times one fair proportion, within its lower bound for the period
(:meth:`Bounds.current_lower`: what it used, up to its nominal limit, never below its lower limit)
and its upper limit (:func:`allocate`): its current limit. The exempt level takes part like the
others: its requests' seats count in its demand (:class:`ExemptSeats`), though nothing limits them.
A level just configured starts at :attr:`Bounds.initial`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: kube's ``borrowingAdjustmentPeriod`` and ``seatDemandSmoothingCoefficient``.
ADJUSTMENT_SECONDS: Final = 10.0
SMOOTHING: Final = 0.977
#: kube's ``MinTarget``: a smaller target counts as this one when the seats are shared, so a level
#: with no demand still gets its part of seats nobody else may take.
MIN_TARGET: Final = 0.001


@dataclass(frozen=True, slots=True)
class Bounds:
    """One level's share: its nominal limit and the limits of its current one (kube's ``nominalCL``,
    ``minCL`` and ``maxCL``)."""

    nominal: int
    lower: int
    upper: int

    def current_lower(self, high_watermark: float) -> float:
        """kube's ``minCurrentCL``: ``max(minCL, min(nominalCL, high watermark))``, so a level keeps
        the seats it used in the last period (up to its nominal limit) rather than lending them."""
        return max(self.lower, min(self.nominal, high_watermark))

    @property
    def initial(self) -> int:
        """kube's ``currentCL`` of a level just configured, before its first adjustment:
        ``nominalCL - lendableCL/2`` (Go's integer halving)."""
        return self.nominal - (self.nominal - self.lower) // 2


def go_round(value: float) -> int:
    """Go's ``math.Round`` of a non-negative number: halves away from zero (Python's go to even)."""
    return math.floor(value + 0.5)


def bounds(nominal: int, lendable_percent: int, borrowing_limit_percent: int | None, *, total: int) -> Bounds:
    """kube's ``lendableCL = round(nominal x lendablePercent / 100)``, ``borrowingCL`` alike, or
    ``total`` (the server's seats) without ``borrowingLimitPercent``."""
    lendable = go_round(nominal * lendable_percent / 100)
    borrowable = total if borrowing_limit_percent is None else go_round(nominal * borrowing_limit_percent / 100)
    return Bounds(nominal, nominal - lendable, nominal + borrowable)


@dataclass(frozen=True, slots=True)
class Observation:
    """kube's ``IntegratorResults`` of one period: time-weighted average and standard deviation
    (NaN over no time), maximum, and the period's seconds."""

    average: float
    stdev: float
    high_watermark: int
    duration: float


class DemandIntegrator:
    """kube's ``fq.Integrator``: the time-weighted average, deviation and maximum of a level's seat demand."""

    __slots__ = ("_last", "_max", "_start", "_sum", "_sum2", "value")

    def __init__(self, now: float) -> None:
        self.value = 0
        self._start = self._last = now
        self._sum = self._sum2 = 0.0
        self._max = 0

    def set(self, now: float, value: int) -> None:
        elapsed = now - self._last
        if elapsed > 0:
            self._sum += self.value * elapsed
            self._sum2 += self.value * self.value * elapsed
            self._last = now
        self.value = value
        if value > self._max:
            self._max = value

    def reset(self, now: float) -> Observation:
        """The period since the last reset; starts a new one."""
        self.set(now, self.value)
        span = now - self._start
        if span > 0:
            average = self._sum / span
            stdev = math.sqrt(max(self._sum2 / span - average * average, 0.0))
        else:  # kube: no time, no average (NaN there)
            average = stdev = math.nan
        results = Observation(average, stdev, self._max, max(span, 0.0))
        self._start, self._sum, self._sum2, self._max = now, 0.0, 0.0, self.value
        return results


class ExemptSeats:
    """An exempt level's seats in use and its demand over time: kube's exempt queueSet never
    limits its requests but counts their seats in its ``seatDemandIntegrator`` all the same."""

    __slots__ = ("demand", "in_use")

    def __init__(self, now: float) -> None:
        self.in_use = 0
        self.demand = DemandIntegrator(now)

    def take(self, seats: int, *, now: float) -> None:
        self.in_use += seats
        self.demand.set(now, self.in_use)

    def give_back(self, seats: int, *, now: float) -> None:
        self.in_use -= seats
        self.demand.set(now, self.in_use)


@dataclass(slots=True)
class DemandStats:
    """kube's ``seatDemandStats`` of one level, as of the last adjustment."""

    average: float = 0.0
    stdev: float = 0.0
    high_watermark: int = 0
    smoothed: float = 0.0

    def update(self, observed: Observation) -> None:
        """kube's ``seatDemandStats.update``: a period of no time gives only its high watermark."""
        self.high_watermark = observed.high_watermark
        if observed.duration <= 0:
            return
        stdev = 0.0 if math.isnan(observed.stdev) else observed.stdev
        self.average, self.stdev = observed.average, stdev
        envelope = observed.average + stdev
        self.smoothed = max(envelope, SMOOTHING * self.smoothed + (1 - SMOOTHING) * envelope)


@dataclass(frozen=True, slots=True)
class Item:
    """kube's ``allocProblemItem``."""

    lower: float
    upper: float
    target: float


def allocate(total: int, items: Sequence[Item]) -> tuple[list[float], float]:
    """kube's ``computeConcurrencyAllocation``: each item's ``clamp(target x p, lower, upper)`` for the
    one fair proportion ``p`` that makes them sum to ``total`` (the lower limits when even they
    exceed it, the upper ones when even they fall short); and ``p``. A target below
    :data:`MIN_TARGET` counts as that (kube's ``MinTarget``)."""
    targets = [max(item.target, MIN_TARGET) for item in items]

    def shares(proportion: float) -> list[float]:
        return [min(max(target * proportion, item.lower), item.upper) for item, target in zip(items, targets, strict=True)]

    if sum(item.lower for item in items) >= total:
        return [item.lower for item in items], 0.0
    if sum(item.upper for item in items) <= total:
        return [item.upper for item in items], math.inf
    low, high = 0.0, 1.0
    while sum(shares(high)) < total:
        if high > 1e15:  # cannot happen (every target counts): what the limits give
            return shares(high), high
        high *= 2
    for _ in range(100):  # bisection: far finer than a seat
        middle = (low + high) / 2
        if sum(shares(middle)) < total:
            low = middle
        else:
            high = middle
    return shares(high), high
