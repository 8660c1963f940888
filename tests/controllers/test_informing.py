"""An informer over a store that reads etcd in small pages while objects are being created:
its list is one snapshot and its watch starts right after it, so every object arrives
exactly once (no gap, no duplicate) and the cache ends equal to the store."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from controlplane.apiserver.errors import ServiceUnavailable
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.controllers.informing import AssumedWrites, Informer, ListWatchBackoff
from controlplane.hub import hub_registry
from controlplane.objectclient.errors import Gone
from controlplane.storage import EmbeddedEtcd, EtcdStore, MemoryStore

from .fleet import eventually

pytestmark = pytest.mark.waiting

T = TypeVar("T")

#: Created before the informer starts; more are created while it lists.
BEFORE = 100


async def test_an_informer_listing_in_pages_during_writes_sees_every_object_once(etcd_endpoint: str) -> None:
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/{uuid.uuid4().hex}", page_size=3) as store:
        objects = ObjectStore(store, hub_registry())
        await objects.bootstrap()
        configmaps = objects.registry.require("v1", "ConfigMap")

        async def create(index: int) -> None:
            await objects.create(configmaps, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"cm{index:03d}", "namespace": "default"}, "data": {"i": str(index)},
            })

        created = [f"cm{index:03d}" for index in range(0, 2 * BEFORE, 2)]
        for index in range(0, 2 * BEFORE, 2):
            await create(index)
        added: list[str] = []
        other_events: list[tuple[WatchEventType, str]] = []
        arrived = asyncio.Event()

        async def on_event(event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
            name = obj["metadata"]["name"]
            if event is WatchEventType.ADDED:
                added.append(name)
            else:
                other_events.append((event, name))
            arrived.set()

        informer = Informer(objects, configmaps)
        informer.add_handler(on_event)
        async with asyncio.TaskGroup() as tasks:

            async def write_during_the_list() -> None:
                # Odd names land between the even ones, so in every page being read; the
                # writes go on until the informer has listed, and a few beyond.
                index, after_sync = 1, 0
                while after_sync < 10:
                    await create(index)
                    created.append(f"cm{index:03d}")
                    index += 2
                    after_sync += informer.synced.is_set()
                    await asyncio.sleep(0)

            writing = tasks.create_task(write_during_the_list())
            await asyncio.sleep(0.05)
            running = tasks.create_task(informer.run())
            async with asyncio.timeout(30):
                await writing
                while len(added) < len(created):
                    arrived.clear()
                    await arrived.wait()
            await asyncio.sleep(0.3)  # nothing more (a duplicate) may arrive
            running.cancel()
        names = sorted(created)
        assert not other_events
        assert sorted(added) == names
        assert sorted(obj["metadata"]["name"] for obj in informer.items()) == names


async def test_an_etcd_outage_is_logged_once_when_it_interrupts_the_watch_and_once_when_it_ends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    etcd = EmbeddedEtcd(tmp_path / "etcd")
    url = await etcd.start()
    try:
        async with EtcdStore([url], prefix="/gpufed", tls=etcd.client_tls) as store:
            objects = ObjectStore(store, hub_registry())
            await objects.bootstrap()
            configmaps = objects.registry.require("v1", "ConfigMap")
            seen: list[str] = []

            async def on_event(_event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
                seen.append(obj["metadata"]["name"])

            informer = Informer(objects, configmaps, backoff=ListWatchBackoff(initial=0.1, maximum=0.2))
            informer.add_handler(on_event)
            task = asyncio.create_task(informer.run())
            try:
                await asyncio.wait_for(informer.synced.wait(), 30)

                def logged(level: int, text: str) -> list[str]:
                    return [r.getMessage() for r in caplog.records if r.levelno == level and text in r.getMessage()]

                with caplog.at_level(logging.INFO, logger="controlplane.controllers.informing"):
                    await etcd.stop()
                    await eventually(
                        _async(lambda: logged(logging.WARNING, "watch of configmaps interrupted")),
                        what="the informer to log the interruption",
                    )
                    await asyncio.sleep(2)  # some ten retries while etcd stays down
                    assert len(logged(logging.WARNING, "watch of configmaps interrupted")) == 1
                    await etcd.start()

                    async def create_after() -> bool:
                        try:  # the store fails fast until its next trial call finds etcd back
                            await objects.create(configmaps, {
                                "apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "after", "namespace": "default"},
                            })
                        except ServiceUnavailable:
                            return False
                        return True

                    await eventually(create_after, what="a write to succeed once etcd is back")
                    await eventually(_async(lambda: "after" in seen), what="the informer to see a write after the outage")
                    assert len(logged(logging.WARNING, "watch of configmaps interrupted")) == 1
                    assert len(logged(logging.INFO, "watch of configmaps resumed")) == 1
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        await etcd.stop()


def _async(check: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    async def probe() -> T:
        return check()

    return probe


def _at(name: str, version: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}, "status": status}


def test_assumed_writes_stand_over_an_older_cache_until_it_catches_up() -> None:
    assumed = AssumedWrites()
    assumed.assume("a", _at("a", "12", evicted=True))
    assumed.assume("b", _at("b", "13", admitted=True))
    assumed.assume("gone", _at("gone", "14"))

    cache = {"a": _at("a", "10"), "b": _at("b", "9"), "c": _at("c", "11")}
    view = assumed.overlay(dict(cache))
    assert view == {"a": _at("a", "12", evicted=True), "b": _at("b", "13", admitted=True), "c": _at("c", "11")}
    assert len(assumed) == 2  # "gone" is not in the cache any more (deleted): forgotten

    cache["a"] = _at("a", "12", evicted=True)  # the informer delivered a's write
    cache["b"] = _at("b", "15", admitted=False)  # and a newer write of b by someone else
    assert assumed.overlay(dict(cache)) == cache
    assert len(assumed) == 0


class _FirstWatchExpires:
    """The object layer, whose first watch ends with 410 Gone once the test says so (as a watch
    whose revision was compacted while it was away): the informer lists again."""

    def __init__(self, objects: ObjectStore) -> None:
        self._objects = objects
        self.registry = objects.registry
        self.expire = asyncio.Event()
        self._watched = False

    async def list(self, rt: Any, **options: Any) -> Any:
        return await self._objects.list(rt, **options)

    def watch(self, rt: Any, **options: Any) -> Any:
        if self._watched:
            return self._objects.watch(rt, **options)
        self._watched = True
        return self._expiring()

    async def _expiring(self) -> Any:
        await self.expire.wait()
        raise Gone("too old resource version")
        yield  # an async generator, as a watch is


async def test_an_informer_that_keeps_some_objects_sees_every_change_and_says_when_it_listed_again() -> None:
    async with MemoryStore() as store:
        objects = ObjectStore(store, hub_registry())
        await objects.bootstrap()
        configmaps = objects.registry.require("v1", "ConfigMap")
        owner = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1"}]
        for name, meta in (("plain", {}), ("owned", {"ownerReferences": owner})):
            await objects.create(configmaps, {"metadata": {"name": name, "namespace": "default", **meta}})
        client = _FirstWatchExpires(objects)
        seen: list[tuple[WatchEventType, str, bool]] = []
        relists: list[int] = []

        async def on_event(event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            seen.append((event, obj["metadata"]["name"], old is not None))

        async def on_relist() -> None:
            relists.append(len(seen))

        informer = Informer(client, configmaps, keep=lambda obj: bool(obj["metadata"].get("ownerReferences")))  # type: ignore[arg-type]
        informer.add_handler(on_event)
        informer.add_relist_handler(on_relist)
        async with asyncio.TaskGroup() as tasks:
            running = tasks.create_task(informer.run())
            await informer.synced.wait()
            assert sorted(seen) == [(WatchEventType.ADDED, "owned", False), (WatchEventType.ADDED, "plain", False)]
            assert [obj["metadata"]["name"] for obj in informer.items()] == ["owned"]
            assert not relists  # the first list is not a relist
            seen.clear()
            for name in ("plain", "owned"):
                await objects.delete(configmaps, namespace="default", name=name)
            client.expire.set()
            await eventually(lambda: _true(bool(relists)), what="the relist handler")
            running.cancel()
        # The kept object's deletion is found by the relist; the other one's is lost with the watch.
        assert seen == [(WatchEventType.DELETED, "owned", True)]
        assert relists == [1] and not informer.items()


async def _true(value: bool) -> bool:
    return value
