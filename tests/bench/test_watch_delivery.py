"""The delivery benchmark runs at its smallest size against a real hub: every matching watcher
gets every probe write, none is dropped, and the hub's CPU over the writes is measured (no
speed asserted)."""

from __future__ import annotations

import pytest

from bench import watch_delivery
from bench.common import Size, Status

pytestmark = pytest.mark.waiting


def test_the_delivery_benchmark_delivers_every_write_and_measures_the_hub() -> None:
    result = watch_delivery.run(Size.TINY)
    assert result.status is Status.OK, result.reason
    figures = {figure.name: figure.value for figure in result.figures}
    assert figures["deliveries missed"] == 0
    assert figures["watches dropped (410 or closed by the hub)"] == 0
    assert (figures["deliveries (of the writes' matching watchers)"] or 0) > 0
    assert (figures["hub CPU over the writes"] or 0) > 0
