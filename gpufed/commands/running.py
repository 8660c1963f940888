"""How a command runs its async part: the failures it expects become ``error: …`` and exit status 1."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

Expected = tuple[type[Exception], ...]


def run_reporting(main: Coroutine[Any, Any, int], expected: Expected) -> int:
    """Run ``main`` to its exit status; an ``expected`` error is printed and exits 1."""
    try:
        return asyncio.run(main)
    except expected as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def serve_reporting(serving: Coroutine[Any, Any, None], *, host: str, port: int, expected: Expected,
                    hint: str = "") -> int:
    """Serve until ``serving`` returns (a signal); an ``expected`` error or an address that cannot be
    bound is printed and exits 1."""
    try:
        asyncio.run(serving)
    except expected as exc:
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: cannot serve on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
