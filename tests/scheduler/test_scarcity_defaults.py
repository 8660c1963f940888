"""Steering inside members and node-shape scarcity in ties are on by default under TieredOverflow:
a policy that does not name them gets both, and ``false`` turns each off."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from policies.models import Placement

from .test_shapescarcity import arrivals, big_and_small, eight_gpus
from .test_steering import NOW, T4, flexible, mixed_fleet, t4_demand_waits
from .test_tiebreak import tiered


def steered(placement: Placement) -> dict[str, tuple[str, ...]]:
    """What a flexible replica is steered away from in a cluster of T4s and V100s while T4-only
    demand waits (``test_steering``)."""
    cache = SchedulerCache()
    t4_demand_waits(cache)
    request = dataclasses.replace(flexible("ns/flex"), placement=placement)
    return schedule(request, mixed_fleet(), now=NOW, cache=cache).steering


def tie_winner(placement: Placement) -> dict[str, int]:
    """Where an 88-core 8-GPU replica goes while 120-core demand needs the only node that holds it
    (``test_shapescarcity``): ``b-big`` with node shapes weighed, ``a-small`` (fewest free GPUs) without."""
    cache = SchedulerCache()
    arrivals(cache, 88, 40, "mid")
    arrivals(cache, 120, 2, "wide")
    return schedule(eight_gpus("ns/job", 88, placement=placement), big_and_small(), now=NOW, cache=cache).clusters


@pytest.mark.parametrize(
    "tiered_overflow",
    [
        pytest.param({}, id="no-tieredOverflow-block"),
        pytest.param({"order": "TierThenPrice"}, id="block-without-the-fields"),
        pytest.param({"scarcitySteering": True, "nodeShapeScarcity": True}, id="both-named-true"),
    ],
)
def test_a_policy_that_does_not_turn_them_off_gets_both(tiered_overflow: dict[str, Any]) -> None:
    placement = tiered(**tiered_overflow)
    assert steered(placement) == {"mixed": (T4,)}
    assert tie_winner(placement) == {"b-big": 1}


@pytest.mark.parametrize(
    ("tiered_overflow", "steering", "winner"),
    [
        pytest.param({"scarcitySteering": False, "nodeShapeScarcity": False}, {}, "a-small", id="both-false"),
        pytest.param({"scarcitySteering": False}, {}, "b-big", id="steering-false"),
        pytest.param({"nodeShapeScarcity": False}, {"mixed": (T4,)}, "a-small", id="node-shapes-false"),
        pytest.param({"scarcityAware": False}, {}, "a-small", id="scarcity-aware-false"),
    ],
)
def test_false_turns_each_off(
    tiered_overflow: dict[str, Any], steering: dict[str, tuple[str, ...]], winner: str
) -> None:
    placement = tiered(**tiered_overflow)
    assert steered(placement) == steering
    assert tie_winner(placement) == {winner: 1}
