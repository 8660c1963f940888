"""Reads not older than a resourceVersion the store has not reached yet wait for it, as kube's
watch cache does (``waitUntilFreshAndBlock``, 3 s): a write that reaches it in time answers the
read; otherwise kube's 504 ``Too large resource version``. On the memory store and on etcd."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore, reading
from controlplane.apiserver.resources import Registry

from .kinds import deployment

pytestmark = pytest.mark.waiting

Client = TestClient[Any, Any]
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
#: Long enough that the waiting read is certainly still waiting, far below the 3 s it waits.
STILL_WAITING_SECONDS = 0.3


@pytest.fixture
async def api(objects_on: ObjectStore, api_registry: Registry) -> AsyncIterator[Client]:
    async with TestClient(TestServer(create_app(objects_on, api_registry))) as client:
        yield client


async def _revision(objects: ObjectStore) -> int:
    return await objects.store.current_revision()


@pytest.mark.parametrize(
    ("path", "params"),
    [
        (f"{DEPLOYMENTS}/d", {}),
        (DEPLOYMENTS, {}),
        (DEPLOYMENTS, {"resourceVersionMatch": "NotOlderThan"}),
    ],
    ids=["get", "list", "list-not-older-than"],
)
async def test_a_read_ahead_of_the_store_waits_for_the_write_that_reaches_it(
    api: Client, objects_on: ObjectStore, path: str, params: dict[str, str]
) -> None:
    await api.post(DEPLOYMENTS, json=deployment("d"))
    ahead = await _revision(objects_on) + 1
    read = asyncio.create_task(api.get(path, params={**params, "resourceVersion": str(ahead)}))
    done, _ = await asyncio.wait({read}, timeout=STILL_WAITING_SECONDS)
    assert not done, "the read answered before the store reached its resourceVersion"
    # A write of another kind reaches the revision: the store, not the kind, has to get there.
    assert (await api.post(CONFIGMAPS, json={"metadata": {"name": "c"}})).status == 201
    response = await read
    assert response.status == 200, await response.text()
    body = await response.json()
    assert int(body["metadata"]["resourceVersion"]) >= (ahead if "items" in body else 0)


async def test_a_read_ahead_of_the_store_is_504_when_no_write_reaches_it(
    api: Client, objects_on: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "FRESH_WAIT_SECONDS", 0.2)
    await api.post(DEPLOYMENTS, json=deployment("d"))
    current = await _revision(objects_on)
    for path in (f"{DEPLOYMENTS}/d", DEPLOYMENTS):
        response = await api.get(path, params={"resourceVersion": str(current + 2)})
        assert response.status == 504
        status = await response.json()
        assert status["reason"] == "Timeout"
        assert status["message"] == f"Timeout: Too large resource version: {current + 2}, current: {current}"
        assert status["details"]["causes"] == [
            {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
        ]
