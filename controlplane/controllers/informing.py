"""Informers: a cached, always-current view of one kind, fed by list + watch.

An :class:`Informer` lists the kind once, then watches from the list's revision,
keeping an in-memory cache keyed by (namespace, name) and calling its handlers with
every change (the new object and, for MODIFIED and DELETED, the one it replaced). When
the watch's revision has been compacted (``Gone``) it relists and synthesises the
differences as events, so handlers never miss a change, only coalesce some.

An informer made with ``keep`` caches only the objects ``keep`` accepts (the garbage collector's
keep the few that carry ownerReferences) and still calls its handlers with every change: an
object it does not keep comes with no previous one, and a relist hands it over again as ADDED.
Handlers added with ``add_relist_handler`` run after every list that follows the first (a
watch that expired): the DELETED events of objects it does not keep were lost with it.

One informer may serve several components of a process (the API's service account token check and
the leader's token controller): a handler added while it runs is given the cached objects with
:meth:`Informer.replay` and taken off again with :meth:`Informer.remove_handler`.

A list or watch that fails is tried again after a pause that grows as client-go's reflector's
(``NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)``): 0.8 s doubling up to 30 s, each
stretched by up to as much again at random, so a kind whose every list fails (a custom kind whose
conversion webhook is down) is asked some twice a minute, not every second. A list that succeeds,
a watch that delivers again, or two minutes without a failure start it from 0.8 s again.

Indexes (``add_index``) map a value computed from each object (the clusters a binding
is placed on, the policy that claims it, the binding a Work belongs to) to the keys of
the objects that have it, so controllers find "every binding on cluster X" without
scanning. Controllers read from the cache and write through the ObjectClient.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any, TypeGuard

from controlplane.apis.bookmarks import BOOKMARK_PERIOD
from controlplane.objectclient import ObjectClient, ResourceType, WatchEventType, errors

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]  # (namespace or "", name)
#: Objects a relist stores and hands to its handlers between two turns of the event loop.
RELIST_TURN = 256
Handler = Callable[[WatchEventType, dict[str, Any], dict[str, Any] | None], Awaitable[None]]
"""``(event, object, previous object or None)``; for DELETED the object is the last state seen."""
IndexFunc = Callable[[dict[str, Any]], Iterable[Hashable]]


def spec_unchanged(old: dict[str, Any] | None, obj: dict[str, Any], event: WatchEventType) -> TypeGuard[dict[str, Any]]:
    """Whether a handler's ``event`` replaced ``old`` by ``obj`` and left ``spec`` as it was: a
    status (or metadata) write, which most handlers pass over. True narrows ``old`` to an object."""
    return event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec")


def object_key(obj: dict[str, Any]) -> ObjectKey:
    meta = obj.get("metadata", {})
    return (meta.get("namespace") or "", meta["name"])


class ListWatchBackoff:
    """The pauses between an informer's failed lists and watches (client-go's reflector's
    ``ExponentialBackoffManager``): ``initial`` seconds, times ``factor`` per failure up to
    ``maximum``, each stretched by up to ``jitter`` times itself at random; started again from
    ``initial`` by :meth:`reset` or when ``reset_after`` seconds passed since the last pause."""

    def __init__(
        self,
        *,
        initial: float = 0.8,
        maximum: float = 30.0,
        reset_after: float = 120.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < initial <= maximum:
            raise ValueError(f"the list/watch backoff needs 0 < initial ({initial}) <= maximum ({maximum})")
        self.initial = initial
        self.maximum = maximum
        self.reset_after = reset_after
        self.factor = factor
        self.jitter = jitter
        self._clock = clock
        self._base = initial
        self._last: float | None = None

    def next_delay(self) -> float:
        """The pause before the next try (and the one after it grows)."""
        now = self._clock()
        if self._last is not None and now - self._last > self.reset_after:
            self._base = self.initial
        self._last = now
        delay = self._base
        self._base = min(self._base * self.factor, self.maximum)
        return delay + random.random() * self.jitter * delay

    def reset(self) -> None:
        """A list or watch succeeded: the next failure waits ``initial`` again."""
        self._base = self.initial


class _Index:
    def __init__(self, func: IndexFunc) -> None:
        self.func = func
        self.keys: dict[Hashable, set[ObjectKey]] = {}
        self.values: dict[ObjectKey, tuple[Hashable, ...]] = {}

    def remove(self, key: ObjectKey) -> None:
        for value in self.values.pop(key, ()):
            members = self.keys.get(value)
            if members is not None:
                members.discard(key)
                if not members:
                    del self.keys[value]

    def add(self, key: ObjectKey, obj: dict[str, Any]) -> None:
        values = tuple(dict.fromkeys(self.func(obj)))
        if values:
            self.values[key] = values
        for value in values:
            self.keys.setdefault(value, set()).add(key)


class Informer:
    def __init__(
        self,
        objects: ObjectClient,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        backoff: ListWatchBackoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        keep: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self._objects = objects
        self._keep = keep
        self._relist_handlers: list[Callable[[], Awaitable[None]]] = []
        self.rt = rt
        self._namespace = namespace
        self._label_selector = label_selector
        #: The pauses between failed lists and watches (see the module docstring).
        self.backoff = backoff if backoff is not None else ListWatchBackoff()
        self._sleep = sleep
        self._cache: dict[ObjectKey, dict[str, Any]] = {}
        self._handlers: list[Handler] = []
        self._indexes: dict[str, _Index] = {}
        self._synced = asyncio.Event()
        self._revision = "0"

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def remove_handler(self, handler: Handler) -> None:
        """Stop calling ``handler`` (client-go's ``RemoveEventHandler``): a controller that reads
        another component's informer for a while (a leader's term) leaves it as it found it."""
        self._handlers = [h for h in self._handlers if h != handler]  # a new list: an event being handed out goes on

    async def replay(self, handler: Handler) -> None:
        """Call ``handler`` with ADDED for every cached object, as client-go hands a handler added
        to a running informer what it holds; the changes that come meanwhile reach it as events."""
        for number, obj in enumerate(list(self._cache.values()), 1):
            if number % RELIST_TURN == 0:
                await asyncio.sleep(0)
            await handler(WatchEventType.ADDED, obj, None)

    def add_relist_handler(self, handler: Callable[[], Awaitable[None]]) -> None:
        """Call ``handler`` after each list but the first (see the module docstring)."""
        self._relist_handlers.append(handler)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Maintain ``name``: value -> keys of the objects for which ``func`` yields that value."""
        index = _Index(func)
        for key, obj in self._cache.items():
            index.add(key, obj)
        self._indexes[name] = index

    @property
    def synced(self) -> asyncio.Event:
        return self._synced

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self._cache.get((namespace or "", name))

    def items(self) -> list[dict[str, Any]]:
        return list(self._cache.values())

    def __len__(self) -> int:
        return len(self._cache)

    def index_keys(self, name: str, value: Hashable) -> list[ObjectKey]:
        """Keys of the cached objects whose index ``name`` holds ``value``."""
        return sorted(self._indexes[name].keys.get(value, ()))

    def by_index(self, name: str, value: Hashable) -> list[dict[str, Any]]:
        """The cached objects whose index ``name`` holds ``value``."""
        out = []
        for key in self.index_keys(name, value):
            obj = self._cache.get(key)
            if obj is not None:
                out.append(obj)
        return out

    def index_values(self, name: str) -> list[Hashable]:
        return list(self._indexes[name].keys)

    def _store(self, key: ObjectKey, obj: dict[str, Any] | None) -> dict[str, Any] | None:
        if obj is not None and self._keep is not None and not self._keep(obj):
            obj = None
        previous = self._cache.pop(key, None) if obj is None else self._cache.get(key)
        for index in self._indexes.values():
            index.remove(key)
            if obj is not None:
                index.add(key, obj)
        if obj is not None:
            self._cache[key] = obj
        return previous

    async def _emit(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for handler in self._handlers:
            try:
                await handler(event, obj, old)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("informer handler failed", extra={"kind": self.rt.kind})

    async def _relist(self) -> None:
        listing = await self._objects.list(
            self.rt, namespace=self._namespace, label_selector=self._label_selector
        )
        fresh = {object_key(obj): obj for obj in listing.items}
        stale = [key for key in self._cache if key not in fresh]
        for key in stale:
            gone = self._store(key, None)
            if gone is not None:
                await self._emit(WatchEventType.DELETED, gone, gone)
        for number, (key, obj) in enumerate(fresh.items(), 1):
            if number % RELIST_TURN == 0:
                await asyncio.sleep(0)  # a relist of thousands of bindings must not hold the loop
            previous = self._store(key, obj)
            if previous is None:
                await self._emit(WatchEventType.ADDED, obj, None)
            elif previous["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                await self._emit(WatchEventType.MODIFIED, obj, previous)
        self._revision = listing.resource_version
        if self._synced.is_set():
            for handler in self._relist_handlers:
                await handler()
        self._synced.set()

    async def run(self) -> None:
        """List, then watch forever; relist on Gone; back off on outages and failing lists.

        An outage is logged once when it interrupts the watch and once when the watch is
        back, not on every retry (an etcd outage would otherwise log every informer every
        second)."""
        need_list = True
        interrupted = False
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                    interrupted = self._resumed(interrupted)
                # Bookmarks on kube's schedule (the server's, as kube's clients get): a watch that
                # breaks resumes from etcd's history (five minutes: the embedded etcd's and kube's
                # compaction interval), or from the watch cache's window, which starts afresh when
                # the cache lists again (410 then, whatever the revision); a minute-old revision
                # serves either, as in kube-controller-manager.
                async for event in self._objects.watch(
                    self.rt,
                    namespace=self._namespace,
                    label_selector=self._label_selector,
                    resource_version=self._revision,
                    bookmark_interval=BOOKMARK_PERIOD,
                ):
                    self._revision = str(event.revision)
                    interrupted = self._resumed(interrupted)
                    if event.type is WatchEventType.BOOKMARK:
                        continue
                    key = object_key(event.object)
                    if event.type is WatchEventType.DELETED:
                        previous = self._store(key, None)
                    else:
                        previous = self._store(key, event.object)
                    await self._emit(event.type, event.object, previous)
            except asyncio.CancelledError:
                raise
            except (errors.StoreGone, errors.Gone):
                log.info("watch of %s expired; relisting", self.rt.plural)
                need_list = True
            except (errors.StoreUnavailable, errors.ApiError) as exc:
                if interrupted:
                    log.debug("watch of %s still interrupted: %s; retrying", self.rt.plural, exc)
                else:
                    log.warning("watch of %s interrupted: %s; retrying", self.rt.plural, exc)
                    interrupted = True
                await self._sleep(self.backoff.next_delay())

    def _resumed(self, interrupted: bool) -> bool:
        """Log the end of an interruption once (and start the backoff afresh); the new
        interrupted state (False)."""
        if interrupted:
            self.backoff.reset()
            log.info("watch of %s resumed", self.rt.plural)
        return False


def _revision(obj: dict[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class AssumedWrites:
    """A controller's own writes, read back until its informer has delivered them (as
    kube-scheduler assumes the pods it bound). A controller that decides from its cache and
    writes several objects must not decide again from a cache that holds some of those writes
    and not others: its next decision would undo or repeat the ones it cannot see yet.

    :meth:`overlay` puts each assumed object over the cache's view while the cache holds an
    older resourceVersion of it, and forgets it once the cache holds the same or a newer one,
    or no longer holds the object at all (deleted since). The hub's resourceVersions are its
    store's revisions, so they order writes (a client outside the hub may not compare them)."""

    def __init__(self) -> None:
        self._written: dict[Hashable, dict[str, Any]] = {}

    def assume(self, key: Hashable, written: dict[str, Any]) -> None:
        self._written[key] = written

    def overlay(self, current: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
        """``current`` (the cache's objects by key), with the writes it does not hold yet."""
        for key, written in list(self._written.items()):
            seen = current.get(key)
            if seen is None or _revision(seen) >= _revision(written):
                del self._written[key]
            else:
                current[key] = written
        return current

    def __len__(self) -> int:
        return len(self._written)
