"""Kueue's metrics from the hub's admission controller: team A borrows team B's idle quota, team
B reclaims it; the gauges, counters and histograms say so under Kueue's names and labels, per
ClusterQueue and per LocalQueue, and a deleted ClusterQueue's or LocalQueue's series go away."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from controlplane.admission.metrics import QueueMetrics
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster, settled
from .test_admission import GPU, KUEUE, PLACEMENT, create, kueue_obj, team_queue
from .test_admission_preemption import admitted, job

pytestmark = pytest.mark.waiting


@pytest.fixture
async def metered(objects: ObjectStore, registry: CollectorRegistry) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=FAST, queue_metrics=QueueMetrics(registry)) as running:
        yield running


def value(registry: CollectorRegistry, metric: str, **labels: str) -> float | None:
    return registry.get_sample_value(metric, labels)


def resource(queue: str, flavor: str, name: str) -> dict[str, str]:
    return {"cohort": "fleet", "cluster_queue": queue, "flavor": flavor, "resource": name}


def lq(team: str, **labels: str) -> dict[str, str]:
    """The labels of ``team``'s LocalQueue (``default/<team>``) under Kueue's names."""
    return {"name": team, "namespace": "default", **labels}


async def test_queue_metrics_follow_admission_and_preemption(
    objects: ObjectStore, metered: ControllerManager, registry: CollectorRegistry
) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    for team in ("team-a", "team-b"):
        cq = team_queue(team, 8)
        cq["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
        if team == "team-a":
            cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["borrowingLimit"] = 6
        await create(objects, cq)
        await create(objects, kueue_obj("LocalQueue", team, "default", spec={"clusterQueue": team}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(metered)
    assert value(registry, "kueue_cluster_queue_status", cluster_queue="team-a", status="active") == 1
    assert value(registry, "kueue_cluster_queue_status", cluster_queue="team-a", status="pending") == 0

    for name in ("a1", "a2", "a3"):  # 12 GPUs: 8 of team A's quota, 4 borrowed from idle team B
        await create(objects, job(name, "team-a"))
        assert await eventually(lambda n=name: admitted(objects, n), what=f"{name} admitted") == "team-a"  # type: ignore[misc]
    await settled(metered)
    gpu_a = resource("team-a", "onprem", GPU)
    assert value(registry, "kueue_cluster_queue_resource_usage", **gpu_a) == 12
    assert value(registry, "kueue_cluster_queue_resource_reservation", **gpu_a) == 12
    assert value(registry, "kueue_cluster_queue_nominal_quota", **gpu_a) == 8
    assert value(registry, "kueue_cluster_queue_borrowing_limit", **gpu_a) == 6
    assert value(registry, "kueue_cluster_queue_lending_limit", **gpu_a) == math.inf  # no limit set, as Kueue says
    assert value(registry, "kueue_cluster_queue_nominal_quota", **resource("team-a", "onprem", "cpu")) == 100
    assert value(registry, "kueue_reserving_active_workloads", cluster_queue="team-a") == 3
    assert value(registry, "kueue_admitted_active_workloads", cluster_queue="team-a") == 3
    assert value(registry, "kueue_admitted_workloads_total", cluster_queue="team-a") == 3
    assert value(registry, "kueue_admission_wait_time_seconds_count", cluster_queue="team-a") == 3
    assert value(registry, "kueue_pending_workloads", cluster_queue="team-a", status="active") == 0
    assert value(registry, "kueue_local_queue_reserving_active_workloads", **lq("team-a")) == 3
    assert value(registry, "kueue_local_queue_admitted_active_workloads", **lq("team-a")) == 3
    assert value(registry, "kueue_local_queue_admitted_workloads_total", **lq("team-a")) == 3
    assert value(registry, "kueue_local_queue_quota_reserved_workloads_total", **lq("team-a")) == 3
    assert value(registry, "kueue_local_queue_admission_wait_time_seconds_count", **lq("team-a")) == 3
    assert value(registry, "kueue_local_queue_resource_usage", **lq("team-a", flavor="onprem", resource=GPU)) == 12
    assert value(registry, "kueue_local_queue_resource_reservation", **lq("team-a", flavor="onprem", resource=GPU)) == 12
    assert value(registry, "kueue_local_queue_status", **lq("team-a", active="True")) == 1
    assert value(registry, "kueue_local_queue_status", **lq("team-a", active="False")) == 0
    assert value(registry, "kueue_local_queue_reserving_active_workloads", **lq("team-b")) == 0
    assert value(registry, "kueue_cluster_queue_weighted_share", cluster_queue="team-a") is None  # fair sharing off

    await create(objects, job("b1", "team-b"))  # the 4 GPUs nobody borrows
    assert await eventually(lambda: admitted(objects, "b1"), what="b1 admitted") == "team-b"
    await create(objects, job("b2", "team-b"))  # within B's nominal quota: reclaims what A borrowed
    assert await eventually(lambda: admitted(objects, "b2"), what="b2 admitted after preempting") == "team-b"
    await settled(metered)
    assert value(registry, "kueue_evicted_workloads_total", cluster_queue="team-a", reason="Preempted") == 1
    assert value(registry, "kueue_preempted_workloads_total", preempting_cluster_queue="team-b",
                 reason="InCohortReclamation") == 1
    assert value(registry, "kueue_pending_workloads", cluster_queue="team-a", status="active") == 1
    assert value(registry, "kueue_cluster_queue_resource_usage", **gpu_a) == 8
    assert value(registry, "kueue_cluster_queue_resource_usage", **resource("team-b", "onprem", GPU)) == 8
    assert value(registry, "kueue_reserving_active_workloads", cluster_queue="team-b") == 2
    assert (value(registry, "kueue_admission_attempts_total", result="success") or 0) >= 1
    assert value(registry, "kueue_local_queue_evicted_workloads_total", **lq("team-a", reason="Preempted")) == 1
    assert value(registry, "kueue_local_queue_pending_workloads", **lq("team-a", status="active")) == 1
    assert value(registry, "kueue_local_queue_pending_workloads", **lq("team-a", status="inadmissible")) == 0
    assert value(registry, "kueue_local_queue_resource_usage", **lq("team-a", flavor="onprem", resource=GPU)) == 8
    assert value(registry, "kueue_local_queue_reserving_active_workloads", **lq("team-b")) == 2

    # A ClusterQueue deleted while its workloads hold quota: Terminating (Kueue's finalizer) ...
    await objects.delete(objects.registry.require(KUEUE, "ClusterQueue"), name="team-b")

    async def team_b_terminating() -> float | None:
        return value(registry, "kueue_cluster_queue_status", cluster_queue="team-b", status="terminating") or None

    assert await eventually(team_b_terminating, what="team-b terminating") == 1
    # ... until they are gone; then its series go, the other queue's stay.
    for name in ("b1", "b2"):
        await objects.delete(objects.registry.require("batch/v1", "Job"), namespace="default", name=name)

    async def team_b_gone() -> bool | None:
        text = generate_latest(registry).decode()
        return True if 'cluster_queue="team-b"' not in text and "preempting_cluster_queue=\"team-b\"" not in text else None

    await eventually(team_b_gone, what="team-b's series removed")
    assert value(registry, "kueue_cluster_queue_nominal_quota", **gpu_a) == 8
    assert value(registry, "kueue_evicted_workloads_total", cluster_queue="team-a", reason="Preempted") == 1
    # Its LocalQueue stays, pointing at no ClusterQueue: inactive.
    async def team_b_local_queue_inactive() -> float | None:
        return value(registry, "kueue_local_queue_status", **lq("team-b", active="False")) or None

    assert await eventually(team_b_local_queue_inactive, what="team-b's LocalQueue inactive") == 1

    # A LocalQueue deleted: its series go (counters and histograms included), the other's stay.
    await objects.delete(objects.registry.require(KUEUE, "LocalQueue"), namespace="default", name="team-a")

    async def team_a_local_queue_gone() -> bool | None:
        text = generate_latest(registry).decode()
        return True if 'name="team-a"' not in text else None

    await eventually(team_a_local_queue_gone, what="team-a's LocalQueue series removed")
    assert value(registry, "kueue_local_queue_status", **lq("team-b", active="False")) == 1


def test_a_replica_that_stops_leading_reports_no_queues(registry: CollectorRegistry) -> None:
    from controlplane.admission.metrics import LocalQueueFigures, QueueFigures, ResourceFigures

    metrics = QueueMetrics(registry)
    figures = QueueFigures("team-a", "", "active", 2, 1, 3, (ResourceFigures("onprem", "cpu", 1.5, math.inf, 0.5, 0.25),))
    metrics.record_queues([figures])
    metrics.admitted("team-a", waited_seconds=7.0)
    assert value(registry, "kueue_pending_workloads", cluster_queue="team-a", status="inadmissible") == 1
    assert value(registry, "kueue_cluster_queue_lending_limit", **{**resource("team-a", "onprem", "cpu"), "cohort": ""}) == 0.5
    assert value(registry, "kueue_admission_wait_time_seconds_bucket", cluster_queue="team-a", le="10.0") == 1
    assert value(registry, "kueue_admission_wait_time_seconds_bucket", cluster_queue="team-a", le="5.0") == 0
    metrics.local_queues.record([LocalQueueFigures("default", "team-a", "True", 1, 0, 2, (("onprem", "cpu", 0.5),))])
    metrics.admitted("team-a", waited_seconds=3.0, local_queue=("default", "team-a"))
    assert value(registry, "kueue_local_queue_resource_usage", **lq("team-a", flavor="onprem", resource="cpu")) == 0.5
    assert value(registry, "kueue_local_queue_admission_wait_time_seconds_bucket", **lq("team-a", le="5.0")) == 1
    metrics.forget()
    assert "team-a" not in generate_latest(registry).decode()
