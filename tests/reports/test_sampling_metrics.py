"""Prometheus metrics fed by the waste sampler and the API server (the hub's /metrics), and the
member agent's own /metrics server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.metrics import HubMetrics
from controlplane.reports.classify import DeviceState, WasteState
from controlplane.storage import MemoryStore
from member_agent.metrics import AgentMetrics, MetricsServer, parse_listen

from .builders import A100, at


def _state(state: WasteState, share: float = 1.0, price: float = 2.0, cluster: str = "a") -> DeviceState:
    return DeviceState(cluster=cluster, node="n1", product=A100, profile=None, share=share, state=state,
                       price_per_gpu_hour=price)


def _metrics() -> HubMetrics:
    return HubMetrics(registry=CollectorRegistry(), process_collectors=False, max_interval=timedelta(minutes=5))


@pytest.mark.parametrize(
    ("minutes", "accounted_minutes"),
    [(1, 1), (5, 5), (30, 5)],  # a gap longer than max_interval counts only up to it
)
def test_gpu_hours_integrate_the_held_sample(minutes: int, accounted_minutes: int) -> None:
    metrics = _metrics()
    metrics.record_fleet([_state(WasteState.IDLE_ALLOCATED), _state(WasteState.BUSY, share=3 / 7)], time=at(0))
    metrics.record_fleet([_state(WasteState.BUSY)], time=at(minutes))
    labels = {"cluster": "a", "model": A100}
    idle = metrics.registry.get_sample_value("gpufed_gpu_hours_total", {"state": "idle-allocated", **labels})
    busy = metrics.registry.get_sample_value("gpufed_gpu_hours_total", {"state": "busy", **labels})
    cost = metrics.registry.get_sample_value("gpufed_gpu_cost_usd_total", {"state": "idle-allocated", **labels})
    assert idle == pytest.approx(accounted_minutes / 60)
    assert busy == pytest.approx(3 / 7 * accounted_minutes / 60)
    assert cost == pytest.approx(2.0 * accounted_minutes / 60)
    # The gauges show the newest sample only.
    assert metrics.registry.get_sample_value("gpufed_gpus", {"state": "busy", **labels}) == 1.0
    assert metrics.registry.get_sample_value("gpufed_gpus", {"state": "idle-allocated", **labels}) is None


def test_bindings_are_counted_by_condition() -> None:
    metrics = _metrics()
    bindings: list[dict[str, Any]] = [
        {"status": {"conditions": [{"type": "Scheduled", "status": "True"}, {"type": "FullyApplied", "status": "True"}]}},
        {"status": {"conditions": [{"type": "Scheduled", "status": "False"}]}},
        {"status": {}},
    ]
    metrics.record_bindings(bindings)
    value = metrics.registry.get_sample_value
    assert value("gpufed_resourcebindings", {"condition": "Scheduled", "status": "True"}) == 1
    assert value("gpufed_resourcebindings", {"condition": "Scheduled", "status": "False"}) == 1
    assert value("gpufed_resourcebindings", {"condition": "none", "status": ""}) == 1
    metrics.record_bindings([])
    assert value("gpufed_resourcebindings", {"condition": "Scheduled", "status": "True"}) is None


@pytest.fixture
async def hub_client() -> AsyncIterator[tuple[TestClient[Any, Any], HubMetrics]]:
    metrics = _metrics()
    async with MemoryStore() as store:
        app = create_app(ObjectStore(store, hub_registry()), hub_registry(), extra_routes=metrics.routes(),
                         outer_middlewares=[metrics.middleware()])
        async with TestClient(TestServer(app)) as client:
            yield client, metrics


async def test_api_requests_are_timed_by_verb_and_resource(hub_client: tuple[TestClient[Any, Any], HubMetrics]) -> None:
    client, metrics = hub_client
    for _ in range(3):
        async with client.get("/apis/cluster.gpufed.io/v1alpha1/clusters") as response:
            assert response.status == 200
    async with client.get("/apis/cluster.gpufed.io/v1alpha1/clusters/missing") as response:
        assert response.status == 404
    metrics.observe_scheduling(0.02, result="Success")
    async with client.get("/metrics") as response:
        assert response.status == 200
        text = await response.text()
    counts = {
        (s.labels["verb"], s.labels["resource"], s.labels["code"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "gpufed_apiserver_request_duration_seconds_count"
    }
    assert counts[("list", "clusters", "200")] == 3
    assert counts[("get", "clusters", "404")] == 1
    assert "gpufed_scheduling_duration_seconds_count{result=\"Success\"} 1" in text


@pytest.mark.parametrize(("text", "expected"), [("127.0.0.1:9464", ("127.0.0.1", 9464)), (":0", ("0.0.0.0", 0)),
                                                 ("[::1]:80", ("::1", 80))])
def test_agent_metrics_listen_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["9464", "host:", "host:port", "h:70000"])
def test_bad_agent_metrics_listen_addresses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_listen(text)


async def test_the_agent_serves_report_lag_and_counts() -> None:
    now = [1000.0]
    metrics = AgentMetrics("gpu-a", clock=lambda: now[0])
    server = MetricsServer(metrics, host="127.0.0.1", port=0)
    await server.start()
    try:
        now[0] = 1012.0
        metrics.report_written()
        metrics.report_failed()
        metrics.dcgm_scraped(ok=True)
        now[0] = 1015.0
        async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{server.port}/metrics", timeout=aiohttp.ClientTimeout(total=10)
        ) as response:
            text = await response.text()
    finally:
        await server.close()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    cluster = (("cluster", "gpu-a"),)
    assert samples[("gpufed_agent_report_lag_seconds", cluster)] == 3.0
    assert samples[("gpufed_agent_reports_written_total", cluster)] == 1.0
    assert samples[("gpufed_agent_report_failures_total", cluster)] == 1.0
    assert samples[("gpufed_agent_dcgm_scrapes_total", (("cluster", "gpu-a"), ("result", "ok")))] == 1.0
