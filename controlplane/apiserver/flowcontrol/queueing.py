"""Fair queuing within one priority level: pure state, no I/O, no clock.

A level serves at most ``seats`` requests at once. A request beyond that waits in one of ``queues``
queues: its flow (the FlowSchema's name and the flow distinguisher) is hashed into a hand of
``hand_size`` queues, dealt as kube's shuffle sharding deals them, and the request joins the
shortest queue of its hand, which holds at most ``queue_length`` requests. When a seat frees, the
next request is taken from the queues in round robin (kube orders by virtual finish time), so a flow
with a thousand requests waiting gets one turn for every turn of a flow with one.
"""

from __future__ import annotations

import hashlib
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
    #: 0: no queueing (a ``Reject`` level), a request beyond the seats is rejected at once.
    queue_length: int
    hand_size: int = 1


def flow_hash(flow_schema: str, flow: str) -> int:
    """kube's ``hashFlowID``: the first 8 bytes of SHA-256 over the schema's name, NUL, the flow."""
    digest = hashlib.sha256(f"{flow_schema}\x00{flow}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def deal(hash_value: int, *, deck_size: int, hand_size: int) -> list[int]:
    """kube's ``shufflesharding.Dealer.Deal``: ``hand_size`` distinct queues of ``deck_size`` for a hash."""
    remainders = []
    for i in range(hand_size):
        hash_value, remainder = divmod(hash_value, deck_size - i)
        remainders.append(remainder)
    hand = []
    for i, card in enumerate(remainders):
        for j in range(i, 0, -1):
            if card >= remainders[j - 1]:
                card += 1
        hand.append(card)
    return hand


class FairQueues(Generic[T]):
    """Seats and queues of one priority level; ``T`` is whatever a waiting request is."""

    def __init__(self, limits: LevelLimits) -> None:
        self.limits = limits
        self.executing = 0
        self.waiting = 0
        count = max(limits.queues, 1)
        self._queues: list[deque[T]] = [deque() for _ in range(count)]
        self._hand_size = min(max(limits.hand_size, 1), count)
        self._where: dict[T, int] = {}
        self._turn = 0
        #: Requests that got a seat, were refused by :meth:`offer`, left their queue when their
        #: wait ran out, or left it with their client (kube's dump_priority_levels counts).
        self.dispatched = self.rejected = self.timed_out = self.cancelled = 0

    @property
    def active_queues(self) -> int:
        return sum(1 for queue in self._queues if queue)

    def offer(self, flow_id: int, request: T) -> Outcome:
        """Take a seat now (EXECUTE), wait for one (QUEUED), or be rejected; ``flow_id``: :func:`flow_hash`."""
        if self.executing < self.limits.seats and self.waiting == 0:
            self.executing += 1
            self.dispatched += 1
            return Outcome.EXECUTE
        if self.limits.queue_length <= 0:
            self.rejected += 1
            return Outcome.CONCURRENCY_LIMIT
        hand = deal(flow_id, deck_size=len(self._queues), hand_size=self._hand_size)
        index = min(hand, key=lambda i: len(self._queues[i]))
        queue = self._queues[index]
        if len(queue) >= self.limits.queue_length:
            self.rejected += 1
            return Outcome.QUEUE_FULL
        queue.append(request)
        self._where[request] = index
        self.waiting += 1
        return Outcome.QUEUED

    def withdraw(self, request: T) -> bool:
        """Take a waiting ``request`` out of its queue (it timed out or its client left);
        False when it is no longer waiting (it was dispatched)."""
        index = self._where.pop(request, None)
        if index is None:
            return False
        self._queues[index].remove(request)
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
                self.dispatched += 1
                request = queue.popleft()
                del self._where[request]
                return request
        return None  # pragma: no cover - waiting > 0 means some queue holds a request
