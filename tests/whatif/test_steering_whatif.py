"""The what-if hands its simulated members what the hub writes into the Work: a flexible job the
hub steers off T4 lands on the V100 node, though best-fit alone would pick the fuller T4 node."""

from __future__ import annotations

from typing import Any

import pytest

from policies.models import Placement
from simulator.whatif.engine import fleet_nodes
from simulator.whatif.strategies import GpufedStrategy, StrategyName, build_strategy
from simulator.whatif.trace import Job
from tests.whatif.fleets import make_fleet

T4 = "Tesla-T4"
V100 = "Tesla-V100-SXM2-16GB"


def mixed_cluster() -> dict[str, Any]:
    return {
        "name": "mixed",
        "nodeGroups": [
            {"name": "t4", "count": 1, "cpu": 16, "memoryGiB": 64, "gpu": {"product": T4, "count": 4}},
            {"name": "v100", "count": 1, "cpu": 96, "memoryGiB": 512, "gpu": {"product": V100, "count": 8}},
        ],
        "simulation": {"scoring": "best-fit"},
    }


def placement(**tiered_overflow: Any) -> Placement:
    scheduling: dict[str, Any] = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}
    scheduling["tieredOverflow"] = tiered_overflow
    return Placement.model_validate({"replicaScheduling": scheduling})


@pytest.mark.parametrize(("tiered_overflow", "node_group"), [({}, "v100"), ({"scarcitySteering": False}, "t4")])
def test_a_flexible_job_follows_the_hubs_steering_inside_the_member(
    tiered_overflow: dict[str, Any], node_group: str
) -> None:
    gpufed = build_strategy(StrategyName.GPUFED, fleet_nodes(make_fleet(mixed_cluster())), placement=placement(**tiered_overflow))
    assert isinstance(gpufed, GpufedStrategy)
    # Two T4-only jobs of 1 GPU: 2 GPUs of T4-only demand against the 2 T4s left free.
    for index in range(2):
        pinned = gpufed.try_place(Job(f"t4-{index}", 0, 1, 1, 1000, cpu_milli=1000, gpu_products=(T4,))).placed
        assert pinned is not None and pinned.node.startswith("mixed-t4")
    flexible = gpufed.try_place(Job("flex", 0, 1, 1, 1000, cpu_milli=1000)).placed
    assert flexible is not None and flexible.node.startswith(f"mixed-{node_group}"), flexible
