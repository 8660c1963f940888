"""Packing hints that wait for multi-GPU demand (``tieredOverflow.packingHintsMultiGPUPercent``): the
share of the recent arrivals' GPUs that replicas of two GPUs or more asked for, on hand-computed
windows and a one-cluster fleet."""

from __future__ import annotations

import pytest

from controlplane.apis.fragmentation import TaskShape
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.demand import DemandHistory

from .test_packhints import half_used, request
from .test_tiebreak import CPU, NOW, reasons

ONE = TaskShape(cpu_milli=CPU, gpu_milli=1000, num_gpu=1)
TWO = TaskShape(cpu_milli=CPU, gpu_milli=1000, num_gpu=2)
EIGHT = TaskShape(cpu_milli=CPU, gpu_milli=1000, num_gpu=8)
HALF = TaskShape(cpu_milli=CPU, gpu_milli=500, num_gpu=1)
NO_GPU = TaskShape(cpu_milli=CPU, gpu_milli=0, num_gpu=0)


def test_the_multi_gpu_percent_counts_gpus_of_the_window_and_forgets_those_that_leave_it() -> None:
    history = DemandHistory(limit=3)
    assert history.multi_gpu_percent() == 0.0
    history.observe("a", ONE)
    history.observe("b", EIGHT)
    history.observe("c", HALF)
    # 1 + 8 + 0.5 GPUs, 8 of them asked for by a replica of two GPUs or more.
    assert history.multi_gpu_percent() == pytest.approx(100 * 8 / 9.5)
    assert history.multi_gpu_arrivals() == 1
    history.observe("b", EIGHT)  # still in the window: not counted twice
    assert history.multi_gpu_percent() == pytest.approx(100 * 8 / 9.5)
    history.observe("d", TWO)  # "a" leaves: 8 + 0.5 + 2
    assert history.multi_gpu_percent() == pytest.approx(100 * 10 / 10.5)
    assert history.multi_gpu_arrivals() == 2
    history.observe("e", NO_GPU)  # "b" leaves: 0.5 + 2 + 0
    assert history.multi_gpu_percent() == pytest.approx(100 * 2 / 2.5)
    assert history.multi_gpu_arrivals() == 1
    assert history.copy().multi_gpu_percent() == history.multi_gpu_percent()


def cache_after(*tasks: TaskShape) -> SchedulerCache:
    """A scheduler cache whose recent demand holds one arrival of each of ``tasks``."""
    cache = SchedulerCache()
    for i, task in enumerate(tasks):
        cache.demand.observe(f"ns/earlier-{i}", task)
    return cache


WAITING = {"packingHints": True, "packingHintsScope": "SpreadingMembers"}


@pytest.mark.parametrize(
    ("earlier", "percent", "hinted"),
    [
        # The 1-GPU replica decided is an arrival too: 4 x 2 of 4 x 2 + 7 + 1 GPUs are multi-GPU, 50 %.
        pytest.param((TWO,) * 4 + (ONE,) * 7, 50, True, id="at-the-percent"),
        pytest.param((TWO,) * 4 + (ONE,) * 7, 50.1, False, id="just-under-the-percent"),
        pytest.param((EIGHT,) * 4, 20, True, id="four-8-gpu-arrivals"),
        pytest.param((EIGHT,) * 3, 20, False, id="three-multi-gpu-arrivals-are-too-few"),
        pytest.param((ONE, ONE, HALF), 1, False, id="only-small-replicas"),
        pytest.param((), 20, False, id="no-earlier-arrival"),
        pytest.param((), 0, True, id="zero-does-not-wait"),
    ],
)
def test_hints_wait_until_multi_gpu_replicas_asked_for_the_percent_of_recent_gpus(
    earlier: tuple[TaskShape, ...], percent: float, hinted: bool
) -> None:
    result = schedule(
        request(**WAITING, packingHintsMultiGPUPercent=percent),
        half_used("LeastAllocated"),
        now=NOW,
        cache=cache_after(*earlier),
    )
    assert result.clusters == {"c": 1}
    assert result.packing == ({"c": ("node-a",)} if hinted else {})


@pytest.mark.parametrize(
    ("node_scoring", "earlier", "hinted"),
    [
        # 4 x 8 of 4 x 8 + 3 + 1 GPUs: 89 %, at least the default 20 %.
        pytest.param("LeastAllocated", (EIGHT,) * 4 + (ONE,) * 3, True, id="spreading-member-multi-gpu-demand"),
        # 4 x 2 of 4 x 2 + 32 + 1 GPUs: 19.5 %.
        pytest.param("LeastAllocated", (TWO,) * 4 + (ONE,) * 32, False, id="under-20-percent"),
        # 4 x 2 of 4 x 2 + 31 + 1 GPUs: 20 %.
        pytest.param("LeastAllocated", (TWO,) * 4 + (ONE,) * 31, True, id="at-20-percent"),
        pytest.param("MostAllocated", (EIGHT,) * 4, False, id="a-member-that-packs-itself"),
        pytest.param(None, (EIGHT,) * 4, False, id="a-member-not-reporting-its-scoring"),
    ],
)
def test_by_default_spreading_members_are_packed_while_multi_gpu_demand_lasts(
    node_scoring: str | None, earlier: tuple[TaskShape, ...], hinted: bool
) -> None:
    result = schedule(request(), half_used(node_scoring), now=NOW, cache=cache_after(*earlier))
    assert result.clusters == {"c": 1}
    assert result.packing == ({"c": ("node-a",)} if hinted else {})


def test_the_explanation_says_how_much_multi_gpu_demand_the_hint_waited_for() -> None:
    result = schedule(request(), half_used("LeastAllocated"), now=NOW, cache=cache_after(*(EIGHT,) * 4, ONE))
    assert result.packing == {"c": ("node-a",)}
    # 4 x 8 of 4 x 8 + 1 + 1 GPUs.
    assert any(
        "replicas of two GPUs or more asked for 94 % of the GPUs of recent arrivals "
        "(packingHintsMultiGPUPercent: 20)" in r
        for r in reasons(result, "c")
    )


def test_packing_hints_false_gives_none_whatever_the_demand() -> None:
    result = schedule(
        request(packingHints=False), half_used("LeastAllocated"), now=NOW, cache=cache_after(*(EIGHT,) * 4)
    )
    assert result.packing == {}
