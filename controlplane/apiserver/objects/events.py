"""Watching objects: a store's change stream as kube's watch events.

:func:`watch_events` lists the current objects as ADDED (or starts after a given
resourceVersion, Gone when it is compacted), then translates every store change into
ADDED/MODIFIED/DELETED. With selectors, an object that stops matching arrives as DELETED
(showing the version the watch last saw, at the change's resourceVersion, as kube's) and one
that starts as ADDED; with a bookmark interval, a BOOKMARK carries the last
revision seen on kube's beat (:func:`~controlplane.apis.bookmarks.next_bookmark`: every
interval, and shortly before the watch's deadline) once the watch has moved past its start
revision. It keeps no event its consumer has taken, so a slow watcher holds at most one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from controlplane.apis.bookmarks import next_bookmark
from controlplane.apiserver import errors
from controlplane.apiserver.objects.reading import (
    decode,
    field_selector_of,
    label_selector_of,
    parse_resource_version,
    store_call,
    store_revision,
)
from controlplane.apiserver.objects.values import ObjectEvent, WatchEventType, WatchOptions
from controlplane.apiserver.resources import ResourceType
from controlplane.storage import interface as storage


async def watch_events(
    store: storage.Store,
    rt: ResourceType,
    *,
    namespace: str | None,
    options: WatchOptions,
) -> AsyncIterator[ObjectEvent]:
    """Events for objects of ``rt`` as kube's watch sends them.

    ``resource_version`` absent or "0": the current objects as ADDED, then changes.
    "N": changes after revision N (Gone when N is compacted). With selectors, an
    object that stops matching arrives as DELETED and one that starts as ADDED.
    With ``bookmark_interval``, a BOOKMARK event carries the last revision seen every
    that many seconds, events or not, and once more ``options.bookmark_before_timeout`` seconds
    before ``options.deadline``;
    none while that is still the watch's start revision.
    """
    resource_version, bookmark_interval = options.resource_version, options.bookmark_interval
    labels = label_selector_of(options.label_selector)
    fields = field_selector_of(rt, options.field_selector)
    filtered = not (labels.empty and fields.empty)
    prefix = rt.key_prefix(namespace)
    matched: set[str] = set()

    def matches(obj: dict[str, Any]) -> bool:
        return labels.matches(obj["metadata"].get("labels")) and fields.matches(obj)

    if resource_version in (None, "", "0"):
        listed = await store_call(rt, "", store.list(prefix))
        start = listed.revision
        # Hand the listed objects out one by one and keep none: a watch whose client
        # reads slowly would otherwise hold the whole list for as long as it stays open.
        items = listed.items
        del listed
        items.reverse()
        while items:
            kv = items.pop()
            obj = decode(rt, kv)
            key, revision = kv.key, kv.mod_revision
            del kv
            if filtered and not matches(obj):
                continue
            matched.add(key)
            yield ObjectEvent(WatchEventType.ADDED, obj, revision)
        obj = {}  # not even the last one
    else:
        start = parse_resource_version(resource_version)
        if filtered:
            current = await store_call(rt, "", store.current_revision())
            try:
                listed = await store.list(prefix, revision=min(start, current))
            except storage.Gone as exc:
                raise errors.expired_resource_version(start, exc.compacted_revision) from exc
            except storage.StorageError as exc:
                raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group) from exc
            matched = {kv.key for kv in listed.items if matches(decode(rt, kv))}

    last_revision = progressed = start

    def progress(revision: int) -> None:
        """The store has handed over every event of the prefix up to ``revision`` (etcd's progress notification)."""
        nonlocal progressed
        progressed = max(progressed, revision)

    ready: deque[ObjectEvent] = deque()
    events = store.watch(
        prefix, from_revision=store_revision(start + 1), progress=None if bookmark_interval is None else progress
    ).__aiter__()
    pending: asyncio.Task[storage.WatchEvent | None] | None = None
    loop = asyncio.get_running_loop()
    lead = options.bookmark_before_timeout
    bookmark_at = None if bookmark_interval is None else next_bookmark(
        loop.time(), deadline=options.deadline, period=bookmark_interval, before_timeout=lead
    )
    try:
        while True:
            if pending is None:
                pending = asyncio.create_task(_next_event(events))
            if bookmark_at is not None and bookmark_interval is not None:
                due = loop.time() >= bookmark_at
                if not due and not pending.done():
                    done, _ = await asyncio.wait({pending}, timeout=bookmark_at - loop.time())
                    due = not done
                if due:
                    # Every event up to last_revision has been handed out; the pending one is later.
                    # (A timed wait may end a hair early: the next one is counted from this one's time.)
                    now = max(loop.time(), bookmark_at)
                    bookmark_at = next_bookmark(now, deadline=options.deadline, period=bookmark_interval, before_timeout=lead)
                    # While no event waits to be handled, the store's progress is as far as nothing is missed.
                    at = last_revision if pending.done() else max(last_revision, progressed)
                    if at <= start:
                        continue  # none at the watch's start revision, as kube's cacher
                    bookmark = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(at)}}
                    yield ObjectEvent(WatchEventType.BOOKMARK, bookmark, at)
                    continue
            try:
                event = await pending
            except storage.Gone as exc:
                raise errors.expired_resource_version(start, exc.compacted_revision) from exc
            except storage.StorageError as exc:
                raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group) from exc
            pending = None
            if event is None:
                return
            last_revision = event.kv.mod_revision
            translated = _translate(rt, event, filtered=filtered, matched=matched, matches=matches)
            if translated is not None and translated.type is WatchEventType.DELETED and event.type is not storage.EventType.DELETE:
                translated = await _as_last_seen(store, rt, event.kv.key, translated)
            del event
            if translated is not None:
                ready.append(translated)
                del translated
            while ready:
                # Yielded straight from the list, so this frame keeps no reference to an
                # event its consumer has taken: a watcher that stops reading holds one copy.
                yield ready.popleft()
    finally:
        # A cancelled consumer leaves the read of the store's watch in flight; it
        # must finish before the store's iterator can be closed.
        if pending is not None and not pending.done():
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def _translate(
    rt: ResourceType,
    event: storage.WatchEvent,
    *,
    filtered: bool,
    matched: set[str],
    matches: Callable[[dict[str, Any]], bool],
) -> ObjectEvent | None:
    obj = decode(rt, event.kv)
    revision = event.kv.mod_revision
    key = event.kv.key
    if event.type is storage.EventType.DELETE:
        if filtered and key not in matched:
            return None
        matched.discard(key)
        return ObjectEvent(WatchEventType.DELETED, obj, revision)
    if not filtered:
        return ObjectEvent(WatchEventType.ADDED if event.created else WatchEventType.MODIFIED, obj, revision)
    was = key in matched
    if matches(obj):
        matched.add(key)
        return ObjectEvent(WatchEventType.MODIFIED if was else WatchEventType.ADDED, obj, revision)
    if was:
        matched.discard(key)
        return ObjectEvent(WatchEventType.DELETED, obj, revision)
    return None


async def _as_last_seen(store: storage.Store, rt: ResourceType, key: str, left: ObjectEvent) -> ObjectEvent:
    """The DELETED of an object that stopped matching the watch's selectors, showing it as the
    watch last saw it (its version before the change) at the change's resourceVersion, as kube
    sends it; as it is now when that version is compacted away."""
    try:
        listed = await store.list(key, revision=left.revision - 1, limit=1)
    except storage.StorageError:
        return left
    previous = next((kv for kv in listed.items if kv.key == key), None)
    if previous is None:
        return left
    obj = decode(rt, previous)
    obj["metadata"]["resourceVersion"] = str(left.revision)
    return ObjectEvent(WatchEventType.DELETED, obj, left.revision)


async def _next_event(events: AsyncIterator[storage.WatchEvent]) -> storage.WatchEvent | None:
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None
