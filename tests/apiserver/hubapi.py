"""An HTTP client of the API server over the hub's registry of kinds and a fresh MemoryStore,
with the admissions a test wires in as the hub does (:func:`hub_api`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hubregistry import hub_registry
from controlplane.storage import MemoryStore


@asynccontextmanager
async def hub_api(wire: Callable[[ObjectStore], None]) -> AsyncIterator[TestClient[Any, Any]]:
    """A client of the hub's kinds; ``wire`` adds the object layer's admissions before it serves."""
    registry = hub_registry()
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        wire(objects)
        async with TestClient(TestServer(create_app(objects, registry))) as client:
            yield client
