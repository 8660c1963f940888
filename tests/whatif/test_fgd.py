"""FGD: the fragmentation measure on hand-computed nodes, and FGD member scoring placing by it."""

from __future__ import annotations

import pytest

from controlplane.apis.fragmentation import DemandMix, TaskShape, fgd_score, node_fragmentation
from simulator.whatif.engine import fleet_nodes
from simulator.whatif.member import MemberScoring, trace_mix
from simulator.whatif.strategies import PooledStrategy, StrategyName, build_strategy
from simulator.whatif.trace import Job
from tests.whatif.fleets import make_fleet, t4_cluster

HALF = TaskShape(cpu_milli=1000, gpu_milli=500, num_gpu=1)
ONE = TaskShape(cpu_milli=1000, gpu_milli=1000, num_gpu=1)
TWO = TaskShape(cpu_milli=1000, gpu_milli=1000, num_gpu=2)
CPU = TaskShape(cpu_milli=4000, gpu_milli=0, num_gpu=0)


def test_fragmentation_of_a_node_by_hand() -> None:
    mix = DemandMix(((HALF, 0.5), (ONE, 0.25), (CPU, 0.25)))
    # GPUs with 300 and 1000 free thousandths, plenty of CPU:
    # HALF fits (on the 1000): only the 300 is too small -> 300; ONE fits: the 300 -> 300;
    # CPU-only tasks use no GPU: all 1300. F = 0.5*300 + 0.25*300 + 0.25*1300 = 550.
    assert node_fragmentation(8000, [300, 1000], "T4", mix) == pytest.approx(550)
    # too little CPU for any GPU task: every free thousandth counts for every task
    assert node_fragmentation(500, [300, 1000], "T4", mix) == pytest.approx(1300)
    # a task that wants another GPU model cannot use this node at all
    picky = DemandMix(((TaskShape(1000, 500, 1, ("A100",)), 1.0),))
    assert node_fragmentation(8000, [1000], "T4", picky) == pytest.approx(1000)
    assert node_fragmentation(8000, [1000], "A100", picky) == pytest.approx(0)
    # two whole GPUs wanted, one free: the free one is fragment
    assert node_fragmentation(8000, [0, 1000], "T4", DemandMix(((TWO, 1.0),))) == pytest.approx(1000)


def test_mix_keeps_the_popular_shapes_and_renormalises() -> None:
    counts = {HALF: 60, ONE: 36, CPU: 4}
    mix = DemandMix.from_counts(counts, threshold_pct=95)
    # 60 + 36 = 96 % >= 95 %: the CPU-only shape is left out, the rest renormalised
    assert [shape for shape, _ in mix.shapes] == [HALF, ONE]
    assert [round(f, 4) for _, f in mix.shapes] == [round(60 / 96, 4), round(36 / 96, 4)]


def test_fgd_score_is_the_sigmoid_of_the_fragmentation_drop() -> None:
    assert fgd_score(1000, 1000) == 50
    assert fgd_score(2000, 1000) == 73  # sigmoid(1) = 0.731
    assert fgd_score(1000, 2000) == 26


def test_fgd_puts_a_share_on_the_gpu_that_fragments_least() -> None:
    nodes = fleet_nodes(make_fleet(t4_cluster("a", nodes=1, gpus=2)))
    # the mix: half-GPU tasks only
    jobs = [Job(f"h{i}", 0, 10, 1, 500, cpu_milli=1000) for i in range(4)]
    strategy = build_strategy(
        StrategyName.POOLED_FGD, nodes, seed=1, percentage=100, demand_mix=trace_mix(jobs)
    )
    assert isinstance(strategy, PooledStrategy)
    state = strategy.members["pooled"].state
    assert state.scoring is MemberScoring.FGD.scoring
    assert strategy.try_place(Job("s1", 0, 10, 1, 400, cpu_milli=1000)).placed is not None
    assert state.ledgers["a-gpu-0"].free == [600, 1000]
    # best-fit would take the 600 (leaving 300, too small for a half); FGD keeps both usable
    assert strategy.try_place(Job("s2", 0, 10, 1, 300, cpu_milli=1000)).placed is not None
    assert state.ledgers["a-gpu-0"].free == [600, 700]


def test_fgd_sends_a_whole_gpu_to_the_node_it_fragments_least() -> None:
    nodes = fleet_nodes(make_fleet(t4_cluster("a", nodes=2, gpus=2)))
    mix = DemandMix(((TWO, 0.6), (ONE, 0.4)))
    strategy = build_strategy(StrategyName.POOLED_FGD, nodes, seed=3, percentage=100, demand_mix=mix)
    state = strategy.members["pooled"].state
    assert strategy.try_place(Job("a", 0, 10, 1, 1000, cpu_milli=1000)).placed is not None
    node_of_a = state.allocations["whatif/a"].node
    # a second single GPU goes to the same node, keeping the other node whole for 2-GPU tasks
    placed = strategy.try_place(Job("b", 0, 10, 1, 1000, cpu_milli=1000)).placed
    assert placed is not None and placed.node == node_of_a


def test_fgd_learns_the_mix_online_without_one() -> None:
    nodes = fleet_nodes(make_fleet(t4_cluster("a", nodes=2, gpus=2)))
    strategy = build_strategy(StrategyName.POOLED_FGD, nodes, seed=3, percentage=100)
    state = strategy.members["pooled"].state
    for name in ("a", "b"):
        assert strategy.try_place(Job(name, 0, 10, 1, 1000, cpu_milli=1000)).placed is not None
    assert state.fgd_mix().shapes == ((ONE, 1.0),)
