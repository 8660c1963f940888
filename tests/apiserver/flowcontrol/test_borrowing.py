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
    allocate,
    bounds,
)
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
        # A level with no demand keeps its lower bound.
        (10, [Item(0, INF, 0), Item(1, INF, 1)], [0, 10]),
    ],
)
def test_allocation(total: int, items: list[Item], expected: list[float]) -> None:
    allocations, _ = allocate(total, items)
    assert allocations == pytest.approx(expected, abs=1e-6)


def test_seat_demand_statistics() -> None:
    demand = DemandIntegrator(0.0)
    demand.set(2.0, 4)  # 0 seats for 2 s, 4 for 4 s, 0 for 4 s
    demand.set(6.0, 0)
    average, stdev, high = demand.reset(10.0)
    assert (average, high) == (pytest.approx(1.6), 4)
    assert stdev == pytest.approx(math.sqrt(6.4 - 1.6 * 1.6))
    assert demand.reset(20.0) == (0.0, 0.0, 0)  # a new period
    stats = DemandStats()
    stats.update(1.0, 1.0, 3)
    assert stats.smoothed == 2.0  # the envelope avg + stdev
    stats.update(0.0, 0.0, 0)
    assert stats.smoothed == pytest.approx(0.977 * 2.0)  # decays slowly


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
