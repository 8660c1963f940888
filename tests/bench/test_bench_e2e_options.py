"""The end-to-end benchmark's own options reach its run, and a bad value is refused."""

from __future__ import annotations

import pytest

from bench import bench_e2e_apply as e2e
from bench.common import BenchmarkResult, Size, Status


def test_rate_and_workloads_reach_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Size, float | None, int | None]] = []

    def spy(size: Size, *, rate: float | None = None, workloads: int | None = None) -> BenchmarkResult:
        seen.append((size, rate, workloads))
        return BenchmarkResult(benchmark=e2e.NAME, size=size, status=Status.SKIPPED, reason="not run here")

    monkeypatch.setattr(e2e, "run", spy)
    assert e2e.main(["--size", "tiny", "--rate", "30", "--workloads", "12"]) == 0
    assert e2e.main(["--size", "tiny"]) == 0
    assert seen == [(Size.TINY, 30.0, 12), (Size.TINY, None, None)]
    for bad in (["--rate", "0"], ["--workloads", "-1"], ["--rate", "fast"]):
        with pytest.raises(SystemExit):
            e2e.main(bad)
    assert len(seen) == 2


def test_the_plan_takes_the_options() -> None:
    """What :func:`bench_e2e_apply.run` does with them, without starting a fleet."""
    plan = e2e.PLANS[Size.FULL]
    assert (plan.rate, plan.workloads) == (10.0, 1000)
    faster = e2e.plan_for(Size.FULL, rate=30.0, workloads=None)
    assert (faster.rate, faster.workloads, faster.clusters) == (30.0, 1000, plan.clusters)
    assert e2e.plan_for(Size.TINY, rate=None, workloads=9).workloads == 9
