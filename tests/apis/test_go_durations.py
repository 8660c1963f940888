"""Go's ``time.ParseDuration``: what it refuses and its words, as a CronJob's ``@every``
schedule is refused with them."""

from __future__ import annotations

import pytest

from controlplane.apis.durations import go_duration_error


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("5m", None), ("1h30m", None), ("-1.5h", None), (".5s", None), ("5.s", None), ("0", None), ("+0", None),
        ("300ms", None), ("3µs", None), ("3us", None), ("9223372036854775807ns", None), ("-9223372036854775808ns", None),
        ("", 'time: invalid duration ""'),
        ("x", 'time: invalid duration "x"'),
        (".s", 'time: invalid duration ".s"'),
        ("5", 'time: missing unit in duration "5"'),
        ("1h5", 'time: missing unit in duration "1h5"'),
        ("5d", 'time: unknown unit "d" in duration "5d"'),
        ("5m ", 'time: unknown unit "m " in duration "5m "'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("3000000h", 'time: invalid duration "3000000h"'),
        ("é", 'time: invalid duration "\\xc3\\xa9"'),
        ('"', 'time: invalid duration "\\""'),
    ],
)
def test_go_duration_errors(text: str, error: str | None) -> None:
    assert go_duration_error(text) == error
