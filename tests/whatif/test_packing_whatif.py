"""The what-if hands its simulated members the hub's packing hint: under kube's default scoring
(least-allocated) a second 1-GPU job joins the first on its node, and the other 8-GPU nodes stay
whole for 8-GPU jobs; without the hint the member spreads them. The members report their scoring
(``status.nodeScoring``), which ``packingHintsScope: SpreadingMembers`` reads."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.whatif.engine import fleet_nodes
from simulator.whatif.member import MemberCluster, MemberScoring
from simulator.whatif.strategies import GpufedStrategy, StrategyName, build_strategy
from simulator.whatif.trace import Job
from tests.whatif.fleets import make_fleet
from tests.whatif.test_steering_whatif import placement

V100 = "Tesla-V100-SXM2-16GB"


def spreading_cluster(scoring: str = "least-allocated") -> dict[str, Any]:
    return {
        "name": "c",
        "nodeGroups": [{"name": "big", "count": 3, "cpu": 96, "memoryGiB": 512, "gpu": {"product": V100, "count": 8}}],
        "simulation": {"scoring": scoring},
    }


@pytest.mark.parametrize(
    ("tiered_overflow", "eight_gpu_jobs"),
    [
        pytest.param({"packingHints": True, "packingHintsMultiGPUPercent": 0}, 2, id="asked"),
        # By default the hints wait for multi-GPU demand, and no job of two GPUs or more came before.
        pytest.param({}, 1, id="none-by-default-without-multi-gpu-demand"),
        pytest.param(
            {"packingHints": True, "packingHintsScope": "SpreadingMembers", "packingHintsMultiGPUPercent": 0},
            2,
            id="spreading-members",
        ),
        pytest.param({"packingHints": False}, 1, id="switched-off"),
    ],
)
def test_small_jobs_share_a_node_when_the_hub_hints_it(tiered_overflow: dict[str, Any], eight_gpu_jobs: int) -> None:
    gpufed = build_strategy(
        StrategyName.GPUFED, fleet_nodes(make_fleet(spreading_cluster())), placement=placement(**tiered_overflow)
    )
    assert isinstance(gpufed, GpufedStrategy)
    nodes = set()
    for index in range(2):
        placed = gpufed.try_place(Job(f"small-{index}", 0, 1, 1, 1000, cpu_milli=1000)).placed
        assert placed is not None
        nodes.add(placed.node)
    assert len(nodes) == 3 - eight_gpu_jobs
    whole = [gpufed.try_place(Job(f"big-{index}", 0, 1, 8, 1000, cpu_milli=1000)).placed for index in range(3)]
    assert sum(1 for placed in whole if placed is not None) == eight_gpu_jobs


@pytest.mark.parametrize(
    ("scoring", "reported"),
    [
        ("least-allocated", "LeastAllocated"),
        ("most-allocated", "MostAllocated"),
        ("best-fit", "MostAllocated"),
        ("fgd", "FragmentationAware"),
        ("random", "Unknown"),
    ],
)
def test_a_simulated_member_reports_its_node_scoring(scoring: str, reported: str) -> None:
    nodes = fleet_nodes(make_fleet(spreading_cluster(scoring)))
    member = MemberCluster(nodes.profiles[0], nodes=nodes.nodes["c"], inventories=nodes.inventories["c"])
    assert member.cluster_object()["status"]["nodeScoring"] == reported
    assert member.snapshot().node_scoring == reported
    forced = MemberCluster(
        nodes.profiles[0], scoring=MemberScoring.FGD, nodes=nodes.nodes["c"], inventories=nodes.inventories["c"]
    )
    assert forced.snapshot().node_scoring == "FragmentationAware"


def sharing_cluster() -> dict[str, Any]:
    return {
        "name": "c",
        "nodeGroups": [{"name": "small", "count": 3, "cpu": 32, "memoryGiB": 128, "gpu": {"product": V100, "count": 2}}],
        "simulation": {"scoring": "least-allocated"},
    }


@pytest.mark.parametrize(
    ("tiered_overflow", "joins"),
    [
        pytest.param({}, True, id="by-default"),
        pytest.param({"shareRemainderHints": False}, False, id="switched-off"),
    ],
)
def test_a_share_joins_the_tightest_remainder_when_the_hub_hints_it(tiered_overflow: dict[str, Any], joins: bool) -> None:
    """Three 2-GPU nodes under least-allocated, no multi-GPU demand: a 1-GPU job and a share of 400
    land on two nodes; a share of 500 then goes, with the hint, to the share of 400's node (a remainder
    of 600, where the mix of the three grows by -0.10 GPUs), not to the empty node the member would
    pick (+0.17)."""
    gpufed = build_strategy(
        StrategyName.GPUFED, fleet_nodes(make_fleet(sharing_cluster())), placement=placement(**tiered_overflow)
    )
    assert isinstance(gpufed, GpufedStrategy)
    whole, first, second = (
        gpufed.try_place(Job(name, 0, 1, 1, milli, cpu_milli=1000)).placed
        for name, milli in (("one", 1000), ("share-400", 400), ("share-500", 500))
    )
    assert whole is not None and first is not None and second is not None
    assert first.node != whole.node
    assert (second.node == first.node) is joins
    assert (second.node not in (whole.node, first.node)) is not joins
