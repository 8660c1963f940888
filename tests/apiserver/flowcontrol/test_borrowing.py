"""Borrowing between priority levels, as kube's config controller does it (apf_controller.go):
the bounds from lendablePercent and borrowingLimitPercent, the seat demand's statistics, the fair
allocation of the nominal limits' sum, and a busy level taking the seats idle ones lend."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from controlplane.apis.kube.flowcontrol_bootstrap import bootstrap_object
from controlplane.apiserver.flowcontrol import FlowControlConfig, FlowController
from controlplane.apiserver.flowcontrol.borrowing import (
    Bounds,
    DemandIntegrator,
    DemandStats,
    Item,
    Observation,
    allocate,
    bounds,
)
from controlplane.apiserver.flowcontrol.estimating import WorkEstimate
from controlplane.apiserver.flowcontrol.levels import Classification
from controlplane.apiserver.flowcontrol.queueing import flow_hash

INF = math.inf


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # global-default lends round(24.5) = 25 (Go rounds halves up); without borrowingLimitPercent
        # kube's maxCL is the nominal limit plus the server's seats: 49 + 600.
        ((49, 50, None, 600), Bounds(49, 24, 649)),
        ((245, 90, None, 600), Bounds(245, 24, 845)),  # workload-low lends 221, may reach 245 + 600
        ((0, 0, None, 600), Bounds(0, 0, 600)),  # exempt: no shares, no borrowingLimitPercent in its spec
        ((10, 0, 0, 600), Bounds(10, 10, 10)),  # lends none, borrows none
        ((10, 20, 50, 600), Bounds(10, 8, 15)),  # borrows round(5.0) = 5
        ((49, 50, 25, 600), Bounds(49, 24, 61)),  # borrows round(12.25) = 12
        ((1, 50, None, 1), Bounds(1, 0, 2)),  # a server of one seat: 1 + 1
    ],
)
def test_bounds(args: tuple[int, int, int | None, int], expected: Bounds) -> None:
    nominal, lendable, borrowing, total = args
    assert bounds(nominal, lendable, borrowing, total=total) == expected


@pytest.mark.parametrize(
    ("limits", "high_watermark", "expected"),
    [
        # kube's minCurrentCL = max(minCL, min(nominalCL, seat demand's high watermark)).
        (Bounds(49, 24, 649), 0, 24),  # idle: it may lend all it lends
        (Bounds(49, 24, 649), 30, 30),  # it used 30: it keeps them
        (Bounds(49, 24, 649), 700, 49),  # never more than its nominal limit
        (Bounds(245, 24, 845), 100.5, 100.5),
        (Bounds(10, 10, 10), 3, 10),  # never below its lower limit
        (Bounds(0, 0, 600), 5, 0),  # exempt with no nominal seats
    ],
)
def test_current_lower_bound(limits: Bounds, high_watermark: float, expected: float) -> None:
    assert limits.current_lower(high_watermark) == expected


@pytest.mark.parametrize(
    ("total", "items", "expected"),
    [
        # One fair proportion of the targets: 2p + 6p = 10.
        (10, [Item(2, INF, 2), Item(2, INF, 6)], [2.5, 7.5]),
        # Within the bounds: 4 at least, 2 at most.
        (10, [Item(4, INF, 4), Item(0, 2, 8), Item(0, INF, 2)], [16 / 3, 2, 8 / 3]),
        # Even the lower bounds exceed the total: they are what each gets.
        (3, [Item(2, 5, 2), Item(2, 5, 2)], [2, 2]),
        # Even the upper bounds fall short: they are what each gets.
        (10, [Item(0, 3, 3), Item(0, 4, 4)], [3, 4]),
        # A level with no demand counts as kube's MinTarget of 0.001: 0.001p + p = 10.
        (10, [Item(0, INF, 0), Item(1, INF, 1)], [0.01 / 1.001, 10 / 1.001]),
        # ... so seats a level may not borrow go to one with no demand rather than to nobody.
        (10, [Item(0, 2, 1), Item(0, 100, 0)], [2, 8]),
        (10, [Item(0, 2, 1), Item(0, 100, 0), Item(0, 100, 0)], [2, 4, 4]),
    ],
)
def test_allocation(total: int, items: list[Item], expected: list[float]) -> None:
    allocations, _ = allocate(total, items)
    assert allocations == pytest.approx(expected, abs=1e-6)


def test_seat_demand_statistics() -> None:
    demand = DemandIntegrator(0.0)
    demand.set(2.0, 4)  # 0 seats for 2 s, 4 for 4 s, 0 for 4 s
    demand.set(6.0, 0)
    observed = demand.reset(10.0)
    assert (observed.average, observed.high_watermark, observed.duration) == (pytest.approx(1.6), 4, 10.0)
    assert observed.stdev == pytest.approx(math.sqrt(6.4 - 1.6 * 1.6))
    assert demand.reset(20.0) == Observation(0.0, 0.0, 0, 10.0)  # a new period
    stats = DemandStats()
    stats.update(Observation(1.0, 1.0, 3, 10.0))
    assert stats.smoothed == 2.0  # the envelope avg + stdev
    stats.update(Observation(0.0, 0.0, 0, 10.0))
    assert stats.smoothed == pytest.approx(0.977 * 2.0)  # decays slowly


def test_a_period_of_no_time_gives_its_high_watermark_alone() -> None:
    """kube's seatDemandStats.update: an adjustment right after another (a configuration change at
    the same instant) has no average to give; the smoothed demand and the average stay."""
    demand = DemandIntegrator(0.0)
    demand.set(5.0, 2)
    stats = DemandStats()
    stats.update(demand.reset(10.0))
    before = (stats.average, stats.stdev, stats.smoothed)
    assert before == (1.0, 1.0, 2.0)
    demand.set(10.0, 50)  # 50 seats asked for at this very instant
    observed = demand.reset(10.0)
    assert observed.duration == 0 and math.isnan(observed.average)
    stats.update(observed)
    assert stats.high_watermark == 50
    assert (stats.average, stats.stdev, stats.smoothed) == before


def _current(controller: FlowController, level: str) -> float:
    value = controller.metrics.limits["current_limit_seats"].labels(level)._value.get()
    assert isinstance(value, float)
    return value


@pytest.mark.parametrize(("borrowing_limit", "most"), [(None, 600), (0, 49), (100, 98)])
async def test_a_busy_level_borrows_what_idle_ones_lend(borrowing_limit: int | None, most: int) -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    default = bootstrap_object("PriorityLevelConfiguration", "global-default")
    assert default is not None
    if borrowing_limit is not None:
        default["spec"]["limited"]["borrowingLimitPercent"] = borrowing_limit
    controller.update((), [default])
    level = controller.levels["global-default"]
    before = level.concurrency
    start = time.monotonic()  # the levels' own clock; the times below are given, not waited for
    loop = asyncio.get_running_loop()
    for n in range(700):
        level.offer(flow_hash("global-default", f"user-{n % 20}"), loop.create_future(), now=start)
    assert level.executing == before
    controller.adjust(start + 10)
    # 700 seats asked for the whole period: global-default gets all the others lend, up to its limit.
    if borrowing_limit is None:
        assert 2 * before < level.concurrency < most
    else:
        assert level.concurrency == most
    assert level.executing == level.concurrency  # the new seats start waiting requests
    assert _current(controller, "global-default") == level.concurrency
    assert controller.metrics.limits["nominal_limit_seats"].labels("global-default")._value.get() == 49
    assert controller.metrics.limits["demand_seats_high_watermark"].labels("global-default")._value.get() == 700
    # The idle levels keep what they do not lend.
    assert _current(controller, "workload-low") >= 24
    total = sum(_current(controller, name) for name in controller.levels)
    assert total == pytest.approx(sum(lv.bounds.nominal for lv in controller.configuration.levels.values()), abs=len(controller.levels))


def _limit(controller: FlowController, name: str, level: str) -> float:
    value = controller.metrics.limits[name].labels(level)._value.get()
    assert isinstance(value, float)
    return value


async def test_a_level_keeps_the_seats_it_used_in_the_period() -> None:
    """kube's lower bound is the period's high watermark (up to the nominal limit): global-default
    ran 30 requests a moment (average demand 0), so its target is 30, not its lower limit 24."""
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    level = controller.levels["global-default"]
    start = time.monotonic()
    loop = asyncio.get_running_loop()
    waiters = [loop.create_future() for _ in range(30)]
    for n, waiter in enumerate(waiters):
        level.offer(flow_hash("global-default", f"user-{n}"), waiter, now=start)
    assert level.executing == 30
    for waiter in waiters:
        level.finish(waiter, now=start)
    controller.adjust(start + 10)
    assert _limit(controller, "demand_seats_high_watermark", "global-default") == 30
    assert _limit(controller, "demand_seats_smoothed", "global-default") == 0
    assert _limit(controller, "target_seats", "global-default") == 30
    assert _limit(controller, "lower_limit_seats", "global-default") == 24  # kube's metric: the configured minCL
    # Every level idle at its lower bound, so each gets it times 602 / their sum: catch-all 13,
    # system 50, node-high 73, leader-election 25, workload-high 49, workload-low 24 and
    # global-default 30 make 264, and global-default gets round(30 x 602 / 264) = round(68.4).
    assert level.concurrency == 68
    assert _current(controller, "workload-low") == round(24 * 602 / 264)  # 54.7


@pytest.mark.parametrize(
    ("level", "upper"),
    [("global-default", 649), ("workload-low", 845), ("catch-all", 613), ("exempt", 600)],
)
async def test_without_borrowing_limit_the_upper_limit_is_the_nominal_one_plus_the_servers(level: str, upper: int) -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    assert _limit(controller, "upper_limit_seats", level) == upper


async def test_a_busy_level_borrows_at_most_the_servers_seats() -> None:
    """At one seat for the server each Limited level has a nominal limit of 1 (7 in all), and
    global-default without borrowingLimitPercent may reach 1 + 1 = 2: no more, however busy."""
    controller = FlowController(FlowControlConfig(total_concurrency=1))
    level = controller.levels["global-default"]
    start = time.monotonic()
    loop = asyncio.get_running_loop()
    for n in range(700):
        level.offer(flow_hash("global-default", f"user-{n % 20}"), loop.create_future(), now=start)
    controller.adjust(start + 10)
    assert _limit(controller, "upper_limit_seats", "global-default") == 2
    assert level.concurrency == 2
    assert _limit(controller, "target_seats", "global-default") > 600  # it wants far more


async def test_the_limits_are_shared_anew_on_a_timer_while_no_request_comes() -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    level = controller.levels["global-default"]
    before = level.concurrency
    loop = asyncio.get_running_loop()
    for n in range(700):  # straight into the level: no request goes through the controller
        level.offer(flow_hash("global-default", f"user-{n % 20}"), loop.create_future(), now=time.monotonic())
    stop = asyncio.Event()
    timer = asyncio.create_task(controller.keep_adjusting(stop, period=0.01))  # kube's is every 10 s
    try:
        async with asyncio.timeout(10):
            while True:
                if _current(controller, "global-default") != before:
                    break
                await asyncio.sleep(0.01)
        assert level.concurrency > before and _current(controller, "global-default") == level.concurrency
    finally:
        stop.set()
        await timer


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (Bounds(49, 24, 649), 37),  # global-default lends 25: 49 - 25 // 2
        (Bounds(245, 24, 845), 135),  # workload-low lends 221: 245 - 110
        (Bounds(10, 8, 15), 9),  # lends 2
        (Bounds(1, 0, 2), 1),  # lends 1: half of it is 0 (Go's integer division)
        (Bounds(10, 10, 10), 10),  # lends none
        (Bounds(0, 0, 600), 0),
    ],
)
def test_a_new_levels_first_limit(limits: Bounds, expected: int) -> None:
    """kube's ``currentCL`` of a level just configured: ``nominalCL - lendableCL/2``."""
    assert limits.initial == expected


_BATCH = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
    "metadata": {"name": "batch"},
    "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 30, "lendablePercent": 50,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 50}},
    }},
}


class _FirstLimits(FlowController):
    """Notes each level's current limit as each adjustment starts."""

    def adjust(self, now: float) -> None:
        self.before = {name: queues.concurrency for name, queues in self.levels.items()}
        super().adjust(now)


async def test_a_new_level_starts_at_its_initial_limit_and_a_changed_one_keeps_its_current() -> None:
    controller = _FirstLimits(FlowControlConfig(total_concurrency=600))
    assert controller.before["global-default"] == 37 and controller.before["workload-low"] == 135
    assert controller.levels["global-default"].concurrency == 56  # idle: round(24 x 602 / 258)
    controller.update((), [_BATCH])
    # Shares 245 + 30: batch's nominal limit is ceil(600 x 30 / 275) = 66, it lends 33 and starts
    # at 66 - 16; global-default's nominal limit falls to 44 (new queues) but it keeps its 56.
    assert controller.configuration.levels["batch"].bounds == Bounds(66, 33, 666)
    assert controller.before["batch"] == 50
    assert controller.configuration.levels["global-default"].bounds.nominal == 44
    assert controller.before["global-default"] == 56


def _exempt() -> Classification:
    return Classification("exempt", "exempt", "", "", "")


async def test_the_exempt_levels_requests_count_in_its_demand() -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    seats = controller.exempt["exempt"]
    async with controller.seat(_exempt(), WorkEstimate(3)):
        assert seats.in_use == 3
    assert seats.in_use == 0
    controller.adjust(time.monotonic())
    assert _limit(controller, "demand_seats_high_watermark", "exempt") == 3


async def test_a_busy_exempt_level_takes_seats_from_the_others() -> None:
    """kube counts the exempt level's demand: 100 seats all the period make its target 100, so the
    602 seats go in one proportion to it and the idle levels' lower limits (258 in all): exempt gets
    round(100 x 602 / 358) = 168 and global-default round(24 x 602 / 358) = 40 (56 without it)."""
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    start = time.monotonic()
    controller.adjust(start)  # every level's period starts now
    controller.exempt["exempt"].take(100, now=start)
    controller.adjust(start + 10)
    assert _limit(controller, "target_seats", "exempt") == pytest.approx(100)
    assert _current(controller, "exempt") == 168
    assert controller.levels["global-default"].concurrency == 40
    assert _current(controller, "system") == 84  # round(50 x 602 / 358)


async def test_the_exempt_levels_lower_bound_is_what_it_used_up_to_its_nominal_limit() -> None:
    """An exempt level with 20 shares of 265 has a nominal limit of ceil(600 x 20 / 265) = 46 and,
    lending all of it, a lower limit of 0; 30 seats used a moment raise its lower bound to 30."""
    exempt = bootstrap_object("PriorityLevelConfiguration", "exempt")
    assert exempt is not None
    exempt["spec"]["exempt"] = {"nominalConcurrencyShares": 20, "lendablePercent": 100}
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    controller.update((), [exempt])
    assert controller.configuration.levels["exempt"].bounds == Bounds(46, 0, 646)
    start = time.monotonic()
    controller.exempt["exempt"].take(30, now=start)
    controller.exempt["exempt"].give_back(30, now=start)
    controller.adjust(start + 10)
    assert _limit(controller, "demand_seats_smoothed", "exempt") == 0
    assert _limit(controller, "target_seats", "exempt") == 30
    assert _current(controller, "exempt") >= 30


async def test_a_level_configured_anew_starts_its_demand_afresh() -> None:
    """kube's new level state has zero seat demand statistics: a level deleted and created again does
    not inherit the smoothed demand of the old one (0.977 x 100 = 97.7 if it did)."""
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    controller.update((), [_BATCH])
    start = time.monotonic()
    controller.adjust(start)
    loop = asyncio.get_running_loop()
    for n in range(100):
        controller.levels["batch"].offer(flow_hash("batch", f"user-{n}"), loop.create_future(), now=start)
    controller.adjust(start + 10)
    assert _limit(controller, "demand_seats_smoothed", "batch") == pytest.approx(100)
    controller.update((), [])
    assert "batch" not in controller.levels
    controller.update((), [_BATCH])
    assert _limit(controller, "demand_seats_smoothed", "batch") == 0


async def test_a_level_of_no_shares_runs_what_it_borrows() -> None:
    """kube: a level of 0 nominalConcurrencyShares has no seats of its own; its requests wait (none
    runs alone) until an adjustment lends it seats for the demand they make."""
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    borrower = {"kind": "PriorityLevelConfiguration", "metadata": {"name": "borrower"}, "spec": {
        "type": "Limited", "limited": {"nominalConcurrencyShares": 0, "limitResponse": {
            "type": "Queue", "queuing": {"queues": 4, "handSize": 2, "queueLengthLimit": 50}}}}}
    controller.update((), [borrower])
    level = controller.levels["borrower"]
    assert level.concurrency == 0
    start = time.monotonic()
    loop = asyncio.get_running_loop()
    for n in range(5):
        level.offer(flow_hash("borrower", f"user-{n}"), loop.create_future(), now=start)
    assert (level.executing, level.waiting) == (0, 5)
    controller.adjust(start + 10)  # 5 seats asked for the whole period
    assert level.concurrency >= 5 and level.executing == 5
