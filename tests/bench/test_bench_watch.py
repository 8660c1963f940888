"""The watch benchmark runs at its smallest size: without the cache every watcher decodes each
event, with it one decode serves them all (no speed asserted)."""

from __future__ import annotations

from bench import bench_watch
from bench.common import Size, Status


def test_watch_benchmark_counts_one_decode_per_event_with_the_cache() -> None:
    result = bench_watch.run(Size.TINY)
    assert result.status is Status.OK
    assert all(figure.value is not None for figure in result.figures)
    watchers = bench_watch.PLANS[Size.TINY].watchers[0]
    runs = result.details["runs"]
    assert runs[f"{watchers:,} watchers, no cache"]["decodes_per_event"] == watchers
    assert runs[f"{watchers:,} watchers, watch cache"]["decodes_per_event"] == 1
