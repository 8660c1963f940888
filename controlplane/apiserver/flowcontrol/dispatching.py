"""The aiohttp middleware that holds each request to its priority level's seats.

In: the authenticated user and parsed request of each request (so it runs after
authentication), a :class:`FlowControlConfig` and the FlowSchema and PriorityLevelConfiguration
objects (:meth:`FlowController.update`, kept by :mod:`.configuring`). Out: the request runs, waits its turn in its
level's fair queues, or is answered 429 TooManyRequests with ``Retry-After`` (a kube
``Status``); every classified response carries kube's ``X-Kubernetes-PF-FlowSchema-UID``
and ``X-Kubernetes-PF-PriorityLevel-UID`` headers. Requests ``not_counted`` says so of
(watches, other long-running requests, health checks) pass without taking a seat.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from controlplane.apiserver import errors
from controlplane.apiserver.flowcontrol.borrowing import (
    ADJUSTMENT_SECONDS,
    DemandStats,
    Item,
    allocate,
    go_round,
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
from controlplane.apiserver.handlers import REQUEST_INFO
from controlplane.apiserver.identity import ANONYMOUS, UNAUTHENTICATED, UserInfo

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

    def __init__(self, config: FlowControlConfig, *, metrics: FlowControlMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else FlowControlMetrics()
        self.configuration = bootstrap_configuration(config.total_concurrency)
        self.levels: dict[str, FairQueues[asyncio.Future[None]]] = {}
        self.demand: dict[str, DemandStats] = {}
        self._adjusted = time.monotonic()
        self._apply(self.configuration)

    def update(self, flow_schemas: Iterable[dict[str, Any]], priority_levels: Iterable[dict[str, Any]]) -> None:
        """Follow the objects as they are now (the schemas and levels of the next requests)."""
        self._apply(configuration(flow_schemas, priority_levels, total=self.config.total_concurrency))

    def _apply(self, new: Configuration) -> None:
        levels: dict[str, FairQueues[asyncio.Future[None]]] = {}
        for name, level in new.levels.items():
            if level.limits is None:
                continue
            known = self.levels.get(name)
            # A level whose limits changed starts new queues; requests in the old ones finish there.
            if known is None or known.limits != level.limits:
                known = FairQueues(level.limits, wake=_wake, now=time.monotonic())
            levels[name] = known
        self.levels, self.configuration = levels, new
        self.adjust(time.monotonic())

    def adjust(self, now: float) -> None:
        """kube's borrowing: each level's current limit from its seat demand since the last time."""
        self._adjusted = now
        names: list[str] = []
        items: list[Item] = []
        nominal_sum = 0
        for name, level in self.configuration.levels.items():
            queues, limits = self.levels.get(name), level.bounds
            nominal_sum += limits.nominal
            upper = math.inf if limits.upper is None else limits.upper
            if queues is None:  # exempt: its demand is not counted, its own seats are kept
                items.append(Item(limits.lower, max(upper, limits.lower), limits.lower))
            else:
                stats = self.demand.setdefault(name, DemandStats())
                stats.update(*queues.demand.reset(now))
                items.append(Item(limits.lower, upper, max(limits.lower, stats.smoothed)))
            names.append(name)
        allocations, _fair = allocate(nominal_sum, items)
        for name, item, share in zip(names, items, allocations, strict=True):
            current = go_round(share)
            queues, limits = self.levels.get(name), self.configuration.levels[name].bounds
            if queues is not None:
                queues.set_concurrency(current, now=now)
            self.metrics.note_limits(
                name, nominal=limits.nominal, lower=limits.lower, current=current, target=item.target,
                upper=nominal_sum if limits.upper is None else limits.upper,
                demand=self.demand.get(name) if queues is not None else None,
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

    def middleware(
        self, *, user_key: web.RequestKey[UserInfo], not_counted: Callable[[web.Request], bool],
        seats: Callable[[web.Request], int] | None = None,
    ) -> Middleware:
        """``seats``: the width of a request (kube's work estimate), one seat without it."""

        @web.middleware
        async def flow_control(request: web.Request, handler: Handler) -> web.StreamResponse:
            found = self.classify(request, request.get(user_key))
            request[CLASSIFICATION] = found
            if not_counted(request):
                return await handler(request)
            async with self.seat(found, 1 if seats is None else seats(request), request=request):
                return await handler(request)

        return flow_control

    def seat(self, found: Classification, seats: int = 1, *, request: web.Request | None = None) -> Seat:
        return Seat(self, found, seats, request)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # waiters are shielded: never cancelled
        waiter.set_result(None)


class Seat:
    """``async with``: a seat of the request's level for the duration of the block."""

    def __init__(
        self, controller: FlowController, found: Classification, seats: int, request: web.Request | None
    ) -> None:
        self._controller = controller
        self.found = self._found = found
        self._seats = seats
        #: The HTTP request (for the debug dumps).
        self.request = request
        self._queues = controller.levels.get(found.level)
        self._inqueue, self._executing = controller.metrics.gauges(found)

    async def __aenter__(self) -> None:
        queues, found = self._queues, self._found
        if queues is None:  # exempt
            self._executing.inc()
            return
        started = time.perf_counter()
        now = time.monotonic()
        if now - self._controller._adjusted >= ADJUSTMENT_SECONDS:
            self._controller.adjust(now)
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        outcome: Outcome | str = queues.offer(
            flow_hash(found.flow_schema, found.flow), waiter, now=now, seats=self._seats, about=self
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
            self._reject(outcome.value if isinstance(outcome, Outcome) else outcome)
        self._executing.inc()

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
            if not queues.withdraw(waiter, now=time.monotonic()):
                self._release()  # dispatched as the client left: hand the seat on
            else:
                queues.cancelled += 1
            self._controller.metrics.reject(self._found, "cancelled")
            raise
        return Outcome.EXECUTE

    async def __aexit__(self, *_exc: object) -> None:
        self._executing.dec()
        if self._queues is not None:
            self._release()

    def _release(self) -> None:
        assert self._queues is not None
        self._queues.finish(self._waiter, now=time.monotonic())

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
