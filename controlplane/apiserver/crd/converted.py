"""Serving a CRD's version whose objects its conversion webhook converts (``conversion: Webhook``).

The objects of such a kind are stored in its storage version; a request in another version is
served by the storage version's type, with what goes in and out converted by the webhook
(:mod:`.converting`): a get, the items of a list (in one review), the events of a watch (one review
per batch of events), a create's or an update's body on its way to storage (defaulted, pruned and
validated by its own version's schema first, as kube does) and the object it answers with, a JSON
or merge patch (applied to the object converted to the request's version, then converted back and
written as a compare-and-swap on the revision it was read at). A failed conversion answers kube's
500 and writes nothing. A server-side apply is made in the request's version as kube's apply
handler makes it (the object converted to it, the configuration merged there, the result converted
back; an absent object created, but not through ``status``, whose apply merges the status only).
A write's managedFields entry is recorded in the request's version, as kube's field manager records
it (the entries of other versions compared in theirs, :meth:`WebhookConversions.to_version`), and
the admission webhooks see the write in that version (:meth:`WebhookCalls.made_through`). A delete
(or a delete of a collection) answers with what it deleted, converted. The ``scale`` subresource
is the request's version's own (:mod:`.scaling`). Each object is converted from the apiVersion it is stored as: while the
CRD's ``status.storedVersions`` lists an earlier storage version, requests in the storage version
come here too (server-side apply in it is then served as usual for an object stored in it, and as
in a converted version for one still in the earlier version); otherwise they do not.
"""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import Any

from aiohttp import web

from controlplane.apis.apiextensions.kind import ConversionWebhook
from controlplane.apiserver import errors
from controlplane.apiserver.admission import WebhookCalls
from controlplane.apiserver.crd.converting import convert, group_version_kind
from controlplane.apiserver.crd.scaling import ConvertedScale
from controlplane.apiserver.handlers import (
    ResourceHandlers,
    json_response,
    method_not_allowed,
)
from controlplane.apiserver.metadataonly import metadata_asked, partial_list, partial_object
from controlplane.apiserver.objects import ObjectEvent, Preconditions, WatchEventType, WriteArgs
from controlplane.apiserver.objects.body_kind import checked_body
from controlplane.apiserver.objects.writing import PATCH_RETRIES
from controlplane.apiserver.offloading import is_large, pure
from controlplane.apiserver.patches import PatchType, apply_patch, check_apply_request, record_update
from controlplane.apiserver.patching.schema import FieldSchema
from controlplane.apiserver.patching.versions import VersionConverter
from controlplane.apiserver.queryparams import field_validation
from controlplane.apiserver.requestoptions import force_of
from controlplane.apiserver.requeststate import request_warnings
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.apiserver.routing import RequestInfo
from controlplane.apiserver.tables import IncludeObject, table, table_content_type, wants_table
from controlplane.apiserver.validation import FieldValidation, check_object, decoded_applied
from controlplane.apiserver.webhooks import equivalence
from controlplane.apiserver.webhooks.calling import WebhookClient
from controlplane.apiserver.webhooks.metrics import AdmissionMetrics
from controlplane.objectclient import ObjectClient

_NO_OBJECT = (WatchEventType.BOOKMARK, WatchEventType.ERROR)


def conversion_webhook(rt: ResourceType) -> ConversionWebhook | None:
    """The webhook that converts ``rt``'s objects from their storage version, if any."""
    return rt.custom.conversion_webhook if rt.custom is not None else None


def storage_version(rt: ResourceType) -> str:
    """The apiVersion ``rt``'s objects are written as."""
    return rt.stored_in_version or rt.api_version


class WebhookConversions:
    """Converts the objects of the CRD versions served through a conversion webhook."""

    def __init__(self, client: WebhookClient, registry: Registry, metrics: AdmissionMetrics | None = None) -> None:
        self._client = client
        self._registry = registry
        self._metrics = metrics

    def storage_type(self, rt: ResourceType) -> ResourceType:
        if not rt.stored_in_version:
            return rt  # the storage version, while objects remain stored in an earlier one
        group, _, version = rt.stored_in_version.rpartition("/")
        stored = self._registry.get(group, version, rt.plural)
        if stored is None:
            raise errors.ServiceUnavailable(
                f"{rt.qualified()} are stored as {rt.stored_in_version}, which is not served"
            )
        return stored

    async def served(self, rt: ResourceType, objects: list[dict[str, Any]], *, is_list: bool = False) -> list[dict[str, Any]]:
        """``objects`` (as stored, each with the apiVersion it is stored as) in ``rt``'s version."""
        webhook = conversion_webhook(rt)
        assert webhook is not None
        source = storage_version(rt) if is_list or not objects else str(objects[0].get("apiVersion"))
        what = group_version_kind(source, rt.list_kind if is_list else rt.kind)
        return await self._convert(webhook, objects, source, rt.api_version, what=what, is_list=is_list)

    async def stored(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` (of ``rt``'s version) in its storage version."""
        webhook = conversion_webhook(rt)
        assert webhook is not None
        what = group_version_kind(str(obj.get("apiVersion") or rt.api_version), rt.kind)
        [out] = await self._convert(webhook, [obj], rt.api_version, storage_version(rt), what=what)
        return out

    async def between(self, objects: list[dict[str, Any]], source: ResourceType, target: ResourceType) -> list[dict[str, Any]]:
        """``objects`` of ``source`` as ``target`` serves them, in one review when ``target`` is a
        version converted by its CRD's webhook (an :data:`~..webhooks.equivalence.Converter`: what
        admission webhooks and policies see a write as)."""
        webhook = conversion_webhook(target) or conversion_webhook(source)
        if webhook is None:
            return await equivalence.converted(objects, source, target)
        what = group_version_kind(str(objects[0].get("apiVersion") or source.api_version), source.kind) if objects else ""
        return await self._convert(webhook, objects, source.api_version, target.api_version, what=what)

    async def to_version(
        self, rt: ResourceType, objects: list[dict[str, Any]], api_version: str
    ) -> tuple[list[dict[str, Any]], FieldSchema] | None:
        """``objects`` of ``rt``'s kind at ``api_version`` and its schema, converted by the CRD's
        webhook in one review (a :class:`~..objects.versions.BatchConverter`: the managedFields
        entries of other versions are compared there); None for a version not served or a CRD
        without a conversion webhook."""
        group, _, version = api_version.rpartition("/")
        target = self._registry.get(group, version, rt.plural) if group == rt.group else None
        webhook = None if target is None else conversion_webhook(target) or conversion_webhook(rt)
        if target is None or webhook is None or not objects:
            return None
        source = str(objects[0].get("apiVersion") or rt.api_version)
        converted = await self._convert(webhook, objects, source, api_version, what=group_version_kind(source, rt.kind))
        return converted, target.apply_schema

    async def replace(
        self, objects: ObjectClient, stored: ResourceType, obj: dict[str, Any], *, current: dict[str, Any],
        namespace: str | None, name: str | None, subresource: str | None, args: WriteArgs,
    ) -> dict[str, Any]:
        """The update of ``obj`` (in the storage version) replacing ``current`` (as stored). An
        object still stored in an earlier version is written whole, in one compare-and-swap on the
        revision read unless the write names one: the part this write does not change (the status
        on a main write, the rest on a status write) converted, as kube converts the old object."""
        if not stored.has_status or current.get("apiVersion") == stored.api_version:
            return await objects.update(stored, obj, namespace=namespace, name=name, subresource=subresource, **args)
        [old] = await self.served(stored, [current])
        version = obj["metadata"].get("resourceVersion") or current["metadata"].get("resourceVersion")
        whole = copy.deepcopy(old if subresource == "status" else obj)
        if subresource == "status":  # the managedFields recorded for the write
            whole["metadata"]["managedFields"] = obj["metadata"].get("managedFields") or []
        whole.pop("status", None)
        status = (obj if subresource == "status" else old).get("status")
        if status is not None:
            whole["status"] = copy.deepcopy(status)
        whole["metadata"]["resourceVersion"] = version
        return await objects.update_with_status(stored, whole, **args)

    async def _convert(
        self, webhook: ConversionWebhook, objects: list[dict[str, Any]], source: str, desired: str, *, what: str,
        is_list: bool = False,
    ) -> list[dict[str, Any]]:
        if self._metrics is None or all(obj.get("apiVersion") == desired for obj in objects):
            return await convert(self._client, webhook, objects, desired, what=what, is_list=is_list)
        started = time.monotonic()
        succeeded = False
        try:
            out = await convert(self._client, webhook, objects, desired, what=what, is_list=is_list)
            succeeded = True
            return out
        finally:
            self._metrics.observe_conversion(
                webhook.crd, source.rpartition("/")[2], desired.rpartition("/")[2], time.monotonic() - started,
                succeeded=succeeded,
            )

    async def events(
        self, rt: ResourceType, batches: AsyncIterator[Sequence[ObjectEvent]]
    ) -> AsyncIterator[Sequence[ObjectEvent]]:
        """A watch's batches with their objects in ``rt``'s version: one review per batch."""
        try:
            async for batch in batches:
                objects = [event.object for event in batch if event.type not in _NO_OBJECT]
                converted = iter(await self.served(rt, objects, is_list=len(objects) > 1) if objects else ())
                out: list[ObjectEvent] = []
                for event in batch:
                    if event.type is WatchEventType.ERROR:
                        out.append(event)
                    elif event.type is WatchEventType.BOOKMARK:
                        out.append(ObjectEvent(event.type, {**event.object, "apiVersion": rt.api_version}, event.revision))
                    else:
                        out.append(ObjectEvent(event.type, next(converted), event.revision))
                yield out
        finally:
            aclose = getattr(batches, "aclose", None)
            if aclose is not None:
                await aclose()


class ConvertedHandlers:
    """The resource handlers of a version served through its CRD's conversion webhook."""

    def __init__(self, handlers: ResourceHandlers, conversions: WebhookConversions) -> None:
        self._handlers = handlers
        self._conversions = conversions
        self._scale = ConvertedScale(handlers, conversions)

    async def handle(self, request: web.Request, rt: ResourceType, info: RequestInfo) -> web.StreamResponse:
        stored = self._conversions.storage_type(rt)
        subresource = info.subresource or None
        if subresource == "scale":
            return await self._scale.handle(request, rt, stored, info)
        if subresource is not None and (subresource != "status" or not rt.has_status or info.name is None):
            raise errors.NotFound("the server could not find the requested resource")
        if info.verb == "watch":
            return await self._handlers.watch(
                request, rt, info, read=stored, convert=lambda batches: self._conversions.events(rt, batches)
            )
        if info.verb == "list":
            return await self._list(request, rt, stored, info)
        if info.verb == "create" and info.name is None and subresource is None:
            return await self._create(request, rt, stored, info)
        if info.verb == "deletecollection" and subresource is None:
            return await self._delete_collection(request, rt, stored, info)
        if info.name is None:
            raise method_not_allowed()
        if info.verb == "get":
            return await self._get(request, rt, stored, info)
        if info.verb == "update":
            return await self._update(request, rt, stored, info)
        if info.verb == "patch":
            return await self._patch(request, rt, stored, info)
        if info.verb == "delete" and subresource is None:
            return await self._delete(request, rt, stored, info)
        raise method_not_allowed()

    def _webhook_calls(self, request: web.Request, rt: ResourceType, warnings: list[str]) -> WebhookCalls | None:
        """The request's admission webhooks, seeing its writes in ``rt``'s version (kube's admission
        sees a write in its request's version; a webhook naming another one converts it)."""
        calls = self._handlers.webhook_calls(request, warnings)
        return None if calls is None else calls.made_through(rt)

    def _write_args(self, request: web.Request, rt: ResourceType, warnings: list[str]) -> tuple[WriteArgs, str | None]:
        """The write's options, and its field manager: the handlers record its managedFields entry
        in the request's version (kube's field manager runs on the versioned object), and the
        object layer keeps what they recorded."""
        args = self._handlers.write_args(request, warnings)
        args["webhooks"] = self._webhook_calls(request, rt, warnings)
        manager = args.get("field_manager")
        args["field_manager"] = None
        args["recorded_managed_fields"] = True
        return args, manager

    async def _recorded(
        self, rt: ResourceType, old: dict[str, Any] | None, obj: dict[str, Any], *, manager: str | None, info: RequestInfo,
        off_loop: bool,
    ) -> dict[str, Any]:
        """``obj`` (in ``rt``'s version) with ``manager``'s write of it over ``old`` recorded in its
        managedFields (the entries of other versions compared in theirs, converted by the webhook)."""
        if not manager:
            return obj
        objects = self._handlers.objects
        return await objects.versions.computed(rt, partial(
            record_update, rt, old, obj, manager=manager, now=objects.now(), subresource=info.subresource or None
        ), off_loop=off_loop)

    def _respond(self, request: web.Request, rt: ResourceType, obj: dict[str, Any], *, status: int = 200) -> web.Response:
        if (as_table := wants_table(request.headers.get("Accept"), protobuf=False)) is not None:
            include = IncludeObject.parse(request.query.get("includeObject"))
            rendered = table(rt, [obj], include=include, now=self._handlers.now(), version=as_table.version)
            return json_response(rendered, content_type=table_content_type(as_table.version))
        if request.method == "GET" and (asked := metadata_asked(request.headers.get("Accept"), protobuf=False)) is not None:
            return json_response(partial_object(rt, obj, asked))
        return json_response(obj, status=status, warnings=request_warnings(request))

    async def _get(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.Response:
        assert info.name is not None
        obj = await self._handlers.objects.get(
            stored, namespace=info.namespace, name=info.name, resource_version=request.query.get("resourceVersion")
        )
        [served] = await self._conversions.served(rt, [obj])
        return self._respond(request, rt, served)

    async def _list(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.Response:
        listed = await self._handlers.reads.list(stored, namespace=info.namespace, **self._handlers.list_args(request))
        items = await self._conversions.served(rt, listed.items, is_list=True)
        if (as_table := wants_table(request.headers.get("Accept"), protobuf=False)) is not None:
            rendered = table(
                rt, items, include=IncludeObject.parse(request.query.get("includeObject")), now=self._handlers.now(),
                resource_version=listed.resource_version, continue_token=listed.continue_token,
                remaining_item_count=listed.remaining_item_count, version=as_table.version,
            )
            return json_response(rendered, content_type=table_content_type(as_table.version))
        if (asked := metadata_asked(request.headers.get("Accept"), protobuf=False)) is not None:
            return json_response(partial_list(
                rt, items, asked, resource_version=listed.resource_version,
                continue_token=listed.continue_token, remaining_item_count=listed.remaining_item_count,
            ))
        metadata: dict[str, Any] = {"resourceVersion": listed.resource_version}
        if listed.continue_token:
            metadata["continue"] = listed.continue_token
        if listed.remaining_item_count is not None:
            metadata["remainingItemCount"] = listed.remaining_item_count
        return json_response({"apiVersion": rt.api_version, "kind": rt.list_kind, "metadata": metadata, "items": items})

    async def _request_object(
        self, request: web.Request, rt: ResourceType, info: RequestInfo, body: Any, *,
        old: dict[str, Any] | None = None, manager: str | None, off_loop: bool,
    ) -> dict[str, Any]:
        """The request's decoded ``body``, checked in its version, ``manager``'s write recorded
        there and converted to the storage version (``off_loop``: a large write, :mod:`..objects.offloading`)."""
        # The body must be of the request's version before it is converted (kube's decoding).
        obj = await pure(off_loop, checked_body, rt, body, namespace=info.namespace, from_request=True)
        if not info.subresource:
            obj = await self._checked(request, rt, obj, old=old, off_loop=off_loop)
        recorded = await self._recorded(rt, old, obj, manager=manager, info=info, off_loop=off_loop)
        return await self._conversions.stored(rt, recorded)

    @staticmethod
    async def _checked(
        request: web.Request, rt: ResourceType, obj: dict[str, Any], *, old: dict[str, Any] | None, off_loop: bool
    ) -> dict[str, Any]:
        """:func:`checked_in_version`, in a worker thread when ``off_loop``."""
        return await pure(off_loop, checked_in_version, rt, obj, old=old, field_validation=field_validation(request),
                          warnings=request_warnings(request))

    async def _create(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.Response:
        args, manager = self._write_args(request, rt, request_warnings(request))
        body = await self._handlers.body(request, kind=rt.kind)
        args["body_bytes"] = len(await request.read())
        obj = await self._request_object(request, rt, info, body, manager=manager, off_loop=is_large(args["body_bytes"]))
        created = await self._handlers.objects.create(stored, obj, namespace=info.namespace, **args)
        [served] = await self._conversions.served(rt, [created])
        return self._respond(request, rt, served, status=201)

    async def _update(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.Response:
        assert info.name is not None
        # As kube's update handler: the body's media type, the UpdateOptions and the body's decoding
        # are checked before the stored object is read (a bad option on a missing object is a 422).
        body = await self._handlers.body(request, kind=rt.kind)
        current, size = await self._handlers.objects.get_sized(stored, namespace=info.namespace, name=info.name)
        # As kube, the stored object is read in the request's version for the checks of the update
        # and the managedFields of its writer.
        [old] = await self._conversions.served(rt, [current])
        args, manager = self._write_args(request, rt, request_warnings(request))
        args["body_bytes"] = len(await request.read())
        large = is_large(args["body_bytes"], size)
        obj = await self._request_object(request, rt, info, body, old=old, manager=manager, off_loop=large)
        updated = await self._replace(stored, obj, current=current, info=info, args=args)
        [served] = await self._conversions.served(rt, [updated])
        return self._respond(request, rt, served)

    async def _patch(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.StreamResponse:
        assert info.name is not None
        patch_type = PatchType.from_content_type(request.headers.get("Content-Type", ""), rt)
        if patch_type is PatchType.APPLY:
            return await self._apply(request, rt, stored, info)
        force_of(request, patch_type)  # refuses a non-apply patch's force
        patch = await self._handlers.patch_body(request, patch_type, stored, info)
        args, manager = self._write_args(request, rt, request_warnings(request))
        now = self._handlers.objects.now

        def patched(served: dict[str, Any] | None, *, converter: VersionConverter | None) -> dict[str, Any]:
            del converter  # a JSON or merge patch records no entry itself
            return apply_patch(rt, served, patch_type, patch, manager=manager, force=False, now=now())

        return await self._write_patched(request, rt, stored, info, patched, args=args, manager=manager)

    async def _apply(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.StreamResponse:
        """Server-side apply as kube's apply handler makes it, in the request's version: the
        object read in it (converted), the configuration merged there (the applier's managedFields
        entry records that version), the result converted to the storage version and stored;
        absent, the object is created from the configuration alone."""
        assert info.name is not None
        subresource = info.subresource or None
        force = force_of(request, PatchType.APPLY)  # kube checks its PatchOptions before it reads the object
        if not rt.stored_in_version:
            try:
                current = await self._handlers.objects.get(rt, namespace=info.namespace, name=info.name)
            except errors.NotFound:
                current = None
            if current is None or current.get("apiVersion") == rt.api_version:
                return await self._handlers.patch(request, rt, info, subresource=subresource)
        patch = await self._handlers.patch_body(request, PatchType.APPLY, stored, info)
        warnings = request_warnings(request)
        args, manager = self._write_args(request, rt, warnings)
        if isinstance(patch, dict):
            large = is_large(len(await request.read()))
            await pure(large, check_apply_request, rt, patch, manager=manager)  # before its fields are decoded, as kube
            decoded = await pure(large, decoded_applied, rt, patch, args["field_validation"])
            patch = decoded.obj
            warnings.extend(decoded.warnings)
        now = self._handlers.objects.now

        def applied(served: dict[str, Any] | None, *, converter: VersionConverter | None) -> dict[str, Any]:
            return apply_patch(
                rt, served, PatchType.APPLY, patch, manager=manager, force=force, now=now(), subresource=subresource,
                converter=converter,
            )

        # An apply through ``status`` merges and owns the status only, and creates nothing (kube's 404).
        return await self._write_patched(request, rt, stored, info, applied, args=args, creates=subresource is None)

    async def _write_patched(
        self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo,
        patched_of: Callable[..., dict[str, Any]], *, args: WriteArgs, creates: bool = False,
        manager: str | None = None,
    ) -> web.Response:
        """The object ``patched_of`` makes of the stored one read in ``rt``'s version, checked
        there (``manager``'s write recorded in its managedFields, unless ``patched_of`` records it
        itself: an apply), converted to the storage version and written as a compare-and-swap on
        the revision read (read again and retried when a concurrent write wins, unless the patch
        names the revision). ``creates``: an absent object is created from ``patched_of(None)``."""
        assert info.name is not None
        objects = self._handlers.objects
        args = {**args, "body_bytes": len(await request.read())}
        for _attempt in range(PATCH_RETRIES):
            try:
                current, size = await objects.get_sized(stored, namespace=info.namespace, name=info.name)
            except errors.NotFound:
                if not creates:
                    raise
                large = is_large(args["body_bytes"])
                new = await pure(large, patched_of, None, converter=None)
                new = await pure(large, checked_body, rt, new, namespace=info.namespace, name=info.name)
                new = await self._conversions.stored(rt, await self._checked(request, rt, new, old=None, off_loop=large))
                created = await objects.create(stored, new, namespace=info.namespace, **args)
                [out] = await self._conversions.served(rt, [created])
                return self._respond(request, rt, out, status=201)
            large = is_large(args["body_bytes"], size)
            [served] = await self._conversions.served(rt, [current])
            patched = await objects.versions.computed(rt, partial(patched_of, served), off_loop=large)
            patched = await pure(large, checked_body, rt, patched, namespace=info.namespace, name=info.name, named=True)
            if not info.subresource:
                patched = await self._checked(request, rt, patched, old=served, off_loop=large)
            patched = await self._recorded(rt, served, patched, manager=manager, info=info, off_loop=large)
            named = patched.get("metadata", {}).get("resourceVersion") != served["metadata"].get("resourceVersion")
            new = await self._conversions.stored(rt, patched)
            new.setdefault("metadata", {})["resourceVersion"] = patched["metadata"].get("resourceVersion")
            try:
                updated = await self._replace(stored, new, current=current, info=info, args=args)
            except errors.Conflict:
                if named:
                    raise
                continue
            [out] = await self._conversions.served(rt, [updated])
            return self._respond(request, rt, out)
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=info.name)

    async def _replace(
        self, stored: ResourceType, obj: dict[str, Any], *, current: dict[str, Any], info: RequestInfo, args: WriteArgs
    ) -> dict[str, Any]:
        return await self._conversions.replace(
            self._handlers.objects, stored, obj, current=current, namespace=info.namespace, name=info.name,
            subresource=info.subresource or None, args=args,
        )

    async def _delete(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.Response:
        assert info.name is not None
        options = await self._handlers.delete_options(request)
        pre = options.get("preconditions") or {}
        warnings = request_warnings(request)
        result = await self._handlers.objects.delete(
            stored, namespace=info.namespace, name=info.name,
            preconditions=Preconditions(uid=pre.get("uid"), resource_version=pre.get("resourceVersion")),
            propagation_policy=options.get("propagationPolicy"),
            dry_run=bool(options.get("dryRun")),
            orphan_dependents=options.get("orphanDependents"), webhooks=self._webhook_calls(request, rt, warnings),
        )
        [served] = await self._conversions.served(rt, [result.object])
        accepted = not result.deleted and options.get("orphanDependents") is False
        return self._respond(request, rt, served, status=202 if accepted else 200)

    async def _delete_collection(
        self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo
    ) -> web.Response:
        options = await self._handlers.delete_options(request)
        deleted = await self._handlers.objects.delete_collection(
            stored, namespace=info.namespace, label_selector=request.query.get("labelSelector"),
            field_selector=request.query.get("fieldSelector"), dry_run=bool(options.get("dryRun")),
            propagation_policy=options.get("propagationPolicy"), orphan_dependents=options.get("orphanDependents"),
            webhooks=self._webhook_calls(request, rt, request_warnings(request)),
        )
        items = await self._conversions.served(rt, deleted.items, is_list=True)
        return json_response({
            "kind": rt.list_kind, "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": deleted.resource_version}, "items": items,
        })


def checked_in_version(
    rt: ResourceType, obj: dict[str, Any], *, old: dict[str, Any] | None, field_validation: FieldValidation,
    warnings: list[str],
) -> dict[str, Any]:
    """A copy of ``obj`` defaulted, pruned and validated by the schema of its version, as kube checks
    a write in the version it is made in: its errors and warnings (added to ``warnings``) name that
    version's fields. The storage version's checks follow, once it is converted. Pure but for
    ``warnings``, the request's own."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    generated = not meta.get("name") and isinstance(meta.get("generateName"), str)
    if generated:
        meta["name"] = meta["generateName"] + "xxxxx"  # as long as the name it will get
    if rt.defaults is not None:
        rt.defaults(obj)
    checked = check_object(obj, rt, field_validation=field_validation, old=old, request_warnings=warnings)
    warnings.extend(checked.warnings)
    if generated:
        checked.obj["metadata"].pop("name", None)
    return checked.obj
