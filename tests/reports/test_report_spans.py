"""How the waste report's header states the observed span: short windows never read "0.0 h"."""

from __future__ import annotations

import pytest

from controlplane.reports.report import span_text


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
