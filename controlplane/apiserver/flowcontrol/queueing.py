"""Fair queuing within one priority level, as kube's queueset does it: pure state, no I/O; the
caller passes the time (monotonic seconds).

A level serves requests holding at most its ``concurrency`` seats at once (its nominal ``seats``,
then what :mod:`.borrowing` gives it); a request takes the seats of its work estimate
(:class:`~.estimating.WorkEstimate`: one for most, more for a LIST of many objects) while it runs,
and a write seen by many watches keeps its final seats for its additional latency after it
finishes (:meth:`FairQueues.finish` says how long; :meth:`FairQueues.release` ends it). Every
request goes through one of ``queues`` queues: its flow (the FlowSchema's name and the flow
distinguisher) is hashed into a hand of ``hand_size`` queues, dealt as kube's shuffle sharding deals
them, and it joins the queue of its hand with the least work waiting (the first looked at of a tie,
starting one further along the hand for each request, as kube). When all seats are taken and that
queue holds ``queue_length`` requests, it is rejected.

Which queue is served next is kube's fair queuing by virtual time: the level's virtual clock ``R``
runs at ``min(seats requested, seats) / active queues`` seat-seconds per second, each queue has the
virtual time its next request may start (``next_dispatch_r``), set to ``R`` when an idle queue
gets a request, never before its oldest request's arrival, and advanced by each dispatched
request's work (its initial seats x kube's estimated 3 ms of service, plus its final seats x its
additional latency); the waiting queue whose oldest request would finish earliest in virtual time is
served next (round robin among ties), and a request served in S seconds instead of 3 ms moves its
queue by its initial seats x (S - 3 ms). The oldest request of that queue waits for enough seats to
free, as in kube (a narrower one behind it does not jump ahead); a request wider than the level runs
alone, and final seats beyond the level's are reshaped to the level's seats for longer. A queue is served only while fewer seats than the level's limit are in use, so at a limit of
0 (all its seats lent) requests wait, and time out, as in kube; a ``Reject`` level, which has no
queues, still runs one request alone then (kube's ``dispatchSansQueue``).
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Generic, TypeVar

from controlplane.apiserver.flowcontrol.borrowing import DemandIntegrator
from controlplane.apiserver.flowcontrol.estimating import ONE_SEAT, WorkEstimate

T = TypeVar("T")

#: kube's queueset ``estimatedServiceDuration``: the seconds a request is taken to run (3 ms).
ESTIMATED_SERVICE_SECONDS: Final = 0.003
#: Hands remembered per level (flows seen), at most; emptied when full.
_KNOWN_HANDS: Final = 4096


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


class Queue(Generic[T]):
    """One queue of a level: its waiting requests (oldest first) and what it has running."""

    __slots__ = (
        "executing", "index", "next_dispatch_r", "seats_in_use", "waiting", "waiting_initial_seats", "waiting_seats",
        "waiting_work",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.next_dispatch_r = 0.0
        self.seats_in_use = 0
        self.executing = 0
        self.waiting: deque[Request[T]] = deque()
        #: kube's queue sums of the waiting requests: initial seats, seats (max), work (seat-seconds).
        self.waiting_initial_seats = self.waiting_seats = 0
        self.waiting_work = 0.0

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.executing


class Request(Generic[T]):
    """A request of a level, waiting or running."""

    __slots__ = ("about", "arrival_r", "arrived", "estimate", "finished", "item", "queue", "running", "started")

    def __init__(
        self, item: T, queue: Queue[T] | None, estimate: WorkEstimate, arrival_r: float, arrived: float,
        about: object = None,
    ) -> None:
        self.item = item
        #: Whatever the caller tells of the request (for the debug dumps).
        self.about = about
        self.queue = queue
        self.estimate = estimate
        self.arrival_r = arrival_r
        self.arrived = arrived
        self.started = 0.0
        #: Holding its seats (from its dispatch to the end of its additional latency).
        self.running = False
        #: Served, its final seats still held for its additional latency.
        self.finished = False

    @property
    def seats(self) -> int:
        """The seats it holds: the most of its initial and final seats (kube's ``MaxSeats``)."""
        return self.estimate.max_seats

    @property
    def final_work(self) -> float:
        """kube's ``finalWork`` (seat-seconds): its final seats for its additional latency."""
        return self.estimate.final_seats * self.estimate.additional_latency

    @property
    def work(self) -> float:
        """kube's ``totalWork`` (seat-seconds): its initial seats for the estimated service time,
        plus its final work."""
        return self.estimate.initial_seats * ESTIMATED_SERVICE_SECONDS + self.final_work


class FairQueues(Generic[T]):
    """Seats and queues of one priority level; ``T`` is whatever a request is (hashable).

    ``wake`` is called with each waiting request that gets its seats.
    """

    def __init__(self, limits: LevelLimits, *, wake: Callable[[T], None] | None = None, now: float = 0.0) -> None:
        self.limits = limits
        #: The seats the level may use now: its nominal limit, then what borrowing gives it.
        self.concurrency = limits.seats
        #: Its seat demand (seats in use and seats asked for by waiting requests) over time.
        self.demand = DemandIntegrator(now)
        self._wake = wake
        count = max(limits.queues, 1)
        self.queues: list[Queue[T]] = [Queue(i) for i in range(count)]
        self._hand_size = min(max(limits.hand_size, 1), count)
        self._hands: dict[int, list[int]] = {}
        self.requests: dict[T, Request[T]] = {}
        #: Requests and seats executing, requests waiting and the seats they ask for.
        self.executing = self.seats_in_use = self.waiting = self._waiting_seats = 0
        self._active_queues = 0
        #: The virtual clock (seat-seconds) and the real time it was last advanced to.
        self.virtual_time = 0.0
        self._last = now
        self._robin = -1
        self._enqueues = 0
        #: Requests that got a seat, were refused by :meth:`offer`, left their queue when their
        #: wait ran out, or left it with their client (kube's dump_priority_levels counts).
        self.dispatched = self.rejected = self.timed_out = self.cancelled = 0

    @property
    def active_queues(self) -> int:
        return self._active_queues

    def offer(
        self, flow_id: int, item: T, *, now: float, estimate: WorkEstimate = ONE_SEAT, about: object = None
    ) -> Outcome:
        """Take seats now (EXECUTE), wait for them (QUEUED), or be rejected; ``flow_id``: :func:`flow_hash`."""
        self._sync(now)
        if self.limits.queue_length <= 0:  # kube's dispatchSansQueue
            if not self._fits(estimate.max_seats):
                self.rejected += 1
                return Outcome.CONCURRENCY_LIMIT
            request = Request(item, None, estimate, self.virtual_time, now, about)
            self.requests[item] = request
            self._start(request, now)
            self.demand.set(now, self.seats_in_use)
            return Outcome.EXECUTE
        queue = self._choose(flow_id)
        if self.seats_in_use >= self.concurrency and len(queue.waiting) >= self.limits.queue_length:
            self.rejected += 1
            return Outcome.QUEUE_FULL
        request = Request(item, queue, estimate, self.virtual_time, now, about)
        self.requests[item] = request
        if queue.idle:
            queue.next_dispatch_r = self.virtual_time
            self._active_queues += 1
        queue.waiting.append(request)
        queue.waiting_initial_seats += estimate.initial_seats
        queue.waiting_seats += request.seats
        queue.waiting_work += request.work
        self.waiting += 1
        self._waiting_seats += request.seats
        self._bound(queue)
        if self.waiting == 1:  # the only queue waiting is served next: no need to look through the others
            if self._free_seats() and self._fits(request.seats):
                self._dispatch(queue, now)
        else:
            self._wake_all([r for r in self._dispatch_all(now) if r is not request])
        self.demand.set(now, self.seats_in_use + self._waiting_seats)
        return Outcome.EXECUTE if request.running else Outcome.QUEUED

    def withdraw(self, item: T, *, now: float) -> bool:
        """Take a waiting request out of its queue (it timed out or its client left);
        False when it is no longer waiting (it was dispatched)."""
        request = self.requests.get(item)
        if request is None or request.running or request.queue is None:
            return False
        self._sync(now)
        queue = request.queue
        queue.waiting.remove(request)
        self._unwait(queue, request)
        del self.requests[item]
        if queue.idle:
            self._active_queues -= 1
        self._bound(queue)
        self._wake_all(self._dispatch_all(now))  # its seats may have held back the queue behind it
        self.demand.set(now, self.seats_in_use + self._waiting_seats)
        return True

    def finish(self, item: T, *, now: float) -> float:
        """A running request is served: its seats are given back and the requests that get seats
        then are woken -- unless it keeps its final seats: then the seconds it keeps them, after
        which the caller calls :meth:`release` (kube's additional latency, a timer there)."""
        request = self.requests[item]
        self._sync(now)
        self.executing -= 1
        request.finished = True
        queue = request.queue
        if queue is not None:
            queue.executing -= 1
            # kube: served in S seconds instead of the estimated G, its queue moves by its initial
            # seats x (S - G), no earlier than the arrival of the queue's oldest request.
            queue.next_dispatch_r += request.estimate.initial_seats * ((now - request.started) - ESTIMATED_SERVICE_SECONDS)
            self._bound(queue)
            if queue.idle:
                self._active_queues -= 1
        lingering = request.estimate.additional_latency
        if lingering <= 0:
            self._release(request, now)
            return 0.0
        self._wake_all(self._dispatch_all(now))  # a wide request waits for no request running
        return lingering

    def release(self, item: T, *, now: float) -> None:
        """A served request gives back the seats it kept for its additional latency."""
        request = self.requests.get(item)
        if request is not None and request.finished:
            self._sync(now)
            self._release(request, now)

    def set_concurrency(self, seats: int, *, now: float) -> None:
        """Use ``seats`` from now on (borrowing's current limit); more seats start waiting requests."""
        self._sync(now)
        self.concurrency = seats
        self._wake_all(self._dispatch_all(now))

    def executing_requests(self) -> dict[int, list[Request[T]]]:
        """The requests being served by their queue's index (-1: a level without queues)."""
        running: dict[int, list[Request[T]]] = {}
        for request in self.requests.values():
            if request.running and not request.finished:
                running.setdefault(-1 if request.queue is None else request.queue.index, []).append(request)
        return running

    def _release(self, request: Request[T], now: float) -> None:
        del self.requests[request.item]
        self.seats_in_use -= request.seats
        if request.queue is not None:
            request.queue.seats_in_use -= request.seats
        self._wake_all(self._dispatch_all(now))
        self.demand.set(now, self.seats_in_use + self._waiting_seats)

    def _choose(self, flow_id: int) -> Queue[T]:
        hand = self._hands.get(flow_id)
        if hand is None:
            if len(self._hands) >= _KNOWN_HANDS:
                self._hands.clear()
            hand = self._hands[flow_id] = deal(flow_id, deck_size=len(self.queues), hand_size=self._hand_size)
        # kube's shuffleShardLocked: the least work waiting (TotalWorkSum), the first looked at of a
        # tie, looking from one card further along the hand for each request.
        offset, size = self._enqueues % len(hand), len(hand)
        self._enqueues += 1
        best = self.queues[hand[offset]]
        for i in range(1, size):
            queue = self.queues[hand[(offset + i) % size]]
            if queue.waiting_work < best.waiting_work:
                best = queue
        return best

    def _sync(self, now: float) -> None:
        """Advance the virtual clock to ``now`` (kube's ``syncTimeLocked``)."""
        elapsed = now - self._last
        self._last = now
        if elapsed > 0 and self._active_queues:
            requested = self.seats_in_use + self._waiting_seats
            self.virtual_time += elapsed * min(requested, self.concurrency) / self._active_queues

    def _fits(self, seats: int) -> bool:
        """kube's ``canAccommodateSeatsLocked``: a request wider than the level runs alone."""
        if seats > self.concurrency:
            return self.executing == 0
        return self.seats_in_use + seats <= self.concurrency

    def _free_seats(self) -> bool:
        """kube's ``dispatchAsMuchAsPossibleLocked`` dispatches from the queues only while fewer seats
        than the limit are in use: at a limit of 0 requests wait (and time out), none runs alone."""
        return self.seats_in_use < self.concurrency

    def _dispatch_all(self, now: float) -> list[Request[T]]:
        started: list[Request[T]] = []
        while self.waiting and self._free_seats():
            queue = self._next_queue()
            request = queue.waiting[0]
            if not self._fits(request.seats):
                break
            started.append(self._dispatch(queue, now))
        return started

    def _dispatch(self, queue: Queue[T], now: float) -> Request[T]:
        """Start the oldest request of ``queue``; the next scan for a queue starts after it (kube)."""
        self._robin = queue.index
        request = queue.waiting.popleft()
        self._unwait(queue, request)
        estimate = request.estimate
        if estimate.final_seats > self.concurrency:
            # kube: final seats beyond the level's are reshaped to its seats for longer (the same work).
            seats = max(self.concurrency, 1)
            request.estimate = WorkEstimate(estimate.initial_seats, seats, request.final_work / seats)
        queue.next_dispatch_r += request.work
        queue.executing += 1
        queue.seats_in_use += request.seats
        self._start(request, now)
        self._bound(queue)
        return request

    def _next_queue(self) -> Queue[T]:
        """The waiting queue whose oldest request would finish earliest in virtual time, the first
        after the last served of a tie (kube's ``findDispatchQueueToBoundLocked``)."""
        count = len(self.queues)
        best: Queue[T] | None = None
        best_finish = 0.0
        index = self._robin
        for _ in range(count):
            index = (index + 1) % count
            queue = self.queues[index]
            if queue.waiting:
                finish = queue.next_dispatch_r + queue.waiting[0].work
                if best is None or finish < best_finish:
                    best, best_finish = queue, finish
        assert best is not None  # self.waiting > 0
        return best

    @staticmethod
    def _bound(queue: Queue[T]) -> None:
        """kube's anti-windup: a queue's next dispatch is never before its oldest request's arrival."""
        if queue.waiting:
            queue.next_dispatch_r = max(queue.next_dispatch_r, queue.waiting[0].arrival_r)

    def _unwait(self, queue: Queue[T], request: Request[T]) -> None:
        queue.waiting_initial_seats -= request.estimate.initial_seats
        queue.waiting_seats -= request.seats
        queue.waiting_work -= request.work
        self.waiting -= 1
        self._waiting_seats -= request.seats

    def _start(self, request: Request[T], now: float) -> None:
        request.started = now
        request.running = True
        self.executing += 1
        self.seats_in_use += request.seats
        self.dispatched += 1

    def _wake_all(self, started: list[Request[T]]) -> None:
        if self._wake is not None:
            for request in started:
                self._wake(request.item)
