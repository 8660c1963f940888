from __future__ import annotations

import pytest

from controlplane.reports.classify import WasteState
from simulator.whatif.engine import Settings, compare, fleet_nodes, run_fill, run_replay
from simulator.whatif.member import MemberScoring
from simulator.whatif.metrics import FillResult
from simulator.whatif.strategies import StrategyName, build_strategy
from simulator.whatif.trace import Job
from tests.whatif.fleets import make_fleet, t4_cluster


def fill_two_t4_nodes(jobs: list[Job]) -> FillResult:
    """The fill of ``jobs`` on one best-fit cluster of two nodes of two T4s (capacity 4)."""
    nodes = fleet_nodes(make_fleet(t4_cluster("a", nodes=2, gpus=2)))
    return run_fill(
        build_strategy(StrategyName.POOLED, nodes, scoring=MemberScoring.BEST_FIT), jobs, capacity_gpus=4
    )


def test_fill_allocation_by_hand() -> None:
    # Two nodes of two GPUs (capacity 4). Best fit: "two" fills one node, the two halves share
    # GPU 0 of the other, "one" takes its GPU 1; "late" finds nothing.
    jobs = [
        Job("two", 0, 1, 2, 1000),
        Job("half1", 0, 1, 1, 500),
        Job("half2", 0, 1, 1, 500),
        Job("one", 0, 1, 1, 1000),
        Job("late", 0, 1, 1, 1000),
    ]
    result = fill_two_t4_nodes(jobs)
    # arrived: 2, 2.5, 3, 4, 5 GPUs = 50, 62.5, 75, 100, 125 % of capacity
    assert result.curve[50] == 50.0
    # a mark takes the allocation after the arrival that first reaches it
    assert result.curve[51] == result.curve[62] == 62.5 and result.curve[63] == 75.0
    assert result.curve[75] == 75.0
    assert result.allocation_at(100) == 100.0 and result.unallocated_gpus_at(100) == 0.0
    assert result.allocation_at(125) == 100.0
    assert (result.jobs_submitted, result.jobs_placed) == (5, 4)


def test_fill_names_what_the_allocation_at_100_lacks() -> None:
    # Two nodes of two T4s (capacity 4). "v100" finds no V100 (25 % arrived, the first task left
    # unplaced), "two" fills a node, "three" fits no node: it brings arrived demand to 150 %, so
    # the 100 % mark is taken after it and its GPUs count. "late" is placed and "late2" is not,
    # both past the mark: they are not what the allocation at 100 % lacks.
    jobs = [
        Job("v100", 0, 1, 1, 1000, gpu_products=("Tesla-V100-SXM2-16GB",)),
        Job("two", 0, 1, 2, 1000),
        Job("three", 0, 1, 3, 1000),
        Job("late", 0, 1, 1, 1000),
        Job("late2", 0, 1, 2, 1000),
    ]
    result = fill_two_t4_nodes(jobs)
    assert result.allocation_at(100) == 50.0
    assert result.unplaced_gpus == {"1-gpu one-model": 1.0, "3-gpu": 3.0}
    assert result.first_unplaced_at == 25.0


@pytest.mark.parametrize(
    ("job", "kind"),
    [
        (Job("c", 0, 1, 0, 0, cpu_milli=100), "cpu-only"),
        (Job("s", 0, 1, 1, 300), "gpu-share"),
        (Job("s", 0, 1, 1, 300, gpu_products=("Tesla-T4",)), "gpu-share one-model"),
        (Job("w", 0, 1, 8, 1000), "8-gpu"),
    ],
)
def test_job_kinds(job: Job, kind: str) -> None:
    assert job.kind == kind


def test_replay_waits_and_gpu_hours_by_hand() -> None:
    # One node, one GPU at $2/GPU-hour. "b" arrives at 0 s behind "a" (1 h) and waits 1 h.
    cluster = t4_cluster("a", nodes=1, gpus=1)
    cluster["pricing"] = {"Tesla-T4": 2.0}
    cluster["simulation"]["gpuUtilization"] = {"mean": 0.9}
    nodes = fleet_nodes(make_fleet(cluster))
    jobs = [
        Job("a", 0, 3600, 1, 1000),
        Job("b", 0, 3600, 1, 1000),
        Job("c", 10800, 3600, 0, 0, cpu_milli=100),
    ]
    strategy = build_strategy(StrategyName.POOLED, nodes)
    result = run_replay(strategy, jobs, nodes, settings=Settings())
    assert sorted(result.waits_s) == [0.0, 0.0, 3600.0]
    assert result.wait_mean_s == pytest.approx(1200.0)
    hours = result.waste.gpu_hours
    assert hours[WasteState.BUSY] == pytest.approx(2.0)
    assert hours[WasteState.FREE_SPARE] == pytest.approx(2.0)  # 2 h to 4 h, when "c" leaves; nothing waits
    assert hours[WasteState.FREE_FRAGMENTED] == hours[WasteState.FREE_NEEDED] == 0.0
    assert result.allocated_cost_usd == pytest.approx(4.0)


def test_free_gpus_another_cluster_could_use_are_free_needed() -> None:
    # Static homes both jobs in "a"; "b" sits free while "y" waits: free-needed GPU-hours.
    nodes = fleet_nodes(make_fleet(t4_cluster("a", nodes=1, gpus=1), t4_cluster("b", nodes=1, gpus=1)))
    jobs = [Job("x", 0, 3600, 1, 1000, home_cluster="a"), Job("y", 0, 3600, 1, 1000, home_cluster="a")]
    result = run_replay(build_strategy(StrategyName.STATIC, nodes), jobs, nodes, settings=Settings())
    assert sorted(result.waits_s) == [0.0, 3600.0]
    assert result.waste.gpu_hours[WasteState.FREE_NEEDED] == pytest.approx(1.0)
    gpufed = run_replay(build_strategy(StrategyName.GPUFED, nodes), jobs, nodes, settings=Settings())
    assert gpufed.waits_s == [0.0, 0.0] and gpufed.waste.gpu_hours[WasteState.FREE_NEEDED] == 0.0


def test_compare_json_contract() -> None:
    fleet = make_fleet(t4_cluster("a", nodes=2, gpus=2), t4_cluster("b", nodes=1, gpus=4, provider="aws"))
    jobs = [Job(f"j{i}", i * 60.0, 600, 1 + i % 2, 1000) for i in range(6)] + [Job("s", 5, 60, 1, 250)]
    comparison = compare(fleet, jobs, settings=Settings(seed=1))
    result = comparison.to_json()
    assert set(result["strategies"]) == {"gpufed", "static", "karmada-like", "pooled"}
    # By hand, whatever the strategy: every job runs its whole duration once, 9 whole GPUs for
    # 600 s and a quarter of one for 60 s.
    allocated_hours = (9 * 600 + 0.25 * 60) / 3600
    for name, values in result["strategies"].items():
        for key in (
            "allocation_pct_at_100",
            "allocation_pct_at_130",
            "unallocated_gpus_at_100",
            "wait_mean_s",
            "wait_p99_s",
            "cost_usd",
        ):
            assert isinstance(values[key], float), key
        assert set(values["gpu_hours"]) == {str(s) for s in WasteState}
        assert all(isinstance(v, float) for v in values["gpu_hours"].values())

        hours = values["gpu_hours"]
        assert hours[WasteState.BUSY] + hours[WasteState.IDLE_ALLOCATED] == pytest.approx(allocated_hours, abs=2e-3)
        # Each of the 8 GPUs is in exactly one state from the first arrival to the last departure.
        end_s = comparison.results[name].replay.end_s
        assert sum(hours.values()) == pytest.approx(8 * end_s / 3600, abs=5e-3), name
        # At 300 s the six whole jobs ask for 9 GPUs of 8, and none leaves before 600 s (the
        # quarter-GPU job left at 65 s): one of them waits 300 s at least, and the last
        # departure is at 1200 s at the earliest. Every job fits a node, so every job starts.
        assert values["wait_p99_s"] >= 300.0, name
        assert values["wait_mean_s"] >= 300.0 / len(jobs), name
        assert end_s >= 1200.0, name
        assert values["jobs"]["replay_never_started"] == 0
        # The fill: what is not allocated at 100 % of arrived demand is the rest of the 8 GPUs.
        assert 0 < values["allocation_pct_at_100"] <= values["allocation_pct_at_130"] <= 100
        assert values["unallocated_gpus_at_100"] == pytest.approx(
            8 * (1 - values["allocation_pct_at_100"] / 100), abs=1e-2
        )
        assert values["jobs"]["fill_placed"] <= values["jobs"]["fill_submitted"]
        # $1 per GPU-hour on-prem (a), $3 in the cloud (b).
        assert allocated_hours - 0.01 <= values["cost_usd"] <= 3 * allocated_hours + 0.01, name
    assert result["fleet"] == {"gpus": 8, "clusters": {"a": 4, "b": 4}}


def test_inflate_below_the_last_mark_is_refused() -> None:
    with pytest.raises(ValueError, match=r"inflate must be at least 1\.3"):
        compare(make_fleet(t4_cluster("a", nodes=1, gpus=1)), [], settings=Settings(inflate=1.2))
