"""Fixtures for the policy example tests: an in-process hub (MemoryStore behind the real
ObjectStore, no HTTP) with the example fleet registered, and a running controller manager.

The fleet is written before the manager starts and the manager is idle before a test
applies anything, so every scheduling decision sees all three clusters' capacity."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.context import ControllerSettings
from controlplane.controllers.manager import ControllerManager
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

from .fleet import put_example_fleet, settled

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
        await put_example_fleet(objs)
        yield objs


@pytest.fixture
async def manager(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=FAST) as running:
        await settled(running)
        yield running
