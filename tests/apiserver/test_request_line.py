"""A request line as long as kube-apiserver reads (Go's 1 MiB of a request's head) is served:
a list with a label selector of thousands of values, a name past the 8190 bytes aiohttp reads by
default (its Status says what is wrong with it, as kube's does). Past the bound the hub answers
400 without reading on. Over plain HTTP, on the runner the hub serves its API with."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.serving import MAX_REQUEST_LINE_BYTES, GuardedTCPSite, ServingLimits, api_runner

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def base_url(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[str]:
    runner = api_runner(create_app(objects, api_registry))
    await runner.setup()
    site = GuardedTCPSite(runner, "127.0.0.1", 0, ssl_context=None, limits=ServingLimits())
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_a_long_selector_and_a_long_name_are_served(base_url: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(base_url + CONFIGMAPS, json={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "v2999", "labels": {"app": "v2999"}},
        }) as created:
            assert created.status == 201, await created.text()
        values = ",".join(f"v{index}" for index in range(3000))  # about 20 KB
        async with session.get(base_url + CONFIGMAPS, params={"labelSelector": f"app in ({values})"}) as listed:
            assert listed.status == 200, await listed.text()
            assert [item["metadata"]["name"] for item in (await listed.json())["items"]] == ["v2999"]
        async with session.get(f"{base_url}{CONFIGMAPS}/{'a' * 20000}") as missing:
            status = await missing.json()
            assert (missing.status, status["kind"], status["reason"]) == (404, "Status", "NotFound"), status


async def test_a_request_line_past_the_bound_is_refused(base_url: str) -> None:
    too_long = f"{base_url}{CONFIGMAPS}?labelSelector={'a' * MAX_REQUEST_LINE_BYTES}"
    async with aiohttp.ClientSession() as session, session.get(too_long) as response:
        assert response.status == 400
