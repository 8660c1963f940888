"""Durations and times as users type them on the command line ("90s", "24h", "7d", RFC 3339)."""

from __future__ import annotations

import datetime as dt
import re

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> dt.timedelta:
    """'1h30m' -> 5400 s. Raises ValueError naming the accepted forms."""
    cleaned = text.strip()
    pos = 0
    seconds = 0.0
    for match in _DURATION.finditer(cleaned):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not cleaned or pos != len(cleaned):
        raise ValueError(f"invalid duration {text!r}: use forms like 90s, 15m, 24h, 7d or 1h30m")
    return dt.timedelta(seconds=seconds)


def parse_time(text: str, *, now: dt.datetime) -> dt.datetime:
    """An RFC 3339 time, or a duration meaning that long before ``now``."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return now - parse_duration(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
