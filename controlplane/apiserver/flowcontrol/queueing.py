"""Fair queuing within one priority level: pure state, no I/O, no clock.

A level serves at most ``seats`` requests at once. A request beyond that waits in one of
``queues`` queues, chosen by hashing its flow (kube shuffle-shards with a hand of several
queues; one queue per flow hash is enough here), each holding at most ``queue_length``
requests. When a seat frees, the next request is taken from the queues in round robin, so a
flow with a thousand requests waiting gets one turn for every turn of a flow with one.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

T = TypeVar("T")


class Outcome(StrEnum):
    EXECUTE = "execute"
    QUEUED = "queued"
    #: kube's rejection reasons (the ``reason`` label of apiserver_flowcontrol_rejected_requests_total).
    QUEUE_FULL = "queue-full"
    CONCURRENCY_LIMIT = "concurrency-limit"


@dataclass(frozen=True, slots=True)
class LevelLimits:
    seats: int
    queues: int
    queue_length: int


def queue_index(flow: str, queues: int) -> int:
    """The queue of ``flow`` (stable across processes)."""
    return zlib.crc32(flow.encode()) % queues


class FairQueues(Generic[T]):
    """Seats and queues of one priority level; ``T`` is whatever a waiting request is."""

    def __init__(self, limits: LevelLimits) -> None:
        self.limits = limits
        self.executing = 0
        self.waiting = 0
        self._queues: list[deque[T]] = [deque() for _ in range(max(limits.queues, 1))]
        self._turn = 0

    def offer(self, flow: str, request: T) -> Outcome:
        """Take a seat now (EXECUTE), wait for one (QUEUED), or be rejected."""
        if self.executing < self.limits.seats and self.waiting == 0:
            self.executing += 1
            return Outcome.EXECUTE
        if self.limits.queue_length <= 0:
            return Outcome.CONCURRENCY_LIMIT
        queue = self._queues[queue_index(flow, len(self._queues))]
        if len(queue) >= self.limits.queue_length:
            return Outcome.QUEUE_FULL
        queue.append(request)
        self.waiting += 1
        return Outcome.QUEUED

    def withdraw(self, flow: str, request: T) -> bool:
        """Take a waiting ``request`` out of its queue (it timed out or its client left);
        False when it is no longer waiting (it was dispatched)."""
        queue = self._queues[queue_index(flow, len(self._queues))]
        try:
            queue.remove(request)
        except ValueError:
            return False
        self.waiting -= 1
        return True

    def finish(self) -> T | None:
        """A request gives its seat back; the request that takes it next, if any."""
        self.executing -= 1
        return self._dispatch()

    def _dispatch(self) -> T | None:
        if self.waiting == 0 or self.executing >= self.limits.seats:
            return None
        count = len(self._queues)
        for step in range(count):
            index = (self._turn + step) % count
            queue = self._queues[index]
            if queue:
                self._turn = (index + 1) % count
                self.waiting -= 1
                self.executing += 1
                return queue.popleft()
        return None  # pragma: no cover - waiting > 0 means some queue holds a request
