"""The watches open on the hub, counted as kube's watch tracker counts them, make a write's work
estimate: 20 watches of a namespace's ConfigMaps, and a ConfigMap created there is seen by 20
watches (kube's ``apiserver_flowcontrol_watch_count_samples``) and keeps 2 seats after its answer
(``..._work_estimated_seats``); once they end, the next write is seen by none."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from controlplane.apiserver.app import create_app
from controlplane.apiserver.flowcontrol import FlowControlConfig, FlowControlMetrics
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

pytestmark = pytest.mark.waiting

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
WATCHES = 20


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, {"priority_level": "global-default", "flow_schema": "global-default",
                                             **labels})
    return 0.0 if value is None else value


async def test_a_write_is_estimated_by_the_watches_open() -> None:
    registry = hub_registry()
    prometheus = CollectorRegistry()
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        app = create_app(objects, registry, flow_control=FlowControlConfig(total_concurrency=600),
                         flow_control_metrics=FlowControlMetrics(prometheus))
        async with TestClient(TestServer(app)) as client:
            watches = [await client.get(CONFIGMAPS, params={"watch": "1", "timeoutSeconds": "2"})
                       for _ in range(WATCHES)]
            assert all(watch.status == 200 for watch in watches)  # each counted once it answers
            created = await client.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "one"}})
            assert created.status == 201
            assert _sample(prometheus, "apiserver_flowcontrol_watch_count_samples_sum") == WATCHES
            # ceil(20 / 10) final seats: the write's estimate is 2 seats (bucket 2, not 1).
            assert _sample(prometheus, "apiserver_flowcontrol_work_estimated_seats_bucket", le="1.0") == WATCHES
            assert _sample(prometheus, "apiserver_flowcontrol_work_estimated_seats_bucket", le="2.0") == WATCHES + 1
            async with asyncio.timeout(30):
                for watch in watches:
                    await watch.read()  # each ends at its timeout, and is forgotten
            created = await client.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "two"}})
            assert created.status == 201
            assert _sample(prometheus, "apiserver_flowcontrol_watch_count_samples_count") == 2
            assert _sample(prometheus, "apiserver_flowcontrol_watch_count_samples_sum") == WATCHES
