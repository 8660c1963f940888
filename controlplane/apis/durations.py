"""Durations written as ``<number><unit>`` parts, as Go prints them (``300ms``, ``1h30m``, ``1.5h``).

In: the text and the units a caller accepts (Go's ``ms``/``s``/``m``/``h`` by default; the
command line also takes ``d`` and ``w``). Out: the seconds, or None when the text is not such a
duration, so each caller words its own error. The simulated member's pod annotations and the
``gpufed`` command line both read durations through :func:`duration_seconds`; a duration is
shown as kube shows ages (``5m30s``, ``2d4h``) by :func:`human_duration`, which the hub's table
cells and a pod's RESTARTS (:mod:`controlplane.apis.podstatus`) use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from controlplane.gojson import go_time_quote

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
#: Seconds per unit.
UNITS: Final[Mapping[str, float]] = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
#: The units of Go's ``time.ParseDuration`` that gpufed reads (no ``us``/``ns``).
GO_UNITS: Final = frozenset({"ms", "s", "m", "h"})


def duration_seconds(text: str, *, units: frozenset[str] = GO_UNITS) -> float | None:
    """The seconds ``text`` (``1h30m``: parts of a number and one of ``units``) stands for; None
    when it is empty or anything in it is not such a part."""
    position = 0
    total = 0.0
    for match in _PART.finditer(text):
        if match.start() != position or match.group(2) not in units:
            break
        total += float(match.group(1)) * UNITS[match.group(2)]
        position = match.end()
    return total if text and position == len(text) else None


#: Go's ``time.ParseDuration`` units, in nanoseconds.
_GO_UNIT_NANOS: Final[Mapping[str, int]] = {
    "ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9,
}
_GO_NUMBER = re.compile(r"([0-9]*)(?:\.([0-9]*))?")
_GO_UNIT = re.compile(r"[^0-9.]*")


def go_duration_error(text: str) -> str | None:
    """Why Go's ``time.ParseDuration`` refuses ``text`` (``time: unknown unit "d" in duration
    "5d"``), or None: a sign, then parts of a number (digits, a fraction) and a unit."""
    invalid = f"time: invalid duration {go_time_quote(text)}"
    rest = text[1:] if text[:1] in ("-", "+") else text
    if rest == "0":
        return None
    if not rest:
        return invalid
    total = 0
    while rest:
        number = _GO_NUMBER.match(rest)
        assert number is not None  # it matches the empty string
        whole, fraction = number.group(1), number.group(2)
        if (not whole and not fraction) or (whole and int(whole) > 2**63):
            return invalid  # no digits, or more than an int64 holds
        rest = rest[number.end():]
        unit = _GO_UNIT.match(rest)
        assert unit is not None
        name = unit.group(0)
        if not name:
            return f"time: missing unit in duration {go_time_quote(text)}"
        if name not in _GO_UNIT_NANOS:
            return f"time: unknown unit {go_time_quote(name)} in duration {go_time_quote(text)}"
        rest = rest[unit.end():]
        scale = _GO_UNIT_NANOS[name]
        if int(whole or "0") > 2**63 // scale:
            return invalid
        total += int(whole or "0") * scale + (int(fraction) * scale // 10 ** len(fraction) if fraction else 0)
        if total > 2**63:
            return invalid
    if text[:1] != "-" and total > 2**63 - 1:
        return invalid
    return None


_GO_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def go_duration_seconds(text: str) -> float:
    """The seconds of a duration Go's ``time.ParseDuration`` reads (``-1.5h``, ``300ms``, ``0``);
    check it with :func:`go_duration_error` first."""
    sign = -1.0 if text.startswith("-") else 1.0
    nanos = sum(float(number or 0) * _GO_UNIT_NANOS[unit] for number, unit in _GO_PART.findall(text.lstrip("+-")))
    return sign * nanos / 1e9


_YEAR = 365 * 86400
#: kube's ``HumanDuration`` steps: (unit in seconds, its letter, the smaller unit and its letter, below how
#: many units both are shown, below how many the unit alone is); past the last step, whole years.
_DURATION_STEPS: tuple[tuple[int, str, int, str, int, int], ...] = (
    (60, "m", 1, "s", 10, 180),
    (3600, "h", 60, "m", 8, 48),
    (86400, "d", 3600, "h", 8, 365 * 2),
    (_YEAR, "y", 86400, "d", 8, 8),
)


def human_duration(seconds_total: float) -> str:
    """kube's ``duration.HumanDuration``: 45s, 5m30s, 3h, 2d4h, 1y20d."""
    seconds = int(seconds_total)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    for unit, letter, smaller, smaller_letter, both_below, alone_below in _DURATION_STEPS:
        count = seconds // unit
        if count < both_below:
            rest = seconds % unit // smaller
            return f"{count}{letter}" if rest == 0 else f"{count}{letter}{rest}{smaller_letter}"
        if count < alone_below:
            return f"{count}{letter}"
    return f"{seconds // _YEAR}y"
