"""A revisioned in-memory :class:`~controlplane.storage.interface.Store`.

Unit tests and simulated member clusters (thousands of pods each) need a store that
behaves like etcd -- global revisions, compare-and-swap, reads as of a past revision,
watches that replay history, compaction and ``Gone`` -- without a process to run.

In: keys (str, starting with "/") and opaque values (bytes), exactly as for the etcd store.
Out: :class:`KeyValue`, :class:`ListResult` and :class:`WatchEvent` with the same
revision semantics as etcd: a fresh store is at revision 1 and every write adds one.

Memory stays bounded: the event log keeps at most ``max_events`` events (older ones
are compacted automatically, raising the compacted revision), a key's history keeps
only the versions newer than the compacted revision plus the one visible at it, and
each watcher buffers at most ``watch_queue_size`` undelivered events -- a watcher that
falls further behind is ended with :class:`Gone` and must relist. A watch given a ``progress``
callback is told the store's revision, as etcd's progress notifications tell it, whenever it has
handed over every event of its prefix: when it goes idle, and at each write elsewhere meanwhile.

Every operation runs without suspending, so each one is atomic with respect to the
other asyncio tasks that share the store. The store is not thread-safe.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice

from controlplane.lifecycle import Lifecycle
from controlplane.storage.interface import (
    AlreadyExists,
    Conflict,
    EventType,
    FutureRevision,
    Gone,
    KeyValue,
    ListResult,
    NotFound,
    Progress,
    Unavailable,
    WatchEvent,
    check_key,
    check_list,
    check_prefix,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_EVENTS = 10_000
DEFAULT_WATCH_QUEUE_SIZE = 10_000

#: One version of a key: (revision written, value or None for a deletion).
_Version = tuple[int, KeyValue | None]


@dataclass(eq=False, slots=True)
class _Watcher:
    """The buffer between the store's writers and one watch iterator."""

    prefix: str
    from_revision: int
    capacity: int
    pending: deque[WatchEvent] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    #: Revision of the first event this watcher could not buffer; it then ends with Gone.
    overflowed_at: int | None = None
    closed: bool = False
    #: Told the revision of each write elsewhere while every event of the prefix is handed over.
    progress: Progress | None = None
    #: Past the replay of history: what it hands over now comes from :attr:`pending`.
    live: bool = False

    def offer(self, event: WatchEvent) -> bool:
        """Buffer ``event``; return False (and mark the watcher overflowed) when full."""
        if len(self.pending) >= self.capacity:
            self.overflowed_at = event.kv.mod_revision
            self.wakeup.set()
            return False
        self.pending.append(event)
        self.wakeup.set()
        return True


class MemoryStore(Lifecycle):
    """In-memory store with etcd's revision, compaction and watch semantics."""

    def __init__(
        self,
        *,
        max_events: int = DEFAULT_MAX_EVENTS,
        watch_queue_size: int = DEFAULT_WATCH_QUEUE_SIZE,
    ) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be at least 1, got {max_events}")
        if watch_queue_size < 1:
            raise ValueError(f"watch_queue_size must be at least 1, got {watch_queue_size}")
        self._max_events = max_events
        self._watch_queue_size = watch_queue_size
        self._revision = 1
        self._compacted = 0
        self._live: dict[str, KeyValue] = {}
        # Every key with any retained version (live or deleted), kept sorted so that a
        # prefix list costs O(log n + matching keys).
        self._keys: list[str] = []
        self._history: dict[str, list[_Version]] = {}
        # Events of consecutive revisions; the event of revision r sits at r - log[0].revision.
        self._log: deque[WatchEvent] = deque()
        self._watchers: set[_Watcher] = set()
        self._closed = False
        #: Called with every write's event before it is made (a write journal); what it raises
        #: fails the write.
        self.on_commit: Callable[[WatchEvent], None] | None = None

    @property
    def compacted_revision(self) -> int:
        """Revisions below this one are forgotten (0 until the first compaction)."""
        return self._compacted

    # -- reads ---------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue:
        self._check_open()
        check_key(key)
        try:
            return self._live[key]
        except KeyError:
            raise NotFound(f"key {key!r} not found") from None

    async def list(
        self,
        prefix: str,
        *,
        revision: int | None = None,
        limit: int = 0,
        start_after: str | None = None,
    ) -> ListResult:
        self._check_open()
        check_list(prefix, limit=limit)
        if revision is not None:
            self._check_readable(revision)
        at = self._revision if revision is None else revision
        if start_after is not None and start_after >= prefix:
            index = bisect.bisect_right(self._keys, start_after)
        else:
            index = bisect.bisect_left(self._keys, prefix)
        items: list[KeyValue] = []
        remaining = 0
        keys = self._keys
        while index < len(keys) and keys[index].startswith(prefix):
            key = keys[index]
            index += 1
            kv = self._live.get(key) if revision is None else self._value_at(key, at)
            if kv is None:
                continue
            if limit and len(items) == limit:
                remaining += 1  # counted as etcd's range count does, past the limit
                continue
            items.append(kv)
        more = remaining > 0
        return ListResult(items=items, revision=at, more=more, remaining=remaining if more else None)

    async def current_revision(self) -> int:
        self._check_open()
        return self._revision

    # -- writes --------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        self._check_open()
        check_key(key)
        if key in self._live:
            raise AlreadyExists(f"key {key!r} already exists")
        revision = self._revision + 1
        kv = KeyValue(key=key, value=value, create_revision=revision, mod_revision=revision)
        self._commit(key, kv, WatchEvent(type=EventType.PUT, kv=kv, created=True))
        return kv

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        self._check_open()
        check_key(key)
        current = self._live.get(key)
        if current is None:
            raise NotFound(f"key {key!r} not found")
        if current.mod_revision != expected_revision:
            raise Conflict(f"key {key!r} is at revision {current.mod_revision}, expected {expected_revision}")
        revision = self._revision + 1
        kv = KeyValue(key=key, value=value, create_revision=current.create_revision, mod_revision=revision)
        self._commit(key, kv, WatchEvent(type=EventType.PUT, kv=kv))
        return kv

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        self._check_open()
        check_key(key)
        current = self._live.get(key)
        if current is None:
            raise NotFound(f"key {key!r} not found")
        if expected_revision is not None and current.mod_revision != expected_revision:
            raise Conflict(f"key {key!r} is at revision {current.mod_revision}, expected {expected_revision}")
        revision = self._revision + 1
        deleted = KeyValue(
            key=key,
            value=current.value,
            create_revision=current.create_revision,
            mod_revision=revision,
        )
        self._commit(key, None, WatchEvent(type=EventType.DELETE, kv=deleted))
        return deleted

    async def compact(self, revision: int) -> None:
        self._check_open()
        if revision > self._revision:
            raise ValueError(f"cannot compact to revision {revision}: the store is at {self._revision}")
        if revision <= self._compacted:
            return
        self._compact_to(revision)

    def restore(self, items: Iterable[KeyValue], *, revision: int) -> None:
        """Load ``items`` (e.g. read back from a snapshot) into this new, unwritten store.

        Every item keeps its create and mod revisions, so resourceVersions survive a
        restart. The store then stands at ``revision + 1``, with everything before that
        compacted: the history leading up to the snapshot is not in it, so a watch from
        any revision up to ``revision`` raises :class:`Gone` and its client relists,
        while a client that had seen exactly the snapshot's state resumes without one.
        """
        self._check_open()
        if self._revision != 1 or self._history:
            raise ValueError("restore() needs a new store that has not been written to")
        if revision < 1:
            raise ValueError(f"revision must be at least 1, got {revision}")
        live: dict[str, KeyValue] = {}
        for kv in items:
            check_key(kv.key)
            if kv.key in live:
                raise ValueError(f"key {kv.key!r} appears twice")
            if not 1 < kv.create_revision <= kv.mod_revision <= revision:
                raise ValueError(
                    f"key {kv.key!r}: need 1 < create revision <= mod revision <= {revision}, "
                    f"got {kv.create_revision} and {kv.mod_revision}"
                )
            live[kv.key] = kv
        self._live = live
        self._keys = sorted(live)
        self._history = {key: [(kv.mod_revision, kv)] for key, kv in live.items()}
        self._revision = revision + 1
        self._compacted = revision + 1

    # -- watch ---------------------------------------------------------------------

    def watch(
        self, prefix: str, *, from_revision: int, progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        check_prefix(prefix)
        return self._watch(prefix, from_revision, progress)

    async def _watch(self, prefix: str, from_revision: int, progress: Progress | None) -> AsyncIterator[WatchEvent]:
        self._check_open()
        start = max(from_revision, 1)
        if start < self._compacted:
            raise Gone(
                f"watch from revision {from_revision}: history before {self._compacted} is compacted",
                compacted_revision=self._compacted,
            )
        # Snapshot the replay and register in one step (no await between them), so no
        # event is missed or seen twice at the seam.
        replay = [event for event in self._events_from(start) if event.kv.key.startswith(prefix)]
        watcher = _Watcher(
            prefix=prefix,
            from_revision=max(start, self._revision + 1),
            capacity=self._watch_queue_size,
            progress=progress,
        )
        self._watchers.add(watcher)
        try:
            for event in replay:
                yield event
            watcher.live = True
            while True:
                if watcher.pending:
                    yield watcher.pending.popleft()
                    continue
                if watcher.overflowed_at is not None:
                    raise Gone(
                        f"watch on {prefix!r} fell more than {watcher.capacity} events behind "
                        f"at revision {watcher.overflowed_at}; relist",
                        compacted_revision=watcher.overflowed_at,
                    )
                if watcher.closed:
                    return
                if progress is not None:  # every event up to now is handed over: etcd's progress notification
                    progress(self._revision)
                watcher.wakeup.clear()
                await watcher.wakeup.wait()
        finally:
            self._unregister(watcher)

    # -- lifecycle -----------------------------------------------------------------

    async def close(self) -> None:
        self._closed = True
        for watcher in self._watchers:
            watcher.closed = True
            watcher.wakeup.set()
        self._watchers.clear()

    shutdown = close

    # -- internals -----------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise Unavailable("the in-memory store is closed")

    def _check_readable(self, revision: int) -> None:
        if revision < self._compacted:
            raise Gone(
                f"revision {revision} is compacted (compacted revision {self._compacted})",
                compacted_revision=self._compacted,
            )
        if revision > self._revision:
            raise FutureRevision(
                f"revision {revision} is in the future (current revision {self._revision})",
                revision=revision, current_revision=self._revision,
            )

    def _value_at(self, key: str, revision: int) -> KeyValue | None:
        for written, kv in reversed(self._history[key]):
            if written <= revision:
                return kv
        return None

    def _events_from(self, revision: int) -> islice[WatchEvent]:
        if not self._log:
            return islice(self._log, 0)
        return islice(self._log, max(revision - self._log[0].kv.mod_revision, 0), None)

    def _commit(self, key: str, kv: KeyValue | None, event: WatchEvent) -> None:
        if self.on_commit is not None:
            self.on_commit(event)  # first: a write it cannot record is not made
        self._revision += 1
        if kv is None:
            del self._live[key]
        else:
            self._live[key] = kv
        history = self._history.get(key)
        if history is None:
            self._history[key] = [(self._revision, kv)]
            bisect.insort(self._keys, key)
        else:
            history.append((self._revision, kv))
        self._log.append(event)
        self._notify(event)
        if len(self._log) > self._max_events:
            self._compact_to(self._log[-self._max_events].kv.mod_revision)

    def _notify(self, event: WatchEvent) -> None:
        revision = event.kv.mod_revision
        overflowed: list[_Watcher] = []
        for watcher in self._watchers:
            if revision < watcher.from_revision:
                continue
            if not event.kv.key.startswith(watcher.prefix):
                # As etcd's progress notification, at once: with nothing pending, the watch's
                # consumer has taken every event of its prefix up to this write.
                if watcher.progress is not None and watcher.live and not watcher.pending:
                    watcher.progress(revision)
                continue
            if not watcher.offer(event):
                overflowed.append(watcher)
        for watcher in overflowed:
            logger.warning(
                "watch fell behind and was ended; it must relist",
                extra={"prefix": watcher.prefix, "revision": revision},
            )
            self._unregister(watcher)

    def _unregister(self, watcher: _Watcher) -> None:
        self._watchers.discard(watcher)

    def _compact_to(self, revision: int) -> None:
        """Forget every version and event older than ``revision``."""
        self._compacted = revision
        touched: set[str] = set()
        while self._log and self._log[0].kv.mod_revision < revision:
            touched.add(self._log.popleft().kv.key)
        for key in touched:
            self._compact_key(key, revision)
        logger.debug("compacted in-memory store", extra={"revision": revision})

    def _compact_key(self, key: str, revision: int) -> None:
        history = self._history[key]
        # Keep versions at or after ``revision`` plus the one visible at ``revision``.
        cut = bisect.bisect_left(history, revision, key=lambda version: version[0])
        keep_from = cut
        if cut and history[cut - 1][1] is not None:
            keep_from = cut - 1
        del history[:keep_from]
        if not history:
            del self._history[key]
            del self._keys[bisect.bisect_left(self._keys, key)]
