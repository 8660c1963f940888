"""The CRD controller's watch: idle periods (when it looks at terminating CRDs again) neither
end nor re-list the watch, and a CRD created after them is still seen through it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.apiserver.crd import controller
from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.objects import ObjectList, ObjectStore
from controlplane.apiserver.resources import ResourceType
from controlplane.storage import MemoryStore

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "trainers.ml.example.com"},
    "spec": {
        "group": "ml.example.com",
        "scope": "Namespaced",
        "names": {"plural": "trainers", "kind": "Trainer"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


class CountingObjectStore(ObjectStore):
    lists = 0

    async def list(self, rt: ResourceType, **options: Any) -> ObjectList:
        CountingObjectStore.lists += 1
        return await super().list(rt, **options)


async def test_idle_periods_keep_the_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(controller, "CLEANUP_RESYNC_SECONDS", 0.005)
    async with MemoryStore() as memory:
        crd_type = crd_resource_type()
        registry = DynamicRegistry(core_resources(), [crd_type])
        objects = CountingObjectStore(memory, registry)
        await objects.bootstrap()
        stop = asyncio.Event()
        crds = CrdController(objects, registry, crd_type)
        task = asyncio.create_task(crds.run(stop))
        try:
            await crds.wait_synced()
            await asyncio.sleep(0.2)  # idle: some forty resync periods pass
            await objects.create(crd_type, CRD)
            async with asyncio.timeout(10):
                while True:
                    if registry.get("ml.example.com", "v1", "trainers") is not None:
                        break
                    await asyncio.sleep(0.01)
            assert CountingObjectStore.lists == 1
        finally:
            stop.set()
            await task
