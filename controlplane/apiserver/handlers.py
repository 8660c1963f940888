"""HTTP handlers for resource paths: parse the request, call the ObjectStore, render.

In: an aiohttp request whose :class:`RequestInfo` the middleware has parsed. Out: JSON
objects and lists, Tables when kubectl asks for them, chunked watch streams, and
``ApiError`` for everything that goes wrong (the middleware renders it as a Status).
The semantics live in :class:`~controlplane.apiserver.objects.ObjectStore`; these
handlers only translate query parameters, bodies and content types.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from aiohttp import web

from controlplane.apis.kube.selectors import of_named_object, parse_field_selector, parse_label_selector
from controlplane.apiserver import codec, errors, protobuf
from controlplane.apiserver.admission import ValidateWrite, WebhookCalls
from controlplane.apiserver.body_refusals import body_media, decode_object, decode_options, decode_patch
from controlplane.apiserver.metadataonly import metadata_asked, partial_list, partial_object, watched_object
from controlplane.apiserver.negotiation import response_media
from controlplane.apiserver.objects import (
    EncodedList,
    ListArgs,
    ObjectEvent,
    ObjectStore,
    Preconditions,
    WatchEventType,
    WriteArgs,
)
from controlplane.apiserver.objects.reading import parse_resource_version
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.queryparams import (
    field_validation,
    parameter_int64,
    query_bool,
    query_optional_bool,
)
from controlplane.apiserver.requestoptions import checked_delete_options, checked_write_options, force_of
from controlplane.apiserver.requeststate import (
    REQUEST_INFO,
    UNSTRUCTURED,
    request_warnings,
    warning_header,
    watch_started,
)
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.routing import RequestInfo
from controlplane.apiserver.tables import IncludeObject, scale_table, table, table_content_type, wants_table
from controlplane.apiserver.validation import FieldValidation
from controlplane.apiserver.watchcache import WatchCache, check_list_options, check_watch_list_options
from controlplane.apiserver.watchcache.watcher import SharedEvent, in_batches_of_one
from controlplane.apiserver.watching import SlowWatcher, WatchLimits, event_line, serve_watch

logger = logging.getLogger(__name__)

JSON_CONTENT_TYPE = "application/json"
#: How often an idle watch checks for a closed connection or a server shutdown.
WATCH_POLL_SECONDS = 1.0
#: A list response larger than this is encoded and sent in pieces of about this size, so
#: the hub never holds a second (and third) copy of a large collection as one body.
STREAMED_LIST_BYTES = 1024 * 1024


def json_response(
    body: Any, *, status: int = 200, warnings: list[str] | None = None, content_type: str = JSON_CONTENT_TYPE
) -> web.Response:
    raw = body if isinstance(body, bytes) else codec.dumps_any_text(body)
    response = web.Response(body=raw, status=status, headers={"Content-Type": content_type})
    for warning in warnings or []:
        response.headers.add("Warning", warning_header(warning))
    return response


async def _stream_list(request: web.Request, head: bytes, encoded: EncodedList) -> web.StreamResponse:
    """Write a large list as chunks: ``head``, the items encoded a piece at a time, the tail."""
    response = web.StreamResponse(headers={"Content-Type": JSON_CONTENT_TYPE})
    response.enable_chunked_encoding()
    await response.prepare(request)
    piece: list[bytes] = [head]
    size = 0
    for index, item in enumerate(encoded.items()):
        piece.append(item if index == 0 else b"," + item)
        size += len(item)
        if size >= STREAMED_LIST_BYTES:
            await response.write(b"".join(piece))
            piece, size = [], 0
    piece.append(b"]}")
    await response.write(b"".join(piece))
    await response.write_eof()
    return response


def field_manager_for(request: web.Request) -> str:
    """``fieldManager`` (its length and characters checked with the request's options), else
    kube's default: the User-Agent up to its first "/" (bytes that are not UTF-8 as U+FFFD, as
    they are stored, so the same client's writes have one manager)."""
    manager = request.query.get("fieldManager")
    if manager:
        return manager
    agent = request.headers.get("User-Agent", "unknown")
    return codec.any_text(agent.split("/", 1)[0][:128]) or "unknown"


def dry_run_of(request: web.Request) -> bool:
    """Whether a create, update or patch is a dry run (its ``dryRun`` values checked with its options)."""
    return bool(request.query.getall("dryRun", []))


class ResourceHandlers:
    """The handlers of ``/api/v1/...`` and ``/apis/<group>/<version>/...`` resource paths."""

    def __init__(
        self,
        objects: ObjectStore,
        *,
        stop: asyncio.Event,
        bookmark_interval: float,
        bookmark_before_timeout: float,
        watch_timeout_seconds: float,
        clock: Callable[[], datetime],
        validation: Callable[[web.Request], ValidateWrite | None] = lambda _request: None,
        watch_limits: WatchLimits | None = None,
        watch_cache: WatchCache | None = None,
        webhooks: Callable[[web.Request, list[str]], WebhookCalls | None] = lambda _request, _warnings: None,
    ) -> None:
        self._objects = objects
        #: Serves watches and the lists it can from memory (None: every read goes to the store).
        self._cache = watch_cache
        self._reads: ObjectStore | WatchCache = watch_cache or objects
        #: The admission checks of one request's writes (None: nothing to check).
        self._validation = validation
        #: The admission webhooks of one request's writes (None: none is configured).
        self._webhooks = webhooks
        self._registry = objects.registry
        self._stop = stop
        self._bookmark_interval = bookmark_interval
        self._bookmark_before_timeout = bookmark_before_timeout
        self._watch_timeout = watch_timeout_seconds
        self._watch_limits = watch_limits or WatchLimits()
        self._clock = clock
        #: Serves the CRD versions converted by a conversion webhook (:mod:`.crd.converted`).
        self.converted: Callable[[web.Request, ResourceType, RequestInfo], Awaitable[web.StreamResponse]] | None = None

    @property
    def objects(self) -> ObjectStore:
        return self._objects

    @property
    def reads(self) -> ObjectStore | WatchCache:
        """Where lists are read: the watch cache, or the store."""
        return self._reads

    def now(self) -> datetime:
        return self._clock()

    def webhook_calls(self, request: web.Request, warnings: list[str]) -> WebhookCalls | None:
        return self._webhooks(request, warnings)

    def _served_instead(self, info: RequestInfo) -> str:
        """For a resource asked for in a version this server does not serve (an old manifest's
        ``batch/v1beta1``, ``kubectl autoscale``'s ``autoscaling/v1``): the versions it is served
        in, so that the 404 says what to write instead; empty otherwise."""
        versions = sorted(
            rt.version for rt in self._registry
            if rt.group == info.group and rt.plural == info.resource and rt.version != info.version
        )
        if not versions:
            return ""
        group_version = f"{info.group}/{info.version}" if info.group else info.version
        served = ", ".join(f"{info.group}/{v}" if info.group else v for v in versions)
        return f": {group_version} {info.resource} are not served; this server serves them as {served}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        info = request[REQUEST_INFO]
        rt = self._registry.get(info.group, info.version, info.resource)
        if rt is None:
            raise errors.NotFound("the server could not find the requested resource" + self._served_instead(info))
        if not self._addressable(rt, info):
            raise errors.NotFound("the server could not find the requested resource")
        if not rt.built_in:  # kube's 406 for an Accept of protobuf alone, before the handler reads
            request[UNSTRUCTURED] = True
            if rt.custom is not None and rt.custom.deprecation_warning:  # kube's, on every verb
                request_warnings(request).append(rt.custom.deprecation_warning)
            if rt.custom is not None and rt.custom.terminating and info.verb == "create" and not info.subresource:
                raise errors.MethodNotAllowed(  # kube's crdHandler, before the body is read
                    "create not allowed while custom resource definition is terminating",
                    target=errors.Target(group=info.group, kind=info.resource),
                )
            response_media(request.headers.get("Accept"), protobuf=False)
        if self.converted is not None and rt.custom is not None and rt.custom.conversion_webhook is not None:
            return await self.converted(request, rt, info)
        if info.subresource:
            return await self.subresource(request, rt, info)
        if info.verb in ("list", "watch"):
            return await (self.watch(request, rt, info) if info.verb == "watch" else self._list(request, rt, info))
        if info.verb == "create" and info.name is None:
            return await self._create(request, rt, info)
        if info.verb == "deletecollection":
            if "deletecollection" not in rt.verbs:  # kube's namespaces: no route, go-restful's 405
                raise method_not_allowed()
            return await self._delete_collection(request, rt, info)
        if info.name is None:
            raise method_not_allowed()
        if info.verb == "get":
            return await self._get(request, rt, info)
        if info.verb == "update":
            return await self._update(request, rt, info, subresource=None)
        if info.verb == "patch":
            return await self.patch(request, rt, info, subresource=None)
        if info.verb == "delete":
            return await self._delete(request, rt, info)
        raise method_not_allowed()

    @staticmethod
    def _addressable(rt: ResourceType, info: RequestInfo) -> bool:
        if not rt.namespaced:
            return info.namespace is None
        # A namespaced object needs its namespace in the path; collections may span all.
        return info.namespace is not None or (info.name is None and info.verb in ("list", "watch"))

    async def subresource(self, request: web.Request, rt: ResourceType, info: RequestInfo) -> web.StreamResponse:
        if info.subresource == "scale" and rt.scale is not None and info.name is not None:
            return await self._scale(request, rt, info)
        finalize = info.subresource == "finalize" and rt.finalize is not None  # kube's FinalizeREST: update alone
        if (info.subresource not in rt.status_subresources and not finalize) or info.name is None:
            raise errors.NotFound("the server could not find the requested resource")
        if info.verb == "get" and not finalize:
            return await self._get(request, rt, info)
        if info.verb == "update":
            return await self._update(request, rt, info, subresource=info.subresource)
        if info.verb == "patch" and not finalize:
            return await self.patch(request, rt, info, subresource=info.subresource)
        raise method_not_allowed()

    async def _scale(self, request: web.Request, rt: ResourceType, info: RequestInfo) -> web.StreamResponse:
        assert info.name is not None
        if info.verb == "get":
            scale = await self._objects.get_scale(
                rt, namespace=info.namespace, name=info.name, resource_version=request.query.get("resourceVersion")
            )
            if (as_table := wants_table(request.headers.get("Accept"), protobuf=rt.built_in)) is not None:
                include = IncludeObject.parse(request.query.get("includeObject"))
                now = self._clock()
                # kube prints a built-in kind's Scale with its Scale printer; a custom kind's (a CRD's,
                # LeaderWorkerSet's) with its own columns, read from the Scale, as its table convertor serves it.
                rendered = scale_table(scale, include=include, now=now, version=as_table.version) if rt.strategic_merge else table(
                    rt, [scale], include=include, now=now, version=as_table.version
                )
                return json_response(rendered, content_type=table_content_type(as_table.version))
            if (partial := metadata_asked(request.headers.get("Accept"), protobuf=rt.built_in)) is not None:
                return json_response(partial_object(rt, scale, partial, scale=True))
            return json_response(scale)
        warnings = request_warnings(request)
        if info.verb == "update":
            scale = await self._objects.update_scale(
                rt, await self.body(request, kind="Scale"), namespace=info.namespace, name=info.name,
                dry_run=dry_run_of(request), field_manager=field_manager_for(request),
                webhooks=self._webhooks(request, warnings),
            )
            return json_response(scale, warnings=warnings)
        if info.verb == "patch":
            patch_type = PatchType.from_content_type(request.headers.get("Content-Type", ""), rt)
            force = force_of(request, patch_type)
            scale = await self._objects.patch_scale(
                rt, namespace=info.namespace, name=info.name, patch_type=patch_type,
                patch=await self.patch_body(request, patch_type, rt, info),
                dry_run=dry_run_of(request), field_manager=field_manager_for(request), force=force,
                webhooks=self._webhooks(request, warnings),
            )
            return json_response(scale, warnings=warnings)
        raise method_not_allowed()

    # --- reads ------------------------------------------------------------------------

    async def _get(self, request: web.Request, rt: ResourceType, info: RequestInfo) -> web.StreamResponse:
        assert info.name is not None
        at = request.query.get("resourceVersion")
        if (as_table := wants_table(request.headers.get("Accept"), protobuf=rt.built_in)) is not None:
            obj = await self._objects.get(rt, namespace=info.namespace, name=info.name, resource_version=at)
            include = IncludeObject.parse(request.query.get("includeObject"))
            rendered = table(rt, [obj], include=include, now=self._clock(), version=as_table.version)
            return json_response(rendered, content_type=table_content_type(as_table.version))
        if (partial := metadata_asked(request.headers.get("Accept"), protobuf=rt.built_in)) is not None:
            obj = await self._objects.get(rt, namespace=info.namespace, name=info.name, resource_version=at)
            return json_response(partial_object(rt, obj, partial))
        return json_response(
            await self._objects.get_encoded(rt, namespace=info.namespace, name=info.name, resource_version=at)
        )

    @staticmethod
    def list_args(request: web.Request) -> ListArgs:
        """A list request's options, checked as kube checks them."""
        query = request.query
        check_list_options(
            resource_version=query.get("resourceVersion"), resource_version_match=query.get("resourceVersionMatch"),
            continue_token=query.get("continue"), send_initial_events="sendInitialEvents" in query,
        )
        limit = max(parameter_int64(query.get("limit")), 0)  # kube pages only a positive limit
        parameter_int64(query.get("timeoutSeconds"))  # decoded as kube decodes the list options, unused
        return {
            "label_selector": query.get("labelSelector"),
            "field_selector": query.get("fieldSelector"),
            "limit": limit,
            "continue_token": query.get("continue"),
            "resource_version": query.get("resourceVersion"),
            "resource_version_match": query.get("resourceVersionMatch"),
        }

    async def _list(self, request: web.Request, rt: ResourceType, info: RequestInfo) -> web.StreamResponse:
        query = request.query
        common = self.list_args(request)
        if (as_table := wants_table(request.headers.get("Accept"), protobuf=rt.built_in)) is not None:
            include = IncludeObject.parse(query.get("includeObject"))
            listed = await self._reads.list(rt, namespace=info.namespace, **common)
            rendered = table(
                rt, listed.items, include=include, now=self._clock(),
                resource_version=listed.resource_version, continue_token=listed.continue_token,
                remaining_item_count=listed.remaining_item_count, version=as_table.version,
            )
            return json_response(rendered, content_type=table_content_type(as_table.version))
        if (partial := metadata_asked(request.headers.get("Accept"), protobuf=rt.built_in)) is not None:
            listed = await self._reads.list(rt, namespace=info.namespace, **common)
            return json_response(partial_list(
                rt, listed.items, partial, resource_version=listed.resource_version,
                continue_token=listed.continue_token, remaining_item_count=listed.remaining_item_count,
            ))
        encoded = await self._reads.list_encoded(rt, namespace=info.namespace, **common)
        metadata: dict[str, str | int] = {"resourceVersion": encoded.resource_version}
        if encoded.continue_token:
            metadata["continue"] = encoded.continue_token
        if encoded.remaining_item_count is not None:
            metadata["remainingItemCount"] = encoded.remaining_item_count
        head = codec.dumps({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": metadata})
        head = head[:-1] + b',"items":['
        if encoded.stored_bytes <= STREAMED_LIST_BYTES:
            return json_response(head + b",".join(encoded.items()) + b"]}")
        return await _stream_list(request, head, encoded)

    async def watch(
        self, request: web.Request, rt: ResourceType, info: RequestInfo, *, read: ResourceType | None = None,
        convert: Callable[[AsyncIterator[Sequence[ObjectEvent]]], AsyncIterator[Sequence[ObjectEvent]]] | None = None,
    ) -> web.StreamResponse:
        """A watch of ``rt`` (its events read as ``read``'s and passed through ``convert``, when given)."""
        query = request.query
        # Parse everything that can be wrong before the 200 goes out.
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"), rt.field_selectors, refuse=rt.field_label_refusal)
        if info.name is not None:  # kube's deprecated /watch/ path of one object
            fields = of_named_object(fields, info.name, rt.field_selectors)
        as_table = wants_table(request.headers.get("Accept"), protobuf=rt.built_in)
        partial = metadata_asked(request.headers.get("Accept"), protobuf=rt.built_in)
        include = IncludeObject.parse(query.get("includeObject"))
        # Without timeoutSeconds (or 0), a jittered default spreads the clients' reconnects; a
        # negative one ends the watch at once, as kube's timer does.
        timeout = parameter_int64(query.get("timeoutSeconds")) or self._watch_timeout * (1 + random.random())
        bookmarks = query_bool(query, "allowWatchBookmarks")
        resource_version = query.get("resourceVersion")
        if resource_version not in (None, "", "0"):
            parse_resource_version(resource_version)
        send_initial_events = query_optional_bool(query, "sendInitialEvents")
        check_watch_list_options(
            send_initial_events, query.get("resourceVersionMatch"), continue_token=query.get("continue")
        )
        bookmark_interval = self._bookmark_interval if bookmarks else None
        loop = asyncio.get_running_loop()
        # The watch ends then; one that asked for bookmarks gets one shortly before, as kube's does.
        deadline = loop.time() + float(timeout)
        source = read or rt
        batches: AsyncIterator[Sequence[ObjectEvent]]
        if self._cache is not None:
            batches = self._cache.watch_batches(
                source, namespace=info.namespace, label_selector=labels, field_selector=fields,
                resource_version=resource_version, bookmark_interval=bookmark_interval, deadline=deadline,
                bookmark_before_timeout=self._bookmark_before_timeout,
                send_initial_events=send_initial_events, started=lambda: watch_started(request),
            )
        elif send_initial_events is not None:
            raise errors.BadRequest("sendInitialEvents: Forbidden: this server has no watch cache to serve it")
        else:
            # kube's store watch says it has started at once (it cannot tell when it caught up).
            watch_started(request)
            batches = in_batches_of_one(self._objects.watch(
                source, namespace=info.namespace, label_selector=labels, field_selector=fields,
                resource_version=resource_version, bookmark_interval=bookmark_interval, deadline=deadline,
                bookmark_before_timeout=self._bookmark_before_timeout,
            ))
        if convert is not None:
            batches = convert(batches)
        response = web.StreamResponse(
            headers={"Content-Type": table_content_type(as_table.version) if as_table else JSON_CONTENT_TYPE}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        first = True

        def encode(event: ObjectEvent) -> bytes:
            nonlocal first
            if partial is not None and event.type is not WatchEventType.ERROR:
                return event_line(event.type.value, watched_object(event.object, partial))
            if isinstance(event, SharedEvent) and not as_table:
                return event.line  # encoded once for every watch of the event
            obj = event.object
            if as_table and event.type not in (WatchEventType.BOOKMARK, WatchEventType.ERROR):
                obj = table(rt, [obj], include=include, now=self._clock(), with_definitions=first,
                            version=as_table.version)
                first = False
            return event_line(event.type.value, obj)

        def drop_slow_client(reason: SlowWatcher) -> None:
            # kube's cacher closes an unresponsive watcher; the client re-watches or re-lists.
            # Aborting (not closing) frees what the transport still buffers for it at once.
            logger.warning(
                "closing an unresponsive watch: %s", reason,
                extra={"path": request.path, "remote": request.remote},
            )
            transport = request.transport
            if transport is None:
                return
            sock = transport.get_extra_info("socket")
            if sock is not None:
                # A reset, not a FIN queued behind data the client will never read: the
                # kernel frees the connection's send buffer too.
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()

        def keep_going() -> bool:
            # A watch ends when its kind stops being served (its CRD was deleted), as kube's does.
            return not self._stop.is_set() and not _closed(request) and self._registry.get(
                info.group, info.version, info.resource
            ) is not None

        def buffered() -> int:
            transport = request.transport
            return 0 if transport is None else transport.get_write_buffer_size()

        try:
            await serve_watch(
                batches, encode=encode, write=response.write, limits=self._watch_limits,
                deadline=deadline, poll=WATCH_POLL_SECONDS, keep_going=keep_going,
                buffered=buffered, on_slow=drop_slow_client,
            )
        except ConnectionResetError:
            logger.debug("watch client went away", extra={"path": request.path})
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    # --- writes -----------------------------------------------------------------------

    async def body(self, request: web.Request, *, kind: str) -> Any:
        """A create's or an update's body (of a ``kind``), refused in kube's words if it does not decode."""
        media = body_media(request.headers.get("Content-Type")) if request.body_exists else ""
        # kube checks the options after the body's media type and before decoding it.
        checked_write_options(request, "UpdateOptions" if request.method == "PUT" else "CreateOptions")
        if media == protobuf.MEDIA_TYPE:
            # kubectl's typed clients (kubectl create namespace|deployment|...) send protobuf only.
            return protobuf.decode_object(await request.read())
        return await decode_object(await request.read(), media=media or JSON_CONTENT_TYPE, kind=kind)

    async def patch_body(self, request: web.Request, patch_type: PatchType, rt: ResourceType, info: RequestInfo) -> Any:
        """A patch's body, refused in its patch type's words if it does not decode (``rt``'s object read first)."""
        strict, raw = field_validation(request) is not FieldValidation.IGNORE, await request.read()
        return await decode_patch(raw, patch_type, strict=strict, read=lambda: self._objects.get(
            rt, namespace=info.namespace, name=info.name or ""))

    def write_args(self, request: web.Request, warnings: list[str]) -> WriteArgs:
        """The write options a create, update or patch request asks for (its query and identity)."""
        return {
            "dry_run": dry_run_of(request),
            "field_validation": field_validation(request),
            "field_manager": field_manager_for(request),
            "warnings": warnings,
            "validate": self._validation(request),
            "webhooks": self._webhooks(request, warnings),
        }

    async def _create(self, request: web.Request, rt: ResourceType, info: RequestInfo) -> web.StreamResponse:
        body = await self.body(request, kind=rt.kind)
        warnings = request_warnings(request)
        options = self.write_args(request, warnings)
        options["body_bytes"] = len(await request.read())  # read (and kept) by body
        created = await self._objects.create_encoded(rt, body, namespace=info.namespace, **options)
        return json_response(created, status=201, warnings=warnings)

    async def _update(
        self, request: web.Request, rt: ResourceType, info: RequestInfo, *, subresource: str | None
    ) -> web.StreamResponse:
        body = await self.body(request, kind=rt.kind)
        warnings = request_warnings(request)
        created: list[bool] = []
        options = self.write_args(request, warnings)
        options["on_create"] = lambda: created.append(True)
        options["body_bytes"] = len(await request.read())  # read (and kept) by body
        updated = await self._objects.update_handed_over(
            rt, body, namespace=info.namespace, name=info.name, subresource=subresource, **options
        )  # a PUT that creates the object (a kind whose strategy allows it) is 201 Created, as kube's
        return json_response(updated, status=201 if created else 200, warnings=warnings)

    async def patch(
        self, request: web.Request, rt: ResourceType, info: RequestInfo, *, subresource: str | None
    ) -> web.StreamResponse:
        assert info.name is not None
        patch_type = PatchType.from_content_type(request.headers.get("Content-Type", ""), rt)
        force = force_of(request, patch_type)  # kube checks its PatchOptions before decoding the patch
        patch = await self.patch_body(request, patch_type, rt, info)
        warnings = request_warnings(request)
        created: list[bool] = []
        options = self.write_args(request, warnings)
        options["on_create"] = lambda: created.append(True)
        options["body_bytes"] = len(await request.read())  # read (and kept) by patch_body
        patched = await self._objects.patch(
            rt, namespace=info.namespace, name=info.name, patch_type=patch_type, patch=patch,
            subresource=subresource, force=force, **options,
        )
        # A server-side apply that creates the object is answered 201 Created, as kube does.
        return json_response(patched, status=201 if created else 200, warnings=warnings)

    @staticmethod
    async def delete_options(request: web.Request) -> dict[str, Any]:
        """The DeleteOptions of a delete: its body's when it has one (kube reads no query then),
        the query's otherwise; checked as kube checks them."""
        raw = await request.read() if request.body_exists else b""
        # As kube, a body's media type is checked only when it has one (415 for one not decoded).
        body = (await decode_options(raw, media=body_media(request.headers.get("Content-Type")) or JSON_CONTENT_TYPE) or {}) if raw else None
        return checked_delete_options(request.query, body)

    async def _delete(self, request: web.Request, rt: ResourceType, info: RequestInfo) -> web.StreamResponse:
        assert info.name is not None
        options = await self.delete_options(request)
        pre = options.get("preconditions") or {}
        dry_run = bool(options.get("dryRun"))
        warnings = request_warnings(request)
        result = await self._objects.delete(
            rt, namespace=info.namespace, name=info.name,
            preconditions=Preconditions(uid=pre.get("uid"), resource_version=pre.get("resourceVersion")),
            propagation_policy=options.get("propagationPolicy"), dry_run=dry_run,
            orphan_dependents=options.get("orphanDependents"), webhooks=self._webhooks(request, warnings),
        )
        if result.deleted and rt.kind != "Namespace" and not rt.returns_deleted_object:
            # An immediate delete is answered with a success Status, as kube's registry does (for
            # custom resources too), except by the kinds whose registry returns the deleted object.
            meta = result.object["metadata"]
            details = {"name": meta["name"], "kind": rt.plural, "uid": meta.get("uid", "")}
            if rt.group:
                details["group"] = rt.group
            return json_response(
                {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details},
                warnings=warnings,
            )
        # kube answers 202 Accepted for an object kept after a delete that set orphanDependents=false.
        accepted = not result.deleted and options.get("orphanDependents") is False
        return json_response(result.object, status=202 if accepted else 200, warnings=warnings)

    async def _delete_collection(
        self, request: web.Request, rt: ResourceType, info: RequestInfo
    ) -> web.StreamResponse:
        options = await self.delete_options(request)
        deleted = await self._objects.delete_collection(
            rt, namespace=info.namespace, label_selector=request.query.get("labelSelector"),
            field_selector=request.query.get("fieldSelector"), dry_run=bool(options.get("dryRun")),
            propagation_policy=options.get("propagationPolicy"), orphan_dependents=options.get("orphanDependents"),
            webhooks=self._webhooks(request, request_warnings(request)),
        )
        return json_response(
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": deleted.resource_version},
                "items": deleted.items,
            }
        )


# --- helpers ----------------------------------------------------------------------------


def method_not_allowed() -> errors.MethodNotAllowed:
    return errors.MethodNotAllowed("the server does not allow this method on the requested resource")


def _closed(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()
