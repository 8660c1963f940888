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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controlplane.apis.bookmarks import BOOKMARK_PERIOD
from controlplane.apis.kube.fieldlabels import BUILT_IN_FIELDS, FieldGetter, refusal, selectable

#: (collection, namespace or "") of a watched object: collection is "<apiVersion>/<plural>".
Scope = tuple[str, str]
Selector = Callable[[Mapping[str, str]], bool]


class Expired(Exception):
    """The resourceVersion asked for is older than the history (410 Gone)."""


@dataclass(frozen=True, slots=True)
class Event:
    resource_version: int
    collection: str
    namespace: str
    type: str
    object: dict[str, Any]


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """Field selector terms (``=``, ``==``, ``!=``), all of which an object must meet: (field,
    value, whether the field must equal it), read with the kind's field labels (``getters``)."""

    terms: tuple[tuple[str, str, bool], ...] = ()
    getters: Mapping[str, FieldGetter] = field(default_factory=dict)

    def matches(self, obj: dict[str, Any]) -> bool:
        return all((self.getters[name](obj) == value) == equal for name, value, equal in self.terms)

    def exact_name(self) -> str | None:
        """The name a ``metadata.name=x`` term pins (kube's ``RequiresExactMatch``)."""
        return next((value for name, value, equal in self.terms if name == "metadata.name" and equal), None)


@dataclass(eq=False, slots=True)
class Watch:
    collection: str
    namespace: str | None
    selector: Selector
    fields: FieldSelector = FieldSelector()
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)
    dropped: bool = False

    def matches(self, event: Event) -> bool:
        if event.collection != self.collection:
            return False
        if self.namespace is not None and event.namespace != self.namespace:
            return False
        metadata = event.object.get("metadata") or {}
        return self.fields.matches(event.object) and self.selector(metadata.get("labels") or {})


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
        self, collection: str, namespace: str | None, selector: Selector, since: int,
        *, fields: FieldSelector = FieldSelector(),
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


def _requirement(raw: str) -> tuple[str, str, str]:
    """(operator, key, value) of one requirement: "=", "!=", "exists" or "absent"."""
    if "!=" in raw:
        key, value = raw.split("!=", 1)
        return "!=", key.strip(), value.strip()
    if "=" in raw:
        key, value = raw.replace("==", "=").split("=", 1)
        return "=", key.strip(), value.strip()
    if raw.startswith("!"):
        return "absent", raw[1:].strip(), ""
    if " " in raw or "(" in raw:
        raise ValueError(f"unsupported label selector requirement {raw!r}: only =, ==, != and existence")
    return "exists", raw, ""


def _holds(requirement: tuple[str, str, str], labels: Mapping[str, str]) -> bool:
    operator, key, value = requirement
    if operator == "=":
        return labels.get(key) == value
    if operator == "!=":
        return labels.get(key) != value
    return (key in labels) == (operator == "exists")


def parse_selector(text: str) -> Selector:
    """An equality-based label selector (``a=b,c!=d,e,!f``); raises ValueError."""
    requirements = [_requirement(raw) for raw in filter(None, (part.strip() for part in text.split(",")))]
    return lambda labels: all(_holds(r, labels) for r in requirements)


def field_labels(collection: str, *, namespaced: bool) -> tuple[dict[str, FieldGetter], bool]:
    """The fields a selector of ``collection`` ("<apiVersion>/<plural>") may name, as the hub's
    registry serves them (a Pod's ``spec.nodeName``, ``status.phase`` ...), and whether the
    kind converts its own field labels (which decides kube's refusal)."""
    api_version, _, plural = collection.rpartition("/")
    group = api_version.rpartition("/")[0]
    extra = BUILT_IN_FIELDS.get((group, plural), {})
    return selectable(extra, own_conversion=bool(extra), namespaced=namespaced), bool(extra)


def parse_field_selector(text: str, collection: str, *, namespaced: bool) -> FieldSelector:
    """A field selector over the field labels of ``collection``; raises ValueError with kube's words."""
    getters, own_conversion = field_labels(collection, namespaced=namespaced)
    terms: list[tuple[str, str, bool]] = []
    for part in filter(None, (raw.strip() for raw in text.split(","))):
        operator = next((op for op in ("!=", "==", "=") if op in part), None)
        if operator is None:
            raise ValueError(f"invalid selector: '{text}'; can't understand '{part}'")
        name, _, value = part.partition(operator)
        if name.strip() not in getters:
            raise ValueError(refusal(name.strip(), own_conversion=own_conversion))
        terms.append((name.strip(), value.strip(), operator != "!="))
    return FieldSelector(tuple(terms), getters)
