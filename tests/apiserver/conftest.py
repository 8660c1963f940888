"""Fixtures for the API server tests: a registry with typed stand-in kinds (``kinds.py``),
the object layer over each store, and an aiohttp test client over the HTTP app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.controllers.namespaces import NamespaceController
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore, Store
from tests.controllers.fleet import namespace_controller as running_namespace_controller

from .kinds import make_registry


@pytest.fixture
def api_registry() -> Registry:
    return make_registry()


@pytest.fixture
async def objects_on(store: Store, api_registry: Registry) -> ObjectStore:
    """The object layer over each store kind (memory and etcd) from tests/conftest.py."""
    objects = ObjectStore(store, api_registry)
    await objects.bootstrap()
    return objects


@pytest.fixture
async def objects(api_registry: Registry) -> AsyncIterator[ObjectStore]:
    """The object layer over a fresh MemoryStore."""
    async with MemoryStore() as memory:
        store = ObjectStore(memory, api_registry)
        await store.bootstrap()
        yield store


@pytest.fixture
async def namespace_controller(objects: ObjectStore) -> AsyncIterator[NamespaceController]:
    """The namespace controller the hub's leader runs: a deleted namespace's content goes, then it."""
    async with running_namespace_controller(objects) as running:
        yield running


@pytest.fixture
async def api(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[TestClient[Any, Any]]:
    """An HTTP client of the API server (no authentication) over a MemoryStore."""
    app = create_app(objects, api_registry, bookmark_interval=0.2)
    async with TestClient(TestServer(app)) as client:
        yield client


async def _hub_client(*, garbage_collection: bool) -> AsyncIterator[TestClient[Any, Any]]:
    registry = hub_registry()
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry, garbage_collection=garbage_collection)
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, registry))) as client:
            yield client


@pytest.fixture
async def hub() -> AsyncIterator[TestClient[Any, Any]]:
    """An HTTP client of an API server serving everything the hub serves, over a MemoryStore
    (a module's own ``hub`` fixture, serving fewer kinds, takes its place there)."""
    async for client in _hub_client(garbage_collection=False):
        yield client


@pytest.fixture
async def collected_hub() -> AsyncIterator[TestClient[Any, Any]]:
    """``hub`` with garbage collection on: a delete's propagation policy puts on its finalizer."""
    async for client in _hub_client(garbage_collection=True):
        yield client
