"""How the waste report's header states the observed span: short windows never read "0.0 h"."""

from __future__ import annotations

import pytest

from controlplane.reports.accounting import Accumulator
from controlplane.reports.report import render_table, span_text

from .builders import A100, T0, at, cluster, fleet, gpu, node, pod


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0.0, "0 s"),
        (42.0, "42 s"),
        (90.0, "2 min"),
        (180.0, "3 min"),
        (59 * 60.0, "59 min"),
        (3600.0, "1.0 h"),
        (5400.0, "1.5 h"),
        (30 * 3600.0, "30.0 h"),
    ],
)
def test_span_text(seconds: float, expected: str) -> None:
    assert span_text(seconds) == expected


def test_a_short_window_header_reads_in_minutes() -> None:
    accumulator = Accumulator()
    for minute in range(0, 4):
        accumulator.add(fleet(cluster("dc1", [node("a1", [gpu(0, pod("idle"), 0.02)])], pricing={A100: 2.0}),
                              time=at(minute)))
    header = render_table(accumulator.query(T0, at(60), by=["cluster"])).splitlines()[0]
    assert header.endswith("(observed 3 min)"), header
    assert "0.0 h" not in header
