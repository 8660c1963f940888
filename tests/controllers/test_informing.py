"""An informer over a store that reads etcd in small pages while objects are being created:
its list is one snapshot and its watch starts right after it, so every object arrives
exactly once (no gap, no duplicate) and the cache ends equal to the store."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.controllers.informing import Informer
from controlplane.hub import hub_registry
from controlplane.storage import EtcdStore

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
