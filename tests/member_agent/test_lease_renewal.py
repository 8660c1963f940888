"""The agent's heartbeat Lease against an API server that creates a Lease on update, as kube's
does: one deleted under the agent is applied again, not a renewal that fails."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from controlplane.apis import constants as c
from controlplane.apiserver import app as app_module
from controlplane.apiserver.objects import ObjectStore
from controlplane.hubregistry import hub_registry
from controlplane.storage import MemoryStore
from member_agent.kubeapi import KubeApi
from member_agent.registering import LEASES_PATH, renew_lease

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
async def hub_api() -> AsyncIterator[tuple[KubeApi, ObjectStore]]:
    registry = hub_registry()
    async with MemoryStore() as store:
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        namespaces = registry.require("v1", "Namespace")
        await objects.create(namespaces, {"metadata": {"name": c.LEASE_NAMESPACE}})
        runner = web.AppRunner(app_module.create_app(objects, registry), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        api = KubeApi(ApiClient(configuration=Configuration(host=f"http://127.0.0.1:{runner.addresses[0][1]}")), timeout=10)
        try:
            yield api, objects
        finally:
            await api.close()
            await runner.cleanup()


async def test_a_lease_deleted_under_the_agent_is_applied_again(hub_api: tuple[KubeApi, ObjectStore]) -> None:
    api, _ = hub_api
    first = await renew_lease(api, "c1", now=NOW, duration_seconds=40, last=None)
    await api.request("DELETE", f"{LEASES_PATH}/c1")
    # The renewal's PUT names the deleted Lease's uid: kube's Conflict, then a read finds none.
    again = await renew_lease(api, "c1", now=NOW + dt.timedelta(seconds=10), duration_seconds=40, last=first)
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert again["spec"]["holderIdentity"] == "c1"
    assert (await api.get(f"{LEASES_PATH}/c1"))["metadata"]["uid"] == again["metadata"]["uid"]
