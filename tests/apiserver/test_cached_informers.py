"""In-process informers over the watch cache (CachedObjects): they see the same adds, updates
and deletes as informers over the store, relist after a 410 when they fall behind, and N of
them watching one kind cost one store watch event and one decode per change, not N + 1."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.apiserver.watchcache import WatchCache, WatchCacheConfig
from controlplane.apiserver.watchcache.cacher import CACHE_WATCHER
from controlplane.apiserver.watchcache.client import CachedObjects
from controlplane.apiserver.watchcache.watcher import WatcherLimits
from controlplane.controllers.informing import Informer, ListWatchBackoff
from controlplane.objectclient import ObjectClient
from controlplane.storage import MemoryStore
from controlplane.storage.ledger import LedgerStore, WriteLedger

from .kinds import WIDGET, make_registry, widget

Seen = list[tuple[str, str, str]]


async def _until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` until it holds; fail after 10 s."""
    async with asyncio.timeout(10):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def _informers(
    *clients: ObjectClient, handler: Callable[[int], Callable[..., Awaitable[None]]] | None = None
) -> AsyncIterator[tuple[list[Informer], list[Seen]]]:
    """One synced informer of widgets per client, each recording (event, name, resourceVersion)."""
    informers, seen = [], [[] for _ in clients]
    for index, client in enumerate(clients):
        informer = Informer(client, WIDGET, backoff=ListWatchBackoff(initial=0.01, maximum=0.02))

        async def record(event: WatchEventType, obj: dict[str, Any], _old: Any, log: Seen = seen[index]) -> None:
            log.append((event.value, obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))

        informer.add_handler(handler(index) if handler is not None else record)
        informers.append(informer)
    tasks = [asyncio.create_task(informer.run()) for informer in informers]
    try:
        async with asyncio.timeout(10):
            await asyncio.gather(*(informer.synced.wait() for informer in informers))
        yield informers, seen
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def _cached(
    objects: ObjectStore, config: WatchCacheConfig | None = None
) -> AsyncIterator[tuple[CachedObjects, WatchCache]]:
    cache = WatchCache(objects, config)
    try:
        yield CachedObjects(objects, cache), cache
    finally:
        await cache.close()


async def test_an_informer_over_the_cache_sees_what_one_over_the_store_sees(objects_on: ObjectStore) -> None:
    await objects_on.create(WIDGET, widget("before"))
    async with _cached(objects_on) as (cached, _cache), _informers(objects_on, cached) as (informers, (direct, via_cache)):
        await objects_on.create(WIDGET, widget("a"))
        current = await objects_on.get(WIDGET, namespace="default", name="a")
        await objects_on.update(WIDGET, {**current, "spec": {"size": 3}})
        await objects_on.delete(WIDGET, namespace="default", name="before")
        await objects_on.create(WIDGET, widget("b"))
        await _until(lambda: len(direct) == 5 and len(via_cache) == 5)
        assert [event for event, _name, _rv in via_cache] == ["ADDED", "ADDED", "MODIFIED", "DELETED", "ADDED"]
        assert via_cache == direct
        assert sorted(informers[1].get("default", name) is not None for name in ("a", "b", "before")) == [
            False, True, True,
        ]
        # Objects keep the store's form: the cached informer's equal the direct one's.
        assert informers[1].items() == informers[0].items()


async def test_an_informer_that_falls_behind_gets_410_relists_and_catches_up(
    objects_on: ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    gate = asyncio.Event()
    names: list[str] = []

    def slow(_index: int) -> Callable[..., Awaitable[None]]:
        async def handle(event: WatchEventType, obj: dict[str, Any], _old: Any) -> None:
            names.append(obj["metadata"]["name"])
            await gate.wait()  # stops reading its watch until released

        return handle

    gate.set()
    limits = WatchCacheConfig(watcher=WatcherLimits(max_events=2))
    caplog.set_level(logging.INFO, logger="controlplane.controllers.informing")
    async with _cached(objects_on, limits) as (cached, cache), _informers(cached, handler=slow) as ([informer], _):
        counters = cache.counters()["widgets.test.gpufed.io"]
        gate.clear()
        taken = counters.events
        for index in range(8):
            await objects_on.create(WIDGET, widget(f"w{index}"))
        await _until(lambda: bool(names))  # blocked on the first event while the others pile up
        # ...all of them: etcd's watch can deliver the creates to the cache well after they
        # returned, and a gate opened before then lets the informer keep up.
        await _until(lambda: counters.events >= taken + 8)
        gate.set()
        stored = await objects_on.list(WIDGET)
        await _until(lambda: sorted(
            (obj["metadata"]["name"], obj["metadata"]["resourceVersion"]) for obj in informer.items()
        ) == sorted((obj["metadata"]["name"], obj["metadata"]["resourceVersion"]) for obj in stored.items))
    assert "watch of widgets expired; relisting" in caplog.text
    assert sorted(set(names)) == [f"w{index}" for index in range(8)]


async def test_n_informers_over_the_cache_cost_one_watch_event_and_one_decode_per_change() -> None:
    ledger = WriteLedger()
    async with MemoryStore() as memory:
        objects = ObjectStore(LedgerStore(memory, ledger), make_registry())
        await objects.bootstrap()
        async with _cached(objects) as (cached, cache), _informers(*[cached] * 5) as (_, seen):
            counters = cache.counters()["widgets.test.gpufed.io"]
            await _until(lambda: counters.watchers == 5)
            events, decodes = sum(ledger.events.values()), counters.decodes
            for index in range(3):
                await objects.create(WIDGET, widget(f"w{index}"))
            await _until(lambda: all(len(log) == 3 for log in seen))
            assert (sum(ledger.events.values()) - events, counters.decodes - decodes) == (3, 3)
            assert {watcher for _resource, watcher in ledger.events} == {CACHE_WATCHER}
        # The same informers over the store: each decodes every change for itself.
        async with _informers(*[objects] * 5) as (_, seen):
            events = sum(ledger.events.values())
            await objects.create(WIDGET, widget("w3"))
            await _until(lambda: all(len(log) == 4 for log in seen))  # 3 listed, 1 watched
            assert sum(ledger.events.values()) - events == 5


async def test_a_watch_from_the_clients_consistent_list_follows_the_cache(objects_on: ObjectStore) -> None:
    async with _cached(objects_on) as (cached, cache):
        listed = await cached.list(WIDGET)
        # Another kind's write moves the store's revision past the list's before the watch.
        await objects_on.store.create("/registry/other/x", b"{}")
        watch = cached.watch(WIDGET, resource_version=listed.resource_version)
        first = asyncio.ensure_future(anext(watch))
        counters = cache.counters()["widgets.test.gpufed.io"]
        await _until(lambda: counters.watchers == 1)  # not a store watch of its own
        created = await objects_on.create(WIDGET, widget("w"))
        async with asyncio.timeout(10):
            event = await first
        assert (event.type, event.revision) == (WatchEventType.ADDED, int(created["metadata"]["resourceVersion"]))
        await watch.aclose()  # type: ignore[attr-defined]


async def test_a_resume_from_before_the_window_is_410_not_a_store_watch(objects_on: ObjectStore) -> None:
    async with _cached(objects_on, WatchCacheConfig(window_events=2)) as (cached, cache):
        await objects_on.create(WIDGET, widget("w0"))
        listed = await cached.list(WIDGET)  # the cache has listed
        for index in range(1, 5):
            await objects_on.create(WIDGET, widget(f"w{index}"))
        counters = cache.counters()["widgets.test.gpufed.io"]
        await _until(lambda: counters.events == 4)
        # The store's history still has it (the API's watch would resume from there) ...
        api_watch = cache.watch(WIDGET, resource_version=listed.resource_version)
        assert [event.object["metadata"]["name"] async for event in _first(api_watch)] == ["w1"]
        # ... but the in-process client relists instead of watching the store for itself.
        with pytest.raises(errors.Gone, match="too old resource version"):
            await anext(cached.watch(WIDGET, resource_version=listed.resource_version))


async def _first(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async with asyncio.timeout(10):
        yield await anext(events)
    await events.aclose()  # type: ignore[attr-defined]
