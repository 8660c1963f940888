"""Which requests kube-apiserver's filters treat apart: the long-running ones and the health checks.

In: a request (its path, and the RequestInfo the middleware keeps on it). Out: the predicates
the request-deadline, in-flight and priority-and-fairness middlewares are given.

kube's long-running check (``BasicLongRunningRequestCheck``) is a resource request that is a
watch or asks for a streaming subresource. Its request deadline (``WithRequestDeadline``) and
timeout leave out those alone: a health check is bounded, and its ``timeout`` query parameter
read, as any request's. Its in-flight limit leaves out the long-running requests and, as its
``probes`` FlowSchema is exempt, the health checks too; priority and fairness counts a watch
while it starts.
"""

from __future__ import annotations

from aiohttp import web

from controlplane.apiserver.requeststate import REQUEST_INFO

#: The health checks: not counted by flow control. They are authenticated as any other path.
HEALTH_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
#: Subresources kube counts as long-running (not in the in-flight limit): proxied streams and
#: the agents' tunnels that carry them.
_LONG_RUNNING_SUBRESOURCES = frozenset({"proxy", "tunnel", "log", "exec", "attach", "portforward"})


def long_running(request: web.Request) -> bool:
    """kube's long-running request: a watch or a streaming subresource (no deadline)."""
    return _is_watch(request) or _streaming(request)


def long_running_or_health(request: web.Request) -> bool:
    """What kube's in-flight limit leaves out: watches (long-running) and health checks."""
    return long_running(request) or request.path in HEALTH_PATHS


def long_running_not_watch_or_health(request: web.Request) -> bool:
    """What kube's APF leaves out: long-running requests but watches (a watch takes seats while it
    starts), and health checks."""
    return request.path in HEALTH_PATHS or _streaming(request)


def _streaming(request: web.Request) -> bool:
    info = request.get(REQUEST_INFO)
    return info is not None and info.subresource in _LONG_RUNNING_SUBRESOURCES


def _is_watch(request: web.Request) -> bool:
    info = request.get(REQUEST_INFO)
    return info is not None and info.verb == "watch"
