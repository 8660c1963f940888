"""The cache of one resource type: what the store holds for it, kept current by one store watch.

A :class:`Cacher` lists the type's key range once, then follows one store watch from the
list's revision (and moves on with etcd's progress notifications while the type is quiet,
as kube's watch cache does, so its watches' bookmarks carry a recent revision). Every store event updates :attr:`Cacher.state`, joins the
:class:`~.window.EventWindow`, and is offered to the attached watchers that may see it --
decoded once for all of them. As kube's cacher indexes its watchers by trigger, watchers are
kept by the keys they may see (every key, a namespace, one object, one name in every
namespace: :attr:`~.watcher.CacheWatcher.trigger`), so an event is offered only to those of
its namespace and name and to the watchers of every key; a namespace's entry goes with its
last watcher. Watchers that asked for the same selectors share one
:class:`~.watcher.Selection`, matched once per event. When the store watch fails (its revision compacted, the store unreachable) the
cacher lists again: its watchers are closed with 410 ``Expired`` first (the client relists,
as after any expired watch), since the events between the two reads are lost. When the store
closes, the watchers' streams end.

Cost: the state holds each object's stored bytes (what etcd holds for the type, plus about
200 bytes of bookkeeping per object); the window at most ``window_events`` events and
``window_bytes`` stored bytes; decoded objects only while an event is being fanned out.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import random

from controlplane.apiserver import errors
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.watchcache.watcher import CacheWatcher, Selection, event_triggers
from controlplane.apiserver.watchcache.window import CacheCounters, CachedEvent, EventWindow
from controlplane.storage import interface as storage
from controlplane.storage.ledger import acting_as

logger = logging.getLogger(__name__)

#: Who decodes the cache's store events, in the write ledger.
CACHE_WATCHER = "watch-cache"
#: Seconds between a failed list or watch of the store and the next try (jittered, doubling).
_RETRY_SECONDS = (0.1, 5.0)


class Cacher:
    """The cached state and recent events of ``rt`` (all namespaces), fed by one store watch."""

    def __init__(self, store: storage.Store, rt: ResourceType, window: EventWindow) -> None:
        self.rt = rt
        self._store = store
        self._prefix = rt.key_prefix(None)
        self.window = window
        #: key -> the stored value, as of :attr:`revision`.
        self.state: dict[str, storage.KeyValue] = {}
        #: The keys of :attr:`state` in order, kept until one is added or removed.
        self._sorted: list[str] | None = None
        #: Every store event up to this revision is in :attr:`state`.
        self.revision = 0
        self.counters = CacheCounters()
        self._watchers: set[CacheWatcher] = set()
        #: The attached watchers by trigger (see the module docstring); no entry is ever empty.
        self._index: dict[tuple[str, str], set[CacheWatcher]] = {}
        #: The selections of the attached watchers, by their selectors.
        self._selections: dict[tuple[object, object], Selection] = {}
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    def indexed(self) -> dict[tuple[str, str], int]:
        """How many watchers each index entry holds."""
        return {trigger: len(watchers) for trigger, watchers in self._index.items()}

    def start(self) -> None:
        if self._task is None:
            # The write ledger counts its store watch's events as the cache's, whoever asked first.
            with acting_as(CACHE_WATCHER):
                self._task = asyncio.create_task(self._run(), name=f"watch-cache-{self.rt.plural}")

    @property
    def ready(self) -> bool:
        """Whether :attr:`state` is listed (and not being listed again)."""
        return self._ready.is_set() and not self._stopped

    async def wait_ready(self) -> None:
        """Return once the state is listed (the first time, or again after a failed watch)."""
        if self._stopped:
            raise errors.ServiceUnavailable(f"the watch cache of {self.rt.plural} is shutting down")
        await self._ready.wait()

    def snapshot(self, prefix: str) -> list[storage.KeyValue]:
        """The stored objects under ``prefix`` as of :attr:`revision`, in key order."""
        if self._sorted is None:
            self._sorted = sorted(self.state)
        keys = self._sorted
        if prefix == self._prefix:
            return [self.state[key] for key in keys]
        found: list[storage.KeyValue] = []
        for index in range(bisect.bisect_left(keys, prefix), len(keys)):
            if not keys[index].startswith(prefix):
                break
            found.append(self.state[keys[index]])
        return found

    def attach(self, watcher: CacheWatcher, after: int) -> bool:
        """Send ``watcher`` every event after revision ``after`` (those still in the window at
        once); False when some of them are no longer in the window, or the cache is listing again."""
        if not self._ready.is_set() or self._stopped:
            return False
        earlier = self.window.since(after)
        if earlier is None:
            return False
        selection = watcher.selection
        watcher.selection = self._selections.setdefault((selection.labels, selection.fields), selection)
        watcher.selection.users += 1
        self._watchers.add(watcher)
        try:
            for event in earlier:
                if not watcher.offer(event):
                    self.detach(watcher)
                    return True
        finally:
            # What the replay decoded stays with this watcher only: the window keeps the stored bytes.
            for event in earlier:
                event.release()
        watcher.follow(self._revision)
        self._index.setdefault(watcher.trigger, set()).add(watcher)
        self.counters.watchers = len(self._watchers)
        return True

    def _revision(self) -> int:
        return self.revision

    def _progressed(self, revision: int) -> None:
        """The store has handed over every event of the cached type up to ``revision`` (etcd's
        progress notification): the cache is as of it, as kube's watch cache moves its
        resourceVersion on one, so that a quiet kind's bookmarks carry a recent revision."""
        if revision > self.revision:
            self.revision = revision

    def detach(self, watcher: CacheWatcher) -> None:
        if watcher not in self._watchers:
            return
        self._watchers.discard(watcher)
        watchers = self._index.get(watcher.trigger)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del self._index[watcher.trigger]
        selection = watcher.selection
        selection.users -= 1
        if selection.users == 0:
            del self._selections[(selection.labels, selection.fields)]
        self.counters.watchers = len(self._watchers)

    async def stop(self) -> None:
        """Stop following the store; open watches end."""
        self._stopped = True
        self._ready.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._close_watchers(None)

    async def _run(self) -> None:
        delay = _RETRY_SECONDS[0]
        while True:
            try:
                listed = await self._store.list(self._prefix)
                self._replace(listed)
                delay = _RETRY_SECONDS[0]
                async for event in self._store.watch(
                    self._prefix, from_revision=self.revision + 1, progress=self._progressed
                ):
                    self._apply(event)
                # The store closed.
                self._stopped = True
                self._ready.set()
                self._close_watchers(None)
                return
            except storage.StorageError as exc:
                logger.info(
                    "watch cache of %s lists again: %s", self.rt.plural, exc,
                    extra={"revision": self.revision},
                )
                error = self._lost(exc)
            except Exception:
                logger.exception("watch cache of %s failed; listing again", self.rt.plural)
                error = errors.InternalError("the watch stream failed; see the server log")
            self._ready.clear()
            self._close_watchers(error)
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, _RETRY_SECONDS[1])

    def _lost(self, exc: storage.StorageError) -> errors.ApiError:
        """What the cache's watches end with when its store watch failed with ``exc``."""
        if isinstance(exc, storage.Gone):
            return errors.expired_resource_version(self.revision, exc.compacted_revision)
        return errors.from_storage_error(exc, plural=self.rt.plural, group=self.rt.group)

    def _replace(self, listed: storage.ListResult) -> None:
        self.state = {kv.key: kv for kv in listed.items}
        self._sorted = None
        self.revision = listed.revision
        self.window.reset(listed.revision)
        self.counters.lists += 1
        self._ready.set()

    def _apply(self, event: storage.WatchEvent) -> None:
        key = event.kv.key
        if event.type is storage.EventType.DELETE:
            prev = self.state.pop(key, None)
        else:
            prev = self.state.get(key)
            self.state[key] = event.kv
        if prev is None or event.type is storage.EventType.DELETE:
            self._sorted = None
        cached = CachedEvent(self.rt, event, prev, self.counters)
        self.counters.events += 1
        self.revision = cached.revision
        self.window.append(cached)
        overflowed: list[CacheWatcher] = []
        index = self._index
        for trigger in event_triggers(self._prefix, key):
            watchers = index.get(trigger)
            if watchers:
                for watcher in watchers:
                    if not watcher.offer(cached):
                        overflowed.append(watcher)
        for watcher in overflowed:
            self.detach(watcher)
            logger.warning(
                "closing a watch of %s that fell behind", self.rt.plural, extra={"revision": cached.revision}
            )
        cached.release()

    def _close_watchers(self, error: errors.ApiError | None) -> None:
        watchers, self._watchers = self._watchers, set()
        self._index = {}
        self._selections = {}
        self.counters.watchers = 0
        for watcher in watchers:
            watcher.close(error)
