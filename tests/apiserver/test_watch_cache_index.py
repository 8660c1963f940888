"""The watch cache's watcher index and selector memo, against both stores: an event is offered
only to the watchers of its namespace, its object or its name, and to those of every key (a
watcher of another namespace never matches, let alone receives, it); an index entry goes with
its last watcher; watchers with the same selectors share what an event is for them -- one
match, one event object, one line -- including a MODIFIED that turns into DELETED or ADDED
for a selector whose match changed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from controlplane.apiserver.objects import ObjectEvent, ObjectStore
from controlplane.apiserver.watchcache import WatchCache

from .kinds import WIDGET, widget
from .test_watch_cache import _merge, _relabel, _until

Events = AsyncIterator[ObjectEvent]
PREFIX = WIDGET.key_prefix(None)


@pytest.fixture
async def cache(objects_on: ObjectStore) -> AsyncIterator[WatchCache]:
    cache = WatchCache(objects_on)
    cache.warm([WIDGET])
    try:
        yield cache
    finally:
        await cache.close()


async def _attached(cache: WatchCache, watches: list[Events]) -> list[asyncio.Future[ObjectEvent]]:
    """Start ``watches`` (each waits for its first event) and return once all are attached."""
    firsts = [asyncio.ensure_future(anext(events)) for events in watches]
    counters = cache.counters()["widgets.test.gpufed.io"]
    await _until(lambda: counters.watchers == len(watches))
    return firsts


async def _close(watches: list[Events], firsts: list[asyncio.Future[ObjectEvent]]) -> None:
    for first in firsts:
        first.cancel()
    await asyncio.gather(*firsts, return_exceptions=True)
    for events in watches:
        await events.aclose()  # type: ignore[attr-defined]


def _names(event: ObjectEvent) -> tuple[str, str, str]:
    metadata = event.object["metadata"]
    return event.type.value, metadata["namespace"], metadata["name"]


async def test_watchers_of_another_namespace_are_never_offered_an_event(
    objects_on: ObjectStore, cache: WatchCache
) -> None:
    start = (await objects_on.create(WIDGET, widget("seed")))["metadata"]["resourceVersion"]
    others = [
        cache.watch(WIDGET, namespace="kube-system", label_selector="tier=gpu", resource_version=start)
        for _ in range(3)
    ]
    firsts = await _attached(cache, others)
    counters = cache.counters()["widgets.test.gpufed.io"]
    assert cache.watcher_index(WIDGET) == {("namespace", f"{PREFIX}kube-system/"): 3}
    decodes, lines = counters.decodes, counters.lines
    await objects_on.create(WIDGET, widget("a", labels={"tier": "gpu"}))
    await objects_on.patch(WIDGET, namespace="default", name="a", patch_type=_merge(), patch={"spec": {"size": 2}})
    # The cache took both events, and no watcher of kube-system even matched them.
    await _until(lambda: counters.events >= 2)
    assert (counters.decodes - decodes, counters.lines - lines) == (0, 0)
    assert not any(first.done() for first in firsts)
    await objects_on.create(WIDGET, widget("b", namespace="kube-system", labels={"tier": "gpu"}))
    async with asyncio.timeout(10):
        received = await asyncio.gather(*firsts)
    assert [_names(event) for event in received] == [("ADDED", "kube-system", "b")] * 3
    await _close(others, [])


async def test_watchers_by_name_get_that_object_alone(objects_on: ObjectStore, cache: WatchCache) -> None:
    start = (await objects_on.create(WIDGET, widget("seed")))["metadata"]["resourceVersion"]
    in_default = cache.watch(
        WIDGET, namespace="default", field_selector="metadata.name=a", resource_version=start
    )
    anywhere = cache.watch(WIDGET, field_selector="metadata.name=a", resource_version=start)
    firsts = await _attached(cache, [in_default, anywhere])
    assert cache.watcher_index(WIDGET) == {("key", f"{PREFIX}default/a"): 1, ("name", "a"): 1}
    await objects_on.create(WIDGET, widget("b"))
    await objects_on.create(WIDGET, widget("a", namespace="kube-system"))
    await objects_on.create(WIDGET, widget("a"))
    async with asyncio.timeout(10):
        first_default, first_anywhere = await asyncio.gather(*firsts)
        second_anywhere = await anext(anywhere)
    assert _names(first_default) == ("ADDED", "default", "a")
    assert [_names(first_anywhere), _names(second_anywhere)] == [
        ("ADDED", "kube-system", "a"), ("ADDED", "default", "a"),
    ]
    await _close([in_default, anywhere], [])


async def test_an_index_entry_goes_with_its_last_watcher(objects_on: ObjectStore, cache: WatchCache) -> None:
    start = (await objects_on.create(WIDGET, widget("seed")))["metadata"]["resourceVersion"]
    watches = [
        cache.watch(WIDGET, namespace="kube-system", resource_version=start),
        cache.watch(WIDGET, namespace="kube-system", resource_version=start),
        cache.watch(WIDGET, resource_version=start),
    ]
    firsts = await _attached(cache, watches)
    assert cache.watcher_index(WIDGET) == {("namespace", f"{PREFIX}kube-system/"): 2, ("", ""): 1}
    await _close(watches[:1], firsts[:1])
    assert cache.watcher_index(WIDGET) == {("namespace", f"{PREFIX}kube-system/"): 1, ("", ""): 1}
    await _close(watches[1:2], firsts[1:2])
    assert cache.watcher_index(WIDGET) == {("", ""): 1}
    await _close(watches[2:], firsts[2:])
    assert cache.watcher_index(WIDGET) == {}
    assert cache.counters()["widgets.test.gpufed.io"].watchers == 0


async def test_watchers_with_one_selector_share_its_match_when_the_labels_change(
    objects_on: ObjectStore, cache: WatchCache
) -> None:
    start = (await objects_on.create(WIDGET, widget("x", labels={"tier": "gpu"})))["metadata"]["resourceVersion"]
    gpu = [cache.watch(WIDGET, label_selector="tier=gpu", resource_version=start) for _ in range(4)]
    not_gpu = [cache.watch(WIDGET, label_selector="tier!=gpu", resource_version=start) for _ in range(3)]
    firsts = await _attached(cache, gpu + not_gpu)
    counters = cache.counters()["widgets.test.gpufed.io"]
    decodes, lines = counters.decodes, counters.lines
    await _relabel(objects_on, "x", {"tier": "cpu"})  # leaves tier=gpu, joins tier!=gpu
    async with asyncio.timeout(10):
        received = await asyncio.gather(*firsts)
    left, joined = received[:4], received[4:]
    assert [_names(event) for event in left] == [("DELETED", "default", "x")] * 4
    assert [_names(event) for event in joined] == [("ADDED", "default", "x")] * 3
    # One event object per selector (shared by its watchers), the object and its previous
    # version decoded once, one line per event type.
    assert len({id(event) for event in left}) == 1 and len({id(event) for event in joined}) == 1
    # The DELETED shows the object as the watch last saw it, at the change's resourceVersion
    # (kube's cacher); the ADDED as it is now.
    assert left[0].object["metadata"]["labels"] == {"tier": "gpu"}
    assert left[0].object["metadata"]["resourceVersion"] == joined[0].object["metadata"]["resourceVersion"]
    assert joined[0].object["metadata"]["labels"] == {"tier": "cpu"}
    assert (counters.decodes - decodes, counters.lines - lines) == (2, 2)
    relabelled = await _relabel(objects_on, "x", {"tier": "gpu"})  # back: ADDED for tier=gpu, DELETED for tier!=gpu
    async with asyncio.timeout(10):
        again = [await anext(events) for events in gpu + not_gpu]
    assert [event.type.value for event in again] == ["ADDED"] * 4 + ["DELETED"] * 3
    assert again[-1].object["metadata"]["labels"] == {"tier": "cpu"}
    assert again[-1].object["metadata"]["resourceVersion"] == relabelled["metadata"]["resourceVersion"]
    await _close(gpu + not_gpu, [])
