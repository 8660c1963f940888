from __future__ import annotations

import random
from typing import Any

import pytest

from controlplane.scheduler.core.snapshot import ClusterSnapshot
from simulator.scheduling.model import NodeState, PodRequest, Scoring
from simulator.whatif.engine import fleet_nodes
from simulator.whatif.member import (
    RESOURCE_GPU_MILLI,
    MemberScoring,
    PodShape,
    SharingClusterState,
)
from simulator.whatif.member import pod_request as member_pod_request
from simulator.whatif.strategies import PooledStrategy, StrategyName, build_strategy, job_shapes
from simulator.whatif.trace import Job
from tests.whatif.fleets import MIG_CLUSTER, make_fleet, t4_cluster


def share(name: str, milli: int) -> Job:
    return Job(name, 0, 10, 1, milli)


def whole(name: str, gpus: int) -> Job:
    return Job(name, 0, 10, gpus, 1000)


def pooled(*clusters: dict[str, Any], scoring: MemberScoring = MemberScoring.BEST_FIT) -> PooledStrategy:
    strategy = build_strategy(
        StrategyName.POOLED, fleet_nodes(make_fleet(*clusters)), scoring=scoring, seed=1
    )
    assert isinstance(strategy, PooledStrategy)
    return strategy


def test_shares_pack_on_one_gpu_best_fit() -> None:
    strategy = pooled(t4_cluster("a", nodes=1, gpus=2))
    member = strategy.members["pooled"]
    for name, milli in (("s1", 500), ("s2", 500), ("s3", 600)):
        assert strategy.try_place(share(name, milli)).placed is not None
    state = member.state
    assert [state.gpu_index_of(f"whatif/{n}") for n in ("s1", "s2", "s3")] == [0, 0, 1]
    assert state.ledgers["a-gpu-0"].free == [0, 400]
    # both GPUs now host shares: no whole GPU is left, only 400 thousandths on one GPU
    assert strategy.try_place(whole("w", 1)).placed is None
    assert strategy.try_place(share("s4", 500)).placed is None
    assert strategy.try_place(share("s5", 400)).placed is not None
    assert member.held_gpus == pytest.approx(2.0)


def test_releasing_the_last_share_frees_the_whole_gpu() -> None:
    strategy = pooled(t4_cluster("a", nodes=1, gpus=1))
    job = share("s", 300)
    assert strategy.try_place(job).placed is not None
    assert strategy.try_place(whole("w", 1)).placed is None
    strategy.release(job)
    assert strategy.try_place(whole("w", 1)).placed is not None


def test_whole_gpus_skip_gpus_hosting_shares() -> None:
    strategy = pooled(t4_cluster("a", nodes=1, gpus=4))
    assert strategy.try_place(share("s", 100)).placed is not None
    assert strategy.try_place(whole("w3", 3)).placed is not None
    ledger = strategy.members["pooled"].state.ledgers["a-gpu-0"]
    assert ledger.free == [900, 0, 0, 0]
    assert strategy.try_place(whole("w1", 1)).placed is None


def test_the_hub_sees_shared_gpus_as_allocated() -> None:
    strategy = pooled(t4_cluster("a", nodes=1, gpus=2))
    member = strategy.members["pooled"]
    strategy.try_place(share("s", 250))
    (shape,) = member.snapshot().shapes
    assert shape.free["nvidia.com/gpu"] == 1
    assert shape.free[RESOURCE_GPU_MILLI] == 1750
    strategy.try_place(whole("w", 1))
    (shape,) = member.snapshot().shapes
    assert (shape.free["nvidia.com/gpu"], shape.free[RESOURCE_GPU_MILLI]) == (0, 750)


@pytest.mark.parametrize(
    ("milli", "resource", "held"),
    [
        (100, "nvidia.com/mig-1g.10gb", 1 / 7),
        (285, "nvidia.com/mig-2g.20gb", 2 / 7),
        (300, "nvidia.com/mig-3g.40gb", 3 / 7),
    ],
)
def test_fractions_map_to_the_smallest_fitting_mig_slice(milli: int, resource: str, held: float) -> None:
    strategy = pooled(MIG_CLUSTER)
    member = strategy.members["pooled"]
    shapes = job_shapes(share("x", milli), mig=member.mig_resources)
    assert shapes[0].resource_map == {RESOURCE_GPU_MILLI: milli}
    assert shapes[1].resource_map == {resource: 1}
    placed = strategy.try_place(share("x", milli)).placed
    assert placed is not None and placed.shape.resource_map == {resource: 1}
    assert placed.shape.held_gpus == pytest.approx(held)


def test_a_fraction_bigger_than_every_slice_does_not_fit_mig() -> None:
    strategy = pooled(MIG_CLUSTER)
    assert len(job_shapes(share("x", 500), mig=strategy.members["pooled"].mig_resources)) == 1
    assert strategy.try_place(share("x", 500)).placed is None


def test_time_sliced_shares() -> None:
    cluster = t4_cluster("ts", nodes=1, gpus=1)
    cluster["nodeGroups"][0]["gpu"]["sharing"] = {"replicas": 4}
    strategy = pooled(cluster)
    member = strategy.members["pooled"]
    assert member.shared_resources == {"nvidia.com/gpu": 4}
    assert not member.state.ledgers
    placed = strategy.try_place(share("x", 300)).placed
    assert placed is not None and placed.shape.resource_map == {"nvidia.com/gpu": 2}
    assert placed.shape.held_gpus == 0.5


def test_random_scoring_spreads_shares_over_gpus() -> None:
    strategy = pooled(t4_cluster("a", nodes=1, gpus=8), scoring=MemberScoring.RANDOM)
    for i in range(8):
        strategy.try_place(share(f"s{i}", 100))
    ledger = strategy.members["pooled"].state.ledgers["a-gpu-0"]
    assert len(ledger.shared) > 1  # best fit would have put all eight on GPU 0


# ------------------------------------------------------------------------------------------ best-fit in the member

SHARING_FLEET: dict[str, Any] = {
    "name": "mixed",
    "nodeGroups": [
        {"name": "t4", "count": 6, "cpu": 32, "memoryGiB": 128, "gpu": {"product": "Tesla-T4", "count": 4}},
        {
            "name": "v100",
            "count": 4,
            "cpu": 96,
            "memoryGiB": 512,
            "gpu": {"product": "Tesla-V100-SXM2-32GB", "count": 8},
        },
        {"name": "cpu", "count": 3, "cpu": 64, "memoryGiB": 256},
        MIG_CLUSTER["nodeGroups"][0],
    ],
}


def sharing_state(scoring: Scoring, seed: int = 1) -> SharingClusterState:
    fleet = fleet_nodes(make_fleet(SHARING_FLEET))
    state = SharingClusterState(scoring=scoring, seed=seed)
    state.add_nodes(fleet.nodes["mixed"], fleet.inventories["mixed"])
    return state


def member_pod(name: str, resources: dict[str, int], cpu: int) -> PodRequest:
    shape = PodShape(tuple(resources.items()), held_gpus=0.0)
    return member_pod_request(name, shape=shape, cpu_milli=cpu, memory_bytes=0)


@pytest.mark.parametrize(
    ("placed", "pod", "expected"),
    [
        # left = (cpu left / 128,000) * 0.5 + (GPU thousandths left / 8,000) * 0.5; score = int((1 - left) * 100)
        ([], ({RESOURCE_GPU_MILLI: 500}, 2000), 66),  # 30,000 and 3,500 left: 0.336
        ([], ({"nvidia.com/gpu": 2}, 0), 75),  # 32,000 and 2,000 left: 0.125 + 0.125
        # a share of 300 already there: the GPU hosting it counts by its thousandths left, not as a whole GPU
        ([({RESOURCE_GPU_MILLI: 300}, 4000)], ({RESOURCE_GPU_MILLI: 700}, 4000), 71),  # 24,000, 3,000 left
        ([({"nvidia.com/gpu": 3}, 30000)], ({RESOURCE_GPU_MILLI: 1000}, 2000), 100),  # nothing left
    ],
)
def test_best_fit_on_a_shared_gpu_node_counts_thousandths_left(
    placed: list[tuple[dict[str, int], int]], pod: tuple[dict[str, int], int], expected: int
) -> None:
    state = sharing_state(Scoring.BEST_FIT)
    node = "mixed-t4-0"
    for index, (resources, cpu) in enumerate(placed):
        assert state.assume(member_pod(f"before{index}", resources, cpu), node).node == node
    resources, cpu = pod
    assert state.score_nodes(member_pod("p", resources, cpu), [state.nodes[node]]) == [expected]


def ref_fits(state: SharingClusterState, pod: PodRequest, node: NodeState) -> bool:
    if node.pod_count >= node.allocatable.get("pods", 110):
        return False
    if any(amount > node.free(resource) for resource, amount in pod.requests.items()):
        return False
    milli = pod.requests.get(RESOURCE_GPU_MILLI)
    ledger = state.ledgers.get(node.name)
    return milli is None or (ledger is not None and max(ledger.free) >= milli)


def ref_best_fit(pod: PodRequest, node: NodeState) -> int:
    """The FGD paper's Best-fit, read from the node's dictionaries and device inventory."""
    assert node.inventory is not None
    units = {r: round(devices[0].share * 1000) for r, devices in node.inventory.devices.items() if devices}
    units[RESOURCE_GPU_MILLI] = 1
    if RESOURCE_GPU_MILLI in node.allocatable:
        gpu_free = node.free(RESOURCE_GPU_MILLI)
    else:
        gpu_free = sum(node.free(r) * unit for r, unit in units.items() if r in node.allocatable)
    gpu_asked = sum(
        amount * units.get(r, 0) for r, amount in pod.requests.items() if r.startswith("nvidia.com/")
    )
    cpu_left = node.free("cpu") - pod.requests.get("cpu", 0)
    left = cpu_left / 128_000 * 0.5 + (gpu_free - gpu_asked) / 8_000 * 0.5
    return int((1.0 - left) * 100.0)


@pytest.mark.parametrize("scoring", [Scoring.BEST_FIT, Scoring.RANDOM])
@pytest.mark.parametrize("seed", [3, 4])
def test_sharing_member_places_as_the_node_by_node_definition(scoring: Scoring, seed: int) -> None:
    """Shares, whole GPUs and MIG slices, with releases: the arrays agree with the dictionaries."""
    state = sharing_state(scoring, seed)
    rng = random.Random(seed)
    shapes = [
        {RESOURCE_GPU_MILLI: 100},
        {RESOURCE_GPU_MILLI: 450},
        {RESOURCE_GPU_MILLI: 900},
        {"nvidia.com/gpu": 1},
        {"nvidia.com/gpu": 4},
        {"nvidia.com/mig-1g.10gb": 1},
        {},
    ]
    bound: list[str] = []
    refused = 0
    for index in range(400):
        pod = member_pod(f"p{index}", rng.choice(shapes), rng.choice([0, 1000, 4000, 12000]))
        feasible = [node for name, node in sorted(state.nodes.items()) if ref_fits(state, pod, node)]
        assert state.fits_somewhere(pod) == bool(feasible)
        draw = random.Random()
        draw.setstate(state.rng.getstate())
        if len(feasible) > 1 and scoring is Scoring.BEST_FIT:
            scores = [ref_best_fit(pod, node) for node in feasible]
            assert state.score_nodes(pod, feasible) == scores
            best = [node for node, score in zip(feasible, scores, strict=True) if score == max(scores)]
            expected = best[0] if len(best) == 1 else draw.choice(best)
        elif len(feasible) > 1:
            expected = draw.choice(feasible)
        result = state.schedule([pod])
        if not feasible:
            assert not result.bindings
            refused += 1
        else:
            want = expected.name if len(feasible) > 1 else feasible[0].name
            assert [b.node for b in result.bindings] == [want], f"pod {index}"
            bound.append(pod.key)
        if bound and rng.random() < 0.25:
            state.release(bound.pop(rng.randrange(len(bound))))
    assert refused > 10 and len(bound) > 50


@pytest.mark.parametrize("seed", range(5))
def test_the_kept_snapshot_has_the_shapes_of_the_whole_report(seed: int) -> None:
    """The member keeps its shapes node by node (:func:`member_agent.capacity.node_shape_key`);
    after random placements and releases they are the shapes of the report summed over all of
    its nodes at once (:meth:`MemberCluster.cluster_object`), counts included."""
    rng = random.Random(seed)
    strategy = pooled(t4_cluster("a", nodes=4, gpus=2), MIG_CLUSTER)
    member = strategy.members["pooled"]
    held: list[Job] = []
    for step in range(30):
        if held and rng.random() < 0.3:
            strategy.release(held.pop(rng.randrange(len(held))))
        else:
            job = share(f"s{step}", rng.choice([100, 250, 500])) if rng.random() < 0.6 else whole(f"w{step}", rng.choice([1, 2]))
            if strategy.try_place(job).placed is not None:
                held.append(job)
        kept = sorted(repr(shape) for shape in member.snapshot().shapes)
        whole_report = sorted(repr(shape) for shape in ClusterSnapshot.from_cluster(member.cluster_object()).shapes)
        assert kept == whole_report
    assert held
