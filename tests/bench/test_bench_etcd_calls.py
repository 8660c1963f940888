"""The etcd-call benchmark runs at its smallest size on real etcds, one per transport, and
reports each figure for the hub and for etcd (no speed asserted)."""

from __future__ import annotations

from bench import bench_etcd_calls
from bench.common import Size, Status

KINDS = ("update", "update, 32 concurrent", "get", "create", "update, fenced", "create, fenced")


def test_etcd_calls_benchmark_reports_its_figures() -> None:
    result = bench_etcd_calls.run(Size.TINY)
    assert result.status is Status.OK
    assert [figure.name for figure in result.figures] == [
        f"{transport}: {kind}: {whose}CPU per call (median)"
        for transport in ("unix", "tls")
        for kind in KINDS
        for whose in ("", "etcd ")
    ]
    hub = [figure for figure in result.figures if ": etcd CPU" not in figure.name]
    assert all(figure.value is not None and figure.value > 0 for figure in hub)
    # etcd's CPU is read in clock ticks: a tiny run may see none, never less.
    assert all(figure.value is not None and figure.value >= 0 for figure in result.figures)
    runs = result.details["cpu_ms_per_call"]
    assert all(len(values) == bench_etcd_calls.PLANS[Size.TINY].repeats for values in runs.values())
