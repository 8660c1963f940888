"""Fixtures for controller tests: an in-process hub store (MemoryStore, no HTTP) and a running
controller manager with short grace periods."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.webhooks.interpreting import InterpreterWebhooks
from controlplane.controllers.context import ControllerSettings
from controlplane.controllers.manager import ControllerManager
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from tests.webhookserver import WebhookServer, webhook_server

FAST = ControllerSettings(
    workers=2,
    unschedulable_grace_seconds=0.3,
    reservation_settle_seconds=0.0,
    deletion_poll_seconds=0.05,
    waiting_hold_seconds=0.2,
    max_waiting_hold_seconds=0.5,
)


@pytest.fixture
def registry() -> CollectorRegistry:
    """A Prometheus registry of the test's own, for a manager's Kueue metrics."""
    return CollectorRegistry()


@pytest.fixture
async def objects() -> AsyncIterator[ObjectStore]:
    async with MemoryStore() as store:
        objs = ObjectStore(store, hub_registry(), garbage_collection=True)  # as the hub's
        await objs.bootstrap()
        yield objs


@pytest.fixture
async def manager(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=FAST) as running:
        yield running


@pytest.fixture
async def crds(objects: ObjectStore) -> AsyncIterator[CrdController]:
    """The hub's CRD controller, serving the CRDs stored in ``objects`` as they come and go."""
    registry = objects.registry
    assert isinstance(registry, DynamicRegistry)
    controller = CrdController(objects, registry, registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition"))
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    await controller.wait_synced()
    yield controller
    stop.set()
    await task


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[WebhookServer]:
    """A real HTTPS webhook server (an interpreter webhook's answers: :mod:`tests.interpreterwebhook`)."""
    async with webhook_server(tmp_path / "webhook") as running:
        yield running


@pytest.fixture
async def webhooks(objects: ObjectStore) -> AsyncIterator[InterpreterWebhooks]:
    """The hub's interpreter webhooks, following the configurations in ``objects``."""
    hooks = InterpreterWebhooks(objects)
    stop = asyncio.Event()
    following = asyncio.create_task(hooks.run(stop))
    await hooks.wait_synced()
    yield hooks
    stop.set()
    following.cancel()
    await hooks.close()
