"""The aiohttp middleware that holds each request to its priority level's seats.

In: the authenticated user and parsed request of each request (so it runs after
authentication), a :class:`FlowControlConfig` and the FlowSchema and PriorityLevelConfiguration
objects (:meth:`FlowController.update`, kept by :mod:`.configuring`). Out: the request runs, waits its turn in its
level's fair queues, or is answered 429 TooManyRequests with ``Retry-After`` (a kube
``Status``); every classified response carries kube's ``X-Kubernetes-PF-FlowSchema-UID``
and ``X-Kubernetes-PF-PriorityLevel-UID`` headers. A request takes the seats of its work estimate
(:mod:`.estimating`); a write keeps its final seats for its additional latency after its answer.
A watch, as in kube, takes its seats only while it starts: from its turn until its handler calls
:func:`~controlplane.apiserver.requeststate.watch_started` (its initial events sent, or handed to
another server), or returns; it counts in :attr:`FlowController.watches` while it lasts. Requests ``not_counted`` says so of
(long-running requests other than watches, health checks) pass without taking a seat. Every
:data:`~.borrowing.ADJUSTMENT_SECONDS` :meth:`FlowController.keep_adjusting` shares the seats
anew between the levels, as kube's timer does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from controlplane.apiserver import errors
from controlplane.apiserver.flowcontrol.borrowing import (
    ADJUSTMENT_SECONDS,
    DemandStats,
    ExemptSeats,
    Item,
    allocate,
    go_round,
)
from controlplane.apiserver.flowcontrol.counting import WatchCounts
from controlplane.apiserver.flowcontrol.estimating import (
    ONE_SEAT,
    ObjectCount,
    WorkEstimate,
    request_estimate,
)
from controlplane.apiserver.flowcontrol.levels import (
    Classification,
    Configuration,
    FlowControlConfig,
    bootstrap_configuration,
    configuration,
)
from controlplane.apiserver.flowcontrol.matching import RequestDigest
from controlplane.apiserver.flowcontrol.metrics import FlowControlMetrics
from controlplane.apiserver.flowcontrol.queueing import FairQueues, Outcome, flow_hash
from controlplane.apiserver.identity import ANONYMOUS, UNAUTHENTICATED, UserInfo
from controlplane.apiserver.requeststate import REQUEST_INFO, WATCH_STARTED

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: The request's :class:`Classification` (set by the middleware).
CLASSIFICATION: Final = web.RequestKey("flowcontrol_classification", Classification)
FLOW_SCHEMA_HEADER: Final = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_HEADER: Final = "X-Kubernetes-PF-PriorityLevel-UID"
RETRY_AFTER_SECONDS: Final = 1
_ANONYMOUS_GROUPS: Final = (UNAUTHENTICATED,)

_REJECTED_BECAUSE = {
    Outcome.QUEUE_FULL.value: "its queue is full",
    Outcome.CONCURRENCY_LIMIT.value: "it queues no request",
    "time-out": "the request waited its limit in the queue",
}


class FlowController:
    """The levels' fair queues and the middleware over them, following the configuration objects."""

    def __init__(
        self, config: FlowControlConfig, *, metrics: FlowControlMetrics | None = None,
        object_count: ObjectCount | None = None,
    ) -> None:
        """``object_count``: the objects of a resource the server holds, for a LIST's estimate
        (without it a LIST takes one seat)."""
        self.config = config
        self.metrics = metrics if metrics is not None else FlowControlMetrics()
        self.configuration = bootstrap_configuration(config.total_concurrency)
        self.levels: dict[str, FairQueues[asyncio.Future[None]]] = {}
        self.demand: dict[str, DemandStats] = {}
        #: The exempt levels' seats in use, for their demand.
        self.exempt: dict[str, ExemptSeats] = {}
        #: The watches open, for a write's estimate (kube's watch tracker).
        self.watches = WatchCounts()
        self._object_count = object_count
        self._apply(self.configuration)

    def update(self, flow_schemas: Iterable[dict[str, Any]], priority_levels: Iterable[dict[str, Any]]) -> None:
        """Follow the objects as they are now (the schemas and levels of the next requests)."""
        self._apply(configuration(flow_schemas, priority_levels, total=self.config.total_concurrency))

    def _apply(self, new: Configuration) -> None:
        levels: dict[str, FairQueues[asyncio.Future[None]]] = {}
        exempt: dict[str, ExemptSeats] = {}
        now = time.monotonic()
        for name, level in new.levels.items():
            if level.limits is None:
                exempt[name] = self.exempt.get(name) or ExemptSeats(now)
                continue
            known = self.levels.get(name)
            # A level whose limits changed starts new queues (requests in the old ones finish
            # there) at the old current limit; a new level at kube's initial one.
            if known is None or known.limits != level.limits:
                current = level.bounds.initial if known is None else known.concurrency
                known = FairQueues(level.limits, wake=_wake, now=now)
                known.concurrency = current
            levels[name] = known
        # A level gone forgets its demand: configured again, it starts afresh (kube's new level state).
        self.demand = {name: stats for name, stats in self.demand.items() if name in new.levels}
        self.levels, self.exempt, self.configuration = levels, exempt, new
        self.adjust(time.monotonic())

    async def keep_adjusting(self, stop: asyncio.Event, *, period: float = ADJUSTMENT_SECONDS) -> None:
        """:meth:`adjust` every ``period`` seconds until ``stop`` (kube's ``updateBorrowing`` timer):
        the limits, and their metrics, follow the demand even while no request comes."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await stop.wait()
            if not stop.is_set():
                self.adjust(time.monotonic())

    def adjust(self, now: float) -> None:
        """kube's borrowing: each level's current limit from its seat demand since the last time."""
        names: list[str] = []
        items: list[Item] = []
        nominal_sum = 0
        for name, level in self.configuration.levels.items():
            queues, limits = self.levels.get(name), level.bounds
            nominal_sum += limits.nominal
            demand = queues.demand if queues is not None else self.exempt[name].demand
            stats = self.demand.setdefault(name, DemandStats())
            stats.update(demand.reset(now))
            lower = limits.current_lower(stats.high_watermark)
            items.append(Item(lower, limits.upper, max(lower, stats.smoothed)))
            names.append(name)
        allocations, _fair = allocate(nominal_sum, items)
        for name, item, share in zip(names, items, allocations, strict=True):
            current = go_round(share)
            queues, limits = self.levels.get(name), self.configuration.levels[name].bounds
            if queues is not None:
                queues.set_concurrency(current, now=now)
            self.metrics.note_limits(
                name, nominal=limits.nominal, lower=limits.lower, upper=limits.upper, current=current,
                target=item.target, demand=self.demand[name],
            )

    def classify(self, request: web.Request, user: UserInfo | None) -> Classification:
        info = request.get(REQUEST_INFO)
        name, groups = (ANONYMOUS, _ANONYMOUS_GROUPS) if user is None else (user.name, user.groups)
        if info is None:
            digest = RequestDigest(name, groups, request.method.lower(), False, path=request.path)
        else:
            digest = RequestDigest(
                name, groups, info.verb, info.is_resource, info.group, info.resource, info.subresource,
                info.namespace or "", "" if info.is_resource else info.path,  # a resource request matches by its parts
            )
        return self.configuration.classify(digest)

    def estimate(self, request: web.Request, found: Classification) -> WorkEstimate:
        """kube's work estimate of ``request`` in its level (and kube's samples of it)."""
        level = self.configuration.levels.get(found.level)
        estimate = request_estimate(
            request.get(REQUEST_INFO), request.query, objects=self._object_count, watches=self.watches.interested,
            level_max=0 if level is None else level.max_seats,
            observe_watches=lambda count: self.metrics.observe_watch_count(found, count),
        )
        self.metrics.observe_estimated_seats(found, estimate.max_seats)
        return estimate

    def middleware(
        self, *, user_key: web.RequestKey[UserInfo], not_counted: Callable[[web.Request], bool]
    ) -> Middleware:
        @web.middleware
        async def flow_control(request: web.Request, handler: Handler) -> web.StreamResponse:
            found = self.classify(request, request.get(user_key))
            request[CLASSIFICATION] = found
            if not_counted(request):
                return await handler(request)
            estimate = self.estimate(request, found)
            info = request.get(REQUEST_INFO)
            if info is not None and info.verb == "watch":
                return await self._watch(request, handler, self.seat(found, estimate, request=request))
            async with self.seat(found, estimate, request=request):
                return await handler(request)

        return flow_control

    async def _watch(self, request: web.Request, handler: Handler, seat: Seat) -> web.StreamResponse:
        """kube's watch in APF: its seats until it has started, counted while it lasts."""
        await seat.__aenter__()  # a 429 when its level has no room
        info = request[REQUEST_INFO]
        assert info is not None
        forget = self.watches.register(info, request.query)
        request[WATCH_STARTED] = seat.release
        try:
            return await handler(request)
        finally:
            seat.release()  # one that ended before it said it had started
            forget()

    def seat(self, found: Classification, estimate: WorkEstimate = ONE_SEAT, *, request: web.Request | None = None) -> Seat:
        return Seat(self, found, estimate, request)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # waiters are shielded: never cancelled
        waiter.set_result(None)


class Seat:
    """``async with``: the request's seats in its level for the duration of the block (and, for a
    write, its additional latency after it); :meth:`release` ends the block's hold early."""

    def __init__(
        self, controller: FlowController, found: Classification, estimate: WorkEstimate, request: web.Request | None
    ) -> None:
        self._controller = controller
        self.found = self._found = found
        self._estimate = estimate
        #: The HTTP request (for the debug dumps).
        self.request = request
        self._queues = controller.levels.get(found.level)
        self._exempt = controller.exempt.get(found.level)
        self._inqueue, self._executing, self._seats = controller.metrics.gauges(found)
        self._held = 0
        self._released = False

    async def __aenter__(self) -> None:
        queues, found = self._queues, self._found
        if queues is None:  # exempt
            self._executing.inc()
            self._held = self._estimate.max_seats
            self._seats.inc(self._held)
            if self._exempt is not None:
                self._exempt.take(self._held, now=time.monotonic())
            return
        started = time.perf_counter()
        now = time.monotonic()
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        outcome: Outcome | str = queues.offer(
            flow_hash(found.flow_schema, found.flow), waiter, now=now, estimate=self._estimate, about=self
        )
        if outcome is Outcome.QUEUED:
            self._inqueue.inc()
            try:
                outcome = await self._wait(queues, waiter)
            finally:
                self._inqueue.dec()
        executed = outcome is Outcome.EXECUTE
        self._controller.metrics.observe_wait(found, time.perf_counter() - started, executed=executed)
        if not executed:
            self._released = True
            self._reject(outcome.value if isinstance(outcome, Outcome) else outcome)
        self._executing.inc()
        self._held = queues.requests[waiter].seats
        self._seats.inc(self._held)

    async def _wait(self, queues: FairQueues[asyncio.Future[None]], waiter: asyncio.Future[None]) -> Outcome | str:
        try:
            async with asyncio.timeout(self._controller.config.queue_wait_seconds):
                await asyncio.shield(waiter)
        except TimeoutError:
            if not queues.withdraw(waiter, now=time.monotonic()):
                return Outcome.EXECUTE  # dispatched as the wait ran out: the seat is ours
            queues.timed_out += 1
            return "time-out"
        except asyncio.CancelledError:
            self._released = True
            if not queues.withdraw(waiter, now=time.monotonic()):
                self._hand_back()  # dispatched as the client left: hand the seat on
            else:
                queues.cancelled += 1
            self._controller.metrics.reject(self._found, "cancelled")
            raise
        return Outcome.EXECUTE

    async def __aexit__(self, *_exc: object) -> None:
        self.release()

    def release(self) -> None:
        """The request is done with its seats (once; later calls do nothing)."""
        if self._released:
            return
        self._released = True
        self._executing.dec()
        if self._queues is None:
            self._seats.dec(self._held)
            if self._exempt is not None:
                self._exempt.give_back(self._held, now=time.monotonic())
        else:
            self._hand_back()

    def _hand_back(self) -> None:
        assert self._queues is not None
        lingering = self._queues.finish(self._waiter, now=time.monotonic())
        if lingering > 0:  # kube's additional latency: the final seats stay taken a while
            asyncio.get_running_loop().call_later(lingering, self._end_lingering)
        else:
            self._seats.dec(self._held)

    def _end_lingering(self) -> None:
        assert self._queues is not None
        self._queues.release(self._waiter, now=time.monotonic())
        self._seats.dec(self._held)

    def _reject(self, reason: str) -> None:
        found = self._found
        self._controller.metrics.reject(found, reason)
        assert self._queues is not None
        seats = self._queues.concurrency
        raise errors.TooManyRequests(
            f"Too many requests, please try again later: priority level {found.level!r} "
            f"(flow schema {found.flow_schema!r}) is using all its {seats} seats and "
            f"{_REJECTED_BECAUSE.get(reason, reason)} ({reason}). Retry after the Retry-After "
            "seconds (kubectl and client-go do); an admin can raise the server's total with "
            "--max-requests-inflight and --max-mutating-requests-inflight, or the level's "
            f"nominalConcurrencyShares and queuing (kubectl edit prioritylevelconfiguration {found.level})",
            retry_after_seconds=RETRY_AFTER_SECONDS,
        )


async def add_flow_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: kube's APF response headers on every classified response."""
    found: Classification | None = request.get(CLASSIFICATION)
    if found is not None:
        response.headers[FLOW_SCHEMA_HEADER] = found.flow_schema_uid
        response.headers[PRIORITY_LEVEL_HEADER] = found.level_uid
