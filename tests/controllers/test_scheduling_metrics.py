"""The scheduler feeds ``gpufed_scheduling_duration_seconds``: a real hub (embedded etcd, HTTPS,
token auth) schedules a Deployment, and its own ``/metrics`` shows the attempt by result; the
controllers' work queues, the federation loop's and the leader-only ones', show up there under
client-go's ``workqueue_*`` names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controlplane.controllers.queueing import WorkQueue
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from tests.controllers.fleet import deployment, eventually, node_shape, propagation_policy, put_cluster
from tests.hubmetrics import samples

COUNT = "gpufed_scheduling_duration_seconds_count"


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        yield running


async def scheduling_counts(hub: Hub) -> dict[str, float]:
    """``result`` -> attempts, read from the hub's /metrics over HTTPS with the admin token."""
    return {labels["result"]: value for labels, value in await samples(hub, COUNT)}


async def test_scheduling_a_binding_is_observed_in_the_hub_metrics(hub: Hub) -> None:
    objects = hub.objects
    assert objects is not None
    before = await scheduling_counts(hub)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await put_cluster(objects, "gpu-a", node_shape(2, gpus=8), report_time=now)
    deployments = objects.registry.require("apps/v1", "Deployment")
    policies = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policies, propagation_policy("spread"))
    await objects.create(deployments, deployment("fits", replicas=2))
    await objects.create(deployments, deployment("too-big", replicas=1, gpus=64))

    async def counted() -> dict[str, float] | None:
        counts = await scheduling_counts(hub)
        grew = {result: n - before.get(result, 0.0) for result, n in counts.items() if n > before.get(result, 0.0)}
        return grew if "Success" in grew and set(grew) - {"Success"} else None

    grew = await eventually(counted, what="a Success and a failed scheduling attempt in /metrics")
    print(f"scheduling attempts observed: {grew}")
    assert grew["Success"] >= 1


async def test_the_controllers_work_queues_are_on_the_hub_metrics(hub: Hub) -> None:
    objects = hub.objects
    assert objects is not None
    deployments = objects.registry.require("apps/v1", "Deployment")
    policies = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policies, propagation_policy("queued"))
    await objects.create(deployments, deployment("queued", replicas=1))

    async def adds() -> dict[str, float] | None:
        counts = {labels["name"]: n for labels, n in await samples(hub, "workqueue_adds_total")}
        return counts if all(counts.get(name, 0) >= 1 for name in ("detector", "scheduler", "binding")) else None

    counts = await eventually(adds, what="the federation loop's queues counting adds in /metrics")
    assert {"status", "cluster-health", "serviceaccounts", "cluster-namespaces"} <= set(counts)
    taken = {labels["name"]: n for labels, n in await samples(hub, "workqueue_queue_duration_seconds_count")}
    assert taken["scheduler"] >= 1
    depth = {labels["name"]: n for labels, n in await samples(hub, "workqueue_depth")}
    assert depth.keys() == counts.keys()


async def test_the_waste_sampler_reads_how_far_behind_the_hubs_controllers_are(hub: Hub) -> None:
    """The hub hands its sampler the backlog of the queues on its own workqueue series: a key
    that waits in such a queue shows in what the sampler reads."""
    clock = [1000.0]
    queue: WorkQueue[str] = WorkQueue(name="behind", metrics=hub.metrics.workqueues, clock=lambda: clock[0])
    backlog = hub.waste_sampler.backlog
    assert backlog is not None
    await queue.add("waiting")
    clock[0] += 120
    assert backlog() >= 120
    await queue.shutdown()
    assert backlog() < 120
