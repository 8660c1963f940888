"""The hub's watch cache, as kube-apiserver's cacher: watches and lists served from memory.

One :class:`~.cacher.Cacher` per resource type, started on the type's first cached request
(or at start for the kinds passed to :meth:`WatchCache.warm`), follows one store watch and
fans each event out, decoded once, to every watch of the type. What is served from it:

* every watch: ``resourceVersion`` "0" starts from the cache's state; unset (or a watch-list,
  ``sendInitialEvents=true``, without one) from a consistent read of the store, after which
  the watch follows the cache; "N" resumes from the cache's window of recent events, or --
  when N is older than the window -- from the store's history as without a cache (410 once
  compacted);
* lists with ``resourceVersion`` "0" (``limit`` is ignored, as kube's cache does) or "N"
  (``resourceVersionMatch`` unset or ``NotOlderThan``, without ``limit``) once the cache has
  reached N (before, the store answers once it has reached N, waiting up to 3 s as kube's
  ``waitUntilFreshAndBlock``). Lists without a resourceVersion (consistent reads), with ``Exact``, a
  ``continue`` token, or a ``limit`` with a resourceVersion other than "0" read the store,
  as kube's do.
* single objects for the hub's own per-request lookups (:meth:`WatchCache.get`,
  :meth:`WatchCache.cached`: admission's Namespaces, params and webhook Services, the objects a
  service account token is bound to), as kube's admission plugins and token getter read their
  listers: from memory, and from the store when memory has no such object yet (kube's live GET
  after a lister's NotFound). The API's own GETs still read the store, as kube's do.

Objects come out exactly as the object layer serves them (the same stored bytes and
decoding); cached events are shared between watchers and must not be changed.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Unpack

from controlplane.apiserver import errors
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.objects import EncodedList, ListArgs, ObjectEvent, ObjectList, ObjectStore
from controlplane.apiserver.objects.events import watch_events
from controlplane.apiserver.objects.reading import (
    decode,
    decode_all,
    encoded,
    field_selector_of,
    label_selector_of,
    parse_resource_version,
    store_call,
)
from controlplane.apiserver.objects.values import (
    WatchArgs,
    WatchEventType,
    WatchOptions,
)
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.watchcache.cacher import Cacher
from controlplane.apiserver.watchcache.watcher import (
    CacheWatcher,
    WatcherLimits,
    bookmark,
    in_batches_of_one,
    one_by_one,
)
from controlplane.apiserver.watchcache.window import (
    DEFAULT_WINDOW_BYTES,
    DEFAULT_WINDOW_EVENTS,
    CacheCounters,
    EventWindow,
)
from controlplane.gojson import go_quote
from controlplane.storage import interface as storage

__all__ = [
    "DEFAULT_WATCH_CACHE", "WatchCache", "WatchCacheConfig", "check_list_options", "check_watch_list_options",
]

_NOT_OLDER_THAN = "NotOlderThan"
_EXACT = "Exact"
#: Seconds a request waits for a type's first list into the cache before the store answers it.
READY_SECONDS = 2.0
#: A watch's initial objects are decoded and handed on this many at a time (or this many stored bytes).
INITIAL_BATCH_EVENTS = 100
INITIAL_BATCH_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class WatchCacheConfig:
    """How much the cache keeps: the event window of each type, and each watch's queue."""

    window_events: int = DEFAULT_WINDOW_EVENTS
    window_bytes: int = DEFAULT_WINDOW_BYTES
    watcher: WatcherLimits = field(default_factory=WatcherLimits)


#: The watch cache's default bounds.
DEFAULT_WATCH_CACHE = WatchCacheConfig()


def check_watch_list_options(
    send_initial_events: bool | None, resource_version_match: str | None, *, continue_token: str | None = None
) -> None:
    """kube's validation of a watch's ``sendInitialEvents`` and ``resourceVersionMatch``
    (``validateWatchOptions``): every problem a cause of one 422, as for a list."""
    causes: list[errors.Cause] = []

    def forbid(detail: str) -> None:
        causes.append(errors.Cause(errors.CauseType.FIELD_VALUE_FORBIDDEN, f"Forbidden: {detail}", "resourceVersionMatch"))

    if send_initial_events is not None and resource_version_match != _NOT_OLDER_THAN:
        forbid(f"sendInitialEvents requires setting resourceVersionMatch to {_NOT_OLDER_THAN}")
    if resource_version_match:
        if send_initial_events is None:
            forbid("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
        if resource_version_match != _NOT_OLDER_THAN:
            causes.append(errors.Cause(
                errors.CauseType.FIELD_VALUE_NOT_SUPPORTED,
                f"Unsupported value: {go_quote(resource_version_match)}: supported values: \"{_NOT_OLDER_THAN}\"",
                "resourceVersionMatch",
            ))
        if continue_token:
            forbid("resourceVersionMatch is forbidden when continue is provided")
    if causes:
        raise errors.invalid(kind="ListOptions", group="meta.k8s.io", name="", causes=causes)


def check_list_options(
    *, resource_version: str | None, resource_version_match: str | None, continue_token: str | None,
    send_initial_events: bool,
) -> None:
    """kube's ``ValidateListOptions`` of a list (not a watch): every problem a cause of one 422
    ``ListOptions.meta.k8s.io "" is invalid``; ``send_initial_events``: the parameter was sent."""
    causes: list[errors.Cause] = []

    def forbid(field: str, detail: str) -> None:
        causes.append(errors.Cause(errors.CauseType.FIELD_VALUE_FORBIDDEN, f"Forbidden: {detail}", field))

    if resource_version_match:
        if not resource_version:
            forbid("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided")
        if continue_token:
            forbid("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided")
        if resource_version_match not in (_EXACT, _NOT_OLDER_THAN):
            causes.append(errors.Cause(
                errors.CauseType.FIELD_VALUE_NOT_SUPPORTED,
                f'Unsupported value: "{resource_version_match}": supported values: "{_EXACT}", "{_NOT_OLDER_THAN}", ""',
                "resourceVersionMatch",
            ))
        if resource_version_match == _EXACT and resource_version == "0":
            forbid("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    if send_initial_events:
        forbid("sendInitialEvents", "sendInitialEvents is forbidden for list")
    if causes:
        raise errors.invalid(kind="ListOptions", group="meta.k8s.io", name="", causes=causes)


class WatchCache:
    """Watches and lists of the API served from memory (see the module docstring); what is not
    served from memory goes to ``objects``."""

    def __init__(self, objects: ObjectStore, config: WatchCacheConfig | None = None) -> None:
        self._objects = objects
        self._store = objects.store
        self._config = config or WatchCacheConfig()
        self._cachers: dict[tuple[str, str, str], Cacher] = {}
        self._retired: set[asyncio.Task[None]] = set()
        self._closed = False
        self._registry = objects.registry
        if isinstance(self._registry, DynamicRegistry):
            self._registry.add_listener(self._kinds_changed)

    def counters(self) -> dict[str, CacheCounters]:
        """Each cached type's counters (store events taken, objects decoded, lines encoded)."""
        return {f"{cacher.rt.plural}.{cacher.rt.group}": cacher.counters for cacher in self._cachers.values()}

    def object_count(self, group: str, plural: str) -> int | None:
        """The objects of a resource the cache holds (every namespace); None while not cached."""
        for (cached_group, _, cached_plural), cacher in self._cachers.items():
            if cached_plural == plural and cached_group == group and cacher.ready:
                return len(cacher.state)
        return None

    def watcher_index(self, rt: ResourceType) -> dict[tuple[str, str], int]:
        """How many of ``rt``'s cached watches each entry of its watcher index holds (by trigger:
        every key, a namespace's prefix, one object's key, one name)."""
        cacher = self._cachers.get((rt.group, rt.version, rt.plural))
        return {} if cacher is None else cacher.indexed()

    def warm(self, types: Iterable[ResourceType]) -> None:
        """Start caching ``types`` now rather than on their first request."""
        for rt in types:
            self._cacher(rt)

    async def listed(self, rt: ResourceType) -> None:
        """Start caching ``rt`` and wait (at most :data:`READY_SECONDS`) for its first list: a
        consistent read of the store after this is at or after the cache's start, so a watch from
        its revision is served by the cache rather than by a store watch of its own."""
        await self._ready(rt)

    async def close(self) -> None:
        self._closed = True
        if isinstance(self._registry, DynamicRegistry):
            self._registry.remove_listener(self._kinds_changed)
        cachers, self._cachers = list(self._cachers.values()), {}
        await asyncio.gather(*(cacher.stop() for cacher in cachers), *self._retired, return_exceptions=True)

    def _cacher(self, rt: ResourceType) -> Cacher:
        if self._closed:
            raise errors.ServiceUnavailable("the API server is shutting down")
        key = (rt.group, rt.version, rt.plural)
        cacher = self._cachers.get(key)
        if cacher is not None and cacher.rt is not rt and cacher.rt != rt:
            self._retire(key)
            cacher = None
        if cacher is None:
            window = EventWindow(max_events=self._config.window_events, max_bytes=self._config.window_bytes)
            cacher = self._cachers[key] = Cacher(self._store, rt, window)
            cacher.start()
        return cacher

    def _retire(self, key: tuple[str, str, str]) -> None:
        """Stop the cache of a kind that changed (its CRD was updated) or is no longer served:
        its watches end, and clients watch again."""
        cacher = self._cachers.pop(key)
        task = asyncio.create_task(cacher.stop())
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)

    def _kinds_changed(self) -> None:
        for key, cacher in list(self._cachers.items()):
            rt = self._registry.get(*key)
            if rt is None or (rt is not cacher.rt and rt != cacher.rt):
                self._retire(key)

    async def _ready(self, rt: ResourceType) -> Cacher | None:
        """The type's cacher once it has listed; None when that takes longer than
        :data:`READY_SECONDS` (the store then answers)."""
        cacher = self._cacher(rt)
        try:
            async with asyncio.timeout(READY_SECONDS):
                await cacher.wait_ready()
        except TimeoutError:
            return None
        return cacher

    # --- single objects ---------------------------------------------------------------

    def cached(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> dict[str, Any] | None:
        """Object ``name`` as the cache holds it (kube's lister), without waiting: None when the cache
        holds no such object or has not listed the type yet (its cache starts on the first call)."""
        if self._closed:
            return None
        cacher = self._cacher(rt)
        if not cacher.ready:
            return None
        kv = cacher.state.get(rt.key(namespace=namespace if rt.namespaced else None, name=name))
        return None if kv is None else decode(rt, kv)

    async def get(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        """Object ``name`` from memory, or read from the store when the cache misses it (404 when the
        store has none either), as kube's admission plugins and token authenticator read a lister and
        then GET: an object created an instant ago is found before the cache sees it."""
        if self._closed:
            return await self._objects.get(rt, namespace=namespace, name=name)
        cacher = await self._ready(rt)
        if cacher is not None:
            kv = cacher.state.get(rt.key(namespace=namespace if rt.namespaced else None, name=name))
            if kv is not None:
                return decode(rt, kv)
        return await self._objects.get(rt, namespace=namespace, name=name)

    # --- lists ------------------------------------------------------------------------

    async def list_encoded(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]
    ) -> EncodedList:
        served = await self._from_cache(rt, namespace, options)
        if served is None:
            return await self._objects.list_encoded(rt, namespace=namespace, **options)
        kvs, revision = served
        return EncodedList(kvs, str(revision), encode=partial(encoded, rt))

    async def list(self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]) -> ObjectList:
        served = await self._from_cache(rt, namespace, options)
        if served is None:
            return await self._objects.list(rt, namespace=namespace, **options)
        kvs, revision = served
        return ObjectList(await decode_all(rt, kvs), str(revision))

    async def _from_cache(
        self, rt: ResourceType, namespace: str | None, options: ListArgs
    ) -> tuple[builtins.list[storage.KeyValue], int] | None:
        """The list's items and revision from the cache; None when the store must answer it."""
        resource_version = options.get("resource_version")
        if options.get("continue_token") or options.get("resource_version_match") not in (None, "", _NOT_OLDER_THAN):
            return None
        if resource_version in (None, ""):
            return None
        if not (resource_version.isascii() and resource_version.isdigit()):
            return None  # the store's answer is kube's 400 for it
        wanted = int(resource_version)
        if options.get("limit") and wanted != 0:
            return None
        if rt.namespaced is False and namespace:
            return None
        labels = label_selector_of(options.get("label_selector"))
        fields = field_selector_of(rt, options.get("field_selector"))
        cacher = await self._ready(rt)
        if cacher is None or cacher.revision < wanted:
            # The cache has not seen that revision: the store answers (or says it is too new).
            return None
        kvs = cacher.snapshot(rt.key_prefix(namespace))
        revision = cacher.revision
        if not (labels.empty and fields.empty):
            kvs = [
                kv for kv in kvs
                if labels.matches((obj := decode(rt, kv))["metadata"].get("labels")) and fields.matches(obj)
            ]
        return kvs, revision

    # --- watches ---------------------------------------------------------------------

    def watch(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        send_initial_events: bool | None = None,
        window_only: bool = False,
        **options: Unpack[WatchArgs],
    ) -> AsyncGenerator[ObjectEvent]:
        """Events for objects of ``rt`` as kube's watch sends them (:meth:`ObjectStore.watch`),
        plus kube's watch-list: with ``send_initial_events`` the current objects as ADDED, then
        (with bookmarks allowed, ``bookmark_interval`` not None) a BOOKMARK annotated
        ``k8s.io/initial-events-end``. With ``window_only`` a resume from before the cache's window
        is 410 ``Expired`` (as kube's cacher answers it) instead of a store watch of its own: the
        in-process informers then relist and follow the cache again."""
        return one_by_one(self.watch_batches(
            rt, namespace=namespace, send_initial_events=send_initial_events, window_only=window_only, **options
        ))

    async def watch_batches(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        send_initial_events: bool | None = None,
        window_only: bool = False,
        started: Callable[[], None] | None = None,
        **options: Unpack[WatchArgs],
    ) -> AsyncGenerator[Sequence[ObjectEvent]]:
        """The events of :meth:`watch` in batches: the initial objects a few at a time, then
        every event queued for the watch at once, so that its consumer wakes once per batch
        (the HTTP handler writes a batch in one transport write). ``started`` is called once the
        consumer has taken the initial events (kube's cacher says then that the watch is initialized)."""
        asked = WatchOptions(**options)
        resource_version, bookmark_interval = asked.resource_version, asked.bookmark_interval
        labels = label_selector_of(asked.label_selector)
        fields = field_selector_of(rt, asked.field_selector)
        filtered = not (labels.empty and fields.empty)
        prefix = rt.key_prefix(namespace)
        cacher = await self._ready(rt)
        if cacher is None and send_initial_events is None:
            # Not listed yet (the store is slow or away): the store serves this watch, as without a cache.
            parsed = replace(asked, label_selector=labels, field_selector=fields)
            if started is not None:
                started()
            async for batch in self._store_batches(rt, namespace, parsed):
                yield batch
            return
        initial: builtins.list[storage.KeyValue] = []
        consistent = resource_version in (None, "")
        if cacher is not None and (resource_version == "0" or (
            send_initial_events and not consistent and cacher.revision >= parse_resource_version(str(resource_version))
        )):
            # From the cache's state; attached below in the same step, so no event falls between.
            if send_initial_events is not False:
                initial = cacher.snapshot(prefix)
            start = cacher.revision
        elif send_initial_events is False:
            start = await store_call(rt, "", self._store.current_revision()) if (
                consistent or resource_version == "0"
            ) else parse_resource_version(str(resource_version))
        elif consistent or send_initial_events:
            listed = await store_call(rt, "", self._store.list(prefix))
            initial, start = listed.items, listed.revision
            del listed
        else:
            start = parse_resource_version(str(resource_version))
        watcher = CacheWatcher(rt, prefix=prefix, labels=labels, fields=fields, after=start, limits=self._config.watcher)
        events: AsyncGenerator[Sequence[ObjectEvent]]
        if cacher is not None and cacher.attach(watcher, start):
            events = watcher.batches(
                bookmark_interval=bookmark_interval, deadline=asked.deadline,
                bookmark_before_timeout=asked.bookmark_before_timeout, on_close=cacher.detach,
            )
        elif cacher is not None and window_only:
            raise errors.expired_resource_version(start, cacher.window.floor)
        else:
            # Older than the cache's window: the store's history serves it, as without a cache.
            events = self._store_batches(
                rt, namespace, replace(asked, label_selector=labels, field_selector=fields, resource_version=str(start))
            )
        try:
            initial.reverse()
            chunk: builtins.list[ObjectEvent] = []
            stored = 0
            while initial:
                kv = initial.pop()
                stored += len(kv.value)
                obj = decode(rt, kv)
                if not filtered or watcher.matches(obj):
                    chunk.append(ObjectEvent(WatchEventType.ADDED, obj, kv.mod_revision))
                del kv, obj
                if len(chunk) >= INITIAL_BATCH_EVENTS or stored >= INITIAL_BATCH_BYTES:
                    yield chunk
                    chunk, stored = [], 0
            if chunk:
                yield chunk
            del chunk
            if send_initial_events and bookmark_interval is not None:
                yield (bookmark(rt, start, initial_events_end=True),)
            if started is not None:
                started()
            async for batch in events:
                yield batch
        finally:
            await events.aclose()
            watcher.close()
            if cacher is not None:
                cacher.detach(watcher)

    def _store_batches(
        self, rt: ResourceType, namespace: str | None, options: WatchOptions
    ) -> AsyncGenerator[Sequence[ObjectEvent]]:
        return in_batches_of_one(watch_events(self._store, rt, namespace=namespace, options=options))
