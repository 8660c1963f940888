"""The values the hub has just seen, by key and revision: a read it can skip.

Each write's answer and each watch event carries a key's value at a revision, and a key's
value at a given ``mod_revision`` never changes (etcd's revisions only grow; a deleted and
re-created key starts at a new one). :class:`RecentStore` wraps a store and keeps the latest
such :class:`KeyValue` per key (at most ``capacity`` keys and ``max_bytes`` of values, least
recently seen dropped first), so
an update that names the revision it was made from (``metadata.resourceVersion``, as every
controller and agent update does) takes the stored object from here instead of reading it
from etcd again. The update itself is still a compare-and-swap on that revision: a stale
entry can only make it fail as a conflict, as the read would have, and a lost compare-and-swap
forgets the key, so that the next look at it (:func:`latest_seen`) reads the store.

Several wrappers may share one :class:`RecentValues` (the hub's API and its controllers).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator

from controlplane.storage.interface import Conflict, EventType, KeyValue, Progress, Store, WatchEvent
from controlplane.storage.wrapping import WrappedStore

DEFAULT_CAPACITY = 8192
#: What the kept values may weigh in all (the hub's memory, whatever its objects' sizes).
DEFAULT_MAX_BYTES = 64 * 2**20


class RecentValues:
    """The latest value seen per key, for at most ``capacity`` keys and ``max_bytes`` of values."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._kvs: OrderedDict[str, KeyValue] = OrderedDict()

    def saw(self, kv: KeyValue) -> None:
        current = self._kvs.get(kv.key)
        if current is not None and current.mod_revision >= kv.mod_revision:
            return
        if len(kv.value) > self._max_bytes // 16:
            self.forget(kv.key)  # a value this big is read when it is needed
            return
        self.forget(kv.key)
        self._kvs[kv.key] = kv
        self._bytes += len(kv.value)
        while len(self._kvs) > self._capacity or self._bytes > self._max_bytes:
            _, dropped = self._kvs.popitem(last=False)
            self._bytes -= len(dropped.value)

    def forget(self, key: str) -> None:
        dropped = self._kvs.pop(key, None)
        if dropped is not None:
            self._bytes -= len(dropped.value)

    def at(self, key: str, revision: int) -> KeyValue | None:
        """The value of ``key`` at exactly ``revision``, if it is the latest seen."""
        kv = self._kvs.get(key)
        return kv if kv is not None and kv.mod_revision == revision else None

    def latest(self, key: str) -> KeyValue | None:
        """The newest value of ``key`` seen, if it is kept."""
        return self._kvs.get(key)

    def newer_than(self, key: str, revision: int) -> bool:
        """Whether ``key`` is known to have changed after ``revision`` (so a compare-and-swap on
        ``revision`` cannot succeed)."""
        kv = self._kvs.get(key)
        return kv is not None and kv.mod_revision > revision

    def __len__(self) -> int:
        return len(self._kvs)


class RecentStore(WrappedStore):
    """``inner``, remembering in ``recent`` the values its writes, reads and watches return."""

    def __init__(self, inner: Store, recent: RecentValues | None = None) -> None:
        super().__init__(inner)
        self.recent = recent if recent is not None else RecentValues()

    def known(self, key: str, revision: int) -> KeyValue | None:
        return self.recent.at(key, revision)

    async def get(self, key: str) -> KeyValue:
        kv = await self.inner.get(key)
        self.recent.saw(kv)
        return kv

    async def create(self, key: str, value: bytes) -> KeyValue:
        kv = await self.inner.create(key, value)
        self.recent.saw(kv)
        return kv

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        try:
            kv = await self.inner.update(key, value, expected_revision=expected_revision)
        except Conflict:
            # Written by someone this store has not seen yet: what it remembers is stale, and the
            # retry (of a caller that reads "the latest seen") must read the store, not this.
            self.recent.forget(key)
            raise
        self.recent.saw(kv)
        return kv

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        self.recent.forget(key)
        return await self.inner.delete(key, expected_revision=expected_revision)

    def watch(
        self, prefix: str, *, from_revision: int, progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        return self.watch_seeing(prefix, from_revision, self._saw_event, progress)

    def _saw_event(self, event: WatchEvent) -> None:
        if event.type is EventType.DELETE:
            self.recent.forget(event.kv.key)
        else:
            self.recent.saw(event.kv)


def known_value(store: Store, key: str, revision: int) -> KeyValue | None:
    """``key`` at ``revision`` when ``store`` remembers it (a :class:`RecentStore`), else None."""
    return store.known(key, revision) if isinstance(store, RecentStore) else None


def latest_seen(store: Store, key: str) -> KeyValue | None:
    """The newest value of ``key`` that ``store`` (a :class:`RecentStore`) has seen, else None.
    Another process may have written the key since: only for callers whose writes are
    compare-and-swaps on the revision they read."""
    return store.recent.latest(key) if isinstance(store, RecentStore) else None


def known_stale(store: Store, key: str, revision: int) -> bool:
    """Whether ``store`` (a :class:`RecentStore`) has seen ``key`` change after ``revision``."""
    return isinstance(store, RecentStore) and store.recent.newer_than(key, revision)
