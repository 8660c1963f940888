"""Fixtures for controller tests: an in-process hub store (MemoryStore, no HTTP) and a running
controller manager with short grace periods."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.context import ControllerSettings
from controlplane.controllers.manager import ControllerManager
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

FAST = ControllerSettings(
    workers=2,
    unschedulable_grace_seconds=0.3,
    reservation_settle_seconds=0.0,
    deletion_poll_seconds=0.05,
)


@pytest.fixture
async def objects() -> AsyncIterator[ObjectStore]:
    async with MemoryStore() as store:
        objs = ObjectStore(store, hub_registry())
        await objs.bootstrap()
        yield objs


@pytest.fixture
async def manager(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=FAST) as running:
        yield running
