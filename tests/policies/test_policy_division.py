"""Replica division strategies, table-driven."""

from __future__ import annotations

import random

import pytest

from policies.affinity import ClusterView
from policies.division import (
    DivisionResult,
    TierCandidate,
    divide_aggregated,
    divide_by_dynamic_weights,
    divide_by_static_weights,
    divide_duplicated,
    divide_tiered_overflow,
    resolve_static_weights,
    take_by_weight,
    tier_candidates,
    tier_of,
)
from policies.models import StaticClusterWeight, TieredOverflow


def _check(result: DivisionResult, assignments: dict[str, int], unplaced: int) -> None:
    assert dict(result.assignments) == assignments
    assert result.unplaced == unplaced


# --- duplicated --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "available", "current", "assignments", "unplaced"),
    [
        (3, None, None, {"a": 3, "b": 3, "c": 3}, 0),
        (3, {"a": 3, "b": 2, "c": 9}, None, {"a": 3, "c": 3}, 0),
        (3, {"a": 1, "b": 2, "c": 0}, None, {}, 3),
        (3, {"a": 1, "b": 0, "c": 0}, {"a": 2}, {"a": 3}, 0),
        (0, {"a": 0}, None, {}, 0),
    ],
)
def test_duplicated(
    replicas: int, available: dict[str, int] | None, current: dict[str, int] | None,
    assignments: dict[str, int], unplaced: int,
) -> None:
    result = divide_duplicated(replicas, ["a", "b", "c"], available=available, current=current)
    _check(result, assignments, unplaced)
    if available and "b" not in assignments and replicas:
        assert "Duplicated needs all of them" in result.reasons["b"]


# --- static weights (Webster / Sainte-Laguë) ---------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "weights", "available", "assignments", "unplaced"),
    [
        pytest.param(3, {"a": 1, "b": 2}, None, {"a": 1, "b": 2}, 0, id="exact-proportion"),
        pytest.param(10, {"a": 1, "b": 1}, None, {"a": 5, "b": 5}, 0, id="equal"),
        pytest.param(1, {"a": 1, "b": 1}, None, {"a": 1}, 0, id="tie-goes-to-lower-name"),
        pytest.param(1, {"a": 1, "b": 2}, None, {"b": 1}, 0, id="first-seat-to-heaviest"),
        pytest.param(2, {"a": 1, "b": 1, "c": 2}, None, {"a": 1, "c": 1}, 0,
                     id="second-seat-tie-quotients-1-vs-2/3"),
        # Classic Sainte-Laguë example: votes 53/24/23, 7 seats -> 3/2/2 (D'Hondt would give 4/2/1).
        pytest.param(7, {"x": 53, "y": 24, "z": 23}, None, {"x": 3, "y": 2, "z": 2}, 0, id="sainte-lague-vs-dhondt"),
        # Webster on 100000/80000/30000/20000, 8 seats -> 3/3/1/1.
        pytest.param(8, {"a": 100000, "b": 80000, "c": 30000, "d": 20000}, None,
                     {"a": 3, "b": 3, "c": 1, "d": 1}, 0, id="webster-four-parties"),
        pytest.param(5, {"a": 1, "b": 0}, None, {"a": 5}, 0, id="zero-weight-gets-nothing"),
        pytest.param(6, {"a": 1, "b": 1}, {"a": 1, "b": 10}, {"a": 1, "b": 5}, 0, id="capacity-caps"),
        pytest.param(6, {"a": 1, "b": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2}, 3, id="unplaced"),
        pytest.param(4, {}, None, {}, 4, id="no-clusters"),
    ],
)
def test_static_weights(
    replicas: int, weights: dict[str, int], available: dict[str, int] | None,
    assignments: dict[str, int], unplaced: int,
) -> None:
    _check(divide_by_static_weights(replicas, weights, available=available), assignments, unplaced)


@pytest.mark.parametrize("weights", [{"a": 1, "b": 2, "c": 3}, {"a": 5, "b": 3, "c": 1}, {"a": 7, "b": 7}])
def test_static_weights_are_house_monotone(weights: dict[str, int]) -> None:
    previous = divide_by_static_weights(0, weights).assignments
    for replicas in range(1, 40):
        now = divide_by_static_weights(replicas, weights).assignments
        assert sum(now.values()) == replicas
        assert all(now.get(name, 0) >= count for name, count in previous.items())
        previous = now


def _view(name: str, **labels: str) -> ClusterView:
    return ClusterView(name=name, labels=labels)


def test_resolve_static_weights() -> None:
    clusters = [_view("m1", env="prod"), _view("m2", env="prod"), _view("m3", env="dev")]
    weight_list = [
        StaticClusterWeight.model_validate({"targetCluster": {"labelSelector": {"matchLabels": {"env": "prod"}}}, "weight": 2}),
        StaticClusterWeight.model_validate({"targetCluster": {"clusterNames": ["m2"]}, "weight": 5}),
    ]
    assert resolve_static_weights(clusters, weight_list) == {"m1": 2, "m2": 5, "m3": 0}
    assert resolve_static_weights(clusters, None) == {"m1": 1, "m2": 1, "m3": 1}
    no_match = [StaticClusterWeight.model_validate({"targetCluster": {"clusterNames": ["zz"]}, "weight": 3})]
    assert resolve_static_weights(clusters, no_match) == {"m1": 1, "m2": 1, "m3": 1}


# --- dynamic weights ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "available", "current", "assignments", "unplaced"),
    [
        pytest.param(12, {"A": 6, "B": 12, "C": 18}, None, {"A": 2, "B": 4, "C": 6}, 0, id="karmada-documented-example"),
        pytest.param(13, {"A": 6, "B": 12, "C": 18}, None, {"A": 2, "B": 4, "C": 7}, 0, id="remainder-to-largest"),
        pytest.param(40, {"A": 6, "B": 12, "C": 18}, None, {"A": 6, "B": 12, "C": 18}, 4, id="capped-by-availability"),
        pytest.param(3, {"A": 5, "B": 5}, None, {"A": 2, "B": 1}, 0, id="tie-by-name"),
        pytest.param(3, {"A": 5, "B": 5}, {"B": 1}, {"A": 1, "B": 2}, 0, id="tie-by-current-replicas"),
        pytest.param(5, {"A": 0, "B": 0}, None, {}, 5, id="nothing-available"),
        # Scale up keeps current assignments and divides only the extra by availability.
        pytest.param(10, {"A": 4, "B": 0, "C": 4}, {"A": 3, "B": 3}, {"A": 5, "B": 3, "C": 2}, 0, id="scale-up-stable"),
        # Scale down shrinks proportionally to the current assignment; nothing grows.
        pytest.param(6, {"A": 100, "B": 100}, {"A": 8, "B": 4}, {"A": 4, "B": 2}, 0, id="scale-down-proportional"),
        pytest.param(5, {"A": 100, "B": 100}, {"A": 8, "B": 4}, {"A": 4, "B": 1}, 0, id="scale-down-remainder"),
        pytest.param(6, {"A": 0, "B": 0}, {"A": 3, "B": 3}, {"A": 3, "B": 3}, 0, id="unchanged-total-is-kept"),
        pytest.param(6, {"B": 10}, {"A": 3, "B": 3}, {"B": 6}, 0, id="gone-cluster-is-replaced"),
    ],
)
def test_dynamic_weights(
    replicas: int, available: dict[str, int], current: dict[str, int] | None,
    assignments: dict[str, int], unplaced: int,
) -> None:
    result = divide_by_dynamic_weights(replicas, available, current=current)
    _check(result, assignments, unplaced)
    for name, count in result.assignments.items():
        assert count <= available.get(name, 0) + (current or {}).get(name, 0)


def _dynamic_weights_reference(
    replicas: int, available: dict[str, int], current: dict[str, int] | None
) -> DivisionResult:
    """The first implementation of ``divide_by_dynamic_weights``, kept as the specification of its output."""
    kept = {name: count for name, count in (current or {}).items() if name in available and count > 0}
    assigned = sum(kept.values())
    if replicas == assigned:
        return DivisionResult(assignments=dict(sorted(kept.items())))
    if replicas < assigned:
        shares = take_by_weight(replicas, kept, last=kept)
        return DivisionResult(assignments={n: c for n, c in sorted(shares.items()) if c > 0})
    extra = replicas - assigned
    free = {name: max(count, 0) for name, count in available.items()}
    placeable = min(extra, sum(free.values()))
    added = take_by_weight(placeable, free, last=kept)
    merged = dict(kept)
    for name, count in added.items():
        merged[name] = merged.get(name, 0) + count
    reasons = {name: "no available replicas" for name, count in free.items() if count <= 0 and name not in kept}
    return DivisionResult(
        assignments={n: c for n, c in sorted(merged.items()) if c > 0},
        unplaced=extra - placeable,
        reasons=reasons,
    )


@pytest.mark.parametrize("seed", range(40))
def test_dynamic_weights_equal_the_reference_implementation(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"c{i:03d}" for i in range(rng.choice((1, 2, 5, 30, 100)))]
    rng.shuffle(names)  # input order must not matter
    for _ in range(25):
        # Few distinct weights, so ties (broken by current replicas, then name) are common.
        available = {name: rng.choice((-1, 0, 0, 1, 2, 3, 3, 8, 40)) for name in names}
        current = {name: rng.randint(1, 5) for name in names if rng.random() < 0.1} or None
        if current and rng.random() < 0.2:
            current["gone"] = 2  # not a candidate any more
        replicas = rng.choice((0, 1, 2, 5, 7, 20, 64, 500))
        got = divide_by_dynamic_weights(replicas, available, current=current)
        want = _dynamic_weights_reference(replicas, available, current)
        assert (dict(got.assignments), got.unplaced, dict(got.reasons)) == (
            dict(want.assignments),
            want.unplaced,
            dict(want.reasons),
        )
        assert list(got.assignments) == sorted(got.assignments)


def test_take_by_weight_matches_karmada_dispenser() -> None:
    assert take_by_weight(12, {"A": 6, "B": 12, "C": 18}) == {"A": 2, "B": 4, "C": 6}
    assert take_by_weight(7, {"A": 1, "B": 1, "C": 1}) == {"A": 3, "B": 2, "C": 2}
    assert take_by_weight(4, {"A": 0}) == {}


# --- aggregated --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "available", "current", "assignments", "unplaced"),
    [
        pytest.param(5, {"a": 3, "b": 10, "c": 6}, None, {"b": 5}, 0, id="one-cluster-enough"),
        pytest.param(12, {"a": 3, "b": 10, "c": 6}, None, {"b": 8, "c": 4}, 0, id="two-largest-by-availability"),
        pytest.param(30, {"a": 3, "b": 10, "c": 6}, None, {"a": 3, "b": 10, "c": 6}, 11, id="all-and-unplaced"),
        # Extra 6 replicas: current cluster a first (3 free), then b; 6 split 3:10 by availability -> 1:5.
        pytest.param(8, {"a": 3, "b": 10, "c": 6}, {"a": 2}, {"a": 3, "b": 5}, 0, id="scale-up-prefers-current"),
        pytest.param(2, {"a": 3, "b": 10}, {"a": 2, "b": 2}, {"a": 1, "b": 1}, 0, id="scale-down"),
    ],
)
def test_aggregated(
    replicas: int, available: dict[str, int], current: dict[str, int] | None,
    assignments: dict[str, int], unplaced: int,
) -> None:
    _check(divide_aggregated(replicas, available, current=current), assignments, unplaced)


# --- tiered overflow ---------------------------------------------------------------------------

ONPREM_A = TierCandidate("onprem-a", available=4, tier=0, price=0.0)
ONPREM_B = TierCandidate("onprem-b", available=2, tier=0, price=1.0)
GCP = TierCandidate("gcp", available=10, tier=1, price=3.5)
AWS = TierCandidate("aws", available=10, tier=1, price=4.1)
FLEET = [AWS, GCP, ONPREM_B, ONPREM_A]


@pytest.mark.parametrize(
    ("replicas", "current", "assignments", "unplaced"),
    [
        pytest.param(3, None, {"onprem-a": 3}, 0, id="fits-on-cheapest"),
        pytest.param(6, None, {"onprem-a": 4, "onprem-b": 2}, 0, id="fills-tier-0-by-price"),
        pytest.param(9, None, {"onprem-a": 4, "onprem-b": 2, "gcp": 3}, 0, id="overflow-to-cheaper-cloud"),
        pytest.param(20, None, {"onprem-a": 4, "onprem-b": 2, "gcp": 10, "aws": 4}, 0, id="overflow-to-next-cloud"),
        pytest.param(30, None, {"onprem-a": 4, "onprem-b": 2, "gcp": 10, "aws": 10}, 4, id="unplaced-remainder"),
        # Scale up with the current assignment kept; available is on top of it.
        pytest.param(8, {"onprem-a": 4, "gcp": 2}, {"onprem-a": 6, "gcp": 2}, 0, id="scale-up-fills-cheap-first"),
        pytest.param(8, {"onprem-a": 4, "onprem-b": 2, "gcp": 1}, {"onprem-a": 5, "onprem-b": 2, "gcp": 1},
                     0, id="scale-up-keeps-existing-cloud"),
        # Scale down removes from the most expensive first, keeps the rest.
        pytest.param(10, {"onprem-a": 4, "onprem-b": 2, "gcp": 4, "aws": 4}, {"onprem-a": 4, "onprem-b": 2, "gcp": 4},
                     0, id="scale-down-drops-aws-first"),
        pytest.param(5, {"onprem-a": 4, "onprem-b": 2, "gcp": 4, "aws": 4}, {"onprem-a": 4, "onprem-b": 1},
                     0, id="scale-down-through-tiers"),
        pytest.param(0, {"onprem-a": 4, "aws": 1}, {}, 0, id="scale-to-zero"),
        pytest.param(4, {"gone": 3}, {"onprem-a": 4}, 0, id="non-candidate-current-dropped"),
    ],
)
def test_tiered_overflow(
    replicas: int, current: dict[str, int] | None, assignments: dict[str, int], unplaced: int
) -> None:
    _check(divide_tiered_overflow(replicas, FLEET, current=current), assignments, unplaced)


def test_tiered_overflow_explains_unused_clusters() -> None:
    result = divide_tiered_overflow(3, FLEET)
    assert "cheaper tiers" in result.reasons["aws"]
    assert "onprem-a" not in result.reasons


def test_tier_of_and_candidates() -> None:
    onprem = ClusterView(name="dc1", provider="onprem", tier=0)
    burst = ClusterView(name="cloud1", provider="aws", tier=1, labels={"gpufed.io/pool": "burst"},
                        pricing={"A100": 4.0, "H100": 9.0})
    other = ClusterView(name="cloud2", provider="gcp", tier=1)
    tiers = TieredOverflow.model_validate({"tiers": [
        {"name": "burst", "clusterAffinity": {"labelSelector": {"matchLabels": {"gpufed.io/pool": "burst"}}}},
        {"name": "dc", "clusterAffinity": {"fieldSelector": {"matchExpressions": [
            {"key": "provider", "operator": "In", "values": ["onprem"]}]}}},
    ]})
    assert tier_of(onprem, None) == 0
    assert tier_of(onprem, tiers) == 1
    assert tier_of(burst, tiers) == 0
    assert tier_of(other, tiers) is None
    rows = tier_candidates([onprem, burst, other], {"dc1": 2, "cloud1": 5}, tiered=tiers, gpu_product="H100")
    assert rows == [TierCandidate("cloud1", 5, 0, 9.0), TierCandidate("dc1", 2, 1, 0.0)]
    rows = tier_candidates([burst, onprem, other], {"cloud2": 1})
    assert [(r.name, r.tier, r.price) for r in rows] == [("dc1", 0, 0.0), ("cloud2", 1, 0.0), ("cloud1", 1, 4.0)]


def test_negative_replicas_are_rejected() -> None:
    with pytest.raises(ValueError, match="replicas must be >= 0"):
        divide_by_dynamic_weights(-1, {"a": 1})
