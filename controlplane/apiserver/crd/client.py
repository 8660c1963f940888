"""The in-process object client that serves a CRD's versions converted by its conversion webhook,
as the HTTP API serves them: what the hub's controllers call (they read through the API in kube).

:class:`ConvertedObjects` is an :class:`~controlplane.objectclient.ObjectClient` over another one
(the leader's fenced object store, or its watch-cache client). A call for a kind the hub does not
convert with a webhook (every built-in kind, a CRD with ``conversion: None``, a CRD's storage
version while ``status.storedVersions`` lists no other) goes straight to it: one attribute test.
A call for a version served through the CRD's webhook (:func:`keeps_stored_version`) is made on
the storage version's type and its objects converted with :class:`WebhookConversions`, the
handlers' own conversions: a get's object, a list's items in one review, a watch's events (one
review each), a write's body converted to the storage version (an object still stored in an
earlier one written whole, as :meth:`WebhookConversions.replace` writes it for the handlers) and
its answer converted back. A failed conversion is kube's 500 (:class:`ConversionFailed`), raised
to the caller as any API error: a list (an informer's) fails whole as kube's does, and the
informer and the controllers' queues retry; no object is handed over in another version's shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Unpack

from controlplane.apiserver.admission import WebhookCalls
from controlplane.apiserver.crd.converted import WebhookConversions
from controlplane.apiserver.objects.reading import keeps_stored_version
from controlplane.apiserver.objects.values import WatchArgs
from controlplane.apiserver.watchcache.watcher import in_batches_of_one
from controlplane.objectclient import (
    DeleteResult,
    ListArgs,
    ObjectClient,
    ObjectEvent,
    ObjectList,
    Preconditions,
    ResourceType,
    WriteArgs,
)


class ConvertedObjects:
    """``objects``, with a CRD's versions served through its conversion webhook converted by ``conversions``."""

    def __init__(self, objects: ObjectClient, conversions: WebhookConversions) -> None:
        self._objects = objects
        self._conversions = conversions
        self.registry = objects.registry  # the same object, swapped in place as CRDs change

    def _current(self, rt: ResourceType) -> ResourceType:
        """``rt`` as the registry serves it now: a caller (an informer) may hold a custom kind's type
        from before its CRD changed (another webhook, storage version or storedVersions)."""
        if rt.custom is None:
            return rt
        return self.registry.get(rt.group, rt.version, rt.plural) or rt

    async def get(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, resource_version: str | None = None
    ) -> dict[str, Any]:
        rt = self._current(rt)
        if not keeps_stored_version(rt):
            return await self._objects.get(rt, namespace=namespace, name=name, resource_version=resource_version)
        stored = self._conversions.storage_type(rt)
        obj = await self._objects.get(stored, namespace=namespace, name=name, resource_version=resource_version)
        [served] = await self._conversions.served(rt, [obj])
        return served

    async def get_latest_seen(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        rt = self._current(rt)
        if not keeps_stored_version(rt):
            return await self._objects.get_latest_seen(rt, namespace=namespace, name=name)
        obj = await self._objects.get_latest_seen(self._conversions.storage_type(rt), namespace=namespace, name=name)
        [served] = await self._conversions.served(rt, [obj])
        return served

    async def list(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]
    ) -> ObjectList:
        rt = self._current(rt)
        if not keeps_stored_version(rt):
            return await self._objects.list(rt, namespace=namespace, **options)
        listed = await self._objects.list(self._conversions.storage_type(rt), namespace=namespace, **options)
        items = await self._conversions.served(rt, listed.items, is_list=True)
        return ObjectList(items, listed.resource_version, listed.continue_token, listed.remaining_item_count)

    def watch(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[WatchArgs]
    ) -> AsyncIterator[ObjectEvent]:
        rt = self._current(rt)
        if not keeps_stored_version(rt):
            return self._objects.watch(rt, namespace=namespace, **options)
        return self._converted_events(rt, namespace, options)

    async def _converted_events(
        self, rt: ResourceType, namespace: str | None, options: WatchArgs
    ) -> AsyncIterator[ObjectEvent]:
        events = self._objects.watch(self._conversions.storage_type(rt), namespace=namespace, **options)
        batches = self._conversions.events(rt, in_batches_of_one(events))
        try:
            async for batch in batches:
                for event in batch:
                    yield event
                if self._current(rt) is not rt:
                    return  # the CRD changed (its webhook, its versions): as kube, the watch ends; watch again
        finally:
            await batches.aclose()  # type: ignore[attr-defined]

    # --- writes: the body converted to the storage version, the answer back ----------------

    async def _stored_body(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` (in ``rt``'s version, or already in its storage version) as it is stored."""
        stored = self._conversions.storage_type(rt)
        if stored is rt or obj.get("apiVersion") == stored.api_version:
            return obj
        return await self._conversions.stored(rt, obj)

    async def _served(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        [served] = await self._conversions.served(rt, [obj])
        return served

    async def create(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, **options: Unpack[WriteArgs]
    ) -> dict[str, Any]:
        rt = self._current(rt)
        if not keeps_stored_version(rt):
            return await self._objects.create(rt, obj, namespace=namespace, **options)
        body = await self._stored_body(rt, obj)
        created = await self._objects.create(self._conversions.storage_type(rt), body, namespace=namespace, **options)
        return await self._served(rt, created)

    async def update(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, name: str | None = None,
        subresource: str | None = None, **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        rt = self._current(rt)
        if not keeps_stored_version(rt):
            return await self._objects.update(rt, obj, namespace=namespace, name=name, subresource=subresource, **options)
        stored = self._conversions.storage_type(rt)
        meta = obj.get("metadata") or {}
        namespace = namespace or meta.get("namespace")
        name = name or meta.get("name")
        current = await self._objects.get_latest_seen(stored, namespace=namespace, name=str(name))
        body = await self._stored_body(rt, obj)
        updated = await self._conversions.replace(
            self._objects, stored, body, current=current, namespace=namespace, name=name, subresource=subresource,
            args=options,
        )
        return await self._served(rt, updated)

    async def update_status(self, rt: ResourceType, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return await self.update(rt, obj, subresource="status", **kwargs)

    async def update_with_status(
        self, rt: ResourceType, obj: dict[str, Any], *, status_of: Callable[[dict[str, Any]], Any] | None = None,
        **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        """The whole object in one write (its status included), so one stored in an earlier version
        is replaced whole; ``status_of`` is given the main update's result in the storage version."""
        rt = self._current(rt)
        if not keeps_stored_version(rt):
            return await self._objects.update_with_status(rt, obj, status_of=status_of, **options)
        body = await self._stored_body(rt, obj)
        updated = await self._objects.update_with_status(
            self._conversions.storage_type(rt), body, status_of=status_of, **options
        )
        return await self._served(rt, updated)

    async def delete(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, preconditions: Preconditions | None = None,
        propagation_policy: str | None = None, dry_run: bool = False, orphan_dependents: bool | None = None,
        webhooks: WebhookCalls | None = None,
    ) -> DeleteResult:
        rt = self._current(rt)
        converted = keeps_stored_version(rt)
        result = await self._objects.delete(
            self._conversions.storage_type(rt) if converted else rt, namespace=namespace, name=name,
            preconditions=preconditions, propagation_policy=propagation_policy, dry_run=dry_run,
            orphan_dependents=orphan_dependents, webhooks=webhooks,
        )
        if not converted:
            return result
        return DeleteResult(await self._served(rt, result.object), result.deleted)
