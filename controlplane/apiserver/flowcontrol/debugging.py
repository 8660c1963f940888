"""kube's ``/debug/api_priority_and_fairness/dump_priority_levels``: one line per priority level
(its active queues, waiting and executing requests, and the requests it dispatched, rejected, timed
out and saw cancelled), as kube's config controller prints it (Go's tabwriter over ``value,`` cells).
For members of ``system:masters`` only (admin tokens), as ``/debug/writes``: it names every level
and what waits in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.flowcontrol.dispatching import FlowController
from controlplane.apiserver.identity import SYSTEM_MASTERS, UserInfo

DUMP_PRIORITY_LEVELS: Final = "/debug/api_priority_and_fairness/dump_priority_levels"
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
            name, str(queues.active_queues), _go_bool(queues.executing == 0 and queues.waiting == 0), "false",
            str(queues.waiting), str(queues.executing), str(queues.dispatched), str(queues.rejected),
            str(queues.timed_out), str(queues.cancelled),
        ])
    return tab_written(rows)


def debug_routes(controller: FlowController, *, user_key: web.RequestKey[UserInfo]) -> list[web.RouteDef]:
    async def priority_levels(request: web.Request) -> web.Response:
        user = request.get(user_key)
        if user is None or SYSTEM_MASTERS not in user.groups:
            raise errors.Forbidden(f"only members of {SYSTEM_MASTERS} may read {DUMP_PRIORITY_LEVELS} (an admin token)")
        return web.Response(text=dump_priority_levels(controller), content_type="text/plain")

    return [web.get(DUMP_PRIORITY_LEVELS, priority_levels)]
