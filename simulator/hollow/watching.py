"""Watch events of one hollow member: a bounded history and the open watches.

Every change gets the member's next resourceVersion and is kept in a history of the last
``history`` events, so a watch can start from a resourceVersion a LIST returned; one older
than the history answers 410 Gone (the client relists), as kube-apiserver's watch cache
does after compaction. Each open watch has a bounded queue; a watcher that falls more than
``queue_limit`` events behind is closed with 410 rather than holding memory. A watch that asked
for bookmarks gets one at kube's cadence (:func:`controlplane.apis.bookmarks.next_bookmark`, as
the hub's watches): the member's current resourceVersion, so a watch that sees no events (nodes) still resumes from a recent version.

Pure asyncio, no I/O.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from controlplane.apis.bookmarks import BOOKMARK_PERIOD
from controlplane.apis.kube.fieldlabels import BUILT_IN_FIELDS, FieldGetter, selectable
from controlplane.apis.kube.selectors import FieldSelector, LabelSelector

#: (collection, namespace or "") of a watched object: collection is "<apiVersion>/<plural>".
Scope = tuple[str, str]


class Expired(Exception):
    """The resourceVersion asked for is older than the history (410 Gone)."""


@dataclass(frozen=True, slots=True)
class Event:
    resource_version: int
    collection: str
    namespace: str
    type: str
    object: dict[str, Any]


@dataclass(eq=False, slots=True)
class Watch:
    collection: str
    namespace: str | None
    selector: LabelSelector
    fields: FieldSelector
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)
    dropped: bool = False

    def matches(self, event: Event) -> bool:
        if event.collection != self.collection:
            return False
        if self.namespace is not None and event.namespace != self.namespace:
            return False
        metadata = event.object.get("metadata") or {}
        return self.fields.matches(event.object) and self.selector.matches(metadata.get("labels"))


class WatchHub:
    def __init__(self, *, history: int = 4096, queue_limit: int = 10_000, bookmark_period: float = BOOKMARK_PERIOD) -> None:
        self.revision = 1
        self._history: deque[Event] = deque(maxlen=history)
        self._watches: set[Watch] = set()
        self.queue_limit = queue_limit
        self.bookmark_period = bookmark_period

    def next_revision(self) -> int:
        self.revision += 1
        return self.revision

    def publish(self, event: Event) -> None:
        self._history.append(event)
        for watch in list(self._watches):
            if not watch.matches(event):
                continue
            if watch.queue.qsize() >= self.queue_limit:
                self.close(watch, dropped=True)
            else:
                watch.queue.put_nowait(event)

    def open(
        self, collection: str, namespace: str | None, selector: LabelSelector, since: int,
        *, fields: FieldSelector,
    ) -> Watch:
        """A watch that first gets the history after ``since``; raises :class:`Expired`."""
        oldest = self._history[0].resource_version if self._history else self.revision + 1
        if since < oldest - 1 and len(self._history) == self._history.maxlen:
            raise Expired(f"too old resource version: {since} ({oldest - 1})")
        watch = Watch(collection, namespace, selector, fields)
        for event in self._history:
            if event.resource_version > since and watch.matches(event):
                watch.queue.put_nowait(event)
        self._watches.add(watch)
        return watch

    def close(self, watch: Watch, *, dropped: bool = False) -> None:
        if watch in self._watches:
            self._watches.discard(watch)
            watch.dropped = dropped
            watch.queue.put_nowait(None)

    @property
    def open_watches(self) -> int:
        return len(self._watches)


def field_labels(collection: str, *, namespaced: bool) -> tuple[dict[str, FieldGetter], bool]:
    """The fields a selector of ``collection`` ("<apiVersion>/<plural>") may name, as the hub's
    registry serves them (a Pod's ``spec.nodeName``, ``status.phase`` ...), and whether the
    kind converts its own field labels (which decides kube's refusal)."""
    api_version, _, plural = collection.rpartition("/")
    group = api_version.rpartition("/")[0]
    extra = BUILT_IN_FIELDS.get((group, plural), {})
    return selectable(extra, own_conversion=bool(extra), namespaced=namespaced), bool(extra)
