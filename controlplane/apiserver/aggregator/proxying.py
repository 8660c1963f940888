"""Requests under an aggregated group-version, proxied to its extension API server, and the hub's
discovery documents with the aggregated groups in them.

As kube-aggregator's proxy handler: the hub has authenticated and authorized the request (its
middlewares run first); ``/apis/<group>/<version>[/...]`` of an aggregated APIService goes to an
address of its Service (:meth:`AggregatedApis.location`) over TLS with the front-proxy certificate,
the caller in ``X-Remote-*`` headers (what the client sent in such headers, its credentials and
its ``Impersonate-*`` headers are not forwarded). An APIService not Available, or whose Service
has no address, is answered kube's 503 (``the server is currently unable to handle the request``).
The answer streams back as it comes (a watch included), each write waiting at most
:data:`STALL_SECONDS` for a slow client; the answer's head must come within
:data:`HEAD_TIMEOUT_SECONDS`, and a body that stays silent longer than that ends a request that
is not a watch; a watch gives its flow-control seats back once it is handed on, as kube's proxy
does. Upgrade requests (exec, port-forward) are relayed as WebSockets (:mod:`.upgrading`).

``/apis`` (plain and aggregated discovery) lists the aggregated groups after the hub's own, and
``/apis/<group>`` of an aggregated group answers from the APIServices, as kube's aggregator does;
``/openapi/v2`` and ``/openapi/v3`` add the Available ones' documents (:mod:`.openapi`).

In: the request, :class:`AggregatedApis`. Out: the extension server's answer, or a Status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware

from controlplane.apis.kube.apiregistration import APIServiceView
from controlplane.apis.proxyframing import DROPPED_RESPONSE_HEADERS
from controlplane.apiserver import discovery, errors
from controlplane.apiserver.aggregator.frontproxy import proxied_headers
from controlplane.apiserver.aggregator.registrations import AggregatedApis, Unreachable
from controlplane.apiserver.aggregator.upgrading import relay_upgrade
from controlplane.apiserver.app import USER
from controlplane.apiserver.handlers import json_response
from controlplane.apiserver.openapi.gnostic import ACCEPTED_MEDIA_TYPES as PROTOBUF_ACCEPTS
from controlplane.apiserver.openapi.gnostic import MEDIA_TYPE as PROTOBUF_MEDIA_TYPE
from controlplane.apiserver.openapi.serving import JSON, serve, serve_v3_document
from controlplane.apiserver.queryparams import watch_asked
from controlplane.apiserver.requeststate import watch_started
from controlplane.apiserver.routing import is_upgrade

logger = logging.getLogger(__name__)

HEAD_TIMEOUT_SECONDS = 60.0
STALL_SECONDS = 60.0
_CHUNK = 64 * 1024
UNAVAILABLE = "the server is currently unable to handle the request"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def aggregation_middleware(apis: AggregatedApis) -> Middleware:
    """The middleware that sends aggregated group-versions to their servers (placed after
    authentication and authorization) and adds the aggregated groups to discovery."""

    @web.middleware
    async def aggregate(request: web.Request, handler: Handler) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts[:1] == ["openapi"] and request.method == "GET":
            return await _openapi(request, handler, apis, parts)
        if not parts or parts[0] != "apis":
            return await handler(request)
        if len(parts) >= 3 and (view := apis.target(parts[1], parts[2])) is not None:
            return await _proxy(request, apis, view)
        if len(parts) == 1 and request.method == "GET":
            return _with_aggregated_groups(await handler(request), apis)
        if len(parts) == 2 and request.method == "GET":
            return await _group(request, handler, apis, parts[1])
        return await handler(request)

    return aggregate


async def _proxy(request: web.Request, apis: AggregatedApis, view: APIServiceView) -> web.StreamResponse:
    if not view.available:
        raise errors.ServiceUnavailable(UNAVAILABLE)
    try:
        base, server_name = await apis.location(view)
        context = apis.ssl_context(view)
    except Unreachable as exc:
        logger.info("aggregated API %s is unreachable: %s", view.name, exc)
        raise errors.ServiceUnavailable(UNAVAILABLE) from None
    if is_upgrade(request.headers):
        url = base + request.rel_url.raw_path + (f"?{request.rel_url.raw_query_string}" if request.rel_url.raw_query_string else "")
        return await relay_upgrade(request, apis.session(), url, name=view.name, context=context, server_name=server_name)
    watch_started(request)  # kube's RequestDelegated: a watch's start is the extension server's work
    headers = proxied_headers(list(request.headers.items()), request[USER])
    if "Accept-Encoding" not in request.headers:  # else the client library would ask for gzip of its own
        headers.append(("Accept-Encoding", "identity"))
    body = await request.read()  # bounded by the API's body limit
    watching = watch_asked(request.query) or "/watch/" in request.path
    url = base + request.rel_url.raw_path + (f"?{request.rel_url.raw_query_string}" if request.rel_url.raw_query_string else "")
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=HEAD_TIMEOUT_SECONDS,
                                    sock_read=None if watching else HEAD_TIMEOUT_SECONDS)
    try:
        async with asyncio.timeout(HEAD_TIMEOUT_SECONDS):
            upstream = await apis.session().request(
                request.method, url, headers=headers, data=body or None, ssl=context, server_hostname=server_name,
                allow_redirects=False, timeout=timeout,
            )
    except TimeoutError:
        raise errors.ServiceUnavailable(f"error trying to reach service: {view.name} did not answer within "
                                        f"{HEAD_TIMEOUT_SECONDS:g}s") from None
    except (aiohttp.ClientError, OSError) as exc:
        logger.info("proxying %s to %s failed: %s", request.path, view.name, exc)
        raise errors.ServiceUnavailable(f"error trying to reach service: {exc}") from None
    async with upstream:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for name, value in upstream.headers.items():
            if name.lower() not in DROPPED_RESPONSE_HEADERS or name.lower() == "content-encoding":
                response.headers.add(name, value)
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_chunked(_CHUNK):
                async with asyncio.timeout(STALL_SECONDS):
                    await response.write(chunk)
        except (TimeoutError, aiohttp.ClientError) as exc:
            # The head is gone already: end the connection, so the client sees an incomplete answer.
            logger.info("proxied answer of %s from %s ended: %r", request.path, view.name, exc)
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response


async def _openapi(request: web.Request, handler: Handler, apis: AggregatedApis, parts: list[str]) -> web.StreamResponse:
    """``/openapi/v2`` merged with the aggregated servers' specs, ``/openapi/v3`` listing their
    documents and ``/openapi/v3/apis/<group>/<version>`` of one of them (:mod:`.openapi`); the hub's
    own answers as they are while there is none."""
    served = [view.name for view in apis.aggregated() if view.available]
    specs = apis.specs
    if parts == ["openapi", "v2"]:
        names = specs.served_v2(served)
        if not names:
            return await handler(request)
        hub = await handler(request.clone(headers={"Accept": "application/json"}))
        if type(hub) is not web.Response or hub.status != 200 or not isinstance(hub.body, bytes):
            return hub
        protobuf = any(media in request.headers.get("Accept", "") for media in PROTOBUF_ACCEPTS)
        # Merged (and encoded) in a worker thread, as the hub renders its own, once per change.
        merged = await asyncio.to_thread(specs.merged_v2, hub.headers.get("ETag", ""), hub.body, names, protobuf=protobuf)
        return serve(request, merged, PROTOBUF_MEDIA_TYPE if protobuf else JSON)
    if len(parts) >= 3 and parts[1] == "v3":
        key = "/".join(parts[2:])
        found = specs.v3.get(key)
        if found is None or found[0] not in served:
            return await handler(request)
        return serve_v3_document(request, key, found[1])
    if parts == ["openapi", "v3"] and any(name in served for name, _ in specs.v3.values()):
        hub = await handler(request.clone(headers={"Accept": "application/json"}))
        document = _read_json(hub)
        return hub if document is None else serve(request, specs.index(document, served), JSON)
    return await handler(request)


def _versions(apis: AggregatedApis) -> dict[str, list[APIServiceView]]:
    groups: dict[str, list[APIServiceView]] = {}
    for view in apis.aggregated():
        groups.setdefault(view.group, []).append(view)
    return groups


def _read_json(response: web.StreamResponse) -> dict[str, Any] | None:
    if type(response) is not web.Response or response.status != 200 or not isinstance(response.body, bytes):
        return None
    document = orjson.loads(response.body)
    return document if isinstance(document, dict) else None


def _rewritten(response: web.StreamResponse, document: dict[str, Any]) -> web.StreamResponse:
    """``document`` answered as ``response`` was (its media type, its ``Vary``)."""
    out = json_response(document, content_type=response.headers.get("Content-Type", "application/json"))
    if "Vary" in response.headers:
        out.headers["Vary"] = response.headers["Vary"]
    return out


def _with_aggregated_groups(response: web.StreamResponse, apis: AggregatedApis) -> web.StreamResponse:
    """``/apis`` with the aggregated groups: an APIGroupList's groups, or aggregated discovery's
    items (each version with the resources its server last listed, ``Stale`` when that answer
    is not the latest)."""
    groups = _versions(apis)
    document = _read_json(response) if groups else None
    if document is None:
        return response
    if document.get("kind") == "APIGroupList":
        listed = {g["name"]: g for g in document.get("groups") or []}
        for group, views in groups.items():
            entries = [{"groupVersion": f"{group}/{v.version}", "version": v.version} for v in views]
            if group in listed:
                known = {e["version"] for e in listed[group]["versions"]}
                listed[group]["versions"] += [e for e in entries if e["version"] not in known]
            else:
                document.setdefault("groups", []).append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return _rewritten(response, document)
    if document.get("kind") == "APIGroupDiscoveryList":
        items = {str((item.get("metadata") or {}).get("name") or ""): item for item in document.get("items") or []}
        for group, views in groups.items():
            versions = []
            for view in views:
                found = apis.discovered.get(view.name)
                if found is None:
                    continue  # never answered: left out, as kube leaves it out
                versions.append({
                    "version": view.version,
                    "resources": discovery.aggregated_resources(found.resources, group, view.version),
                    "freshness": "Current" if found.fresh else "Stale",
                })
            if not versions:
                continue
            if group in items:
                known = {v["version"] for v in items[group]["versions"]}
                items[group]["versions"] += [v for v in versions if v["version"] not in known]
            else:
                document.setdefault("items", []).append(
                    {"metadata": {"name": group, "creationTimestamp": None}, "versions": versions}
                )
        return _rewritten(response, document)
    return response


async def _group(request: web.Request, handler: Handler, apis: AggregatedApis, group: str) -> web.StreamResponse:
    """``/apis/<group>``: the hub's own document, with the aggregated versions of the group."""
    views = _versions(apis).get(group)
    if not views:
        return await handler(request)
    entries = [{"groupVersion": f"{group}/{v.version}", "version": v.version} for v in views]
    try:
        response = await handler(request)
    except errors.NotFound:
        return json_response({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries,
                              "preferredVersion": entries[0]})
    document = _read_json(response)
    if document is None:
        return response
    known = {e["version"] for e in document.get("versions") or []}
    document["versions"] = [*(document.get("versions") or []), *(e for e in entries if e["version"] not in known)]
    return _rewritten(response, document)
