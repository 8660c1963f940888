"""kube's ``metav1.Time`` and ``metav1.MicroTime`` as its JSON decoder reads and writes them.

A built-in kind's timestamps are Go values: ``Time.UnmarshalJSON`` reads a string with Go's
``time.Parse(time.RFC3339, ...)``, which takes an offset (``+02:00``) and fractional seconds
(``.5``, ``,5``), and ``MarshalJSON`` writes it back in UTC to the second
(``2026-12-07T17:01:43Z``); ``MicroTime`` reads exactly ``RFC3339Micro``
(``2006-01-02T15:04:05.000000Z07:00``: six digits of fraction, a zone) and writes UTC with six
digits. The zero time (``0001-01-01T00:00:00Z``) is written ``null``. A string Go cannot parse
fails the whole decoding with Go's own words: ``parsing time "yesterday" as
"2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"``; Python's parsers take and
refuse other strings and word their errors otherwise, so Go's parser is followed step by step,
for the two layouts kube uses.

Pure: text in, kube's text out (None for the zero time) or :class:`TimeParseError`.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
_DAYS_IN = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class TimeParseError(ValueError):
    """Go's ``time.ParseError`` as it prints."""


def _quote(text: bytes) -> str:
    """Go's ``time.quote``: a control or non-ASCII byte as ``\\xNN``, ``"`` and ``\\`` escaped."""
    out = ['"']
    for byte in text:
        if byte < 0x20 or byte >= 0x80:
            out.append(f"\\x{byte:02x}")
        else:
            if byte in (0x22, 0x5C):
                out.append("\\")
            out.append(chr(byte))
    out.append('"')
    return "".join(out)


def _digit(text: bytes, at: int) -> bool:
    return at < len(text) and 0x30 <= text[at] <= 0x39


def _getnum(text: bytes, fixed: bool) -> tuple[int, bytes] | None:
    """Go's ``getnum``: one or two leading digits (two when ``fixed``)."""
    if not _digit(text, 0):
        return None
    if not _digit(text, 1):
        return None if fixed else (text[0] - 0x30, text[1:])
    return (text[0] - 0x30) * 10 + text[1] - 0x30, text[2:]


def _atoi(text: bytes) -> int | None:
    """Go's ``atoi``: an optional sign, then digits only (none is 0)."""
    negative = text[:1] == b"-"
    if text[:1] in (b"-", b"+"):
        text = text[1:]
    if text and not text.isdigit():
        return None
    number = int(text) if text else 0
    return -number if negative else number


def _nanoseconds(text: bytes, width: int) -> tuple[int | None, str]:
    """Go's ``parseNanoseconds``: the fraction in ``text[:width]`` (a separator, then digits) as
    nanoseconds, or None; and the range error (a negative fraction)."""
    if text[:1] not in (b".", b","):
        return None, ""
    width = min(width, 10)
    number = _atoi(text[1:width])
    if number is None:
        return None, ""
    if number < 0:
        return 0, "fractional second"
    return number * 10 ** (10 - width), ""


class _Parse:
    """One ``time.Parse`` of ``text`` with ``layout`` (RFC3339 or RFC3339Micro)."""

    def __init__(self, layout: str, text: str) -> None:
        self.layout, self.text = layout, text
        self.raw = text.encode()

    def error(self, element: str, rest: bytes) -> TimeParseError:
        return TimeParseError(
            f"parsing time {_quote(self.raw)} as {_quote(self.layout.encode())}: cannot parse {_quote(rest)} as "
            f"{_quote(element.encode())}"
        )

    def out_of_range(self, what: str) -> TimeParseError:
        return TimeParseError(f"parsing time {_quote(self.raw)}: {what} out of range")

    def literal(self, rest: bytes, expected: str) -> bytes:
        if rest[:1] != expected.encode():
            raise self.error(expected, rest)
        return rest[1:]

    def number(self, rest: bytes, element: str, fixed: bool, limit: int, name: str) -> tuple[int, bytes]:
        found = _getnum(rest, fixed)
        if found is None:
            raise self.error(element, rest)
        if found[0] >= limit:
            raise self.out_of_range(name)
        return found

    def run(self, micro: bool) -> tuple[datetime, int, int, int]:
        """The parsed wall time (in a year of the same 400-year cycle, which Python can hold),
        the years to add back, the nanoseconds and the zone offset in seconds."""
        rest = self.raw
        if len(rest) < 4 or not _digit(rest, 0) or (year := _atoi(rest[:4])) is None:
            raise self.error("2006", rest)
        rest = self.literal(rest[4:], "-")
        found = _getnum(rest, True)
        if found is None:
            raise self.error("01", rest)
        month, rest = found
        if not 1 <= month <= 12:
            raise self.out_of_range("month")
        rest = self.literal(rest, "-")
        found = _getnum(rest, True)
        if found is None:
            raise self.error("02", rest)
        day, rest = found
        rest = self.literal(rest, "T")
        hour, rest = self.number(rest, "15", False, 24, "hour")
        rest = self.literal(rest, ":")
        minute, rest = self.number(rest, "04", True, 60, "minute")
        rest = self.literal(rest, ":")
        second, rest = self.number(rest, "05", True, 60, "second")
        nanos = 0
        if micro:
            hold = rest
            fraction, too_small = _nanoseconds(rest, 7) if len(rest) >= 7 else (None, "")
            if too_small:
                raise self.out_of_range(too_small)
            if fraction is None:
                raise self.error(".000000", hold)
            nanos, rest = fraction, rest[7:]
        elif len(rest) >= 2 and rest[:1] in (b".", b",") and _digit(rest, 1):
            width = 2
            while _digit(rest, width):
                width += 1
            fraction, too_small = _nanoseconds(rest, width)
            if too_small:
                raise self.out_of_range(too_small)
            nanos, rest = fraction or 0, rest[width:]
        offset, rest = self.zone(rest)
        if rest:
            raise TimeParseError(f"parsing time {_quote(self.raw)}: extra text: {_quote(rest)}")
        leap = month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        if not 1 <= day <= _DAYS_IN[month - 1] + leap:
            raise self.out_of_range("day")
        cycle = 2000 + year % 400
        return datetime(cycle, month, day, hour, minute, second), year - cycle, nanos, offset

    def zone(self, rest: bytes) -> tuple[int, bytes]:
        """``Z07:00``: ``Z``, or a sign, two digits, ``:``, two digits (up to 24 hours and 60 minutes)."""
        if rest[:1] == b"Z":
            return 0, rest[1:]
        if len(rest) < 6 or rest[3:4] != b":":
            raise self.error("Z07:00", rest)
        hours = _getnum(rest[1:3], True)
        minutes = _getnum(rest[4:6], True) if hours is not None else None  # Go stops at the first bad number
        hour, minute = (hours or (0, b""))[0], (minutes or (0, b""))[0]
        if minute > 60:  # Go checks both and names the last
            raise self.out_of_range("time zone offset minute")
        if hour > 24:
            raise self.out_of_range("time zone offset hour")
        if hours is None or minutes is None or rest[:1] not in (b"+", b"-"):
            raise self.error("Z07:00", rest)
        offset = (hour * 60 + minute) * 60
        return (-offset if rest[:1] == b"-" else offset), rest[6:]


#: kube's own form of a Time (``micro``: a MicroTime): UTC, with six digits of fraction or none.
_KUBE_FORM = {
    False: re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"),
    True: re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"),
}


def _in_kube_form(text: str, micro: bool) -> bool:
    """``text`` is a time kube writes back unchanged (most are: those it wrote itself), checked
    without Go's parser: of kube's form, and a date and time of day that exist (Python's parser
    checks those as Go's does). The zero time, written ``null``, is left to Go's parser."""
    if _KUBE_FORM[micro].fullmatch(text) is None or text.startswith("0001-01-01T00:00:00"):
        return False
    try:
        datetime.fromisoformat(text)
    except ValueError:  # February 30th, hour 24, second 60, year 0: Go's parser says which
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _decoded(text: str, micro: bool) -> tuple[str | None, str | None]:
    """(kube's text or None for the zero time, None) or (None, Go's error), cached: an object's
    timestamps come back on each of its writes."""
    if _in_kube_form(text, micro):
        return text, None
    try:
        wall, years, nanos, offset = _Parse(RFC3339_MICRO if micro else RFC3339, text).run(micro)
    except TimeParseError as exc:
        return None, str(exc)
    moment = wall - timedelta(seconds=offset)
    year = moment.year + years
    if (year, moment.month, moment.day, moment.hour, moment.minute, moment.second, nanos) == (
        1,
        1,
        1,
        0,
        0,
        0,
        0,
    ):
        return None, None
    shown = f"-{-year:04d}" if year < 0 else f"{year:04d}"
    fraction = f".{nanos // 1000:06d}" if micro else ""
    return f"{shown}{moment.strftime('-%m-%dT%H:%M:%S')}{fraction}Z", None


def kube_time(text: str, *, micro: bool = False) -> str | None:
    """``text`` as kube stores a ``metav1.Time`` (``micro``: a ``MicroTime``) it decoded from it:
    UTC, to the second (six digits of fraction for a MicroTime); None for the zero time, which
    kube writes ``null``. :class:`TimeParseError` with Go's words where Go cannot parse it."""
    kept, error = _decoded(text, micro)
    if error is not None:
        raise TimeParseError(error)
    return kept
