"""``/livez``, ``/readyz`` and ``/healthz``, answered as kube-apiserver does, for the hub and for a
simulated member.

kube-apiserver's health endpoints (k8s.io/apiserver ``pkg/server/healthz``) answer ``200 ok``
when every check passes; with ``?verbose`` one line per check (``[+]etcd ok``) and
``<endpoint> check passed``; on a failure ``500`` with every check listed whatever
``verbose`` says (``[-]etcd failed: reason withheld``) and ``<endpoint> check failed``;
``?exclude=<check>`` skips a check (``[+]etcd excluded: ok``) and warns about names that match
none; ``/<endpoint>/<check>`` answers for one check. The agent's probe
(:mod:`member_agent.probing`) reads exactly this format, so a simulated member behaves like a
real one when its API is unhealthy.

In: named asynchronous checks (an exception or a timeout is a failure) and which endpoint runs
which. Out: :func:`render_health` (pure) and :class:`HealthEndpoints`, served as routes (the hub:
``/<endpoint>`` is anyone's, as kube's ``system:public-info-viewer`` allows, ``/<endpoint>/<check>``
``system:monitoring``'s) or as a middleware in front of an application (a simulated member, where all
of them are public). Each check an endpoint runs is recorded for ``/metrics/slis``
(:mod:`.healthslis`) when given a place to record it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from controlplane.apiserver.healthslis import HealthcheckSLIs

#: kube-apiserver's endpoints, each with the checks it runs (by name, from the checks given).
ENDPOINTS: Mapping[str, tuple[str, ...]] = {
    "livez": ("ping", "log", "etcd"),
    "readyz": ("ping", "log", "etcd", "shutdown"),
    "healthz": ("ping", "log", "etcd"),
}
CHECK_TIMEOUT_SECONDS = 5.0
Check = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    error: str | None = None
    excluded: bool = False


def render_health(
    endpoint: str, results: Sequence[CheckResult], *, verbose: bool, unmatched_excludes: Sequence[str] = ()
) -> tuple[int, str]:
    """The HTTP status and body of ``/<endpoint>`` for these check results, in kube's format."""
    lines = []
    for result in results:
        if result.excluded:
            lines.append(f"[+]{result.name} excluded: ok")
        elif result.error is not None:
            lines.append(f"[-]{result.name} failed: reason withheld")
        else:
            lines.append(f"[+]{result.name} ok")
    if unmatched_excludes:
        quoted = ",".join(f'"{name}"' for name in unmatched_excludes)
        lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
    listing = "".join(f"{line}\n" for line in lines)
    if any(r.error is not None and not r.excluded for r in results):
        return 500, f"{listing}{endpoint} check failed\n"
    if not verbose:
        return 200, "ok"
    return 200, f"{listing}{endpoint} check passed\n"


async def _run(check: Check) -> str | None:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            await check()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # any failure of a check is that check failing
        return str(exc) or type(exc).__name__
    return None


class HealthEndpoints:
    """The health endpoints of one server: ``checks`` by name, and which endpoint runs which."""

    def __init__(
        self, checks: Mapping[str, Check], endpoints: Mapping[str, tuple[str, ...]] = ENDPOINTS,
        slis: HealthcheckSLIs | None = None,
    ) -> None:
        if missing := {name for names in endpoints.values() for name in names} - checks.keys():
            raise ValueError(f"health endpoints name checks that are not given: {sorted(missing)}")
        self._checks = checks
        self._endpoints = endpoints
        #: Where each check ``/<endpoint>`` runs is recorded (``/metrics/slis``), if anywhere.
        self._slis = slis

    async def answer(self, request: web.Request, endpoint: str, single: str = "") -> web.StreamResponse:
        """The answer of ``/<endpoint>`` (``single``: of ``/<endpoint>/<single>``)."""
        names = self._endpoints[endpoint]
        if single:
            if single not in names:
                return web.Response(status=404, text="404 page not found\n")
            error = await _run(self._checks[single])
            if error is not None:
                return web.Response(status=500, text=f"internal server error: {error}\n")
            return web.Response(text="ok")
        excluded = {name for value in request.query.getall("exclude", []) for name in value.split(",") if name}
        results = []
        for name in names:
            if name in excluded:
                results.append(CheckResult(name, excluded=True))
                continue
            result = CheckResult(name, await _run(self._checks[name]))
            if self._slis is not None:
                self._slis.observe(name, endpoint, passed=result.error is None)
            results.append(result)
        status, body = render_health(
            endpoint, results, verbose="verbose" in request.query, unmatched_excludes=sorted(excluded - set(names))
        )
        return web.Response(status=status, text=body, headers={"X-Content-Type-Options": "nosniff"})

    def routes(self) -> list[web.RouteDef]:
        """``GET /<endpoint>`` and ``GET /<endpoint>/<check>`` for each endpoint."""
        routes = []
        for endpoint in self._endpoints:
            routes.append(web.get(f"/{endpoint}", functools.partial(self._whole, endpoint=endpoint)))
            routes.append(web.get(f"/{endpoint}/{{check}}", functools.partial(self._single, endpoint=endpoint)))
        return routes

    async def _whole(self, request: web.Request, *, endpoint: str) -> web.StreamResponse:
        return await self.answer(request, endpoint)

    async def _single(self, request: web.Request, *, endpoint: str) -> web.StreamResponse:
        return await self.answer(request, endpoint, request.match_info["check"])

    def middleware(self) -> Middleware:
        """Serve the endpoints in front of the wrapped application, to anyone."""

        @web.middleware
        async def serve_health(request: web.Request, handler: Handler) -> web.StreamResponse:
            endpoint, _, single = request.path.strip("/").partition("/")
            if endpoint not in self._endpoints or request.method != "GET":
                return await handler(request)
            return await self.answer(request, endpoint, single)

        return serve_health
