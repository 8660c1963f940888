"""The aiohttp middleware that holds each request to its priority level's seats.

In: the authenticated user and parsed request of each request (so it runs after
authentication), a :class:`FlowControlConfig`. Out: the request runs, waits its turn in its
level's fair queues, or is answered 429 TooManyRequests with ``Retry-After`` (a kube
``Status``); every classified response carries kube's ``X-Kubernetes-PF-FlowSchema-UID``
and ``X-Kubernetes-PF-PriorityLevel-UID`` headers. Requests ``not_counted`` says so of
(watches, other long-running requests, health checks) pass without taking a seat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from controlplane.apiserver import errors
from controlplane.apiserver.flowcontrol.levels import Classification, FlowControlConfig, Level, classify
from controlplane.apiserver.flowcontrol.metrics import FlowControlMetrics
from controlplane.apiserver.flowcontrol.queueing import FairQueues, LevelLimits, Outcome
from controlplane.apiserver.handlers import REQUEST_INFO
from controlplane.apiserver.identity import UserInfo

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: The request's :class:`Classification` (set by the middleware).
CLASSIFICATION: Final = web.RequestKey("flowcontrol_classification", Classification)
FLOW_SCHEMA_HEADER: Final = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_HEADER: Final = "X-Kubernetes-PF-PriorityLevel-UID"
RETRY_AFTER_SECONDS: Final = 1

_REJECTED_BECAUSE = {
    Outcome.QUEUE_FULL.value: "its queue is full",
    Outcome.CONCURRENCY_LIMIT.value: "it queues no request",
    "time-out": "the request waited its limit in the queue",
}


class FlowController:
    """The levels' fair queues and the middleware over them."""

    def __init__(self, config: FlowControlConfig, *, metrics: FlowControlMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else FlowControlMetrics()
        self.levels: dict[Level, FairQueues[asyncio.Future[None]]] = {
            level: FairQueues(LevelLimits(seats, config.queues, config.queue_length))
            for level, seats in config.seats().items()
        }

    def middleware(
        self, *, user_key: web.RequestKey[UserInfo], not_counted: Callable[[web.Request], bool]
    ) -> Middleware:
        @web.middleware
        async def flow_control(request: web.Request, handler: Handler) -> web.StreamResponse:
            info = request.get(REQUEST_INFO)
            user: UserInfo | None = request.get(user_key)
            found = classify(
                user, verb=info.verb if info else None, group=info.group if info else None,
                resource=info.resource if info else None,
            )
            request[CLASSIFICATION] = found
            if not_counted(request):
                return await handler(request)
            async with self.seat(found):
                return await handler(request)

        return flow_control

    def seat(self, found: Classification) -> _Seat:
        return _Seat(self, found)


class _Seat:
    """``async with``: a seat of the request's level for the duration of the block."""

    def __init__(self, controller: FlowController, found: Classification) -> None:
        self._controller = controller
        self._found = found
        self._queues = controller.levels.get(found.level)
        self._inqueue, self._executing = controller.metrics.gauges(found)

    async def __aenter__(self) -> None:
        queues, found = self._queues, self._found
        if queues is None:  # exempt
            self._executing.inc()
            return
        started = time.perf_counter()
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        outcome: Outcome | str = queues.offer(found.flow, waiter)
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
            if not queues.withdraw(self._found.flow, waiter):
                return Outcome.EXECUTE  # dispatched as the wait ran out: the seat is ours
            return "time-out"
        except asyncio.CancelledError:
            if not queues.withdraw(self._found.flow, waiter):
                self._release()  # dispatched as the client left: hand the seat on
            self._controller.metrics.reject(self._found, "cancelled")
            raise
        return Outcome.EXECUTE

    async def __aexit__(self, *_exc: object) -> None:
        self._executing.dec()
        if self._queues is not None:
            self._release()

    def _release(self) -> None:
        assert self._queues is not None
        following = self._queues.finish()
        if following is not None and not following.done():  # waiters are shielded: never cancelled
            following.set_result(None)

    def _reject(self, reason: str) -> None:
        found, config = self._found, self._controller.config
        self._controller.metrics.reject(found, reason)
        seats = self._controller.levels[found.level].limits.seats
        raise errors.TooManyRequests(
            f"Too many requests, please try again later: priority level {found.level.value!r} "
            f"(flow schema {found.flow_schema!r}) is serving its {seats} requests at once and "
            f"{_REJECTED_BECAUSE.get(reason, reason)} ({reason}). Retry after the Retry-After "
            "seconds (kubectl and client-go do); an admin can raise the server's total with "
            f"--max-requests-inflight (the levels share it by --flowcontrol-shares), the queues "
            f"with --flowcontrol-queue-length ({config.queue_length}) and "
            f"--flowcontrol-queue-wait-seconds ({config.queue_wait_seconds:g})",
            retry_after_seconds=RETRY_AFTER_SECONDS,
        )


async def add_flow_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: kube's APF response headers on every classified response."""
    found: Classification | None = request.get(CLASSIFICATION)
    if found is not None:
        response.headers[FLOW_SCHEMA_HEADER] = found.flow_schema_uid
        response.headers[PRIORITY_LEVEL_HEADER] = found.level_uid
