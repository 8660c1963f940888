"""Moves toward a policy's own preference (core/preferring.py) and gangs that move whole between
runs (core/returning.py: propose_return for a gang): which policies state one, what falls short of it,
the step toward it, and the decisions that carry a step out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.preferring import (
    observed_term,
    pinned_decision,
    preference_unmet,
    states_preference,
)
from controlplane.scheduler.core.rescheduling import placement_broken
from controlplane.scheduler.core.returning import Move, propose_return
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

from .builders import A100, cluster, shape

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
GPU = ReplicaRequirements.build({"nvidia.com/gpu": 1})
TERMS = [
    {"affinityName": "home", "clusterNames": ["onprem"]},
    {"affinityName": "burst", "clusterNames": ["cloud"]},
]
WEIGHTS = {
    "staticWeightList": [
        {"targetCluster": {"clusterNames": ["onprem"]}, "weight": 1},
        {"targetCluster": {"clusterNames": ["cloud"]}, "weight": 1},
    ]
}


def placement(division: str = "Weighted", *, terms: bool = False, weights: bool = False, **rebalance: Any) -> Placement:
    scheduling: dict[str, Any] = {"replicaSchedulingType": "Duplicated"} if division == "Duplicated" else {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": division,
    }
    if weights:
        scheduling["weightPreference"] = WEIGHTS
    if division == "DynamicWeight":
        scheduling.update(replicaDivisionPreference="Weighted", weightPreference={"dynamicWeight": "AvailableReplicas"})
    if rebalance:
        scheduling["rebalance"] = rebalance
    spec: dict[str, Any] = {"replicaScheduling": scheduling}
    if terms:
        spec["clusterAffinities"] = TERMS
    return Placement.model_validate(spec)


def node(free: int) -> dict[str, Any]:
    """A node of 16 GPUs with ``free`` of them free (the binding's own replicas use the others)."""
    return shape(1, gpus=free, allocatable={"nvidia.com/gpu": 16})


def fleet(onprem_free: int, cloud_free: int = 8) -> list[ClusterSnapshot]:
    return [
        cluster("cloud", node(cloud_free), provider="aws", pricing={A100: 4.10}),
        cluster("onprem", node(onprem_free), pricing={A100: 1.20}),
    ]


def request(place: Placement, previous: dict[str, int], *, observed: str | None = None, replicas: int = 8,
            gang: bool = False) -> BindingRequest:
    return BindingRequest(
        key="default/web", replicas=replicas, requirements=GPU, placement=place, gang=gang,
        previous=previous, previous_affinity_name=observed,
    )


@pytest.mark.parametrize(
    ("place", "expected"),
    [
        (placement(weights=True), True),
        (placement(), True),  # Weighted without a list: equal static weights
        (placement("Aggregated"), False),
        (placement("DynamicWeight"), False),
        (placement("TieredOverflow"), False),  # its preference is the tier rank (returning.py)
        (placement("Aggregated", terms=True), True),
        (placement("DynamicWeight", terms=True), True),
        (placement("TieredOverflow", terms=True), True),
        (placement("Duplicated", terms=True), False),
    ],
)
def test_which_policies_state_a_preference(place: Placement, expected: bool) -> None:
    assert states_preference(request(place, {"cloud": 8})) is expected
    assert not states_preference(request(place, {"cloud": 8}, gang=True))  # a gang moves whole (between runs)


@pytest.mark.parametrize(
    ("place", "placed", "observed", "unmet"),
    [
        (placement(weights=True), {"onprem": 4, "cloud": 4}, None, False),
        (placement(weights=True), {"cloud": 8}, None, True),
        (placement(weights=True), {"onprem": 2, "cloud": 6}, None, True),
        (placement(terms=True), {"cloud": 8}, "burst", True),
        (placement("Aggregated", terms=True), {"onprem": 8}, "home", False),
        (placement("Aggregated", terms=True), {"onprem": 8}, None, False),
        (placement("Aggregated"), {"cloud": 8}, None, False),
        (placement(weights=True), {}, None, False),  # runs nowhere: nothing to bring back
    ],
)
def test_which_placements_fall_short(
    place: Placement, placed: dict[str, int], observed: str | None, unmet: bool
) -> None:
    assert preference_unmet(request(place, placed), placed, fleet(8), affinity_name=observed) is unmet


def test_equal_weights_leave_out_clusters_that_could_never_run_a_replica() -> None:
    snapshots = [*fleet(8), cluster("cpu-only", shape(2, product=None))]
    placed = {"onprem": 4, "cloud": 4}
    assert not preference_unmet(request(placement(), placed), placed, snapshots, affinity_name=None)
    assert preference_unmet(request(placement(), {"cloud": 8}), {"cloud": 8}, snapshots, affinity_name=None)


@pytest.mark.parametrize(
    ("place", "previous", "observed", "onprem_free", "move", "reason"),
    [
        # static weights 1:1; on-prem could not take its half when decided: 2 (25% of 8) per step
        (placement(weights=True), {"cloud": 8}, None, 8,
         Move("cloud", "onprem", 2, 5.80, why="toward the staticWeightList division"), None),
        (placement(weights=True, maxSurge="100%"), {"cloud": 8}, None, 8,
         Move("cloud", "onprem", 4, 11.60, why="toward the staticWeightList division"), None),
        # on-prem has room for one more only: the weights' division as room allows
        (placement(weights=True), {"onprem": 2, "cloud": 6}, None, 1,
         Move("cloud", "onprem", 1, 2.90, why="toward the staticWeightList division"), None),
        (placement(weights=True), {"onprem": 2, "cloud": 6}, None, 0, None, "the placement meets the policy's preference"),
        (placement(weights=True), {"onprem": 4, "cloud": 4}, None, 8, None, "the placement meets the policy's preference"),
        # fell over to the second affinity term: back to the first once it holds every replica
        (placement(terms=True), {"cloud": 8}, "burst", 8,
         Move("cloud", "onprem", 2, 5.80, why="back to clusterAffinities term home"), None),
        (placement("TieredOverflow", terms=True), {"cloud": 8}, "burst", 8,
         Move("cloud", "onprem", 2, 5.80, why="back to clusterAffinities term home"), None),
        (placement("Aggregated", terms=True), {"cloud": 8}, "burst", 8,
         Move("cloud", "onprem", 2, 5.80, why="back to clusterAffinities term home"), None),
        # part way back (4 moved): the rest follows when on-prem holds them too
        (placement(terms=True), {"onprem": 4, "cloud": 4}, "burst", 4,
         Move("cloud", "onprem", 2, 5.80, why="back to clusterAffinities term home"), None),
        # the first term cannot hold all 8: the workload stays in the term it runs in
        (placement(terms=True), {"cloud": 8}, "burst", 5, None, "the placement meets the policy's preference"),
        # dynamic weights and Aggregated within one term divide by room and keep what runs
        (placement("DynamicWeight"), {"cloud": 8}, None, 8, None, "states no preference"),
        (placement("Aggregated"), {"cloud": 8}, None, 8, None, "states no preference"),
        (placement(weights=True, enabled=False), {"cloud": 8}, None, 8, None, "disabled"),
    ],
)
def test_the_step_toward_the_preference(
    place: Placement, previous: dict[str, int], observed: str | None, onprem_free: int, move: Move | None,
    reason: str | None,
) -> None:
    plan = propose_return(request(place, previous, observed=observed), fleet(onprem_free), last_move=None, now=NOW)
    assert plan.move == move, plan.reason
    if reason is not None:
        assert reason in plan.reason


def test_a_preferred_move_is_not_held_back_by_its_price_only_by_the_interval() -> None:
    # The first affinity term is the dearer cluster: the policy's order asks for it anyway.
    snapshots = [
        cluster("cloud", node(8), provider="aws", pricing={A100: 1.00}),
        cluster("onprem", node(8), pricing={A100: 1.50}),
    ]
    asked = request(placement(terms=True, maxSurge="100%"), {"cloud": 8}, observed="burst")
    plan = propose_return(asked, snapshots, last_move=None, now=NOW)
    assert plan.move == Move("cloud", "onprem", 8, -4.0, why="back to clusterAffinities term home")
    assert plan.reason == "moved 8 replicas cloud \u2192 onprem: back to clusterAffinities term home, costs $4.00/h more"
    recent = propose_return(asked, snapshots, last_move=NOW - timedelta(seconds=100), now=NOW)
    assert recent.move is None and recent.wait_seconds == pytest.approx(200)


def test_a_step_is_written_as_decided_and_observes_the_latest_term_it_needs() -> None:
    asked = request(placement(terms=True), {"cloud": 8}, observed="burst")
    surge = pinned_decision(asked, fleet(8), {"cloud": 8, "onprem": 2}, why="keeps", reservations=None, now=NOW)
    assert surge is not None and surge.clusters == {"cloud": 8, "onprem": 2} and surge.affinity_name == "burst"
    assert surge.condition.status
    # the shrink that ends the last step: the workload observes the first term again
    home = request(placement(terms=True), {"cloud": 2, "onprem": 8}, observed="burst")
    done = pinned_decision(home, fleet(0), {"onprem": 8}, why="moved", reservations=None, now=NOW)
    assert done is not None and done.clusters == {"onprem": 8} and done.affinity_name == "home"
    # a cluster that gains replicas must have the room for them
    assert pinned_decision(asked, fleet(1), {"cloud": 8, "onprem": 2}, why="keeps", reservations=None, now=NOW) is None
    by_name = {s.name: s for s in fleet(8)}
    assert observed_term(placement(terms=True), by_name, {"onprem": 4, "cloud": 4}, current="burst") == "burst"
    assert observed_term(placement(weights=True), by_name, {"onprem": 4}, current=None) is None


@pytest.mark.parametrize(
    ("previous", "observed", "broken"),
    [
        ({"onprem": 4, "cloud": 4}, "burst", None),  # on its way back to the first term
        ({"cloud": 8}, "burst", None),
        ({"cloud": 8}, "home", "cluster cloud no longer matches the placement's cluster affinity"),
    ],
)
def test_clusters_of_an_earlier_term_are_in_place(previous: dict[str, int], observed: str, broken: str | None) -> None:
    snapshots = {s.name: s for s in fleet(8)}
    assert placement_broken(request(placement(terms=True), previous, observed=observed), snapshots) == broken


def gang_fleet(onprem_free: int, *, onprem_price: float = 1.20) -> Sequence[ClusterSnapshot]:
    return [
        cluster("cloud", node(0), provider="aws", pricing={A100: 4.10}),
        cluster("onprem", node(onprem_free), pricing={A100: onprem_price}),
    ]


@pytest.mark.parametrize(
    ("place", "observed", "onprem_free", "onprem_price", "move", "reason"),
    [
        # a gang of 4 between runs in the cloud; on-prem now holds it whole: 4 GPUs x $2.90
        (placement("TieredOverflow"), None, 4, 1.20, Move("cloud", "onprem", 4, 11.60, why="the gang, between runs"), None),
        (placement("TieredOverflow"), None, 3, 1.20, None, "no other cluster holds the whole gang now"),
        # dearer on-prem (a better tier, but no saving): no move
        (placement("TieredOverflow"), None, 4, 5.00, None, "below the policy's minimum"),
        # the cheaper cluster of the same tier is no better placed than a fresh decision's pick
        (placement("TieredOverflow"), None, 0, 1.20, None, "no other cluster holds the whole gang now"),
        (placement("TieredOverflow", maxSurge=1, minSavingPerHour=20), None, 4, 1.20, None, "below the policy's minimum"),
        # an earlier affinity term: back whatever the price
        (placement(terms=True), "burst", 4, 5.00,
         Move("cloud", "onprem", 4, -3.60, why="the gang, between runs, back to clusterAffinities term home"), None),
        (placement(terms=True, enabled=False), "burst", 4, 1.20, None, "disabled"),
    ],
)
def test_a_gang_between_runs_moves_whole(
    place: Placement, observed: str | None, onprem_free: int, onprem_price: float, move: Move | None, reason: str | None
) -> None:
    asked = request(place, {"cloud": 4}, observed=observed, replicas=4, gang=True)
    plan = propose_return(asked, gang_fleet(onprem_free, onprem_price=onprem_price), last_move=None, now=NOW)
    assert plan.move == move, plan.reason
    if reason is not None:
        assert reason in plan.reason


def test_rebalance_is_set_in_one_place() -> None:
    with pytest.raises(ValueError, match="set rebalance in one place"):
        Placement.model_validate({"replicaScheduling": {
            "replicaDivisionPreference": "TieredOverflow", "tieredOverflow": {"rebalance": {"maxSurge": 1}},
            "rebalance": {"maxSurge": 2},
        }})
