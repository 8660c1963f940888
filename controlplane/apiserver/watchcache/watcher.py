"""One watch served by the watch cache: its filters, its bounded queue, its event stream.

The cacher hands each event to the watchers its index names for the event's key (see
:attr:`CacheWatcher.trigger`) through :meth:`CacheWatcher.offer`, which never waits: an event
outside the watch's namespace or selectors is skipped (an object that stops matching arrives
as DELETED, showing the version the watch last saw at the event's resourceVersion, one that
starts as ADDED, as kube's cacher does from the event's previous object),
and a matching one is queued as a :class:`SharedEvent`. Watchers with the same selectors share
one :class:`Selection`, so an event is matched once per distinct selector, and the event's
:class:`SharedEvent` (object and encoded line) once per selection. A watcher whose queue is full -- its client reads slower than the type
changes -- is closed with a 410 ``Expired`` ERROR event, as kube's cacher closes an
unresponsive watcher; the client then watches again from the last resourceVersion it got,
or lists again. The others never wait for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.apis.bookmarks import BOOKMARK_BEFORE_TIMEOUT, next_bookmark
from controlplane.apis.kube.selectors import FieldSelector, LabelSelector
from controlplane.apiserver import errors
from controlplane.apiserver.objects.values import ObjectEvent, WatchEventType
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.watchcache.window import CachedEvent

#: Events one cached watch may have queued that its consumer has not taken.
DEFAULT_WATCHER_EVENTS = 1000
#: Encoded bytes of those events (shared with the other watchers of the same events).
DEFAULT_WATCHER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SharedEvent(ObjectEvent):
    """A watch event from the cache, with its line as the watch stream writes it
    (encoded once for every watcher that gets the same event)."""

    line: bytes = b""


#: The index entry of the watchers of every object of the type.
EVERY_KEY = ("", "")
#: A name in an index entry: the watchers of one object (``key``), or of one name in every namespace (``name``).
NAMESPACE, KEY, NAME = "namespace", "key", "name"

_UNSET: Any = object()


class Selection:
    """A label and field selector pair, shared by every watcher of a cache that asked for the
    same ones: an event is matched against it (and its previous version) once, however many
    watchers share it. Hashed by identity, so memos keyed by it cost one pointer hash."""

    __slots__ = ("fields", "filtered", "labels", "users")

    def __init__(self, labels: LabelSelector, fields: FieldSelector) -> None:
        self.labels = labels
        self.fields = fields
        self.filtered = not (labels.empty and fields.empty)
        #: Watchers of the cache that share it (kept by the cacher).
        self.users = 0

    def matches(self, obj: dict[str, Any]) -> bool:
        return self.labels.matches(obj["metadata"].get("labels")) and self.fields.matches(obj)

    def kind(self, event: CachedEvent) -> WatchEventType | None:
        """The type of ``event`` for a watch with these selectors; None when it does not see it."""
        if event.deleted:
            if self.filtered and not self.matches(event.object()):
                return None
            return WatchEventType.DELETED
        if not self.filtered:
            return WatchEventType.ADDED if event.created else WatchEventType.MODIFIED
        previous = event.prev_object()
        was = previous is not None and self.matches(previous)
        if self.matches(event.object()):
            return WatchEventType.MODIFIED if was else WatchEventType.ADDED
        return WatchEventType.DELETED if was else None

    def shared(self, event: CachedEvent) -> SharedEvent | None:
        """What a watch with these selectors queues for ``event`` (worked out once per event)."""
        found = event.memo.get(self, _UNSET)
        if found is not _UNSET:
            shared: SharedEvent | None = found
            return shared
        kind = self.kind(event)
        if kind is None:
            shared = None
        elif kind is WatchEventType.DELETED and not event.deleted:  # stopped matching: as it was
            left, line = event.left_selection()
            shared = SharedEvent(kind, left, event.revision, line)
        else:
            shared = SharedEvent(kind, event.object(), event.revision, event.line(kind))
        event.memo[self] = shared
        return shared


@dataclass(frozen=True, slots=True)
class WatcherLimits:
    max_events: int = DEFAULT_WATCHER_EVENTS
    max_bytes: int = DEFAULT_WATCHER_BYTES


class CacheWatcher:
    """The events of one watch: those after ``after``, under ``prefix``, matching the selectors."""

    def __init__(
        self,
        rt: ResourceType,
        *,
        prefix: str,
        labels: LabelSelector,
        fields: FieldSelector,
        after: int,
        limits: WatcherLimits,
    ) -> None:
        self._rt = rt
        self._prefix = prefix
        self.selection = Selection(labels, fields)
        self._after = after
        self._limits = limits
        self._queue: deque[SharedEvent] = deque()
        self._bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._bookmark_interval: float | None = None
        self._bookmark_before_timeout = BOOKMARK_BEFORE_TIMEOUT
        self._deadline: float | None = None
        self._bookmark_timer: asyncio.TimerHandle | None = None
        self._bookmark_due = False
        self._error: errors.ApiError | None = None
        self._closed = False
        #: The latest revision the cache has sent this watch past (what a BOOKMARK carries,
        #: unless the cache it follows is further on: see :meth:`follow`).
        self.last_revision = after
        self._progress: Callable[[], int] | None = None
        #: The cacher's index entry for this watch: the events it may see are those of every
        #: key (:data:`EVERY_KEY`), of one namespace, of one key, or of one name in every namespace.
        self.trigger = _trigger(rt, prefix, fields.exact_name())

    @property
    def closed(self) -> bool:
        return self._closed

    def matches(self, obj: dict[str, Any]) -> bool:
        return self.selection.matches(obj)

    def follow(self, progress: Callable[[], int]) -> None:
        """``progress()`` is the revision up to which every event this watch may see was offered
        to it (the cache's revision): its bookmarks carry that."""
        self._progress = progress

    @property
    def bookmark_revision(self) -> int:
        if self._progress is None:
            return self.last_revision
        return max(self.last_revision, self._progress())

    def offer(self, event: CachedEvent) -> bool:
        """Queue ``event`` if this watch wants it; False when the queue overflowed (the watch is closed)."""
        if self._closed or event.revision <= self._after:
            return not self._closed
        self.last_revision = event.revision
        if not event.key.startswith(self._prefix):
            return True
        shared = self.selection.shared(event)
        if shared is None:
            return True
        if len(self._queue) >= self._limits.max_events or self._bytes >= self._limits.max_bytes:
            self.close(errors.Gone(
                f"too old resource version: {self._queue[0].revision} ({event.revision}): the watch fell "
                f"{len(self._queue)} events behind and was closed; watch again from the last resourceVersion "
                "received, or list again"
            ))
            return False
        self._queue.append(shared)
        self._bytes += len(shared.line)
        self._wake()
        return True

    def close(self, error: errors.ApiError | None = None) -> None:
        """No events after those queued; then ``error`` (if any) ends the stream."""
        if self._closed:
            return
        self._closed = True
        self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        """Until an event is queued, the watch is closed, or a bookmark is due."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _schedule_bookmark(self, now: float) -> None:
        """Set the one timer of this watch for its next bookmark (:func:`next_bookmark`), if any is left."""
        interval = self._bookmark_interval
        if interval is None or self._closed:
            return
        at = next_bookmark(now, deadline=self._deadline, period=interval, before_timeout=self._bookmark_before_timeout)
        if at is not None:
            self._bookmark_timer = asyncio.get_running_loop().call_at(at, self._bookmark_fire, at)

    def _bookmark_fire(self, at: float) -> None:
        """A bookmark is due: the watch sends it once the events queued before it are out."""
        self._bookmark_timer = None
        if self._closed:
            return
        self._bookmark_due = True
        self._wake()
        # Counted from the moment it was due (a timer may fire a hair early), as kube's cacher
        # schedules a watcher's next bookmark when it dispatches one.
        self._schedule_bookmark(max(asyncio.get_running_loop().time(), at))

    async def batches(
        self,
        *,
        bookmark_interval: float | None,
        deadline: float | None = None,
        bookmark_before_timeout: float = BOOKMARK_BEFORE_TIMEOUT,
        on_close: Callable[[CacheWatcher], None],
    ) -> AsyncGenerator[Sequence[ObjectEvent]]:
        """Every event queued, as one batch, as they come (one wake-up of the consumer per batch
        however many events it holds); with ``bookmark_interval``, a BOOKMARK every that many
        seconds, events or not, and one ``bookmark_before_timeout`` seconds before ``deadline`` (the
        event-loop time at which the server ends the watch), as kube's cacher sends them. A batch is the consumer's (it no
        longer counts against the queue's bound) and must not be changed: its events are shared
        with the other watchers. A bookmark goes only once the watch has moved past its start
        revision (kube's ``cacheWatcher.process`` drops one at it)."""
        self._bookmark_interval = bookmark_interval
        self._bookmark_before_timeout = bookmark_before_timeout
        self._deadline = deadline
        self._schedule_bookmark(asyncio.get_running_loop().time())
        try:
            while True:
                if self._queue:
                    batch, self._queue = self._queue, deque()
                    self._bytes = 0
                    # What a bookmark due now carries: every event up to it is in this batch (events
                    # queued while the consumer writes the batch are later than it).
                    revision = self.bookmark_revision
                    yield batch
                    del batch
                    if self._bookmark_due and not self._closed:
                        self._bookmark_due = False
                        yield (bookmark(self._rt, revision),)  # past the start: the batch is later
                    continue
                if self._closed:  # closed meanwhile (410, too far behind): no bookmark before its error
                    if self._error is not None:
                        raise self._error
                    return
                if self._bookmark_due:
                    self._bookmark_due = False
                    revision = self.bookmark_revision
                    # As kube's cacheWatcher, none at the watch's start revision: the client
                    # has it already (the initial-events-end bookmark is sent apart).
                    if revision > self._after:
                        yield (bookmark(self._rt, revision),)
                    continue
                await self._wait()
        finally:
            self._closed = True
            self._queue.clear()
            if self._bookmark_timer is not None:
                self._bookmark_timer.cancel()
                self._bookmark_timer = None
            on_close(self)


async def one_by_one(batches: AsyncGenerator[Sequence[ObjectEvent]]) -> AsyncGenerator[ObjectEvent]:
    """The events of a stream of batches, one at a time."""
    try:
        async for batch in batches:
            for event in batch:
                yield event
    finally:
        await batches.aclose()


async def in_batches_of_one(events: AsyncIterator[ObjectEvent]) -> AsyncGenerator[Sequence[ObjectEvent]]:
    """An event stream as batches of one event (a source that cannot tell what is waiting)."""
    try:
        async for event in events:
            yield (event,)
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def _trigger(rt: ResourceType, prefix: str, name: str | None) -> tuple[str, str]:
    every = rt.key_prefix(None)
    if name is not None:
        return (NAME, name) if prefix == every else (KEY, prefix + name)
    return EVERY_KEY if prefix == every else (NAMESPACE, prefix)


def event_triggers(every: str, key: str) -> tuple[tuple[str, str], ...]:
    """The index entries whose watchers may see an event of ``key`` (``every``: the type's prefix)."""
    cut = key.rfind("/") + 1
    scope = key[:cut]
    if scope == every:
        return EVERY_KEY, (KEY, key), (NAME, key[cut:])
    return EVERY_KEY, (NAMESPACE, scope), (KEY, key), (NAME, key[cut:])


def bookmark(rt: ResourceType, revision: int, *, initial_events_end: bool = False) -> ObjectEvent:
    """A BOOKMARK at ``revision`` (with the ``k8s.io/initial-events-end`` annotation when it ends
    a watch-list's initial events)."""
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if initial_events_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    return ObjectEvent(
        WatchEventType.BOOKMARK, {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": metadata}, revision
    )
