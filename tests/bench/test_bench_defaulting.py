"""The defaulting benchmark runs at its smallest size and reports each figure (no speed asserted)."""

from __future__ import annotations

from bench import bench_defaulting
from bench.common import Size, Status


def test_defaulting_benchmark_reports_its_figures() -> None:
    result = bench_defaulting.run(Size.TINY)
    assert result.status is Status.OK
    names = [figure.name for figure in result.figures]
    assert len(names) == 6 and all(figure.value is not None for figure in result.figures)
    seconds = result.details["seconds"]
    assert set(seconds) == {"without", "defaulted", "stored_before_defaulting"}
    assert all(len(runs["list"]) == bench_defaulting.PLANS[Size.TINY].repeats for runs in seconds.values())
