"""A rate-limited work queue with per-key de-duplication, as client-go's workqueue.

Controllers are level-based: an event only says "look at key K again". The queue
guarantees that one key is never processed by two workers at once, that a key added
while it is being processed is processed again afterwards (never lost), that repeated
adds of a waiting key collapse into one, and that failures back off per key
(exponential, capped, jittered) without blocking other keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import random
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down; workers should exit."""


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay: float = 0.05, max_delay: float = 30.0) -> None:
        self._ready: deque[K] = deque()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._dirty_while_processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._failures: dict[K, int] = {}
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._changed = asyncio.Condition()
        self._shutdown = False

    def __len__(self) -> int:
        return len(self._ready) + len(self._delayed)

    def busy(self, *, horizon: float = 0.0) -> bool:
        """Whether a key is ready, being processed, or delayed to within ``horizon`` seconds from now."""
        if self._ready or self._processing or self._dirty_while_processing:
            return True
        return bool(self._delayed) and self._delayed[0][0] - time.monotonic() <= horizon

    async def add(self, key: K) -> None:
        async with self._changed:
            self._add_locked(key)

    def _add_locked(self, key: K) -> None:
        if self._shutdown:
            return
        if key in self._processing:
            self._dirty_while_processing.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)
            self._changed.notify()

    async def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            await self.add(key)
            return
        async with self._changed:
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._seq), key))
            self._changed.notify_all()

    async def add_rate_limited(self, key: K, *, max_delay: float | None = None) -> None:
        """Re-add after a failure: exponential backoff per key (capped at ``max_delay`` when given), with jitter."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        cap = self._max_delay if max_delay is None else min(max_delay, self._max_delay)
        delay = min(cap, self._base_delay * 2 ** (failures - 1))
        await self.add_after(key, delay * random.uniform(0.8, 1.2))

    def forget(self, key: K) -> None:
        """The key succeeded: reset its backoff."""
        self._failures.pop(key, None)

    def _promote_due(self) -> float | None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self._add_locked(key)
        return self._delayed[0][0] - now if self._delayed else None

    async def get(self) -> K:
        async with self._changed:
            while True:
                if self._shutdown:
                    raise ShutDown
                wait = self._promote_due()
                if self._ready:
                    key = self._ready.popleft()
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                # asyncio.timeout, not wait_for: no inner task, so a cancelled worker leaves the
                # condition's lock in a consistent state.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._changed.wait()

    async def done(self, key: K) -> None:
        async with self._changed:
            self._processing.discard(key)
            if key in self._dirty_while_processing:
                self._dirty_while_processing.discard(key)
                self._add_locked(key)

    async def shutdown(self) -> None:
        async with self._changed:
            self._shutdown = True
            self._changed.notify_all()
