"""A waste pass with pending demand gives the hub's event loop turns while it works.

At 100 clusters x 5,000 nodes, matching pending demand and summing the cells of the clusters it
changed touch millions of device states; done in one go they held the loop for minutes and the
hub lost its leader lease. :meth:`Accumulator.prepare_steps` does that work in steps and the
sampler gives the loop a turn after each: these tests count the turns another task gets while
one pass is prepared, and check that the stepped pass gives what :meth:`Accumulator.prepare`
gives.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from controlplane.reports.accounting import Accumulator
from controlplane.reports.classify import DEMANDS_PER_STEP, classify_fleet
from controlplane.reports.fleet import FleetSample
from controlplane.reports.sampling import _in_turns

from .builders import A100, GPU, at, cluster, demand, fleet, gpus, node


def _sample(minute: float, clusters: int = 6) -> FleetSample:
    members = [
        cluster(f"c{i}", [node(f"n{j}", gpus(8), product=A100) for j in range(4)], pricing={A100: 1.0 + i})
        for i in range(clusters)
    ]
    # Enough 8-GPU replicas to claim every node of every cluster: each cluster's part changes.
    pending = [demand({GPU: 8}, replicas=4, workload=f"Deployment/w{i}") for i in range(clusters)]
    return fleet(*members, pending=pending, time=at(minute))


async def _turns_during(work: asyncio.Future[object] | asyncio.Task[object]) -> int:
    turns = 0

    async def tick() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    ticker = asyncio.ensure_future(tick())
    try:
        await work
    finally:
        ticker.cancel()
    return turns


async def test_a_pass_gives_the_loop_a_turn_per_cluster_it_changes() -> None:
    accumulator = Accumulator()
    sample = _sample(0)
    prepared = asyncio.ensure_future(_in_turns(accumulator.prepare_steps(sample)))
    turns = await _turns_during(prepared)
    clusters = len(sample.clusters)
    # Each cluster: its states, its free layout, its new part, its cells.
    assert turns >= 4 * clusters
    assert prepared.result().classification == Accumulator().prepare(sample).classification
    assert prepared.result().rates == Accumulator().prepare(sample).rates


async def test_matching_many_demands_gives_the_loop_turns() -> None:
    members = [cluster("c0", [node(f"n{j}", gpus(8)) for j in range(50)])]
    pending = [demand({GPU: 1}, workload=f"Deployment/w{i:04d}") for i in range(3 * DEMANDS_PER_STEP)]
    sample = fleet(*members, pending=pending)
    accumulator = Accumulator()
    accumulator.prepare(sample)  # the cluster's states and layout are known: only matching is left
    prepared = asyncio.ensure_future(_in_turns(accumulator.prepare_steps(sample)))
    assert await _turns_during(prepared) >= 3
    assert prepared.result().classification == classify_fleet(sample)


def test_a_pass_whose_demand_waits_for_the_same_devices_keeps_the_changed_parts() -> None:
    """The clusters pending demand changes are the very tuples of the last pass when it claims
    the same devices again, so their cells are not summed again."""
    accumulator = Accumulator()
    sample = _sample(0)
    first = accumulator.prepare(sample).classification
    assert first.parts[0] is not accumulator.memos.classification.base_states(sample.clusters[0], 0.1)
    later = replace(sample, time=at(1))  # the same clusters (their reports unchanged), the same demand
    second = accumulator.prepare(later).classification
    assert all(a is b for a, b in zip(first.parts, second.parts, strict=True))
    assert second == classify_fleet(later)


async def test_reading_many_bindings_gives_the_loop_turns_and_the_same_sample() -> None:
    """20,000 bindings read in one go held the hub's loop for seconds: the sample is read in steps
    of OBJECTS_PER_STEP bindings or Works, and is the sample read without pauses."""
    from datetime import UTC, datetime

    from controlplane.reports.snapshot import OBJECTS_PER_STEP, sample_from_cluster_statuses, sample_steps

    clusters = [{
        "apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": f"c{i}"},
        "spec": {"provider": "onprem"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    } for i in range(3)]
    bindings = [{
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "ResourceBinding",
        "metadata": {"name": f"w{i}", "namespace": "ml"},
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"w{i}", "namespace": "ml"},
            "replicas": 2, "replicaRequirements": {"resourceRequest": {"nvidia.com/gpu": "1"}},
            "clusters": [{"name": "c0", "replicas": 1}] if i % 2 else [],
        },
    } for i in range(3 * OBJECTS_PER_STEP)]
    now = datetime(2026, 12, 3, tzinfo=UTC)
    stepped = asyncio.ensure_future(_in_turns(sample_steps(clusters, bindings, [], now=now)))
    turns = await _turns_during(stepped)
    assert turns >= 3
    whole = sample_from_cluster_statuses(clusters, bindings, [], now=now)
    assert stepped.result() == whole
    assert len(whole.pending) == len(bindings)  # every binding waits with 1 or 2 replicas
