from __future__ import annotations

from simulator.whatif.engine import fill_sequence, fleet_nodes, run_fill
from simulator.whatif.strategies import (
    GpufedStrategy,
    KarmadaLikeStrategy,
    StaticStrategy,
    StrategyName,
    build_strategy,
)
from simulator.whatif.trace import Job
from tests.whatif.fleets import make_fleet, t4_cluster


def test_karmada_like_sends_a_4_gpu_job_where_free_gpus_only_add_up() -> None:
    fleet = fleet_nodes(make_fleet(t4_cluster("frag", nodes=4, gpus=2), t4_cluster("whole", nodes=1, gpus=4)))
    job = Job("big", 0, 10, 4, 1000)
    karmada = build_strategy(StrategyName.KARMADA_LIKE, fleet)
    assert isinstance(karmada, KarmadaLikeStrategy)
    outcome = karmada.try_place(job)
    assert outcome.placed is None and outcome.waiting_in == "frag"  # 8 free GPUs summed: "room" for 2
    assert karmada.try_place(job).waiting_in == "frag"  # and it stays there
    gpufed = build_strategy(StrategyName.GPUFED, fleet)
    assert isinstance(gpufed, GpufedStrategy)
    placed = gpufed.try_place(job).placed
    assert placed is not None and placed.cluster == "whole"


def test_gpufed_fills_the_cheap_tier_first_and_overflows() -> None:
    fleet = fleet_nodes(
        make_fleet(
            t4_cluster("cloud", nodes=1, gpus=2, provider="aws"), t4_cluster("onprem", nodes=1, gpus=2)
        )
    )
    gpufed = build_strategy(StrategyName.GPUFED, fleet)
    clusters = [gpufed.try_place(Job(f"j{i}", 0, 1, 1, 1000)).placed for i in range(5)]
    assert [p.cluster if p else None for p in clusters] == ["onprem", "onprem", "cloud", "cloud", None]


def test_static_waits_at_home() -> None:
    fleet = fleet_nodes(make_fleet(t4_cluster("a", nodes=1, gpus=1), t4_cluster("b", nodes=1, gpus=1)))
    static = build_strategy(StrategyName.STATIC, fleet)
    assert isinstance(static, StaticStrategy)
    first = static.try_place(Job("x", 0, 1, 1, 1000, home_cluster="a"))
    second = static.try_place(Job("y", 0, 1, 1, 1000, home_cluster="a"))
    assert first.placed is not None and first.placed.cluster == "a"
    assert second.placed is None and second.waiting_in == "a"
    homes = {static.home_of(Job(f"r{i}", 0, 1, 1, 1000)) for i in range(40)}
    assert homes == {"a", "b"}  # drawn, weighted by GPUs, when the trace names no cluster


def test_pooled_at_least_gpufed_at_least_static() -> None:
    # Online greedy placement has order effects, so the ordering holds per case, not always.
    fleet = fleet_nodes(make_fleet(t4_cluster("a", nodes=1, gpus=2), t4_cluster("b", nodes=1, gpus=4)))
    jobs = [
        Job("two", 0, 1, 2, 1000, home_cluster="a"),
        Job("four", 0, 1, 4, 1000, home_cluster="a"),
        Job("one", 0, 1, 1, 1000, home_cluster="b"),
    ]
    totals = {}
    for name in StrategyName:
        result = run_fill(build_strategy(name, fleet, seed=3), jobs, capacity_gpus=6)
        totals[name] = result.allocation_at(max(result.curve))
    assert totals[StrategyName.POOLED] >= totals[StrategyName.GPUFED] >= totals[StrategyName.STATIC]
    assert (totals[StrategyName.GPUFED], totals[StrategyName.STATIC]) == (100.0, 50.0)
    assert totals[StrategyName.KARMADA_LIKE] < 100.0


def test_fill_sequence_shuffles_then_samples_until_the_target() -> None:
    jobs = [Job(f"j{i}", 0, 1, 1, 1000) for i in range(10)]
    sequence = fill_sequence(jobs, capacity_gpus=10, inflate=1.3, seed=5)
    assert sorted(j.name for j in sequence[:10]) == sorted(j.name for j in jobs)
    assert [j.name for j in sequence[:10]] != [j.name for j in jobs]
    assert len(sequence) == 13 and all("-clone-" in j.name for j in sequence[10:])
    assert fill_sequence(jobs, capacity_gpus=10, inflate=1.3, seed=5) == sequence
