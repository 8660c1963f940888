"""A simulated member's ``/livez``, ``/readyz`` and ``/healthz``, answered as kube-apiserver does.

kube-apiserver's health endpoints (k8s.io/apiserver ``pkg/server/healthz``) answer ``200 ok``
when every check passes; with ``?verbose`` one line per check (``[+]etcd ok``) and
``<endpoint> check passed``; on a failure ``500`` with every check listed whatever
``verbose`` says (``[-]etcd failed: reason withheld``) and ``<endpoint> check failed``;
``?exclude=<check>`` skips a check (``[+]etcd excluded: ok``) and warns about names that match
none; ``/<endpoint>/<check>`` answers for one check. The agent's probe
(:mod:`member_agent.probing`) reads exactly this format, so a simulated member behaves like a
real one when its API is unhealthy.

In: named asynchronous checks (an exception or a timeout is a failure). Out:
:func:`render_health` (pure) and :func:`health_middleware`, which serves the endpoints in
front of the member's API application (they need no credentials, as kube's
``system:public-info-viewer`` allows).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

#: The endpoints served, each with the checks it runs (by name, from the checks given).
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


def health_middleware(checks: Mapping[str, Check]) -> Middleware:
    """Serve :data:`ENDPOINTS` from ``checks`` (by name) in front of the wrapped application."""

    @web.middleware
    async def serve_health(request: web.Request, handler: Handler) -> web.StreamResponse:
        endpoint, _, single = request.path.strip("/").partition("/")
        names = ENDPOINTS.get(endpoint)
        if names is None or request.method != "GET":
            return await handler(request)
        if single:
            if single not in names:
                return web.Response(status=404, text="404 page not found\n")
            error = await _run(checks[single])
            if error is not None:
                return web.Response(status=500, text=f"internal server error: {error}\n")
            return web.Response(text="ok")
        excluded = {name for value in request.query.getall("exclude", []) for name in value.split(",") if name}
        results = [
            CheckResult(name, excluded=True) if name in excluded else CheckResult(name, await _run(checks[name]))
            for name in names
        ]
        status, body = render_health(
            endpoint, results, verbose="verbose" in request.query, unmatched_excludes=sorted(excluded - set(names))
        )
        return web.Response(status=status, text=body, headers={"X-Content-Type-Options": "nosniff"})

    return serve_health
