"""The in-process object client over the watch cache: what the hub's controllers, scheduler
and health monitor call when the hub runs with a watch cache.

:class:`CachedObjects` is an :class:`~controlplane.objectclient.ObjectClient` whose watches and
lists come from the :class:`~controlplane.apiserver.watchcache.WatchCache` the API's HTTP
clients read (so each store event of a kind is decoded once for every watcher of that kind,
in process or over HTTP), and whose reads of one object and writes go to ``objects`` (the
leader's fenced object store, say). Lists and watches follow the cache's rules (see its module
docstring): a list without a resourceVersion is a consistent read of the store (made once the
cache of its kind has listed, so that a watch from the list's revision follows the cache), one with
resourceVersion "0" or ``NotOlderThan`` is served from memory; a watch that falls behind, or
resumes from before the cache's window of recent events (after the cache listed again), ends
with 410 ``Gone``, and the informer lists again, as after any expired watch.

Objects from the cache's watches are shared between every watcher of the same event: never
change them in place (controllers copy before they change an object, as kube's informers ask).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Unpack

from controlplane.apiserver.admission import WebhookCalls
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.objects.values import WatchArgs
from controlplane.apiserver.watchcache import WatchCache
from controlplane.objectclient import (
    DeleteResult,
    ListArgs,
    ObjectEvent,
    ObjectList,
    Preconditions,
    Registry,
    ResourceType,
    WriteArgs,
)


class CachedObjects:
    """``objects`` for reads of one object and writes, ``cache`` for lists and watches."""

    def __init__(self, objects: ObjectStore, cache: WatchCache) -> None:
        self._objects = objects
        self._cache = cache

    @property
    def registry(self) -> Registry:
        return self._objects.registry

    async def get(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, resource_version: str | None = None
    ) -> dict[str, Any]:
        return await self._objects.get(rt, namespace=namespace, name=name, resource_version=resource_version)

    async def get_latest_seen(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        return await self._objects.get_latest_seen(rt, namespace=namespace, name=name)

    async def list(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]
    ) -> ObjectList:
        if options.get("resource_version") in (None, ""):
            # A consistent read (the store's): at or after the cache's own list, so that the
            # informer's watch from it resumes from the cache.
            await self._cache.listed(rt)
        return await self._cache.list(rt, namespace=namespace, **options)

    async def create(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, **options: Unpack[WriteArgs]
    ) -> dict[str, Any]:
        return await self._objects.create(rt, obj, namespace=namespace, **options)

    async def update(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, name: str | None = None,
        subresource: str | None = None, **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        return await self._objects.update(rt, obj, namespace=namespace, name=name, subresource=subresource, **options)

    async def update_status(self, rt: ResourceType, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return await self._objects.update_status(rt, obj, **kwargs)

    async def update_with_status(
        self, rt: ResourceType, obj: dict[str, Any], *, status_of: Callable[[dict[str, Any]], Any] | None = None,
        **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        return await self._objects.update_with_status(rt, obj, status_of=status_of, **options)

    async def delete(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, preconditions: Preconditions | None = None,
        propagation_policy: str | None = None, dry_run: bool = False, orphan_dependents: bool | None = None,
        webhooks: WebhookCalls | None = None,
    ) -> DeleteResult:
        return await self._objects.delete(
            rt, namespace=namespace, name=name, preconditions=preconditions,
            propagation_policy=propagation_policy, dry_run=dry_run, orphan_dependents=orphan_dependents,
            webhooks=webhooks,
        )

    def watch(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[WatchArgs]
    ) -> AsyncIterator[ObjectEvent]:
        return self._cache.watch(rt, namespace=namespace, window_only=True, **options)
