"""FGD: the fragmentation measure on hand-computed nodes, and FGD member scoring placing by it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from controlplane.apis.fragmentation import DemandMix, TaskShape, fgd_score, node_fragmentation
from simulator.scheduling.fgd import FgdDemand, FgdRows
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


def test_array_scores_match_the_one_node_definition() -> None:
    rng = random.Random(1)
    counts: dict[TaskShape, float] = {}
    for _ in range(12):
        num = rng.choice([0, 1, 1, 1, 2, 4, 8])
        milli = 0 if num == 0 else (rng.choice([100, 250, 500, 700, 1000]) if num == 1 else 1000)
        counts[TaskShape(rng.choice([1000, 4000, 8000, 16000]), milli, num, rng.choice([(), (), ("A",)]))] = rng.random()
    mix = DemandMix.from_counts(counts, threshold_pct=100)
    rows = FgdRows(30, 8)
    cpu = np.array([rng.choice([0, 2000, 8000, 32000]) for _ in range(30)], dtype=np.int64)
    for row in range(30):
        slots = [rng.choice([0, 100, 300, 500, 800, 1000, 1000]) for _ in range(rng.choice([2, 4, 8]))]
        rows.set_row(row, slots, rng.choice(["A", "B"]))
    arrays = rows.use_mix(mix)
    every = np.arange(30)
    for demand in (FgdDemand(1000, share_milli=300), FgdDemand(2000, whole_gpus=2), FgdDemand(500)):
        scores, gpus = rows.scores(every, cpu, demand, arrays)
        for row in range(30):
            slots = [int(x) for x in rows.slots[row]]
            model = rows.models[row]
            before = node_fragmentation(int(cpu[row]), slots, model, mix)
            left = int(cpu[row]) - demand.cpu_milli
            if demand.share_milli:
                options = []
                for index, free in enumerate(slots):
                    if free >= demand.share_milli:
                        after = [*slots[:index], free - demand.share_milli, *slots[index + 1 :]]
                        options.append((fgd_score(before, node_fragmentation(left, after, model, mix)), -index))
                if options:
                    best, index = max(options)
                    assert (scores[row], gpus[row]) == (best, -index)
                continue
            after = list(slots)
            wanted = demand.whole_gpus
            for index, free in enumerate(after):
                if wanted and free == 1000:
                    after[index], wanted = 0, wanted - 1
            assert scores[row] == fgd_score(before, node_fragmentation(left, after, model, mix))


def test_a_fleet_profile_can_ask_for_fgd() -> None:
    from simulator.profile import parse_fleet
    from simulator.scheduling.model import Scoring

    cluster = t4_cluster("a", nodes=1, gpus=2)
    cluster["simulation"] = {"scoring": "fgd"}
    fleet = parse_fleet({"clusters": [cluster]})
    assert fleet.clusters[0].simulation.scoring is Scoring.FGD
