"""A LIST takes the seats kube's work estimate gives it, from the watch cache's count of its
resource: with 250 ConfigMaps stored, a consistent LIST (read from the store: twice the count)
holds 5 seats of its level while it runs, as kube's ``dump_requests`` shows; a watch with its
initial events holds 3 (the count, from the cache) until they are sent, and none after."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web

from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth import RoleAuthorizer, TokenStore
from controlplane.apiserver.flowcontrol import FlowControlConfig, FlowControlMetrics
from controlplane.apiserver.identity import Role
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.tls import ensure_pki
from controlplane.hub import hub_registry
from controlplane.storage import Store

from .gating import GatedObjects, GatedStore

pytestmark = pytest.mark.waiting

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
DUMP_REQUESTS = "/debug/api_priority_and_fairness/dump_requests"
STORED = 250


@dataclass
class _Hub:
    url: str
    session: aiohttp.ClientSession
    admin: dict[str, str]
    viewer: dict[str, str]  # the user "bob", at the global-default level

    async def bobs_requests(self) -> list[list[str]]:
        """The rows of bob's requests in kube's ``dump_requests``."""
        async with self.session.get(self.url + DUMP_REQUESTS, headers=self.admin) as response:
            dump = await response.text()
        rows = [[cell.strip() for cell in line.split(",")[:-1]] for line in dump.splitlines()]
        return [row for row in rows[1:] if row[4] == "bob"]


@contextlib.asynccontextmanager
async def _serving(tmp_path: Path, store: Store, objects: ObjectStore, metrics: FlowControlMetrics) -> AsyncIterator[_Hub]:
    """The API over ``objects`` (with ``STORED`` ConfigMaps) behind TLS and tokens, 600 seats."""
    pki = ensure_pki(tmp_path, hosts=[])
    tokens = TokenStore(store)
    app = create_app(
        objects, objects.registry, authenticator=tokens, authorizer=RoleAuthorizer(),
        flow_control=FlowControlConfig(total_concurrency=600), flow_control_metrics=metrics,
    )
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pki.server_ssl_context())
    await site.start()
    admin = {"Authorization": f"Bearer {(await tokens.create(role=Role.ADMIN, name='admin')).token}"}
    viewer = {"Authorization": f"Bearer {(await tokens.create(role=Role.VIEWER, name='bob')).token}"}
    configmap = objects.registry.require("v1", "ConfigMap")
    for n in range(STORED):
        await objects.create(configmap, {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": f"cm-{n}", "namespace": "default"}})
    connector = aiohttp.TCPConnector(ssl=pki.client_ssl_context(), limit=0)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            hub = _Hub(f"https://127.0.0.1:{runner.addresses[0][1]}", session, admin, viewer)
            # A list at resourceVersion=0 is served by the watch cache, which then counts the objects.
            async with session.get(hub.url + CONFIGMAPS, params={"resourceVersion": "0"}, headers=viewer) as response:
                assert response.status == 200
                assert len((await response.json())["items"]) == STORED
            yield hub
    finally:
        await runner.cleanup()


async def test_a_list_holds_seats_by_the_objects_it_goes_through(tmp_path: Path, store: Store) -> None:
    objects = GatedObjects(store, hub_registry(), signal_at=1, hold_at_most=1)
    try:
        async with _serving(tmp_path, store, objects, FlowControlMetrics()) as hub:
            held = asyncio.create_task(hub.session.get(hub.url + CONFIGMAPS, headers=hub.viewer))
            async with asyncio.timeout(10):
                await objects.all_held.wait()
            [bobs] = await hub.bobs_requests()
            assert (bobs[0], bobs[3], bobs[6]) == ("global-default", "-1", str(2 * STORED // 100))
            objects.gate.set()
            response = await held
            assert response.status == 200
            response.release()
    finally:
        objects.gate.set()


async def test_a_watch_holds_its_seats_while_its_initial_events_are_read(tmp_path: Path, store: Store) -> None:
    gated = GatedStore(store)
    metrics = FlowControlMetrics()
    seats = metrics.executing_seats.labels("global-default", "global-default")
    params = {"watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
              "allowWatchBookmarks": "true", "timeoutSeconds": "60"}
    try:
        async with _serving(tmp_path, store, ObjectStore(gated, hub_registry()), metrics) as hub:
            gated.armed = True
            async with hub.session.get(hub.url + CONFIGMAPS, params=params, headers=hub.viewer) as watch:
                assert watch.status == 200
                async with asyncio.timeout(10):
                    await gated.held.wait()  # its initial list is being read
                [bobs] = await hub.bobs_requests()
                # Executing (-1) in global-default with 3 seats: 250 objects from the cache.
                assert (bobs[0], bobs[3], bobs[6]) == ("global-default", "-1", str(-(-STORED // 100)))
                assert seats._value.get() == 3
                gated.gate.set()
                added = 0
                async with asyncio.timeout(10):
                    while (event := orjson.loads(await watch.content.readline()))["type"] != "BOOKMARK":
                        added += 1
                assert added == STORED
                # Started (the initial-events-end bookmark sent): its seats are back while it goes on.
                assert await hub.bobs_requests() == []
                assert seats._value.get() == 0
                assert event["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    finally:
        gated.gate.set()
