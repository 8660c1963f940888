"""The watch cache against both stores: the events a watch gets from it are those the store's
own watch gives (selectors included), decoded once for every watcher; resumes from its window;
410 once history is compacted, for a watcher that falls behind, and when the cache loses its
place; bookmarks and watch-list's initial events; lists at resourceVersion "0" from memory,
byte for byte as the store serves them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.objects import ObjectEvent, ObjectStore, WatchEventType
from controlplane.apiserver.watchcache import WatchCache, WatchCacheConfig
from controlplane.apiserver.watchcache.watcher import SharedEvent, WatcherLimits
from controlplane.storage import MemoryStore

from .kinds import GADGET, WIDGET, make_registry, widget

pytestmark = pytest.mark.waiting

Events = AsyncIterator[ObjectEvent]


async def _take(events: Events, count: int) -> list[ObjectEvent]:
    taken: list[ObjectEvent] = []
    async with asyncio.timeout(10):
        while len(taken) < count:
            taken.append(await anext(events))
    return taken


async def _until(condition: Any) -> None:
    """Poll ``condition`` until it holds; fail after 10 s."""
    async with asyncio.timeout(10):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)


def _summary(events: list[ObjectEvent]) -> list[tuple[str, str]]:
    return [(event.type.value, event.object["metadata"].get("name", "")) for event in events]


async def _cache(objects: ObjectStore, config: WatchCacheConfig | None = None) -> AsyncIterator[WatchCache]:
    cache = WatchCache(objects, config)
    cache.warm([WIDGET])
    try:
        yield cache
    finally:
        await cache.close()


@pytest.fixture
async def cache(objects_on: ObjectStore) -> AsyncIterator[WatchCache]:
    async for cache in _cache(objects_on):
        yield cache


async def _relabel(objects: ObjectStore, name: str, labels: dict[str, str]) -> dict[str, Any]:
    current = await objects.get(WIDGET, namespace="default", name=name)
    current["metadata"]["labels"] = labels
    return await objects.update(WIDGET, current)


async def test_a_cached_watch_gets_what_the_stores_watch_gets_with_selectors(
    objects_on: ObjectStore, cache: WatchCache
) -> None:
    start = await objects_on.create(WIDGET, widget("x", labels={"tier": "gpu"}))
    rv = start["metadata"]["resourceVersion"]
    await objects_on.create(WIDGET, {**widget("elsewhere"), "metadata": {"name": "y", "namespace": "kube-system"}})
    selected = {"namespace": "default", "label_selector": "tier=gpu", "resource_version": rv}
    cached = cache.watch(WIDGET, **selected)
    direct = objects_on.watch(WIDGET, **selected)
    everything = cache.watch(WIDGET, resource_version=rv)
    await _relabel(objects_on, "x", {"tier": "cpu"})  # stops matching: DELETED
    await objects_on.create(WIDGET, widget("z", labels={"tier": "gpu"}))
    await _relabel(objects_on, "x", {"tier": "gpu"})  # matches again: ADDED
    await objects_on.delete(WIDGET, namespace="default", name="z")
    got, want = await _take(cached, 4), await _take(direct, 4)
    assert _summary(got) == [("DELETED", "x"), ("ADDED", "z"), ("ADDED", "x"), ("DELETED", "z")]
    assert [(e.type, e.object, e.revision) for e in got] == [(e.type, e.object, e.revision) for e in want]
    # x leaving the selection shows as the watch last saw it, at the change's resourceVersion (kube's).
    left = got[0].object["metadata"]
    assert (left["labels"], left["resourceVersion"]) == ({"tier": "gpu"}, str(got[0].revision))
    assert _summary(await _take(everything, 5)) == [
        ("ADDED", "y"), ("MODIFIED", "x"), ("ADDED", "z"), ("MODIFIED", "x"), ("DELETED", "z"),
    ]
    for events in (cached, direct, everything):
        await events.aclose()  # type: ignore[attr-defined]


async def test_each_event_is_decoded_and_encoded_once_for_every_watcher(
    objects_on: ObjectStore, cache: WatchCache
) -> None:
    created = await objects_on.create(WIDGET, widget("a"))
    watches = [cache.watch(WIDGET, resource_version=created["metadata"]["resourceVersion"]) for _ in range(5)]
    firsts = [asyncio.ensure_future(anext(events)) for events in watches]
    counters = cache.counters()["widgets.test.gpufed.io"]
    await _until(lambda: counters.watchers == 5)
    decodes, lines = counters.decodes, counters.lines
    await objects_on.patch(WIDGET, namespace="default", name="a", patch_type=_merge(), patch={"spec": {"size": 2}})
    async with asyncio.timeout(10):
        received = list(await asyncio.gather(*firsts))
    assert all(isinstance(event, SharedEvent) for event in received)
    assert {id(event.object) for event in received} == {id(received[0].object)}
    assert (counters.decodes - decodes, counters.lines - lines) == (1, 1)
    assert isinstance(received[0], SharedEvent)
    assert received[0].line.startswith(b'{"type":"MODIFIED","object":{')
    for events in watches:
        await events.aclose()  # type: ignore[attr-defined]


def _merge() -> Any:
    from controlplane.apiserver.patches import PatchType

    return PatchType.MERGE


async def test_a_watch_resumes_from_the_window_and_older_ones_from_the_store(objects_on: ObjectStore) -> None:
    async for cache in _cache(objects_on, WatchCacheConfig(window_events=3)):
        first = await objects_on.create(WIDGET, widget("w0"))
        seen = cache.watch(WIDGET, resource_version="0")
        await _take(seen, 1)  # the cache has listed
        for index in range(1, 6):
            await objects_on.create(WIDGET, widget(f"w{index}"))
        await _take(seen, 5)  # and taken every write
        await seen.aclose()  # type: ignore[attr-defined]
        # Within the window (the last three events): served from memory.
        listed = await cache.list(WIDGET, resource_version="0")
        w3 = next(item for item in listed.items if item["metadata"]["name"] == "w3")
        from_window = cache.watch(WIDGET, resource_version=w3["metadata"]["resourceVersion"])
        assert _summary(await _take(from_window, 2)) == [("ADDED", "w4"), ("ADDED", "w5")]
        # Older than the window: the store's history still has it.
        from_store = cache.watch(WIDGET, resource_version=first["metadata"]["resourceVersion"])
        assert _summary(await _take(from_store, 5)) == [(("ADDED", f"w{i}")) for i in range(1, 6)]
        # Once compacted, a watch from before is 410 Expired, as without a cache.
        await objects_on.store.compact(int(listed.resource_version))
        expired = cache.watch(WIDGET, resource_version=first["metadata"]["resourceVersion"])
        with pytest.raises(errors.Gone, match="too old resource version"):
            await _take(expired, 1)
        # The window is memory: it still serves a resume the store's history no longer could.
        with pytest.raises(errors.Gone):
            await _take(objects_on.watch(WIDGET, resource_version=w3["metadata"]["resourceVersion"]), 1)
        resumed = cache.watch(WIDGET, resource_version=w3["metadata"]["resourceVersion"])
        assert _summary(await _take(resumed, 2)) == [("ADDED", "w4"), ("ADDED", "w5")]
        for events in (from_window, from_store, resumed):
            await events.aclose()  # type: ignore[attr-defined]


async def test_a_watcher_that_falls_behind_is_closed_with_410_and_the_others_get_everything(
    objects_on: ObjectStore,
) -> None:
    async for cache in _cache(objects_on, WatchCacheConfig(watcher=WatcherLimits(max_events=3))):
        created = await objects_on.create(WIDGET, widget("seed"))
        rv = created["metadata"]["resourceVersion"]
        slow, fast = cache.watch(WIDGET, resource_version=rv), cache.watch(WIDGET, resource_version=rv)
        await objects_on.create(WIDGET, widget("n0"))
        assert _summary(await _take(slow, 1)) == [("ADDED", "n0")]  # attached, then stops reading
        names = [f"n{index}" for index in range(1, 11)]
        got: list[ObjectEvent] = []
        for name in names:
            await objects_on.create(WIDGET, widget(name))
            got += await _take(fast, 1)
        assert _summary(got) == [("ADDED", "n0")] + [("ADDED", name) for name in names[:-1]]
        assert _summary(await _take(fast, 1)) == [("ADDED", names[-1])]
        # The slow one still gets what was queued for it, then 410 Expired.
        assert _summary(await _take(slow, 3)) == [("ADDED", "n1"), ("ADDED", "n2"), ("ADDED", "n3")]
        with pytest.raises(errors.Gone, match="too old resource version"):
            await _take(slow, 1)
        await fast.aclose()  # type: ignore[attr-defined]


async def test_bookmarks_carry_the_latest_revision(objects_on: ObjectStore, cache: WatchCache) -> None:
    created = await objects_on.create(WIDGET, widget("a"))
    rv = created["metadata"]["resourceVersion"]
    events = cache.watch(WIDGET, namespace="other", resource_version=rv, bookmark_interval=0.05)
    updated = await objects_on.patch(
        WIDGET, namespace="default", name="a", patch_type=_merge(), patch={"spec": {"size": 3}}
    )
    async with asyncio.timeout(10):
        event = await anext(events)  # none at the watch's start: the first carries the change's
    assert event.type is WatchEventType.BOOKMARK
    assert event.object == {
        "kind": "Widget", "apiVersion": "test.gpufed.io/v1",
        "metadata": {"resourceVersion": updated["metadata"]["resourceVersion"]},
    }
    await events.aclose()  # type: ignore[attr-defined]


async def test_a_quiet_kinds_bookmark_carries_how_far_the_store_has_moved(
    objects_on: ObjectStore, cache: WatchCache
) -> None:
    """As kube's watch cache moves on with etcd's progress notifications: a watch of a kind no one
    writes gets a bookmark once the store has moved on elsewhere (etcd tells it within its progress
    interval, 5 s for the hub's embedded etcd), so the client resumes from a recent revision."""
    created = await objects_on.create(WIDGET, widget("a"))
    events = cache.watch(
        WIDGET, namespace="default", resource_version=created["metadata"]["resourceVersion"], bookmark_interval=0.05
    )
    elsewhere = await objects_on.create(GADGET, {"metadata": {"name": "g", "namespace": "default"}})
    async with asyncio.timeout(20):
        event = await anext(events)
    assert event.type is WatchEventType.BOOKMARK
    assert int(event.object["metadata"]["resourceVersion"]) >= int(elsewhere["metadata"]["resourceVersion"])
    await events.aclose()  # type: ignore[attr-defined]


@pytest.mark.parametrize("resource_version", ["", "0"])
async def test_watch_list_sends_the_objects_then_the_initial_events_end_bookmark(
    objects_on: ObjectStore, cache: WatchCache, resource_version: str
) -> None:
    for name in ("b", "a"):
        await objects_on.create(WIDGET, widget(name))
    await _take(cache.watch(WIDGET, resource_version="0"), 2)  # the cache holds both
    events = cache.watch(WIDGET, resource_version=resource_version, send_initial_events=True, bookmark_interval=60)
    initial = await _take(events, 3)
    assert _summary(initial[:2]) == [("ADDED", "a"), ("ADDED", "b")]
    end = initial[2]
    assert end.type is WatchEventType.BOOKMARK
    assert end.object["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    listed = await objects_on.list(WIDGET)
    assert end.object["metadata"]["resourceVersion"] == listed.resource_version
    await objects_on.create(WIDGET, widget("c"))
    assert _summary(await _take(events, 1)) == [("ADDED", "c")]
    await events.aclose()  # type: ignore[attr-defined]


async def test_lists_at_revision_0_come_from_memory_as_the_store_serves_them(
    objects_on: ObjectStore, cache: WatchCache
) -> None:
    for index in range(4):
        await objects_on.create(WIDGET, widget(f"w{index}", labels={"even": str(index % 2 == 0).lower()}))
    await objects_on.create(WIDGET, widget("w9", namespace="kube-system", labels={"even": "true"}))
    await _take(cache.watch(WIDGET, resource_version="0"), 5)
    stored = await objects_on.list_encoded(WIDGET)
    cached = await cache.list_encoded(WIDGET, resource_version="0", limit=2)  # limit ignored at "0", as kube's
    assert (list(cached.items()), cached.resource_version, cached.continue_token) == (
        list(stored.items()), stored.resource_version, ""
    )
    selected = await cache.list(WIDGET, namespace="default", resource_version="0", label_selector="even=true")
    assert [item["metadata"]["name"] for item in selected.items] == ["w0", "w2"]
    assert selected.items == (await objects_on.list(WIDGET, namespace="default", label_selector="even=true")).items
    assert [item["metadata"]["name"] for item in (await cache.list(WIDGET, resource_version="0")).items] == [
        "w0", "w1", "w2", "w3", "w9",
    ]
    # A limit with another resourceVersion, or a continue token, reads the store (and pages).
    paged = await cache.list_encoded(WIDGET, resource_version=stored.resource_version, limit=2)
    assert paged.continue_token
    assert len(list(paged.items())) == 2


async def test_a_cache_that_loses_its_place_lists_again_and_its_watchers_get_410() -> None:
    async with MemoryStore(watch_queue_size=2) as memory:
        objects = ObjectStore(memory, make_registry())
        await objects.bootstrap()
        async for cache in _cache(objects):
            seed = await objects.create(WIDGET, widget("seed"))
            watch = cache.watch(WIDGET, resource_version=seed["metadata"]["resourceVersion"])
            await objects.create(WIDGET, widget("one"))
            assert _summary(await _take(watch, 1)) == [("ADDED", "one")]
            # A burst the store's watch of the cache cannot buffer: the cache falls behind the store.
            for index in range(5):
                await memory.create(WIDGET.key(namespace="default", name=f"burst{index}"), b'{"x":1}')
            with pytest.raises(errors.Gone):
                await _take(watch, 10)
            # It lists again and serves the current state.
            counters = cache.counters()["widgets.test.gpufed.io"]
            await _until(lambda counters=counters: counters.lists == 2)
            listed = await cache.list(WIDGET, resource_version="0")
            assert len(listed.items) == 7
            assert listed.resource_version == str(await memory.current_revision())




async def test_the_cache_of_a_kind_no_longer_served_stops_and_its_watches_end() -> None:
    registry = DynamicRegistry([rt for rt in make_registry() if rt.plural != "gadgets"])
    registry.serve([GADGET])  # served as a CRD's kind is
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        cache = WatchCache(objects)
        try:
            watch = cache.watch(GADGET, resource_version="0")
            pending = asyncio.ensure_future(anext(watch))
            await _until(lambda: "gadgets.test.gpufed.io" in cache.counters()
                         and cache.counters()["gadgets.test.gpufed.io"].watchers == 1)
            registry.serve([GADGET])  # unchanged: the cache stays
            assert "gadgets.test.gpufed.io" in cache.counters()
            registry.serve([])  # its CRD was deleted
            with pytest.raises(StopAsyncIteration):
                async with asyncio.timeout(10):
                    await pending
            assert "gadgets.test.gpufed.io" not in cache.counters()
        finally:
            await cache.close()


@pytest.mark.parametrize("resource_version", ["", "0"])
async def test_watch_list_without_initial_events_starts_after_the_current_state(
    objects_on: ObjectStore, cache: WatchCache, resource_version: str
) -> None:
    await objects_on.create(WIDGET, widget("old"))
    seen = cache.watch(WIDGET, resource_version="0")
    await _take(seen, 1)  # the cache holds it
    await seen.aclose()  # type: ignore[attr-defined]
    events = cache.watch(WIDGET, resource_version=resource_version, send_initial_events=False, bookmark_interval=60)
    first = asyncio.ensure_future(anext(events))
    await _until(lambda: cache.counters()["widgets.test.gpufed.io"].watchers >= 1)
    await objects_on.create(WIDGET, widget("new"))
    async with asyncio.timeout(10):
        assert _summary([await first]) == [("ADDED", "new")]
    await events.aclose()  # type: ignore[attr-defined]
