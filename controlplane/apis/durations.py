"""Durations written as ``<number><unit>`` parts, as Go prints them (``300ms``, ``1h30m``, ``1.5h``).

In: the text and the units a caller accepts (Go's ``ms``/``s``/``m``/``h`` by default; the
command line also takes ``d`` and ``w``). Out: the seconds, or None when the text is not such a
duration, so each caller words its own error. The simulated member's pod annotations and the
``gpufed`` command line both read durations through :func:`duration_seconds`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

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
