"""The member agent's client of a hollow member: a :class:`KubeTransport` without the HTTP hop.

The seam: the agent reaches its member only through :class:`member_agent.kubeapi.KubeTransport`,
whose verbs, ``list_all``, discovery and ``version`` are built on three transport calls (a JSON
request, a plain-text GET, a watch stream). :class:`HollowKubeApi` answers those three by routing
a request by method and path to a :class:`~simulator.hollow.member.HollowMember` in the same
process instead of sending it. Everything above them is the real agent: informers, applier,
status passes, reports, leases, and every request it makes to the hub over HTTPS. Answers are
serialized and parsed as they would be off the wire (so the agent never shares an object
with the member), errors are Kubernetes ``Status`` bodies turned into the agent's
:class:`ApiError` classes by the agent's own :func:`error_from_status`. Discovery is kube's:
``/api`` (APIVersions), ``/apis`` (APIGroupList) and each served version's APIResourceList, from
which the agent lists the member's ``status.apiEnablements``.

A watch of one object is served as kube serves it: a collection watch with
``fieldSelector=metadata.name=x``, or the deprecated ``/watch/`` path of the object
(``/api/v1/watch/namespaces/ns/pods/x``), which is the same watch (a field selector that names
another object is kube's 400).

Label and field selectors are parsed as the hub parses them (:mod:`controlplane.apis.kube.selectors`,
set-based requirements and escaped characters included; kube's 400 in its words for one that does
not parse). Field selectors take each kind's field labels as the hub serves them
(:mod:`controlplane.apis.kube.fieldlabels`: a Pod's ``spec.nodeName``, ``status.phase`` ..., and
kube's 400 for another field). What is left out: the member's HTTP server, TLS and
authentication, and paging (a LIST answers in one page, as kube-apiserver's watch cache does).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, NamedTuple

import orjson

from controlplane.apis.bookmarks import next_bookmark
from controlplane.apis.kube.fieldlabels import FieldGetter, refusal
from controlplane.apis.kube.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    of_named_object,
    parse_field_selector,
    parse_label_selector,
)
from member_agent.apierrors import error_from_status
from member_agent.kubeapi import APPLY_PATCH, KubeTransport, Request
from simulator.hollow.member import SERVED, HollowError, HollowMember, kind_of
from simulator.hollow.watching import Expired, field_labels

#: Health endpoints answered "ok" (the hollow member is up while its process runs).
HEALTH = frozenset({"/readyz", "/livez", "/healthz"})
#: The values a boolean query parameter is true with (as kube-apiserver reads them).
TRUE = frozenset({"1", "true", "True"})


def _wire(obj: Any) -> dict[str, Any]:
    """``obj`` as the client gets it off the wire: a fresh copy."""
    answer: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return answer


def _bookmark(api_version: str, kind: str, revision: int) -> dict[str, Any]:
    """A BOOKMARK event as kube sends it: an object of the watched kind with only its resourceVersion."""
    return {"type": "BOOKMARK", "object": {"apiVersion": api_version, "kind": kind,
                                           "metadata": {"resourceVersion": str(revision)}}}


def _no_resource() -> HollowError:
    """kube-apiserver's answer to a path where it serves no resource (a kind this member does not serve)."""
    return HollowError(404, "NotFound", "the server could not find the requested resource")


def _raise(error: HollowError) -> None:
    raise error_from_status(error.code, orjson.dumps(error.status()))


def discovery(api_version: str) -> dict[str, Any] | None:
    served = SERVED.get(api_version)
    if served is None:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version, "resources": [
        {"name": plural, "kind": kind, "namespaced": namespaced, "singularName": kind.lower(),
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
        for plural, kind, namespaced in served]}


def versions() -> dict[str, Any]:
    """``/api``: the core group's versions (kube's ``APIVersions``)."""
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}


def groups() -> dict[str, Any]:
    """``/apis``: the named groups the member serves (kube's ``APIGroupList``)."""
    by_group: dict[str, list[str]] = {}
    for api_version in SERVED:
        if "/" in api_version:
            group, _, version = api_version.partition("/")
            by_group.setdefault(group, []).append(version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": group,
                "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in found],
                "preferredVersion": {"groupVersion": f"{group}/{found[0]}", "version": found[0]},
            }
            for group, found in sorted(by_group.items())
        ],
    }


class ResourcePath(NamedTuple):
    collection: str
    namespace: str | None
    name: str | None
    #: One of kube's deprecated ``/watch/`` paths (``/api/v1/watch/namespaces/ns/pods/x``).
    legacy_watch: bool = False


def parse_path(path: str, *, watch: bool = False) -> ResourcePath | None:
    """The collection, namespace and name of a resource path; None when it is not one. With
    ``watch``, the path may also be a deprecated ``/watch/`` path (of the same resource)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        api_version, rest = parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    legacy_watch = watch and rest[:1] == ["watch"]
    if legacy_watch:
        rest = rest[1:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 2:
        return None
    return ResourcePath(f"{api_version}/{rest[0]}", namespace, rest[1] if len(rest) == 2 else None, legacy_watch)


class HollowKubeApi(KubeTransport):
    """A :class:`KubeTransport` whose requests a :class:`HollowMember` answers in-process."""

    def __init__(self, member: HollowMember, *, timeout: float = 30.0) -> None:
        # No ApiClient: nothing is sent. The agent's proxy tunnel (which needs one) is not
        # offered by a hollow fleet.
        super().__init__(timeout=timeout)
        self.member = member
        self.requests = 0

    @property
    def server(self) -> str:
        return f"hollow://{self.member.name}"

    async def _text(self, request: Request) -> tuple[int, str]:
        self.requests += 1
        return (200, "ok") if request.path in HEALTH else (404, "404 page not found")

    async def _exchange(self, request: Request) -> dict[str, Any]:
        self.requests += 1
        await asyncio.sleep(0)  # a request yields to the loop, as a real one does
        try:
            return self._answer(request.method, request.path, dict(request.query), request.body, request.content_type)
        except HollowError as exc:
            _raise(exc)
            raise  # unreachable: _raise always raises

    def _answer(self, method: str, path: str, query: dict[str, Any], body: Any, content_type: str) -> dict[str, Any]:
        member = self.member
        if method == "GET" and path == "/version":
            return {"gitVersion": member.kubernetes_version, "major": "1", "platform": "linux/amd64"}
        if method == "GET" and path in ("/api", "/apis"):
            return versions() if path == "/api" else groups()
        if method == "GET" and path.startswith(("/api/", "/apis/")):
            api_version = path.removeprefix("/api/").removeprefix("/apis/").strip("/")
            if api_version.count("/") <= 1 and ("/" in api_version) == path.startswith("/apis/"):
                document = discovery(api_version)
                if document is None:
                    raise _no_resource()
                return document
        parsed = parse_path(path)
        if parsed is None or kind_of(parsed[0]) is None:
            raise _no_resource()
        collection, namespace, name, _ = parsed
        ns = namespace or ""
        if name is None:
            if method == "GET":
                return self._list(
                    collection, namespace, _labels(query.get("labelSelector")),
                    _fields(query.get("fieldSelector"), collection),
                )
            if method == "POST":
                return _wire(member.create(collection, ns, body or {}))
        elif method == "GET":
            return _wire(member.get(collection, ns, name))
        elif method == "PATCH" and content_type == APPLY_PATCH:
            return _wire(member.apply(collection, ns, name, body or {}))
        elif method == "PATCH":
            raise HollowError(415, "UnsupportedMediaType", f"the hollow member takes only {APPLY_PATCH} patches")
        elif method == "PUT":
            return _wire(member.replace(collection, ns, name, body or {}))
        elif method == "DELETE":
            return _wire(member.delete(collection, ns, name))
        raise HollowError(405, "MethodNotAllowed", f"{method} is not supported on {path}")

    def _list(
        self, collection: str, namespace: str | None, labels: LabelSelector, fields: FieldSelector
    ) -> dict[str, Any]:
        items = self.member.page(collection, namespace, 0, self.member.count(collection))  # fresh copies
        if not (labels.empty and fields.empty):
            items = [i for i in items if fields.matches(i) and labels.matches((i.get("metadata") or {}).get("labels"))]
        return {"kind": "List", "apiVersion": "v1", "items": items,
                "metadata": {"resourceVersion": str(self.member.watches.revision)}}

    async def _events(
        self, path: str, query: Mapping[str, Any], *, timeout_seconds: int
    ) -> AsyncIterator[dict[str, Any]]:
        self.requests += 1
        parsed = parse_path(path, watch=True)
        served = None if parsed is None else kind_of(parsed[0])
        if parsed is None or served is None:
            _raise(_no_resource())  # as kube's: not an empty stream that never says why
            return
        collection, namespace, name, legacy_watch = parsed
        try:
            fields = _fields(query.get("fieldSelector"), collection)
            if name is not None:
                if not legacy_watch:  # kube answers a GET of the object there, not a stream
                    raise HollowError(404, "NotFound", f"cannot watch {path}: watch its collection with "
                                      "fieldSelector=metadata.name, or its /watch/ path")
                fields = _one_object(fields, name, collection)
            selector = _labels(query.get("labelSelector"))
        except HollowError as exc:
            _raise(exc)
            return
        hub = self.member.watches
        try:
            resource_version = str(query.get("resourceVersion") or "")
            since = int(resource_version) if resource_version not in ("", "0") else hub.revision
            opened = hub.open(collection, namespace, selector, since, fields=fields)
        except Expired as exc:
            _raise(HollowError(410, "Expired", str(exc)))
            return
        except ValueError as exc:
            _raise(HollowError(400, "BadRequest", f"resourceVersion: {exc}"))
            return
        bookmarks = str(query.get("allowWatchBookmarks") or "") in TRUE
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline = now + timeout_seconds
        bookmark_at = next_bookmark(now, deadline=deadline, period=hub.bookmark_period) if bookmarks else None
        try:
            while (now := loop.time()) < deadline:
                if bookmark_at is not None and now >= bookmark_at and opened.queue.empty():
                    # Nothing queued: this watch has had every event up to the member's revision.
                    # As kube's, a bookmark goes only once the member has moved past the watch's start.
                    bookmark_at = next_bookmark(now, deadline=deadline, period=hub.bookmark_period)
                    if hub.revision > since:
                        yield _bookmark(served[0], served[1], hub.revision)
                    continue
                wake = deadline if bookmark_at is None else min(deadline, bookmark_at)
                try:  # a timeout per wait: a deadline around the yields would cancel the consumer
                    async with asyncio.timeout(max(0.0, wake - now)):
                        event = await opened.queue.get()
                except TimeoutError:
                    continue
                if event is None:
                    break
                yield {"type": event.type, "object": _wire(event.object)}
            if opened.dropped:
                _raise(HollowError(410, "Expired", "the watch fell too far behind; list again"))
        finally:
            hub.close(opened)


def _labels(text: Any) -> LabelSelector:
    try:
        return parse_label_selector(str(text or ""))
    except SelectorError as exc:
        raise HollowError(400, "BadRequest", exc.message) from exc


def _field_labels(collection: str) -> tuple[dict[str, FieldGetter], bool]:
    served = kind_of(collection)
    return field_labels(collection, namespaced=served is not None and served[2])


def _fields(text: Any, collection: str) -> FieldSelector:
    getters, own_conversion = _field_labels(collection)
    try:
        return parse_field_selector(
            str(text or ""), getters, refuse=lambda field: refusal(field, own_conversion=own_conversion)
        )
    except SelectorError as exc:
        raise HollowError(400, "BadRequest", exc.message) from exc


def _one_object(fields: FieldSelector, name: str, collection: str) -> FieldSelector:
    """The selector of a watch of the object ``name`` that a deprecated ``/watch/`` path names:
    ``metadata.name=name``, as kube's watch handler makes it; a selector that does not pin that
    same name is kube's 400."""
    try:
        return of_named_object(fields, name, _field_labels(collection)[0])
    except SelectorError as exc:
        raise HollowError(400, "BadRequest", exc.message) from exc
