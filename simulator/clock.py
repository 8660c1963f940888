"""Simulated time: the real clock sped up by ``--time-scale``, or a clock tests move by hand.

Pod start-up delays and job durations are in simulated seconds. :class:`ScaledClock`
runs ``time_scale`` simulated seconds per real second (so a 300 s job takes 3 s at
``--time-scale 100``); :class:`ManualClock` only moves when a test calls ``advance``,
so lifecycle tests run in virtual time without waiting.

In: nothing but the scale. Out: ``now()`` in simulated epoch seconds and
``sleep_until(deadline, wake)``, which returns at the deadline or as soon as ``wake``
is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from datetime import UTC, datetime
from typing import Any, Protocol

from controlplane.apis.timestamps import format_time


class Clock(Protocol):
    def now(self) -> float:
        """Simulated seconds since the epoch."""
        ...

    async def sleep_until(self, deadline: float | None, wake: asyncio.Event) -> None:
        """Return at ``deadline`` (simulated; None: never) or when ``wake`` is set."""
        ...


def rfc3339(seconds: float) -> str:
    return format_time(datetime.fromtimestamp(seconds, UTC))


def parse_rfc3339(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


class ScaledClock:
    """Wall-clock time running ``time_scale`` times faster, starting at the real now."""

    def __init__(self, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.time_scale = time_scale
        self._epoch = time.time()
        self._start = time.monotonic()

    def now(self) -> float:
        return self._epoch + (time.monotonic() - self._start) * self.time_scale

    async def sleep_until(self, deadline: float | None, wake: asyncio.Event) -> None:
        timeout = None if deadline is None else max(0.0, (deadline - self.now()) / self.time_scale)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await wake.wait()


class ManualClock:
    """Virtual time that moves only with :meth:`advance`."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[Any]]] = []
        self._counter = itertools.count()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    async def sleep_until(self, deadline: float | None, wake: asyncio.Event) -> None:
        if deadline is not None and deadline <= self._now:
            return
        waiter: asyncio.Future[Any] = asyncio.ensure_future(wake.wait())
        waits: set[asyncio.Future[Any]] = {waiter}
        if deadline is not None:
            timer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._sleepers, (deadline, next(self._counter), timer))
            waits.add(timer)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in waits:
                future.cancel()
