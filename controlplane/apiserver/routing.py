"""From an HTTP method and path to what the request asks for, as kube-apiserver reads it.

``/apis/apps/v1/namespaces/default/deployments/web/status`` with PATCH becomes
``RequestInfo(verb="patch", group="apps", version="v1", namespace="default",
resource="deployments", name="web", subresource="status")``; ``/version`` or
``/apis/apps/v1`` become non-resource requests. Authorization and the handlers both
use this one parse. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controlplane.apiserver.queryparams import watch_asked

#: Subresources of a namespace (so /api/v1/namespaces/x/status is not a list of "status").
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
#: Subresources whose upgraded (WebSocket) GET kube authorizes as ``create``, like their SPDY POST.
_STREAMING_SUBRESOURCES = frozenset({"exec", "attach", "portforward"})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    path: str
    #: get, list, watch, create, update, patch, delete, deletecollection ("" for other methods);
    #: for non-resource requests the lower-cased HTTP method.
    verb: str
    is_resource: bool
    group: str = ""
    version: str = ""
    namespace: str | None = None
    resource: str = ""
    name: str | None = None
    subresource: str = ""


_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def is_upgrade(headers: Mapping[str, str]) -> bool:
    """Whether a request asks to switch protocols (a WebSocket or SPDY upgrade)."""
    connection = {token.strip().lower() for token in headers.get("Connection", "").split(",")}
    return "upgrade" in connection and bool(headers.get("Upgrade"))


def parse_request(method: str, path: str, query: Mapping[str, str], *, upgrade: bool = False) -> RequestInfo:
    """``upgrade``: the request asks to switch protocols; through ``clusters/proxy`` and on
    ``pods/exec``, ``attach`` and ``portforward`` that is ``create`` whatever the method, as kube
    authorizes a WebSocket ``GET`` of ``pods/exec`` like its SPDY ``POST``."""
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return _non_resource(method, path)
    if parts[0] == "api":
        if len(parts) < 3:
            return _non_resource(method, path)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return _non_resource(method, path)
        group, version, rest = parts[1], parts[2], parts[3:]

    # kube's deprecated /watch/ paths (/api/v1/watch/namespaces/ns/pods[/name]): a watch of the
    # same resource whatever the query says, as kube's request info reads its "special verb".
    legacy_watch = rest[0] == "watch"
    if legacy_watch:
        if len(rest) < 2:
            return RequestInfo(path, "", True, group, version)
        rest = rest[1:]
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
        else:
            # The namespace object itself: /api/v1/namespaces/<name>[/status].
            rest = ["namespaces", rest[1], *rest[2:]]
            namespace = None
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3 and subresource == "proxy" and not legacy_watch:
        # A proxy subresource takes the rest of the path as its own (kube's pods/proxy/<path>);
        # the verb comes from the method alone.
        verb = "create" if upgrade else _proxy_verb(method)
        return RequestInfo(path, verb, True, group, version, namespace, resource, name, subresource)
    if len(rest) > 3:
        # Deeper paths do not exist; an empty verb makes the handler answer 404.
        return RequestInfo(path, "", True, group, version, namespace, resource, name, "/".join(rest[2:]))

    if legacy_watch:
        verb = "watch" if method in ("GET", "HEAD") and not subresource else ""
    elif upgrade and subresource in _STREAMING_SUBRESOURCES:
        verb = "create"
    elif method in ("GET", "HEAD") and name is not None:
        verb = "get"
    elif method in ("GET", "HEAD"):
        verb = "watch" if watch_asked(query) else "list"
    elif method == "DELETE":
        verb = "delete" if name is not None else "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, "")
    return RequestInfo(path, verb, True, group, version, namespace, resource, name, subresource)


def _non_resource(method: str, path: str) -> RequestInfo:
    return RequestInfo(path=path, verb=method.lower(), is_resource=False)


def _proxy_verb(method: str) -> str:
    if method in ("GET", "HEAD"):
        return "get"
    if method == "DELETE":
        return "delete"
    return _METHOD_VERBS.get(method, method.lower())


def authorized_namespace(info: RequestInfo) -> str | None:
    """The namespace kube's request info gives a request to authorize: a namespace's own
    (``/api/v1/namespaces/<name>``, its ``status`` and ``finalize``) is in itself, so a RoleBinding
    in a namespace may grant rights on that namespace; any other request's is its path's."""
    if info.is_resource and info.group == "" and info.resource == "namespaces" and info.name is not None:
        return info.name
    return info.namespace
