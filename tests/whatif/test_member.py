from __future__ import annotations

from typing import Any

import pytest

from simulator.whatif.engine import fleet_nodes
from simulator.whatif.member import RESOURCE_GPU_MILLI, MemberScoring
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
