"""Every route of a real hub passes authentication, as every path of kube-apiserver passes its
authentication filter: credentials that fail are kube's 401 ``Unauthorized`` Status on each one, and a
request without credentials is 401 except on the paths the hub asks as ``system:anonymous`` (then
RBAC decides). The routes are read from the running hub, so a route added later is checked too; one
that must skip authentication has to be listed in :data:`UNAUTHENTICATED` with its reason."""

from __future__ import annotations

import re

import aiohttp
from aiohttp import hdrs, web

from controlplane.apis.constants import CA_PATH
from controlplane.apiserver.anonymous import ANONYMOUS_PATHS, MONITORING_PATHS, AnonymousPaths
from controlplane.hub import Hub
from controlplane.ui.serving import ui_anonymous_paths

#: (method, path pattern) of a route served without authentication, with the reason. None today: the
#: CA and the dashboard, once public, are authenticated too (anonymous without credentials).
UNAUTHENTICATED: dict[tuple[str, str], str] = {}
#: Paths a request without credentials asks as system:anonymous (with --anonymous-auth, the default).
ANONYMOUS = AnonymousPaths([CA_PATH, *ANONYMOUS_PATHS, *MONITORING_PATHS, *ui_anonymous_paths()])
_PLACEHOLDER = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")


def concrete(route: web.AbstractRoute) -> str:
    """A path the route matches: ``{tail:.+}`` and every other placeholder filled in."""
    info = route.resource.get_info() if route.resource is not None else {}
    pattern = str(info.get("path") or info.get("formatter") or "")
    return _PLACEHOLDER.sub(lambda m: "v1/namespaces" if m.group(1) == "tail" else "x", pattern)


async def status_of(session: aiohttp.ClientSession, method: str, url: str, token: str | None) -> tuple[int, dict[str, object]]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with session.request(method, url, headers=headers) as response:
        if method == hdrs.METH_HEAD or response.content_type != "application/json":
            return response.status, {}
        return response.status, await response.json()


async def test_every_route_authenticates(hub: Hub, session: aiohttp.ClientSession) -> None:
    routes = hub.routes
    assert len(routes) > 50, "the hub's routes were not found"
    checked = set()
    for route in routes:
        method = hdrs.METH_GET if route.method == hdrs.METH_ANY else route.method
        path = concrete(route)
        assert path.startswith("/"), route
        pattern = str(route.resource.canonical) if route.resource is not None else path
        if (method, pattern) in UNAUTHENTICATED or (method, path) in checked:
            continue
        checked.add((method, path))
        code, body = await status_of(session, method, hub.url + path, "not-a-token")
        assert code == 401, (method, path, code, body)
        if method != hdrs.METH_HEAD:
            assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401), (method, path, body)
        code, body = await status_of(session, method, hub.url + path, None)
        if ANONYMOUS.match(path):
            assert code != 401, (method, path, body)  # system:anonymous: RBAC decides
        else:
            assert code == 401, (method, path, code, body)
    served = {path for _, path in checked}
    # The paths this test is about are among those enumerated.
    assert {CA_PATH, "/ui", "/ui/x", "/metrics", "/debug/writes", "/healthz/x", "/openapi/v2"} <= served, served
