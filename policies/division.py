"""Replica division: how many replicas each chosen cluster gets.

Pure functions; each returns a :class:`DivisionResult` with ``assignments`` (cluster ->
replicas, clusters with 0 left out) and ``unplaced`` (replicas no cluster could take), so a
shortfall is a value the scheduler can explain, never an exception.

Conventions shared by every function:

* ``available[c]`` is how many *more* replicas of this workload cluster ``c`` can hold beyond
  what it already runs for it (the estimator's answer over free capacity). A cluster's capacity
  for the workload is therefore ``current[c] + available[c]``.
* ``current`` is the binding's present assignment. Clusters in ``current`` that are not
  candidates any more are dropped (their replicas are placed again).
* Ties are broken by cluster name (after price, where a strategy says so), so equal inputs give
  equal outputs.

Strategies:

* :func:`divide_duplicated` — every cluster that can hold all replicas runs all of them.
* :func:`divide_by_static_weights` — Webster/Sainte-Laguë apportionment (highest averages with
  divisors 1, 3, 5, …): each next replica goes to the cluster with the highest
  ``weight / (2 * assigned + 1)``; ties go to the higher weight, then to the lower name.
  Webster is house-monotone, so adding a replica never takes one away from another cluster.
  A cluster stops receiving replicas at its capacity when ``available`` is given.
* :func:`divide_by_dynamic_weights` — Karmada's ``dynamicWeight: AvailableReplicas``: weights are
  the available replicas; each cluster gets ``floor(replicas * weight / sum)`` and the
  remainder goes one by one to the largest weights (ties: larger current assignment, then name),
  as Karmada's ``Dispenser.TakeByWeight`` does. Available 6:12:18 and 12 replicas gives 2:4:6.
  Stability (Karmada's ``dynamicScaleUp``/``dynamicScaleDown``): scaling up keeps every current
  assignment and divides only the extra replicas by availability; scaling down divides the new
  total using the current assignments as weights, so every cluster shrinks proportionally and
  none grows; an unchanged total keeps the assignment as it is.
* :func:`divide_aggregated` — Karmada's ``Aggregated``: as few clusters as possible. Clusters
  already in ``current`` come first, then by available replicas (most first); the shortest
  prefix that holds the replicas is chosen and the replicas are divided among it by
  availability. Clusters that tie — each alone holds the replicas still to place, or they
  have equal room — are taken cheapest first (``prices``, $ per GPU-hour), then roomiest, then
  by name, so a $0.35 cluster that holds the job wins over a $4.10 one. Scale-down is
  proportional, as for dynamic weights.
* :func:`divide_tiered_overflow` — gpufed's ``TieredOverflow``: fill clusters in
  (tier, price per GPU-hour, name) order, each up to its capacity; the remainder spills to the
  next. Scaling up keeps current assignments and places the extra replicas in that order;
  scaling down removes replicas from the most expensive end first (highest tier, highest
  price, last name) and leaves the rest where they are.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from policies.affinity import ClusterView, cluster_matches_affinity
from policies.models import StaticClusterWeight, TieredOverflow


@dataclass(frozen=True)
class DivisionResult:
    """Replicas per cluster (no zero entries) and the replicas that could not be placed."""

    assignments: Mapping[str, int]
    unplaced: int = 0
    reasons: Mapping[str, str] = field(default_factory=dict)
    """Per cluster, why it got nothing (only where it says more than "not needed")."""

    @property
    def placed(self) -> int:
        return sum(self.assignments.values())


def _result(assignments: Mapping[str, int], unplaced: int, reasons: Mapping[str, str] | None = None) -> DivisionResult:
    return DivisionResult(
        assignments={name: count for name, count in sorted(assignments.items()) if count > 0},
        unplaced=max(unplaced, 0),
        reasons=dict(reasons or {}),
    )


def _check_replicas(replicas: int) -> None:
    if replicas < 0:
        raise ValueError(f"replicas must be >= 0, got {replicas}")


# ---------------------------------------------------------------------------------------------
# Duplicated
# ---------------------------------------------------------------------------------------------


def divide_duplicated(
    replicas: int, clusters: Iterable[str], *, available: Mapping[str, int] | None = None,
    current: Mapping[str, int] | None = None,
) -> DivisionResult:
    """Every cluster runs all ``replicas``; with ``available``, only clusters that can hold them.

    ``unplaced`` is ``replicas`` when no cluster can run the workload, else 0.
    """
    _check_replicas(replicas)
    current = current or {}
    assignments: dict[str, int] = {}
    reasons: dict[str, str] = {}
    for name in clusters:
        capacity = None if available is None else available.get(name, 0) + current.get(name, 0)
        if capacity is not None and capacity < replicas:
            reasons[name] = f"can hold {capacity} of {replicas} replicas (Duplicated needs all of them)"
            continue
        assignments[name] = replicas
    unplaced = replicas if replicas and not assignments else 0
    return _result(assignments, unplaced, reasons)


# ---------------------------------------------------------------------------------------------
# Static weights (Webster / Sainte-Laguë)
# ---------------------------------------------------------------------------------------------


def resolve_static_weights(
    clusters: Sequence[ClusterView], weight_list: Sequence[StaticClusterWeight] | None
) -> dict[str, int]:
    """Per-cluster weights from ``staticWeightList`` as Karmada does.

    A cluster takes the highest weight among the entries whose ``targetCluster`` it matches and
    0 (no replicas) when it matches none. With no list, or when every weight comes out 0, every
    cluster weighs 1.
    """
    weights: dict[str, int] = {}
    for cluster in clusters:
        weight = 0
        for entry in weight_list or ():
            if cluster_matches_affinity(cluster, entry.target_cluster).fits:
                weight = max(weight, entry.weight)
        weights[cluster.name] = weight
    if not any(weights.values()):
        return {cluster.name: 1 for cluster in clusters}
    return weights


def divide_by_static_weights(
    replicas: int, weights: Mapping[str, int], *, available: Mapping[str, int] | None = None,
    current: Mapping[str, int] | None = None,
) -> DivisionResult:
    """Webster/Sainte-Laguë apportionment of ``replicas`` by ``weights`` (see the module docstring).

    Clusters with weight 0 get nothing. With ``available``, a cluster is full at
    ``current + available`` replicas and the next replica goes to the next-best cluster.
    """
    _check_replicas(replicas)
    current = current or {}
    seats = {name: 0 for name, weight in weights.items() if weight > 0}
    capacity = {
        name: (None if available is None else available.get(name, 0) + current.get(name, 0)) for name in seats
    }
    # Min-heap on (-quotient, -weight, name): highest quotient, then higher weight, then lower name.
    # A cluster with no seat yet has the whole weight as its quotient: an int, exact and cheap to
    # compare with the Fractions of later quotients.
    heap: list[tuple[Fraction | int, int, str]] = [
        (-weights[name], -weights[name], name) for name in seats if capacity[name] != 0
    ]
    heapq.heapify(heap)
    remaining = replicas
    while remaining and heap:
        _, negative_weight, name = heapq.heappop(heap)
        seats[name] += 1
        remaining -= 1
        limit = capacity[name]
        if limit is None or seats[name] < limit:
            heapq.heappush(heap, (-Fraction(-negative_weight, 2 * seats[name] + 1), negative_weight, name))
    reasons = {name: "staticWeightList gives it weight 0" for name, weight in weights.items() if weight <= 0}
    return _result(seats, remaining, reasons)


# ---------------------------------------------------------------------------------------------
# Dynamic weights and aggregation (Karmada's dynamic family)
# ---------------------------------------------------------------------------------------------


def take_by_weight(replicas: int, weights: Mapping[str, int], *, last: Mapping[str, int] | None = None) -> dict[str, int]:
    """Karmada's ``Dispenser.TakeByWeight``: floor shares, remainder to the largest weights.

    Order for the remainder: weight (largest first), then ``last`` replicas (largest first),
    then name. Returns every cluster with a positive weight (possibly 0 replicas).
    """
    last = last or {}
    order = sorted(
        (name for name, weight in weights.items() if weight > 0),
        key=lambda name: (-weights[name], -last.get(name, 0), name),
    )
    total = sum(weights[name] for name in order)
    if total == 0:
        return {}
    shares = {name: weights[name] * replicas // total for name in order}
    remain = replicas - sum(shares.values())
    for name in order:
        if remain == 0:
            break
        shares[name] += 1
        remain -= 1
    return shares


def _merge(*parts: Mapping[str, int]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for part in parts:
        for name, count in part.items():
            merged[name] = merged.get(name, 0) + count
    return merged


def _candidates_current(available: Mapping[str, int], current: Mapping[str, int] | None) -> dict[str, int]:
    return {name: count for name, count in (current or {}).items() if name in available and count > 0}


def _scale_down(replicas: int, current: Mapping[str, int]) -> DivisionResult:
    return _result(take_by_weight(replicas, current, last=current), 0)


def _from_current(
    replicas: int, available: Mapping[str, int], current: Mapping[str, int] | None
) -> DivisionResult | tuple[dict[str, int], int]:
    """The start of a division that keeps what runs: the result when nothing is to add (same count, or a
    scale-down), else the replicas kept per candidate and how many are still to place."""
    _check_replicas(replicas)
    kept = _candidates_current(available, current)
    assigned = sum(kept.values())
    if replicas == assigned:
        return _result(kept, 0)
    if replicas < assigned:
        return _scale_down(replicas, kept)
    return kept, replicas - assigned


def _dispense(replicas: int, weights: Mapping[str, int], *, last: Mapping[str, int]) -> dict[str, int]:
    """:func:`take_by_weight` without its zero entries, for many clusters and few replicas.

    At most ``replicas`` clusters get a floor share of one or more (their weights would sum past
    the total otherwise), and the remainder goes to the ``remain`` first clusters in (weight,
    ``last``, name) order: every cluster that gets anything weighs at least the ``replicas``-th
    largest weight, so only those are looked at, and only the ones tied for the remainder sorted.
    """
    values = weights.values()
    positive = weights if min(values, default=1) > 0 else {n: w for n, w in weights.items() if w > 0}
    total = sum(positive.values())
    if not total or not replicas:
        return {}
    ranked = sorted(positive.values(), reverse=True)
    cut = ranked[min(replicas, len(ranked)) - 1]
    heavy = [(name, weight) for name, weight in positive.items() if weight >= cut]
    shares = {name: share for name, weight in heavy if (share := weight * replicas // total)}
    remain = replicas - sum(shares.values())
    if remain:
        # Fewer than len(positive): the floors lose less than one replica per cluster.
        threshold = ranked[remain - 1]
        tied = sorted(
            (name for name, weight in heavy if weight >= threshold),
            key=lambda name: (-positive[name], -last.get(name, 0), name),
        )
        for name in tied[:remain]:
            shares[name] = shares.get(name, 0) + 1
    return shares


def divide_by_dynamic_weights(
    replicas: int, available: Mapping[str, int], *, current: Mapping[str, int] | None = None
) -> DivisionResult:
    """Divide by available replicas (Karmada ``dynamicWeight: AvailableReplicas``), capped by them.

    See the module docstring for scale-up/scale-down stability. Replicas beyond the total
    available are returned as ``unplaced``.
    """
    start = _from_current(replicas, available, current)
    if isinstance(start, DivisionResult):
        return start
    kept, extra = start
    if min(available.values(), default=1) > 0:  # the usual case: every candidate has room
        total_free = sum(available.values())
        reasons: dict[str, str] = {}
    else:
        total_free = sum(count for count in available.values() if count > 0)
        reasons = {name: "no available replicas" for name, count in available.items() if count <= 0 and name not in kept}
    placeable = min(extra, total_free)
    added = _dispense(placeable, available, last=kept)
    return _result(_merge(kept, added) if kept else added, extra - placeable, reasons)


def divide_aggregated(
    replicas: int,
    available: Mapping[str, int],
    *,
    current: Mapping[str, int] | None = None,
    prices: Mapping[str, float] | None = None,
) -> DivisionResult:
    """As few clusters as possible (Karmada ``Aggregated``); see the module docstring."""
    start = _from_current(replicas, available, current)
    if isinstance(start, DivisionResult):
        return start
    kept, extra = start
    chosen: dict[str, int] = {}
    total = 0
    for name in sorted(kept, key=lambda name: (-available[name], name)):
        if total >= extra:
            break
        if available[name] > 0:
            chosen[name] = available[name]
            total += available[name]
    price = prices or {}
    # Most room first (fewest clusters); equal room goes to the cheaper cluster, then the name.
    others = sorted(
        (name for name in available if name not in kept and available[name] > 0),
        key=lambda name: (-available[name], price.get(name, 0.0), name),
    )
    while total < extra and others:
        need = extra - total
        # Every cluster that alone holds the rest makes the same number of clusters: the
        # cheapest of them, then the roomiest, then the name.
        holders = [name for name in others if available[name] >= need]
        pick = min(holders, key=lambda name: (price.get(name, 0.0), -available[name], name)) if holders else others[0]
        others.remove(pick)
        chosen[pick] = available[pick]
        total += available[pick]
    placeable = min(extra, total)
    added = take_by_weight(placeable, chosen, last=kept)
    reasons = {name: "not needed: fewer clusters hold the replicas" for name in available if name not in chosen and name not in kept}
    return _result(_merge(kept, added), extra - placeable, reasons)


# ---------------------------------------------------------------------------------------------
# Tiered overflow
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TierCandidate:
    """One cluster as tiered overflow sees it."""

    name: str
    available: int
    tier: int = 0
    price: float = 0.0
    rank: int = 0
    """Order among clusters of equal tier and price (lower first; the scheduler's tie-break), then name."""

    @property
    def order_key(self) -> tuple[int, float, int, str]:
        return (self.tier, self.price, self.rank, self.name)


def tier_of(cluster: ClusterView, tiered: TieredOverflow | None) -> int | None:
    """The cluster's tier: the index of the first listed tier it matches, else its own tier.

    With ``tieredOverflow.tiers`` listed, a cluster matching none of them has no tier (``None``)
    and is not used.
    """
    if tiered is None or not tiered.tiers:
        return cluster.tier
    for index, tier in enumerate(tiered.tiers):
        if cluster_matches_affinity(cluster, tier.cluster_affinity).fits:
            return index
    return None


def tier_candidates(
    clusters: Sequence[ClusterView],
    available: Mapping[str, int],
    *,
    tiered: TieredOverflow | None = None,
    gpu_product: str | None = None,
) -> list[TierCandidate]:
    """Build :class:`TierCandidate` rows (tier, price of ``gpu_product``) for the given clusters."""
    rows: list[TierCandidate] = []
    for cluster in clusters:
        tier = tier_of(cluster, tiered)
        if tier is None:
            continue
        rows.append(
            TierCandidate(
                name=cluster.name,
                available=available.get(cluster.name, 0),
                tier=tier,
                price=cluster.price_per_gpu_hour(gpu_product),
            )
        )
    return sorted(rows, key=lambda row: row.order_key)


def divide_tiered_overflow(
    replicas: int, candidates: Sequence[TierCandidate], *, current: Mapping[str, int] | None = None
) -> DivisionResult:
    """Fill cheapest tier first, overflow to the next, shrink the most expensive first."""
    _check_replicas(replicas)
    ordered = sorted(candidates, key=lambda row: row.order_key)
    names = {row.name for row in ordered}
    assignment = {name: count for name, count in (current or {}).items() if name in names and count > 0}
    assigned = sum(assignment.values())
    if replicas < assigned:
        surplus = assigned - replicas
        for row in reversed(ordered):
            if surplus == 0:
                break
            take = min(surplus, assignment.get(row.name, 0))
            if take:
                assignment[row.name] -= take
                surplus -= take
        return _result(assignment, 0)
    extra = replicas - assigned
    reasons: dict[str, str] = {}
    for row in ordered:
        if extra == 0:
            reasons.setdefault(row.name, f"not needed: cheaper tiers hold the replicas (tier {row.tier})")
            continue
        take = min(extra, max(row.available, 0))
        if take:
            assignment[row.name] = assignment.get(row.name, 0) + take
            extra -= take
        elif row.name not in assignment:
            reasons[row.name] = "no available replicas"
    for name in assignment:
        reasons.pop(name, None)
    return _result(assignment, extra, reasons)
