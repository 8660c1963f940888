"""The watched-write benchmark runs at its smallest size on a real etcd and reports each figure
(no speed asserted)."""

from __future__ import annotations

from bench import bench_etcd_watches
from bench.common import Size, Status


def test_etcd_watches_benchmark_reports_its_figures() -> None:
    result = bench_etcd_watches.run(Size.TINY)
    assert result.status is Status.OK
    assert [figure.name for figure in result.figures] == [
        f"{who}: CPU per update with {bench_etcd_watches.WATCHES} watches (median)" for who in ("etcd", "client")
    ]
    assert all(figure.value is not None and figure.value > 0 for figure in result.figures)
    runs = result.details["cpu_ms_per_update"]
    assert all(len(values) == bench_etcd_watches.PLANS[Size.TINY].repeats for values in runs.values())
