"""Durations and times as users type them on the command line ("90s", "24h", "7d", RFC 3339)."""

from __future__ import annotations

import datetime as dt

from controlplane.apis.durations import GO_UNITS, duration_seconds

_UNITS = GO_UNITS | {"d", "w"}
# Go's time.Duration ends near 292 years; past this no window, lifetime or notice makes sense.
MAX_DURATION = dt.timedelta(days=100 * 365)


def parse_duration(text: str) -> dt.timedelta:
    """'1h30m' -> 5400 s. Raises ValueError naming the accepted forms, or the longest accepted."""
    seconds = duration_seconds(text.strip(), units=_UNITS)
    if seconds is None:
        raise ValueError(f"invalid duration {text!r}: use forms like 90s, 15m, 24h, 7d or 1h30m")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"invalid duration {text!r}: longer than {MAX_DURATION.days}d")
    return dt.timedelta(seconds=seconds)


def parse_time(text: str, *, now: dt.datetime) -> dt.datetime:
    """An RFC 3339 time, or a duration meaning that long before ``now``."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return now - parse_duration(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
