"""The dispatch benchmark runs at its smallest size: every patch of a probe Work is decoded
once with its previous version (for the label watchers) and encoded once for all the watchers
it reaches (no speed asserted)."""

from __future__ import annotations

from bench import watch_dispatch
from bench.common import Size, Status


def test_the_dispatch_benchmark_decodes_and_encodes_each_event_once() -> None:
    result = watch_dispatch.run(Size.TINY)
    assert result.status is Status.OK
    assert all(figure.value is not None for figure in result.figures)
    watchers, events = watch_dispatch.PLANS[Size.TINY]
    figures = {figure.name: figure.value for figure in result.figures}
    assert figures[f"{watchers:,} watchers: objects decoded per event"] == 2
    assert result.details["lines"] == events
