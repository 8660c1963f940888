"""The etcd-call benchmark runs at its smallest size on a real etcd and reports each figure
(no speed asserted)."""

from __future__ import annotations

from bench import bench_etcd_calls
from bench.common import Size, Status


def test_etcd_calls_benchmark_reports_its_figures() -> None:
    result = bench_etcd_calls.run(Size.TINY)
    assert result.status is Status.OK
    assert [figure.name for figure in result.figures] == [
        f"{kind}: CPU per call (median)" for kind in ("update", "update, 32 concurrent", "get", "create")
    ]
    assert all(figure.value is not None and figure.value > 0 for figure in result.figures)
    runs = result.details["cpu_ms_per_call"]
    assert all(len(values) == bench_etcd_calls.PLANS[Size.TINY].repeats for values in runs.values())
