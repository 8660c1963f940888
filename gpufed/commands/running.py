"""How a command runs its async part: the failures it expects become one line (kubectl's words
for the hub's, ``error: …`` for the rest) and exit status 1."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from gpufed.hubclient import HubError

if TYPE_CHECKING:
    from pydantic import ValidationError

Expected = tuple[type[Exception], ...]


def error_line(exc: BaseException) -> str:
    """The line a command that fails with ``exc`` prints on stderr."""
    if isinstance(exc, HubError):
        return exc.line
    return f"error: {file_error(exc) if isinstance(exc, OSError) else exc}"


def report(exc: BaseException) -> int:
    """Print ``exc`` as the command's last line; its exit status (1)."""
    print(error_line(exc), file=sys.stderr)
    return 1


def first_problem(exc: ValidationError) -> str:
    """The first problem pydantic found, as one line (its message without the "Value error, ")."""
    first = exc.errors()[0]
    return str(first.get("msg", exc)).removeprefix("Value error, ")


def run_reporting(main: Coroutine[Any, Any, int], expected: Expected) -> int:
    """Run ``main`` to its exit status; an ``expected`` error is printed and exits 1."""
    try:
        return asyncio.run(main)
    except expected as exc:
        return report(exc)


def serve_reporting(serving: Coroutine[Any, Any, None], *, host: str, port: int, expected: Expected,
                    hint: str = "") -> int:
    """Serve until ``serving`` returns (a signal); an ``expected`` error, a file or directory that
    cannot be used, or an address that cannot be bound is printed and exits 1."""
    try:
        asyncio.run(serving)
    except expected as exc:
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.filename is not None:
            print(f"error: {file_error(exc)}", file=sys.stderr)
            return 1
        print(f"error: cannot serve on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def file_error(exc: OSError) -> str:
    """``PATH: reason`` for a file or directory the command could not use."""
    reason = exc.strerror or str(exc)
    return reason if exc.filename is None else f"{exc.filename}: {reason}"
