"""A team reads its own namespace's waste report and nothing of the fleet's: the namespaced
reports path over HTTP with the hub's RBAC authorizer (aiohttp's test client, real middlewares,
tokens, rollups in a MemoryStore)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.index import ROLE_BINDING
from controlplane.apiserver.auth.rbac.policy import default_policy_index
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.identity import Role
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.reports.accounting import Accumulator
from controlplane.reports.api import ReportSource, waste_report_routes
from controlplane.reports.persistence import RollupStore
from controlplane.storage import MemoryStore

from .builders import at, cluster, fleet, gpu, node, pod

NOW = at(10)
BASE = "/apis/reports.gpufed.io/v1alpha1"


def _accumulator() -> Accumulator:
    """Minutes 0..3: team-a's GPU busy, team-b's idle, one GPU free."""
    accumulator = Accumulator()
    devices = (
        gpu(0, pod("train-0", namespace="team-a", workload="train"), 0.9),
        gpu(1, pod("infer-0", namespace="team-b", workload="infer"), 0.05),
        gpu(2),
    )
    for minute in range(4):
        accumulator.add(fleet(cluster("a", [node("n1", devices)], pricing={"NVIDIA-A100-SXM4-80GB": 3.0}), time=at(minute)))
    return accumulator


def _rbac() -> HubAuthorizer:
    index = default_policy_index()
    index.put(ROLE_BINDING, {"metadata": {"name": "team-a-view", "namespace": "team-a"},
                             "roleRef": {"kind": "ClusterRole", "name": "view"},
                             "subjects": [{"kind": "Group", "name": "team-a"}]})
    return HubAuthorizer(index)


@pytest.fixture
async def client() -> AsyncIterator[tuple[TestClient[Any, Any], dict[str, str]]]:
    async with MemoryStore() as store:
        await RollupStore(store).save(_accumulator())
        tokens = TokenStore(store)
        issued = {
            "alice": (await tokens.create(role=Role.USER, name="alice", groups=("team-a",))).token,
            "viewer": (await tokens.create(role=Role.VIEWER, name="viewer")).token,
        }
        app = create_app(
            ObjectStore(store, hub_registry()), hub_registry(), authenticator=tokens, authorizer=_rbac(),
            extra_routes=waste_report_routes(ReportSource(store), clock=lambda: NOW),
        )
        async with TestClient(TestServer(app)) as test_client:
            yield test_client, issued


async def get(client: tuple[TestClient[Any, Any], dict[str, str]], path: str, user: str) -> tuple[int, Any]:
    test_client, tokens = client
    async with test_client.get(path, headers={"Authorization": f"Bearer {tokens[user]}"}) as response:
        return response.status, await response.json()


async def test_a_team_reads_its_namespaces_share_only(client: tuple[TestClient[Any, Any], dict[str, str]]) -> None:
    status, obj = await get(client, f"{BASE}/namespaces/team-a/wastereports/last-1h?by=cluster", "alice")
    assert status == 200, obj
    assert obj["metadata"]["namespace"] == "team-a"
    report = obj["status"]
    hours = report["totals"]["gpu_hours"]
    assert hours["busy"] == pytest.approx(3 / 60, abs=1e-4)
    assert hours["idle-allocated"] == hours["free-spare"] == 0  # team-b's idle GPU and the free one
    assert [g["key"] for g in report["groups"]] == [{"namespace": "team-a", "cluster": "a"}]
    assert {w["namespace"] for w in report["top_idle_workloads"]} <= {"team-a"}
    assert report["recommendations"] == [] and "series" not in report
    status, listed = await get(client, f"{BASE}/namespaces/team-a/wastereports", "alice")
    assert status == 200 and listed["items"]

    # Not the fleet's report, nor another team's.
    for path in (f"{BASE}/wastereports/last-1h", f"{BASE}/namespaces/team-b/wastereports/last-1h"):
        status, body = await get(client, path, "alice")
        assert status == 403, path
        assert 'User "alice" cannot' in body["message"]


async def test_the_fleet_report_needs_a_cluster_wide_binding(client: tuple[TestClient[Any, Any], dict[str, str]]) -> None:
    status, obj = await get(client, f"{BASE}/wastereports/last-1h", "viewer")
    assert status == 200
    assert obj["status"]["totals"]["gpu_hours"]["idle-allocated"] == pytest.approx(3 / 60, abs=1e-4)
    status, team_b = await get(client, f"{BASE}/namespaces/team-b/wastereports/last-1h?by=workload", "viewer")
    assert status == 200
    assert [w["namespace"] for w in team_b["status"]["top_idle_workloads"]] == ["team-b"]
