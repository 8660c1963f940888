"""The namespaces that always exist come back when deleted, as kube-apiserver's
``systemnamespaces`` controller creates them again; other namespaces stay deleted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from controlplane.apis.kube.namespaces import SYSTEM_NAMESPACES
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.systemnamespaces import SystemNamespacesController

from .fleet import eventually, namespace_controller, namespace_gone

HUB_OWN = "gpufed-cluster-lease"


@pytest.fixture
async def controller(objects: ObjectStore) -> AsyncIterator[SystemNamespacesController]:
    running = SystemNamespacesController(objects, (*SYSTEM_NAMESPACES, HUB_OWN))
    task = asyncio.create_task(running.run())
    yield running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def uid_of(objects: ObjectStore, name: str) -> str | None:
    try:
        namespace = await objects.get(objects.registry.require("v1", "Namespace"), name=name)
    except errors.NotFound:
        return None
    return str(namespace["metadata"]["uid"])


async def test_a_deleted_system_namespace_is_created_again(
    objects: ObjectStore, controller: SystemNamespacesController
) -> None:
    namespaces = objects.registry.require("v1", "Namespace")
    await objects.create(namespaces, {"metadata": {"name": "team-a"}})
    # Missing when the controller starts: created from its first sync.
    await eventually(lambda: uid_of(objects, HUB_OWN), what=f"{HUB_OWN} created at the first sync")
    await controller.namespaces.synced.wait()
    before = await uid_of(objects, "kube-node-lease")
    assert before is not None
    async with namespace_controller(objects):
        await objects.delete(namespaces, name="kube-node-lease")
        await objects.delete(namespaces, name="team-a")
        await namespace_gone(objects, "team-a")

    async def recreated() -> str | None:
        uid = await uid_of(objects, "kube-node-lease")
        return uid if uid not in (None, before) else None

    await eventually(recreated, what="kube-node-lease created again")
    assert await uid_of(objects, "team-a") is None
