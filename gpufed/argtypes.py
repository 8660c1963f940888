"""Argument types the commands share: argparse ``type=`` callables that refuse with a message
naming what was expected."""

from __future__ import annotations

import argparse
import datetime as dt
import math
from collections.abc import Callable
from typing import TypeVar

from controlplane.gojson import parse_bool
from gpufed.timeparse import parse_duration, parse_time

_T = TypeVar("_T")


class UsageError(ValueError):
    """A command line that is wrong as a whole (a flag that needs another, a value no ``type=``
    could refuse alone): the command's usage and ``error: <message>``, exit status 2, as argparse
    refuses a flag (:func:`gpufed.cli.main`)."""


def whole_number(
    minimum: int = 0, *, what: str = "a whole number", why: str = "", maximum: int | None = None
) -> Callable[[str], int]:
    """A ``type=`` for a whole number of at least ``minimum`` and at most ``maximum`` (when
    given) (ASCII digits only: no sign, no spaces).

    Refuses with ``expected <what> >= <minimum><why>, not '<text>'`` (``expected <what>
    <minimum>-<maximum>, not '<text>'`` with a maximum); ``why`` is a parenthesised reason for
    the minimum, with its leading space.
    """

    def parse(text: str) -> int:
        if not (text.isascii() and text.isdigit()) or not minimum <= int(text) <= (maximum or int(text)):
            expected = f">= {minimum}{why}" if maximum is None else f"{minimum}-{maximum}"
            raise argparse.ArgumentTypeError(f"expected {what} {expected}, not {text!r}")
        return int(text)

    return parse


def go_bool(text: str) -> bool:
    """A ``type=`` for a boolean flag as kube's read theirs (Go's ``strconv.ParseBool``: ``true``,
    ``false``, ``1``, ``0``, ``t``, ``F``, ``TRUE``, ``False`` ...); with ``nargs="?"`` and
    ``const=True``, ``--flag`` alone is true, as in kube."""
    value = parse_bool(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return value


def port_number(text: str) -> int:
    """A ``type=`` for a TCP port, 0 to 65535 (0: any free one)."""
    if not (text.isascii() and text.isdigit()) or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535, not {text!r}")
    return int(text)


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 as '[::1]:6443'); port 0 picks a free port."""
    host, sep, port = text.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()):
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT (e.g. 127.0.0.1:6443), not {text!r}")
    return host.strip("[]") or "0.0.0.0", port_number(port)


def _converted(text: str, convert: Callable[[str], _T], what: str) -> _T:
    """``convert(text)``, or the refusal ``expected <what>, not '<text>'``."""
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}") from None


def positive_number(what: str = "a number") -> Callable[[str], float]:
    """A ``type=`` for a number greater than 0 (``float`` syntax: ``2``, ``0.5``, ``1e3``).

    Refuses text that is no number with ``expected <what>, not '<text>'``, and a number at or
    below 0 with ``must be positive``.
    """

    def parse(text: str) -> float:
        value = _converted(text, float, what)
        if value <= 0:
            raise argparse.ArgumentTypeError("must be positive")
        return value

    return parse


def seconds_or_off(text: str) -> float:
    """A ``type=`` for a number of seconds, 0 meaning off (``--loop-stall-warning``)."""
    value = _converted(text, float, "a number of seconds (0: off)")
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0 (0: off), not {text!r}")
    return value


def duration(text: str) -> dt.timedelta:
    """A ``type=`` for a duration (``90s``, ``15m``, ``24h``, ``7d``, ``1h30m``): a malformed one is
    a usage error naming its flag (``argument --since: invalid duration 'x': …``)."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_duration(text: str) -> dt.timedelta:
    """:func:`duration`, at least one second (a window or a lifetime of 0 means nothing)."""
    value = duration(text)
    if value.total_seconds() < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1s, not {text!r}")
    return value


def time_or_duration(text: str) -> str:
    """A ``type=`` for an RFC 3339 time or a duration meaning that long ago; the text, checked here
    so a malformed one is a usage error, is read against the time the command asks for."""
    try:
        parse_time(text, now=dt.datetime.now(dt.UTC))
    except (ValueError, OverflowError) as exc:
        raise argparse.ArgumentTypeError(
            f"expected an RFC 3339 time (2024-05-01T00:00:00Z) or a duration ago (48h): {exc}") from None
    return text


def tail_lines(text: str) -> int:
    """A ``type=`` for ``--tail``: a number of lines, -1 meaning all of them (kubectl's)."""
    value = _converted(text, int, "a number of lines (-1: all)")
    if value < -1:
        raise argparse.ArgumentTypeError(f"must be greater than or equal to -1, not {text!r}")
    return value


def object_name(text: str) -> str:
    """A ``type=`` for the name of one object (a cluster, a token ID): not empty, which would name
    the whole collection instead."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a name is required, not an empty one")
    return text
