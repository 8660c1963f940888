"""A rate-limited priority work queue with per-key de-duplication, as client-go's workqueue.

Controllers are level-based: an event only says "look at key K again". The queue
guarantees that one key is never processed by two workers at once, that a key added
while it is being processed is processed again afterwards (never lost), that repeated
adds of a waiting key collapse into one, and that failures back off per key
(exponential, capped, jittered) without blocking other keys.

Keys carry a priority (an int, default 0): :meth:`WorkQueue.get` hands out the waiting key
of the highest priority, and keys of equal priority in the order they became ready (FIFO).
That is the scheduler's ``schedulePriority`` order (Karmada's priority scheduling queue);
every other controller adds everything at 0, so its queue is plain FIFO. A key added again
with a new priority moves to it (the newest value wins: priorities follow the object);
re-adds that name none (a retry, a delayed look, a key dirtied while processing) keep the
one the key was last given. Ordering only: a key being processed is never interrupted, and
a lower-priority key waits only while higher ones are ready, so it runs as soon as they are
handed out.

A queue given a name and :class:`~controlplane.controllers.workqueuemetrics.WorkqueueMetrics`
feeds client-go's workqueue series under that name, at client-go's points: an add that makes
a key dirty counts (one that finds it waiting does not, and its wait counts from the first
add); a delayed key counts as added when its delay ends, whenever a worker next looks; every
:meth:`WorkQueue.add_after` is a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import random
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from controlplane.controllers.workqueuemetrics import WorkqueueMetrics

K = TypeVar("K", bound=Hashable)

DEFAULT_PRIORITY = 0


class ShutDown(Exception):
    """The queue was shut down; workers should exit."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """Where a ready key sits: its priority and the sequence number of its live heap entry."""

    priority: int
    seq: int


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        base_delay: float = 0.05,
        max_delay: float = 30.0,
        name: str = "",
        metrics: WorkqueueMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Heap of (-priority, seq, key); an entry whose (priority, seq) no longer matches
        # ``_queued[key]`` was superseded by a re-prioritisation and is skipped.
        self._ready: list[tuple[int, int, K]] = []
        self._queued: dict[K, _Entry] = {}
        #: Keys being processed -> the priority they were handed out with.
        self._processing: dict[K, int] = {}
        #: Keys added while being processed -> the priority to queue them with afterwards.
        self._dirty_while_processing: dict[K, int] = {}
        self._delayed: list[tuple[float, int, K, int]] = []
        self._seq = itertools.count()
        self._failures: dict[K, int] = {}
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._changed = asyncio.Condition()
        self._shutdown = False
        self._clock = clock
        #: The workqueue series this queue feeds (None: unnamed or no metrics), and for them, when
        #: each dirty key was added and each key being processed was taken.
        self._series = metrics.series(name) if metrics is not None and name else None
        self._added_at: dict[K, float] = {}
        self._taken_at: dict[K, float] = {}
        if self._series is not None:
            self._series.attach(self)

    def __len__(self) -> int:
        return len(self._queued) + len(self._delayed)

    @property
    def depth(self) -> int:
        """Keys waiting for a worker (client-go's dirty set): those ready and those added again
        while being processed; delayed ones count once their delay has ended and a worker looked."""
        return len(self._queued) + len(self._dirty_while_processing)

    def running_seconds(self) -> list[float]:
        """How long each key being processed has been (its metrics only; empty without them)."""
        now = self._clock()
        return [now - taken for taken in self._taken_at.values()]

    def longest_wait(self) -> float:
        """About how long the key that has waited longest for a worker has waited, in seconds (0
        when none waits). Kept only by a queue that feeds metrics: the first key still waiting in
        add order (a delayed key joins that order when a worker next looks, with its wait
        counted from the end of its delay, so it may be a little older than the first)."""
        for added in self._added_at.values():
            return max(0.0, self._clock() - added)
        return 0.0

    def stop_reporting(self) -> None:
        """Leave the workqueue gauges (the loop stopped): they read 0 unless a newer queue of the name runs."""
        if self._series is not None:
            self._series.detach(self)

    def busy(self, *, horizon: float = 0.0) -> bool:
        """Whether a key is ready, being processed, or delayed to within ``horizon`` seconds from now."""
        if self._queued or self._processing or self._dirty_while_processing:
            return True
        return bool(self._delayed) and self._delayed[0][0] - self._clock() <= horizon

    def priority_of(self, key: K) -> int:
        """The priority ``key`` was last given (the default when the queue does not hold it)."""
        if key in self._dirty_while_processing:
            return self._dirty_while_processing[key]
        if key in self._processing:
            return self._processing[key]
        entry = self._queued.get(key)
        return entry.priority if entry is not None else DEFAULT_PRIORITY

    async def add(self, key: K, *, priority: int | None = None) -> None:
        """Queue ``key``; ``priority`` None keeps the one it was last given."""
        async with self._changed:
            if priority is None:
                self._add_locked(key, self.priority_of(key), override=False)
            else:
                self._add_locked(key, priority, override=True)

    def _push(self, key: K, priority: int) -> None:
        seq = next(self._seq)
        self._queued[key] = _Entry(priority, seq)
        heapq.heappush(self._ready, (-priority, seq, key))
        if len(self._ready) > 2 * len(self._queued) + 64:
            # Superseded entries pile up only under constant re-prioritisation: drop them.
            self._ready = [(-e.priority, e.seq, k) for k, e in self._queued.items()]
            heapq.heapify(self._ready)

    def _add_locked(self, key: K, priority: int, *, override: bool, added_at: float | None = None) -> None:
        """Make ``key`` dirty (counted as an add, at ``added_at`` or now) unless it is already."""
        if self._shutdown:
            return
        if key in self._processing:
            if key not in self._dirty_while_processing:
                self._dirty_while_processing[key] = priority
                self._count_add(key, added_at)
            elif override:
                self._dirty_while_processing[key] = priority
            return
        entry = self._queued.get(key)
        if entry is None:
            self._push(key, priority)
            self._count_add(key, added_at)
            self._changed.notify()
        elif override and entry.priority != priority:
            self._push(key, priority)  # the old heap entry is now superseded

    def _count_add(self, key: K, added_at: float | None) -> None:
        if self._series is not None:
            self._series.adds += 1
            self._added_at[key] = self._clock() if added_at is None else added_at

    async def add_after(self, key: K, delay: float, *, priority: int | None = None) -> None:
        """Queue ``key`` in ``delay`` seconds (with its current priority unless one is given)."""
        async with self._changed:
            if self._series is not None and not self._shutdown:
                self._series.retries += 1
            resolved = self.priority_of(key) if priority is None else priority
            if delay <= 0:
                self._add_locked(key, resolved, override=priority is not None)
                return
            heapq.heappush(self._delayed, (self._clock() + delay, next(self._seq), key, resolved))
            self._changed.notify_all()

    async def add_rate_limited(self, key: K, *, max_delay: float | None = None) -> None:
        """Re-add after a failure: exponential backoff per key (capped at ``max_delay`` when given), with jitter."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        cap = self._max_delay if max_delay is None else min(max_delay, self._max_delay)
        delay = min(cap, self._base_delay * 2 ** (failures - 1))
        await self.add_after(key, delay * random.uniform(0.8, 1.2))

    def num_requeues(self, key: K) -> int:
        """How many failures in a row the key has been backed off for (client-go's ``NumRequeues``)."""
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        """The key succeeded: reset its backoff."""
        self._failures.pop(key, None)

    def _promote_due(self) -> float | None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key, priority = heapq.heappop(self._delayed)
            # A key that is waiting already keeps its place and priority. Its wait counts from
            # the end of the delay, as client-go's delaying queue adds it then.
            self._add_locked(key, priority, override=False, added_at=due)
        return self._delayed[0][0] - now if self._delayed else None

    def _pop_ready(self) -> K | None:
        while self._ready:
            negative, seq, key = heapq.heappop(self._ready)
            entry = self._queued.get(key)
            if entry is None or entry.seq != seq:
                continue  # superseded by a later re-prioritisation
            del self._queued[key]
            self._processing[key] = -negative
            if self._series is not None:
                now = self._clock()
                self._series.queue_duration.observe(now - self._added_at.pop(key, now))
                self._taken_at[key] = now
            return key
        return None

    async def get(self) -> K:
        async with self._changed:
            while True:
                if self._shutdown:
                    raise ShutDown
                wait = self._promote_due()
                key = self._pop_ready()
                if key is not None:
                    return key
                # asyncio.timeout, not wait_for: no inner task, so a cancelled worker leaves the
                # condition's lock in a consistent state.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._changed.wait()

    async def done(self, key: K) -> None:
        async with self._changed:
            self._processing.pop(key, None)
            taken = self._taken_at.pop(key, None)
            if taken is not None and self._series is not None:
                self._series.work_duration.observe(self._clock() - taken)
            if key in self._dirty_while_processing:
                priority = self._dirty_while_processing.pop(key)
                if not self._shutdown:  # counted as an add when it was dirtied
                    self._push(key, priority)
                    self._changed.notify()

    async def shutdown(self) -> None:
        async with self._changed:
            self._shutdown = True
            self.stop_reporting()
            self._changed.notify_all()
