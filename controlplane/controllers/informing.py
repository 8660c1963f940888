"""Informers: a cached, always-current view of one kind, fed by list + watch.

An :class:`Informer` lists the kind once, then watches from the list's revision,
keeping an in-memory cache keyed by (namespace, name) and calling its handlers with
every change. When the watch's revision has been compacted (``Gone``) it relists and
synthesises the differences as events, so handlers never miss a change, only
coalesce some. Controllers read from the cache and write through the ObjectStore.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.apiserver.resources import ResourceType
from controlplane.storage.interface import Gone, Unavailable

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]  # (namespace or "", name)
Handler = Callable[[WatchEventType, dict[str, Any]], Awaitable[None]]


def object_key(obj: dict[str, Any]) -> ObjectKey:
    meta = obj.get("metadata", {})
    return (meta.get("namespace") or "", meta["name"])


class Informer:
    def __init__(
        self,
        objects: ObjectStore,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        retry_delay: float = 1.0,
    ) -> None:
        self._objects = objects
        self.rt = rt
        self._namespace = namespace
        self._label_selector = label_selector
        self._retry_delay = retry_delay
        self._cache: dict[ObjectKey, dict[str, Any]] = {}
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        self._revision = "0"

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    @property
    def synced(self) -> asyncio.Event:
        return self._synced

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self._cache.get((namespace or "", name))

    def items(self) -> list[dict[str, Any]]:
        return list(self._cache.values())

    async def _emit(self, event: WatchEventType, obj: dict[str, Any]) -> None:
        for handler in self._handlers:
            try:
                await handler(event, obj)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("informer handler failed", extra={"kind": self.rt.kind})

    async def _relist(self) -> None:
        listing = await self._objects.list(
            self.rt, namespace=self._namespace, label_selector=self._label_selector
        )
        fresh = {object_key(obj): obj for obj in listing.items}
        stale = [obj for key, obj in self._cache.items() if key not in fresh]
        for obj in stale:
            self._cache.pop(object_key(obj), None)
            await self._emit(WatchEventType.DELETED, obj)
        for key, obj in fresh.items():
            previous = self._cache.get(key)
            self._cache[key] = obj
            if previous is None:
                await self._emit(WatchEventType.ADDED, obj)
            elif previous["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                await self._emit(WatchEventType.MODIFIED, obj)
        self._revision = listing.resource_version
        self._synced.set()

    async def run(self) -> None:
        """List, then watch forever; relist on Gone; back off on outages."""
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                async for event in self._objects.watch(
                    self.rt,
                    namespace=self._namespace,
                    label_selector=self._label_selector,
                    resource_version=self._revision,
                    bookmark_interval=30.0,
                ):
                    self._revision = str(event.revision)
                    if event.type is WatchEventType.BOOKMARK:
                        continue
                    key = object_key(event.object)
                    if event.type is WatchEventType.DELETED:
                        self._cache.pop(key, None)
                    else:
                        self._cache[key] = event.object
                    await self._emit(event.type, event.object)
            except asyncio.CancelledError:
                raise
            except (Gone, errors.Gone):
                log.info("watch of %s expired; relisting", self.rt.plural)
                need_list = True
            except (Unavailable, errors.ApiError) as exc:
                log.warning("watch of %s interrupted: %s; retrying", self.rt.plural, exc)
                await asyncio.sleep(self._retry_delay)
