"""The ``gpufed-rebalance`` strategy: running jobs return to a cheaper tier in the replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufed.cli import main
from gpufed.commands.whatif import format_table
from policies.models import Placement
from simulator.whatif.engine import Settings, compare, fleet_nodes, run_replay
from simulator.whatif.returns import return_candidates
from simulator.whatif.strategies import StrategyName, build_strategy
from simulator.whatif.trace import Job
from tests.scheduler.builders import tiered_placement
from tests.whatif.fleets import make_fleet, t4_cluster

# One on-prem GPU at $1/h (tier 0), one cloud GPU at $3/h (tier 1).
FLEET = make_fleet(t4_cluster("onprem", nodes=1, gpus=1), t4_cluster("cloud", nodes=1, gpus=1, provider="aws"))
# "a" holds on-prem for 1 h, so "b" (3 h) bursts to the cloud; at 1 h on-prem frees.
JOBS = [Job("a", 0, 3600, 1, 1000), Job("b", 0, 3 * 3600, 1, 1000)]


def _replay(name: StrategyName, jobs: list[Job], placement: Placement | None = None) -> Any:
    nodes = fleet_nodes(FLEET)
    strategy = build_strategy(name, nodes, placement=placement)
    return run_replay(strategy, jobs, nodes, settings=Settings(placement=placement))


def test_a_burst_job_comes_home_when_on_prem_frees() -> None:
    plain = _replay(StrategyName.GPUFED, JOBS)
    returning = _replay(StrategyName.GPUFED_REBALANCE, JOBS)
    # without returns: a 1 h x $1 + b 3 h x $3; with: b moves home at 1 h, 1 h x $3 + 2 h x $1
    assert plain.allocated_cost_usd == pytest.approx(10.0)
    assert returning.allocated_cost_usd == pytest.approx(6.0)
    assert plain.gpu_hours_by_tier == pytest.approx({"tier 0": 1.0, "tier 1": 3.0})
    assert returning.gpu_hours_by_tier == pytest.approx({"tier 0": 3.0, "tier 1": 1.0})
    assert plain.returns is None
    tally = returning.returns
    assert tally is not None
    assert (tally.moves, tally.replicas_moved, tally.gpus_moved) == (1, 1, 1.0)
    assert tally.by_route == {"cloud -> onprem": 1}
    assert tally.estimated_saving_usd == pytest.approx(4.0)  # $2/h for the 2 h left
    assert returning.waits_s == plain.waits_s == [0.0, 0.0]


def test_a_saving_below_the_policy_minimum_moves_nothing() -> None:
    placement = tiered_placement(minSavingPerHour=2.5)
    returning = _replay(StrategyName.GPUFED_REBALANCE, JOBS, placement)
    assert returning.returns is not None and returning.returns.moves == 0
    assert returning.allocated_cost_usd == pytest.approx(10.0)


def test_a_disabled_rebalance_moves_nothing() -> None:
    returning = _replay(StrategyName.GPUFED_REBALANCE, JOBS, tiered_placement(enabled=False))
    assert returning.returns is not None and returning.returns.moves == 0


def test_a_waiting_job_takes_the_freed_room_before_a_return() -> None:
    jobs = [*JOBS, Job("c", 0, 3600, 1, 1000)]  # waits at the hub: both GPUs are taken
    returning = _replay(StrategyName.GPUFED_REBALANCE, jobs)
    # at 1 h "c" takes on-prem; only when "c" leaves at 2 h does "b" come home, for its last hour
    assert sorted(returning.waits_s) == [0.0, 0.0, 3600.0]
    assert returning.returns is not None and returning.returns.moves == 1
    assert returning.returns.estimated_saving_usd == pytest.approx(2.0)
    assert returning.gpu_hours_by_tier == pytest.approx({"tier 0": 3.0, "tier 1": 2.0})


def test_return_candidates_are_the_jobs_above_a_freed_cluster_most_expensive_first() -> None:
    order = {"onprem": (0, 1.0), "cheap-cloud": (1, 2.0), "dear-cloud": (1, 4.0)}
    running = {"x": "cheap-cloud", "y": "dear-cloud", "z": "onprem", "w": "dear-cloud"}
    assert return_candidates(running, order, ["onprem"]) == ["w", "y", "x"]
    assert return_candidates(running, order, ["cheap-cloud"]) == ["w", "y"]
    assert return_candidates(running, order, ["dear-cloud"]) == []
    assert return_candidates(running, order, ["unranked"]) == []


def test_compare_reports_the_saving_against_no_returns() -> None:
    comparison = compare(
        FLEET, JOBS, strategies=[StrategyName.GPUFED, StrategyName.GPUFED_REBALANCE], settings=Settings()
    )
    result = comparison.to_json()
    rebalance = result["rebalance"]
    assert rebalance["saved_usd"] == pytest.approx(4.0)
    assert rebalance["cost_usd"] == {"without": 10.0, "with": 6.0}
    assert rebalance["replicas_moved"] == 1
    assert rebalance["gpu_hours_by_tier"]["with"] == {"tier 0": 3.0, "tier 1": 1.0}
    assert result["strategies"]["gpufed-rebalance"]["returns"]["moves"] == 1
    assert result["strategies"]["gpufed"]["returns"] is None
    table = format_table({**result, "trace": {**result["trace"], "path": "t.csv"}})
    assert "saved $4.00 (cost $10.00 -> $6.00); 1 replica(s) moved" in table
    assert "allocated GPU-hours by tier: without tier 0 1, tier 1 3; with tier 0 3, tier 1 1" in table


def test_no_rebalance_section_without_both_strategies() -> None:
    comparison = compare(FLEET, JOBS, strategies=[StrategyName.GPUFED], settings=Settings())
    assert comparison.to_json()["rebalance"] is None


def test_cli_rebalance_adds_both_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, trace = tmp_path / "fleet.yaml", tmp_path / "trace.csv"
    fleet.write_text(
        yaml.safe_dump(
            {"clusters": [t4_cluster("onprem", nodes=1, gpus=1), t4_cluster("cloud", nodes=1, gpus=1, provider="aws")]}
        )
    )
    trace.write_text("name,submit_s,duration_s,gpus\na,0,3600,1\nb,0,10800,1\n")
    args = ["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), "--compare", "static", "--rebalance"]
    assert main([*args, "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["strategies"]) == ["static", "gpufed", "gpufed-rebalance"]
    assert out["rebalance"]["saved_usd"] == pytest.approx(4.0)
    assert main(args) == 0
    assert "returns to a cheaper tier (gpufed-rebalance against gpufed): saved $4.00" in capsys.readouterr().out


def _banded(band: float | None) -> Placement:
    tiered: dict[str, Any] = {"rebalance": {"minSavingPerHour": 0.1}}
    if band is not None:
        tiered["priceBandPercent"] = band
    return Placement.model_validate(
        {"replicaScheduling": {"replicaDivisionPreference": "TieredOverflow", "tieredOverflow": tiered}}
    )


@pytest.mark.parametrize(
    ("band", "cost", "moves"),
    [
        # "b" runs in "dear" ($1.30) while "a" holds "cheap" ($1.00); at 1 h it moves to "cheap":
        # a 1 h x $1 + b 1 h x $1.30 + 2 h x $1
        (None, 4.30, 1),
        (20, 4.30, 1),  # $1.00 + 20% = $1.20: separate bands
        # one band: the division takes the two as equal, so the replay does not move "b" either
        (50, 4.90, 0),
    ],
)
def test_returns_in_the_replay_respect_price_bands(band: float | None, cost: float, moves: int) -> None:
    # two on-prem clusters of one tier; "dear" has 2 GPUs, so a tie of the band sends "a" to "cheap" (fewest free GPUs)
    fleet = make_fleet(
        t4_cluster("cheap", nodes=1, gpus=1, pricing={"Tesla-T4": 1.0}),
        t4_cluster("dear", nodes=1, gpus=2, pricing={"Tesla-T4": 1.3}),
    )
    nodes = fleet_nodes(fleet)
    placement = _banded(band)
    strategy = build_strategy(StrategyName.GPUFED_REBALANCE, nodes, placement=placement)
    result = run_replay(strategy, JOBS, nodes, settings=Settings(placement=placement))
    assert result.returns is not None and result.returns.moves == moves
    assert result.allocated_cost_usd == pytest.approx(cost)
