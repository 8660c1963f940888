"""kube's ``/debug/api_priority_and_fairness/`` dumps, as kube's config controller prints them (Go's
tabwriter over ``value,`` cells): ``dump_priority_levels``, one line per priority level (its active
queues -- those with requests waiting --, waiting and executing requests, and the requests it
dispatched, rejected, timed out and saw cancelled); ``dump_queues``, one line per queue (its waiting and executing requests, seats in use,
virtual dispatch time and the seats and work waiting); ``dump_requests``, one line per request
waiting or executing (its level, schema, queue, place in the queue (-1: executing), flow, arrival,
initial and final seats, additional latency and start; ``?includeRequestDetails=1`` adds the user and what it asks). Authorized as
kube authorizes them, as any non-resource path: the default policy grants them only to ``cluster-admin``
(they name every level and what waits in it); a ClusterRole with ``nonResourceURLs: ["/debug/*"]``
grants them to others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from aiohttp import web

from controlplane.apiserver.flowcontrol.dispatching import FlowController, Seat
from controlplane.apiserver.flowcontrol.queueing import Request
from controlplane.apiserver.identity import UserInfo
from controlplane.apiserver.requeststate import REQUEST_INFO

DUMP_PRIORITY_LEVELS: Final = "/debug/api_priority_and_fairness/dump_priority_levels"
DUMP_QUEUES: Final = "/debug/api_priority_and_fairness/dump_queues"
DUMP_REQUESTS: Final = "/debug/api_priority_and_fairness/dump_requests"
_QUEUE_HEADERS: Final = (
    "PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse", "NextDispatchR",
    "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum",
)
_REQUEST_HEADERS: Final = (
    "PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher", "ArriveTime",
    "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime",
)
_DETAIL_HEADERS: Final = (
    "UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource",
)
#: Go's zero ``time.Time`` in RFC 3339: the start of a request still waiting.
_GO_ZERO_TIME: Final = "0001-01-01T00:00:00Z"
_HEADERS: Final = (
    "PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests", "ExecutingRequests",
    "DispatchedRequests", "RejectedRequests", "TimedoutRequests", "CancelledRequests",
)


def tab_written(rows: Sequence[Sequence[str]]) -> str:
    """Go's ``tabwriter.NewWriter(w, 8, 0, 1, ' ', 0)`` over lines of ``value,<TAB>`` cells."""
    cells = [[f"{value}," for value in row] for row in rows]
    widths = [max(8, max(len(row[i]) for row in cells) + 1) for i in range(len(cells[0]))] if cells else []
    return "".join("".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + "\n" for row in cells)


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def dump_priority_levels(controller: FlowController) -> str:
    rows: list[list[str]] = [list(_HEADERS)]
    for name in sorted(controller.configuration.levels):
        queues = controller.levels.get(name)
        if queues is None:
            rows.append([name, *(["<none>"] * (len(_HEADERS) - 1))])
            continue
        rows.append([
            name, str(sum(1 for queue in queues.queues if queue.waiting)), _go_bool(queues.executing == 0 and queues.waiting == 0), "false",
            str(queues.waiting), str(queues.executing), str(queues.dispatched), str(queues.rejected),
            str(queues.timed_out), str(queues.cancelled),
        ])
    return tab_written(rows)


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` below a minute: ``0s``, ``5ms``, ``7.5ms``, ``1.5s``."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    for unit, size in (("s", 10**9), ("ms", 10**6), ("µs", 10**3), ("ns", 1)):
        if nanos >= size or unit == "ns":
            whole, rest = divmod(nanos, size)
            digits = len(str(size)) - 1
            fraction = f"{rest:0{digits}d}".rstrip("0") if digits else ""
            return f"{whole}.{fraction}{unit}" if fraction else f"{whole}{unit}"
    raise AssertionError("unreachable")


def seat_seconds(value: float) -> str:
    """kube's ``SeatSeconds.String``: eight decimals and ``ss``."""
    return f"{value:.8f}ss"


def dump_queues(controller: FlowController) -> str:
    rows: list[list[str]] = [list(_QUEUE_HEADERS)]
    for name in sorted(controller.configuration.levels):
        level = controller.levels.get(name)
        if level is None:
            rows.append([name, *(["<none>"] * (len(_QUEUE_HEADERS) - 1))])
            continue
        for queue in level.queues if level.limits.queue_length > 0 else ():  # a Reject level has none
            rows.append([
                name, str(queue.index), str(len(queue.waiting)), str(queue.executing), str(queue.seats_in_use),
                seat_seconds(queue.next_dispatch_r), str(queue.waiting_initial_seats), str(queue.waiting_seats),
                seat_seconds(queue.waiting_work),
            ])
    return tab_written(rows)


def _go_time(monotonic: float, *, now: float, wall: float) -> str:
    """A monotonic time as Go's ``time.RFC3339Nano`` in UTC."""
    moment = datetime.fromtimestamp(wall - (now - monotonic), UTC)
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def _details(seat: Seat | None, user_key: web.RequestKey[UserInfo] | None) -> list[str]:
    request = seat.request if seat is not None else None
    info = request.get(REQUEST_INFO) if request is not None else None
    user = request.get(user_key) if request is not None and user_key is not None else None
    if info is None:
        return [getattr(user, "name", ""), "", request.path if request is not None else "", "", "", "", "", ""]
    version = f"{info.group}/{info.version}" if info.group else info.version
    return [
        getattr(user, "name", ""), info.verb, info.path, info.namespace or "", info.name or "", version,
        info.resource, info.subresource,
    ]


def dump_requests(
    controller: FlowController, *, details: bool, user_key: web.RequestKey[UserInfo] | None = None
) -> str:
    headers = [*_REQUEST_HEADERS, *(_DETAIL_HEADERS if details else ())]
    rows: list[list[str]] = [headers]
    now, wall = time.monotonic(), time.time()

    def row(level: str, queue: int, place: int, request: Request[Any]) -> list[str]:
        seat = request.about if isinstance(request.about, Seat) else None
        found = seat.found if seat is not None else None
        started = _go_time(request.started, now=now, wall=wall) if request.running else _GO_ZERO_TIME
        cells = [
            level, found.flow_schema if found else "", str(queue), str(place), found.flow if found else "",
            _go_time(request.arrived, now=now, wall=wall), str(request.estimate.initial_seats),
            str(request.estimate.final_seats), go_duration(request.estimate.additional_latency), started,
        ]
        return cells + (_details(seat, user_key) if details else [])

    for name in sorted(controller.configuration.levels):
        level = controller.levels.get(name)
        if level is None:
            continue
        running = level.executing_requests()
        for queue in level.queues if level.limits.queue_length > 0 else ():
            rows += [row(name, queue.index, place, r) for place, r in enumerate(queue.waiting)]
            rows += [row(name, queue.index, -1, r) for r in running.get(queue.index, ())]
        rows += [row(name, -1, -1, r) for r in running.get(-1, ())]
    return tab_written(rows)


def debug_routes(controller: FlowController, *, user_key: web.RequestKey[UserInfo]) -> list[web.RouteDef]:
    """The three dumps. The API server authorizes them as any non-resource path (``get``), so the
    default policy lets only ``cluster-admin`` read them, as kube's."""

    def dump_route(path: str, dump: Callable[[web.Request], str]) -> web.RouteDef:
        async def serve(request: web.Request) -> web.Response:
            return web.Response(text=dump(request), content_type="text/plain")

        return web.get(path, serve)

    return [
        dump_route(DUMP_PRIORITY_LEVELS, lambda _request: dump_priority_levels(controller)),
        dump_route(DUMP_QUEUES, lambda _request: dump_queues(controller)),
        dump_route(DUMP_REQUESTS, lambda request: dump_requests(
            controller, details=bool(request.query.get("includeRequestDetails")), user_key=user_key,
        )),
    ]
