"""The waste report grouped by Kueue ClusterQueue: a team's idle GPU-hours and their cost. A
workload a queue admitted counts for that ClusterQueue (from its Workload's admission; an evicted
one for the ClusterQueue its LocalQueue points at), everything else for ``-`` — over HTTP, with
the Workloads in the hub's store, fleet-wide and for one namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.reports.accounting import Accumulator
from controlplane.reports.api import ReportSource, waste_report_routes
from controlplane.reports.persistence import RollupStore
from controlplane.reports.queues import cluster_queues_of
from controlplane.storage import MemoryStore

from .builders import at, cluster, fleet, gpu, node, pod

NOW = at(10)
BASE = "/apis/reports.gpufed.io/v1alpha1"
KUEUE = "kueue.x-k8s.io/v1beta1"
PRICE = 3.0


def workload(kind: str, name: str, namespace: str, *, queue: str, admitted_by: str | None) -> dict[str, Any]:
    status = {"admission": {"clusterQueue": admitted_by, "podSetAssignments": []}} if admitted_by else {}
    return {
        "apiVersion": KUEUE, "kind": "Workload",
        "metadata": {"name": f"{kind.lower()}-{name}", "namespace": namespace, "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}]},
        "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
        "status": status,
    }


def local_queue(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def _accumulator() -> Accumulator:
    """Minutes 0..6: team-a's Job idle (admitted by research), team-a's evicted Job idle (its
    LocalQueue points at research), team-b's Job busy (admitted by prod), a Deployment nobody
    queued idle, and one free GPU."""
    accumulator = Accumulator()
    devices = (
        gpu(0, pod("train-0", namespace="team-a", workload="train", kind="Job"), 0.02),
        gpu(1, pod("evicted-0", namespace="team-a", workload="evicted", kind="Job"), 0.01),
        gpu(2, pod("serve-0", namespace="team-b", workload="serve", kind="Job"), 0.9),
        gpu(3, pod("web-0", namespace="team-b", workload="web"), 0.03),
        gpu(4),
    )
    for minute in range(7):
        accumulator.add(fleet(cluster("a", [node("n1", devices)], pricing={"NVIDIA-A100-SXM4-80GB": PRICE}), time=at(minute)))
    return accumulator


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    async with MemoryStore() as store:
        await RollupStore(store).save(_accumulator())
        objects = ObjectStore(store, hub_registry())
        await objects.bootstrap()
        for namespace in ("team-a", "team-b"):
            await objects.create(objects.registry.require("v1", "Namespace"),
                                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for obj in (
            local_queue("lq", "team-a", "research"), local_queue("lq", "team-b", "prod"),
            workload("Job", "train", "team-a", queue="lq", admitted_by="research"),
            workload("Job", "evicted", "team-a", queue="lq", admitted_by=None),
            workload("Job", "serve", "team-b", queue="lq", admitted_by="prod"),
        ):
            await objects.create(objects.registry.require(KUEUE, obj["kind"]), obj)
        app = create_app(objects, hub_registry(),
                         extra_routes=waste_report_routes(ReportSource(store), clock=lambda: NOW, objects=objects))
        async with TestClient(TestServer(app)) as test_client:
            yield test_client


async def groups(client: TestClient[Any, Any], path: str) -> dict[str, dict[str, Any]]:
    async with client.get(path) as response:
        body = await response.json()
        assert response.status == 200, body
    return {g["key"]["clusterqueue"]: g for g in body["status"]["groups"]}


async def test_idle_gpu_hours_and_cost_per_cluster_queue(client: TestClient[Any, Any]) -> None:
    by_queue = await groups(client, f"{BASE}/wastereports/last-1h?by=clusterqueue")
    assert set(by_queue) == {"research", "prod", "-"}
    minutes = 6 / 60  # seven samples a minute apart: six minutes accounted
    research = by_queue["research"]
    assert research["gpu_hours"]["idle-allocated"] == pytest.approx(2 * minutes, abs=1e-4)  # train and the evicted Job
    assert research["cost_usd"]["idle-allocated"] == pytest.approx(2 * minutes * PRICE, abs=1e-3)
    assert research["gpu_hours"]["busy"] == 0
    assert by_queue["prod"]["gpu_hours"]["busy"] == pytest.approx(minutes, abs=1e-4)
    assert by_queue["prod"]["gpu_hours"]["idle-allocated"] == 0
    unqueued = by_queue["-"]  # the Deployment no queue admitted, and the free GPU
    assert unqueued["gpu_hours"]["idle-allocated"] == pytest.approx(minutes, abs=1e-4)
    assert unqueued["gpu_hours"]["free-spare"] == pytest.approx(minutes, abs=1e-4)


async def test_a_team_sees_its_own_queues_share(client: TestClient[Any, Any]) -> None:
    by_queue = await groups(client, f"{BASE}/namespaces/team-b/wastereports/last-1h?by=clusterqueue")
    assert set(by_queue) == {"prod", "-"}
    assert by_queue["prod"]["key"] == {"namespace": "team-b", "clusterqueue": "prod"}
    assert by_queue["-"]["gpu_hours"]["free-spare"] == 0  # the fleet's free GPU is not the team's


def test_the_workload_key_is_the_owner_a_finished_or_evicted_one_keeps_its_queue() -> None:
    finished = workload("Job", "done", "ns", queue="lq", admitted_by="research")
    finished["status"]["conditions"] = [{"type": "Finished", "status": "True"}]
    evicted = workload("PyTorchJob", "bert", "ns", queue="lq", admitted_by=None)
    stray = workload("Job", "lost", "ns", queue="missing", admitted_by=None)
    orphan = {**workload("Job", "x", "ns", queue="lq", admitted_by="research"), "metadata": {"name": "x", "namespace": "ns"}}
    assert cluster_queues_of([finished, evicted, stray, orphan], [local_queue("lq", "ns", "research")]) == {
        ("ns", "Job/done"): "research",
        ("ns", "PyTorchJob/bert"): "research",
    }


def test_a_pod_groups_workload_gives_each_of_its_pods_its_queue() -> None:
    grouped = {**workload("Pod", "ignored", "ns", queue="lq", admitted_by="prod"), "metadata": {
        "name": "grp", "namespace": "ns", "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": f"g{i}", "uid": f"u{i}"} for i in range(2)]}}
    assert cluster_queues_of([grouped], []) == {("ns", "Pod/g0"): "prod", ("ns", "Pod/g1"): "prod"}
