"""Priority and fairness over real HTTPS: while one user's slow LISTs fill global-default
(held by a gate in the object layer, over memory and etcd) and its queue, the agent's Cluster status report and Lease
renewal are still served, an admin is exempt, the flood beyond the queue is refused with
kube's 429 Status and Retry-After, and the held LISTs all complete once the gate opens."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from controlplane.apis.constants import FIELD_MANAGER_AGENT, LEASE_NAMESPACE
from controlplane.apis.kube.flowcontrol_bootstrap import bootstrap_object
from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth import RoleAuthorizer, TokenStore
from controlplane.apiserver.auth.clusterrestriction import ClusterRestriction
from controlplane.apiserver.flowcontrol import (
    FLOW_SCHEMA_HEADER,
    PRIORITY_LEVEL_HEADER,
    FlowControlConfig,
    FlowControlMetrics,
)
from controlplane.apiserver.flowcontrol.levels import object_uid
from controlplane.apiserver.identity import Role
from controlplane.apiserver.tls import ensure_pki
from controlplane.hub import hub_registry
from controlplane.storage import Store

from .gating import GatedObjects

CLUSTER = "/apis/cluster.gpufed.io/v1alpha1/clusters/c1"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
#: 20 seats in all: global-default gets ceil(20 * 20 / 245) = 2 of them (kube's shares); its object
#: is edited to one queue of 3 and to borrow no seats.
CONFIG = FlowControlConfig(total_concurrency=20, queue_wait_seconds=600)
SEATS = 2
QUEUE_LENGTH = 3
FLOOD = SEATS + QUEUE_LENGTH + 2


@dataclass
class Hub:
    session: aiohttp.ClientSession
    url: str
    objects: GatedObjects
    metrics: CollectorRegistry
    tokens: dict[str, str]
    #: The stored global-default PriorityLevelConfiguration's UID.
    level_uid: str

    async def call(
        self, method: str, path: str, *, who: str, body: Any = None, content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        headers = {"Authorization": f"Bearer {self.tokens[who]}", "Content-Type": content_type}
        data = json.dumps(body).encode() if body is not None else None
        async with self.session.request(
            method, self.url + path, headers=headers, data=data, params=query or {}
        ) as response:
            return response.status, await response.json(), dict(response.headers)


@pytest.fixture
async def hub(tmp_path: Path, store: Store) -> AsyncIterator[Hub]:
    """The hub's API over HTTPS on each store kind (memory and etcd)."""
    pki = ensure_pki(tmp_path, hosts=[])
    registry = hub_registry()
    objects = GatedObjects(store, registry, signal_at=SEATS)
    tokens = TokenStore(store)
    metrics = CollectorRegistry()
    level = bootstrap_object("PriorityLevelConfiguration", "global-default")
    assert level is not None
    level["spec"]["limited"]["limitResponse"]["queuing"] = {"queues": 1, "handSize": 1, "queueLengthLimit": QUEUE_LENGTH}
    level["spec"]["limited"]["borrowingLimitPercent"] = 0  # its two seats, none borrowed
    level = await objects.create(registry.require("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"), level)
    app = create_app(
        objects, registry, authenticator=tokens, authorizer=RoleAuthorizer(), admission=[ClusterRestriction()],
        flow_control=CONFIG, flow_control_metrics=FlowControlMetrics(metrics), watch_cache=None,
    )
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pki.server_ssl_context())
    await site.start()
    port = runner.addresses[0][1]
    issued = {
        "admin": (await tokens.create(role=Role.ADMIN, name="admin")).token,
        "agent": (await tokens.create(role=Role.AGENT, name="agent:c1", cluster="c1")).token,
        "viewer": (await tokens.create(role=Role.VIEWER, name="dashboard")).token,
    }
    connector = aiohttp.TCPConnector(ssl=pki.client_ssl_context(), limit=0)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            yield Hub(session, f"https://127.0.0.1:{port}", objects, metrics, issued, level["metadata"]["uid"])
    finally:
        objects.gate.set()
        await runner.cleanup()


def _value(metrics: CollectorRegistry, name: str, **labels: str) -> float | None:
    return metrics.get_sample_value(name, labels)


async def test_agents_are_served_while_user_lists_flood_the_hub(hub: Hub) -> None:
    # The agent registers its Cluster and its Lease before the flood (in the hub's namespace for them).
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NAMESPACE}}
    status, body, _ = await hub.call("POST", "/api/v1/namespaces", who="admin", body=namespace)
    assert status == 201, body
    registration = {
        "apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "c1"},
        "spec": {"provider": "aws", "region": "eu-west-1"},
    }
    status, body, _ = await hub.call(
        "PATCH", CLUSTER, who="agent", body=registration, content_type="application/apply-patch+yaml",
        query={"fieldManager": FIELD_MANAGER_AGENT, "force": "false"},
    )
    assert status in (200, 201), body
    lease = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "c1", "namespace": LEASE_NAMESPACE},
        "spec": {"holderIdentity": "agent:c1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"},
    }
    status, created, _ = await hub.call(
        "PATCH", f"{LEASES}/c1", who="agent", body=lease, content_type="application/apply-patch+yaml",
        query={"fieldManager": FIELD_MANAGER_AGENT, "force": "true"},
    )
    assert status in (200, 201), created

    flood = [asyncio.create_task(hub.call("GET", CONFIGMAPS, who="viewer")) for _ in range(FLOOD)]
    # Seats fill and the flow's queue fills: the rest are refused at once, while the gate is closed.
    refused: list[tuple[int, dict[str, Any], dict[str, str]]] = []
    pending = set(flood)
    while len(refused) < FLOOD - SEATS - QUEUE_LENGTH:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        refused.extend(task.result() for task in done)
    await hub.objects.all_held.wait()
    assert len(pending) == SEATS + QUEUE_LENGTH and not hub.objects.gate.is_set()
    for code, status_body, headers in refused:
        assert code == 429, status_body
        assert headers["Retry-After"] == "1"
        assert (status_body["kind"], status_body["reason"], status_body["code"]) == ("Status", "TooManyRequests", 429)
        assert "global-default" in status_body["message"] and "queue-full" in status_body["message"]
        assert headers[PRIORITY_LEVEL_HEADER] == hub.level_uid
    assert _value(hub.metrics, "apiserver_flowcontrol_rejected_requests_total", priority_level="global-default",
                  flow_schema="global-default", reason="queue-full") == len(refused)
    assert _value(hub.metrics, "apiserver_flowcontrol_current_inqueue_requests", priority_level="global-default",
                  flow_schema="global-default") == QUEUE_LENGTH
    assert _value(hub.metrics, "apiserver_flowcontrol_current_executing_requests", priority_level="global-default",
                  flow_schema="global-default") == SEATS

    # kube's dump_queues: the level's one queue holds the waiting LISTs, its seats the running ones.
    async with hub.session.get(
        f"{hub.url}/debug/api_priority_and_fairness/dump_queues", headers={"Authorization": f"Bearer {hub.tokens['admin']}"}
    ) as response:
        assert response.status == 200
        dump = await response.text()
    [queue] = [line.split(",")[1:-1] for line in dump.splitlines() if line.startswith("global-default,")]
    cells = [cell.strip() for cell in queue]
    assert cells[:4] + cells[5:] == ["0", str(QUEUE_LENGTH), str(SEATS), str(SEATS), str(QUEUE_LENGTH),
                                     str(QUEUE_LENGTH), f"{QUEUE_LENGTH * 0.003:.8f}ss"]
    assert cells[4].endswith("ss")

    # The agent's report and its lease renewal go through the system level meanwhile.
    report = {"status": {"lastReportTime": "2026-01-01T00:00:10Z"}}
    code, reported, headers = await hub.call(
        "PATCH", CLUSTER + "/status", who="agent", body=report, content_type="application/merge-patch+json",
    )
    assert code == 200, reported
    assert headers[PRIORITY_LEVEL_HEADER] == object_uid("prioritylevelconfigurations", "system")
    assert headers[FLOW_SCHEMA_HEADER] == object_uid("flowschemas", "system-agents")
    renewed = {**created, "spec": {**created["spec"], "renewTime": "2026-01-01T00:00:10.000000Z"}}
    code, body, _ = await hub.call("PUT", f"{LEASES}/c1", who="agent", body=renewed)
    assert code == 200, body
    # An admin is exempt.
    code, body, headers = await hub.call("GET", CLUSTER, who="admin")
    assert code == 200 and body["status"]["lastReportTime"] == "2026-01-01T00:00:10Z"
    assert headers[PRIORITY_LEVEL_HEADER] == object_uid("prioritylevelconfigurations", "exempt")
    assert not any(task.done() for task in pending) and not hub.objects.gate.is_set()

    # The gate opens: every held and queued LIST is served.
    hub.objects.gate.set()
    served = await asyncio.gather(*pending)
    assert [code for code, _, _ in served] == [200] * len(pending)
    assert _value(hub.metrics, "apiserver_flowcontrol_current_executing_requests", priority_level="global-default",
                  flow_schema="global-default") == 0
