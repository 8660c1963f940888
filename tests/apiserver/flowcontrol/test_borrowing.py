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
        ((49, 50, None), Bounds(49, 24, None)),  # global-default lends round(24.5) = 25 (Go rounds halves up)
        ((245, 90, None), Bounds(245, 24, None)),  # workload-low lends 221
        ((10, 0, 0), Bounds(10, 10, 10)),  # lends none, borrows none
        ((10, 20, 50), Bounds(10, 8, 15)),
    ],
)
def test_bounds(args: tuple[int, int, int | None], expected: Bounds) -> None:
    assert bounds(*args) == expected


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
