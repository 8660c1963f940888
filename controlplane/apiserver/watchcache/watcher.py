"""One watch served by the watch cache: its filters, its bounded queue, its event stream.

The cacher hands every event of its type to :meth:`CacheWatcher.offer`, which never waits:
an event outside the watch's namespace or selectors is skipped (an object that stops matching
arrives as DELETED, one that starts as ADDED, as kube's cacher does from the event's previous
object), and a matching one is queued as a :class:`SharedEvent` whose line every watcher of
that event shares. A watcher whose queue is full -- its client reads slower than the type
changes -- is closed with a 410 ``Expired`` ERROR event, as kube's cacher closes an
unresponsive watcher; the client then watches again from the last resourceVersion it got,
or lists again. The others never wait for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.objects.values import ObjectEvent, WatchEventType
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.selectors import FieldSelector, LabelSelector
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
        self._labels = labels
        self._fields = fields
        self._filtered = not (labels.empty and fields.empty)
        self._after = after
        self._limits = limits
        self._queue: deque[SharedEvent] = deque()
        self._bytes = 0
        self._wake = asyncio.Event()
        self._error: errors.ApiError | None = None
        self._closed = False
        #: The latest revision the cache has sent this watch past (what a BOOKMARK carries).
        self.last_revision = after

    @property
    def closed(self) -> bool:
        return self._closed

    def matches(self, obj: dict[str, Any]) -> bool:
        return self._labels.matches(obj["metadata"].get("labels")) and self._fields.matches(obj)

    def offer(self, event: CachedEvent) -> bool:
        """Queue ``event`` if this watch wants it; False when the queue overflowed (the watch is closed)."""
        if self._closed or event.revision <= self._after:
            return not self._closed
        self.last_revision = event.revision
        if not event.key.startswith(self._prefix):
            return True
        kind = self._kind(event)
        if kind is None:
            return True
        if len(self._queue) >= self._limits.max_events or self._bytes >= self._limits.max_bytes:
            self.close(errors.Gone(
                f"too old resource version: {self._queue[0].revision} ({event.revision}): the watch fell "
                f"{len(self._queue)} events behind and was closed; watch again from the last resourceVersion "
                "received, or list again"
            ))
            return False
        line = event.line(kind)
        self._queue.append(SharedEvent(kind, event.object(), event.revision, line))
        self._bytes += len(line)
        self._wake.set()
        return True

    def _kind(self, event: CachedEvent) -> WatchEventType | None:
        if event.deleted:
            if self._filtered and not self.matches(event.object()):
                return None
            return WatchEventType.DELETED
        if not self._filtered:
            return WatchEventType.ADDED if event.created else WatchEventType.MODIFIED
        previous = event.prev_object()
        was = previous is not None and self.matches(previous)
        if self.matches(event.object()):
            return WatchEventType.MODIFIED if was else WatchEventType.ADDED
        return WatchEventType.DELETED if was else None

    def close(self, error: errors.ApiError | None = None) -> None:
        """No events after those queued; then ``error`` (if any) ends the stream."""
        if self._closed:
            return
        self._closed = True
        self._error = error
        self._wake.set()

    async def events(
        self, *, bookmark_interval: float | None, on_close: Callable[[CacheWatcher], None]
    ) -> AsyncGenerator[ObjectEvent]:
        """The queued events as they come; a BOOKMARK after ``bookmark_interval`` seconds without one."""
        try:
            while True:
                while self._queue:
                    event = self._queue.popleft()
                    self._bytes -= len(event.line)
                    yield event
                    del event
                if self._closed:
                    if self._error is not None:
                        raise self._error
                    return
                self._wake.clear()
                if bookmark_interval is None:
                    await self._wake.wait()
                    continue
                try:
                    async with asyncio.timeout(bookmark_interval):
                        await self._wake.wait()
                except TimeoutError:
                    yield bookmark(self._rt, self.last_revision)
        finally:
            self._closed = True
            self._queue.clear()
            on_close(self)


def bookmark(rt: ResourceType, revision: int, *, initial_events_end: bool = False) -> ObjectEvent:
    """A BOOKMARK at ``revision`` (with the ``k8s.io/initial-events-end`` annotation when it ends
    a watch-list's initial events)."""
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if initial_events_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    return ObjectEvent(
        WatchEventType.BOOKMARK, {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": metadata}, revision
    )
