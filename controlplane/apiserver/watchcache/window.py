"""The watch cache's pure parts: one store event as the cache keeps it, and the window of
recent events a watch may resume from.

A :class:`CachedEvent` is decoded at most once however many watchers receive it, and each
of its watch lines (``{"type": ..., "object": ...}``) is encoded at most once per event
type (and what each distinct selection of watchers gets of it worked out once);
:meth:`CachedEvent.release` drops all that once the event has been fanned out, so the
window keeps only the stored bytes. An :class:`EventWindow` keeps the latest events, bounded
by count and by stored bytes; a watch from revision ``r`` resumes from it while ``r`` is at
or after its :attr:`EventWindow.floor` (every later event is still in it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from controlplane.apiserver import codec
from controlplane.apiserver.objects.reading import decode
from controlplane.apiserver.objects.values import WatchEventType
from controlplane.apiserver.resources import ResourceType
from controlplane.storage import interface as storage

#: Events a cache keeps for watches that resume from a resourceVersion.
DEFAULT_WINDOW_EVENTS = 10_000
#: Stored bytes of those events.
DEFAULT_WINDOW_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class CacheCounters:
    """What a cache did: lists of the store, store events taken, objects decoded, watch lines
    encoded; and the watches it now serves."""

    lists: int = 0
    events: int = 0
    watchers: int = 0
    decodes: int = 0
    lines: int = 0


class CachedEvent:
    """One store event of the cached type, with the value it replaced (``prev``)."""

    __slots__ = (
        "_left", "_lines", "_object", "_prev_object", "counters", "created", "deleted", "kv", "memo", "prev", "rt",
    )

    def __init__(
        self,
        rt: ResourceType,
        event: storage.WatchEvent,
        prev: storage.KeyValue | None,
        counters: CacheCounters,
    ) -> None:
        self.rt = rt
        self.kv = event.kv
        self.deleted = event.type is storage.EventType.DELETE
        self.created = event.created
        self.prev = prev
        self.counters = counters
        self._object: dict[str, Any] | None = None
        self._prev_object: dict[str, Any] | None = None
        self._lines: dict[WatchEventType, bytes] = {}
        self._left: tuple[dict[str, Any], bytes] | None = None
        #: What each selection of watchers gets of this event, worked out once (see ``Selection.shared``).
        self.memo: dict[Any, Any] = {}

    @property
    def revision(self) -> int:
        return self.kv.mod_revision

    @property
    def key(self) -> str:
        return self.kv.key

    @property
    def size(self) -> int:
        return len(self.kv.value)

    def object(self) -> dict[str, Any]:
        """The object as served (decoded once; shared: never change it)."""
        if self._object is None:
            self.counters.decodes += 1
            self._object = decode(self.rt, self.kv)
        return self._object

    def prev_object(self) -> dict[str, Any] | None:
        """The object this event replaced, or None when it created it."""
        if self.prev is None:
            return None
        if self._prev_object is None:
            self.counters.decodes += 1
            self._prev_object = decode(self.rt, self.prev)
        return self._prev_object

    def line(self, kind: WatchEventType) -> bytes:
        """This event as a watch stream's line of type ``kind`` (encoded once per type)."""
        line = self._lines.get(kind)
        if line is None:
            self.counters.lines += 1
            line = self._lines[kind] = codec.dumps({"type": kind.value, "object": self.object()}) + b"\n"
        return line

    def left_selection(self) -> tuple[dict[str, Any], bytes]:
        """What a watch whose selectors the object stops matching with this event gets, and its
        line: DELETED with the object as it was before (the one the watch last saw), at this
        event's resourceVersion, as kube's cacher sends it."""
        if self._left is None:
            previous = self.prev_object()
            assert previous is not None, "an object that stops matching had a previous version"
            left = {**previous, "metadata": {**previous["metadata"], "resourceVersion": str(self.revision)}}
            self.counters.lines += 1
            line = codec.dumps({"type": WatchEventType.DELETED.value, "object": left}) + b"\n"
            self._left = (left, line)
        return self._left

    def release(self) -> None:
        """Forget the decoded objects and lines (the watchers that got them keep theirs)."""
        self._object = self._prev_object = self._left = None
        self._lines = {}
        self.memo = {}


class EventWindow:
    """The latest events, at most ``max_events`` of them and ``max_bytes`` stored bytes
    (one event is always kept, however large)."""

    def __init__(self, *, max_events: int = DEFAULT_WINDOW_EVENTS, max_bytes: int = DEFAULT_WINDOW_BYTES) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError(f"the event window must be positive, got {max_events} events and {max_bytes} bytes")
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._events: deque[CachedEvent] = deque()
        self._bytes = 0
        #: A watch from this revision or later resumes from the window.
        self.floor = 0

    def __len__(self) -> int:
        return len(self._events)

    @property
    def stored_bytes(self) -> int:
        return self._bytes

    def reset(self, revision: int) -> None:
        """Start over from a list read at ``revision``."""
        self._events.clear()
        self._bytes = 0
        self.floor = revision

    def append(self, event: CachedEvent) -> None:
        self._events.append(event)
        self._bytes += event.size
        while len(self._events) > 1 and (len(self._events) > self._max_events or self._bytes > self._max_bytes):
            dropped = self._events.popleft()
            self._bytes -= dropped.size
            self.floor = dropped.revision

    def since(self, revision: int) -> list[CachedEvent] | None:
        """The events after ``revision``, oldest first; None when some are no longer kept."""
        if revision < self.floor:
            return None
        later: list[CachedEvent] = []
        for event in reversed(self._events):
            if event.revision <= revision:
                break
            later.append(event)
        later.reverse()
        return later
