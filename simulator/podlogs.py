"""Pod logs of a simulated member (``GET /api/v1/namespaces/<ns>/pods/<name>/log``).

A running simulated container writes one line every :data:`LINE_INTERVAL` simulated seconds
from its pod's ``status.startTime``; line ``i`` is a pure function of the pod, the container
and ``i`` (:func:`log_line`), so a log read twice reads the same. The query parameters follow
kube's ``PodLogOptions``: ``container`` (required when the pod has several), ``tailLines``,
``sinceSeconds``, ``timestamps`` and ``follow`` (new lines are streamed as the simulated clock
reaches them, until the client leaves or the pod is deleted). Errors are kube's: 404 for an
unknown pod, 400 for a missing or unknown container or a malformed option.

The simulator also records who called it (:class:`CallerLog`), so tests can tell the hub's
proxied requests (impersonating hub users through the agent) from anything else.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from controlplane.apis.impersonation import extra_of_headers
from controlplane.objectclient import ObjectClient, errors
from simulator.clock import Clock, parse_rfc3339, rfc3339

#: Simulated seconds between two log lines of a running container.
LINE_INTERVAL = 1.0
#: The most lines one non-following read returns (kube has no such cap; a bound on our memory).
MAX_LINES = 100_000
CALLER_LOG_SIZE = 512


def log_line(pod: str, container: str, index: int, at: float, *, timestamps: bool) -> str:
    """Line ``index`` of a container's log, written at simulated time ``at``."""
    step = index + 1
    loss = 2.5 / (1 + step / 50)
    text = f"[{container}] step {step}: loss={loss:.4f} pod={pod}"
    return f"{rfc3339(at)} {text}" if timestamps else text


def line_range(start: float, now: float, *, tail: int | None, since: float | None) -> range:
    """The indexes of the lines written by ``now`` (from ``since`` on, the last ``tail``) for a
    container started at ``start``."""
    if now < start:
        return range(0)
    count = int((now - start) // LINE_INTERVAL) + 1
    first = 0
    if since is not None:
        first = max(0, int(-(-(since - start) // LINE_INTERVAL)))
    if tail is not None:
        first = max(first, count - tail)
    first = max(first, count - MAX_LINES)
    return range(first, count)


def _int_option(query: Mapping[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise errors.BadRequest(f"{name}: invalid value {raw!r}: must be an integer") from None
    if value < 0 or (name == "sinceSeconds" and value == 0):
        raise errors.BadRequest(f"{name}: invalid value {raw!r}: must be {'positive' if name == 'sinceSeconds' else 'non-negative'}")
    return value


def container_of(pod: Mapping[str, Any], wanted: str | None) -> str:
    """The container a log request reads, as kube picks it (or its 400)."""
    name = (pod.get("metadata") or {}).get("name", "")
    containers = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if wanted:
        if wanted not in containers:
            raise errors.BadRequest(f"container {wanted} is not valid for pod {name}")
        return wanted
    if len(containers) == 1:
        return containers[0]
    raise errors.BadRequest(
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
    )


class PodLogs:
    def __init__(self, objects: ObjectClient, clock: Clock, stop: asyncio.Event) -> None:
        self.objects = objects
        self.clock = clock
        self.stop = stop
        self._pods = objects.registry.require("v1", "Pod")

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/api/v1/namespaces/{namespace}/pods/{name}/log", self.log)]

    async def _pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.objects.get(self._pods, namespace=namespace, name=name)
        except errors.NotFound:
            return None

    async def log(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        query = request.query
        tail, since = _int_option(query, "tailLines"), _int_option(query, "sinceSeconds")
        follow = query.get("follow") in ("1", "true")
        timestamps = query.get("timestamps") in ("1", "true")
        pod = await self._pod(namespace, name)
        if pod is None:
            raise errors.NotFound(f'pods "{name}" not found', target=errors.Target(name=name, kind="pods"))
        container = container_of(pod, query.get("container"))
        start = parse_rfc3339((pod.get("status") or {}).get("startTime"))
        if start is None:
            raise errors.BadRequest(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        now = self.clock.now()
        lines = line_range(start, now, tail=tail, since=None if since is None else now - since)
        next_index = lines.stop
        await self._write(response, name, container, start, lines, timestamps)
        while follow and not self.stop.is_set():
            await self.clock.sleep_until(start + next_index * LINE_INTERVAL, self.stop)
            if await self._pod(namespace, name) is None:
                break
            now_index = line_range(start, self.clock.now(), tail=None, since=None).stop
            await self._write(response, name, container, start, range(next_index, now_index), timestamps)
            next_index = max(next_index, now_index)
        await response.write_eof()
        return response

    async def _write(
        self, response: web.StreamResponse, pod: str, container: str, start: float, lines: range, timestamps: bool
    ) -> None:
        batch: list[str] = []
        for index in lines:
            batch.append(log_line(pod, container, index, start + index * LINE_INTERVAL, timestamps=timestamps))
            if len(batch) >= 1000:
                await response.write(("\n".join(batch) + "\n").encode())
                batch.clear()
        if batch:
            await response.write(("\n".join(batch) + "\n").encode())


class CallerLog:
    """The most recent callers of the member API: peer address and impersonation (user, groups, uid
    and extra, its keys unescaped as kube-apiserver reads them)."""

    def __init__(self, size: int = CALLER_LOG_SIZE) -> None:
        self.entries: collections.deque[dict[str, Any]] = collections.deque(maxlen=size)

    def middleware(self) -> Middleware:
        @web.middleware
        async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
            peer = request.transport.get_extra_info("peername") if request.transport else None
            self.entries.append({
                "peer": f"{peer[0]}:{peer[1]}" if peer else "",
                "method": request.method,
                "path": request.path,
                "impersonateUser": request.headers.get("Impersonate-User", ""),
                "impersonateGroups": request.headers.getall("Impersonate-Group", []),
                "impersonateUid": request.headers.get("Impersonate-Uid", ""),
                "impersonateExtra": extra_of_headers(request.headers.items()),
            })
            return await handler(request)

        return record

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/debug/gpufed/callers", self.serve)]

    async def serve(self, _request: web.Request) -> web.StreamResponse:
        return web.json_response({"callers": list(self.entries)})
