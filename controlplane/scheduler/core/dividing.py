"""How a decision divides replicas among the feasible clusters: tiers, the best whole-workload
cluster, and the division the placement asks for (``policies.division``).

In: a decision's :class:`~controlplane.scheduler.core.framework.CycleState` and its feasible
clusters. Out: a :class:`~policies.division.DivisionResult` and the division reasons worked
out only when the explanation is read. Tiered overflow is asked only about the clusters that
can matter (those filled before the replicas run out and those running the binding), with
the same outcome as the full division. No I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from controlplane.scheduler.core.framework import CycleState
from controlplane.scheduler.core.outcome import LazyReasons, Scores
from controlplane.scheduler.core.plugins import cluster_price
from controlplane.scheduler.core.pricebands import band_percent, band_price, banded, fleet_band_starts
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from controlplane.scheduler.core.tiebreak import TIE_LIMIT, rank
from policies.division import (
    DivisionResult,
    TierCandidate,
    divide_aggregated,
    divide_by_dynamic_weights,
    divide_by_static_weights,
    divide_duplicated,
    divide_tiered_overflow,
    resolve_static_weights,
    tier_of,
)
from policies.models import DivisionStrategy

Row = tuple[int, float, str, int]
"""(tier, price band, cluster, available): a cluster as tiered overflow orders it."""


@functools.lru_cache(maxsize=64)
def not_needed_reason(tier: int) -> str:
    """Tiered overflow's reason for a feasible cluster after the one where the replicas ran out."""
    reasons = divide_tiered_overflow(0, [TierCandidate(name="", available=0, tier=tier)]).reasons
    return reasons[""]


UNTIERED = "matches none of tieredOverflow.tiers"
"""Division reason of a cluster left out because the placement lists tiers and it matches none."""


def cluster_tiers(state: CycleState, feasible: Sequence[ClusterSnapshot]) -> tuple[dict[str, int], dict[str, str]]:
    """Each cluster's tier for this placement, and the reasons of those it does not use.

    ``tieredOverflow.tiers``, when listed, replace the clusters' own tiers, and a cluster
    matching none of them is not used (gangs and scaled-to-zero workloads included).
    """
    replica_scheduling = state.request.placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    if tiered is None or not tiered.tiers:
        return {c.name: c.tier for c in feasible}, {}
    tiers: dict[str, int] = {}
    untiered: dict[str, str] = {}
    for cluster in feasible:
        tier = tier_of(cluster.view, tiered)
        if tier is None:
            untiered[cluster.name] = UNTIERED
        else:
            tiers[cluster.name] = tier
    return tiers, untiered


def best_cluster(
    state: CycleState,
    feasible: Sequence[ClusterSnapshot],
    scores: Scores,
    *,
    tiers: Mapping[str, int],
) -> ClusterSnapshot | None:
    """The best cluster for a whole workload among those with a tier in ``tiers``: the one it
    runs in, else tier, price, score, then ``tiebreak`` (None when no cluster has a tier)."""
    candidates = [c for c in feasible if c.name in tiers]
    previous = [c for c in candidates if state.request.previous.get(c.name)]
    if len(previous) == 1:
        return previous[0]
    if not candidates:
        return None
    feasibility = state.feasibility
    keyed = [
        (
            tiers[c.name],
            band_price(
                state,
                found.price if (found := feasibility.get(c.name)) is not None else cluster_price(state, c),
                feasible,
            ),
            c,
        )
        for c in candidates
    ]
    lowest = min((tier, price) for tier, price, _ in keyed)
    tied = [c for tier, price, c in keyed if (tier, price) == lowest]
    if len(tied) == 1:
        return tied[0]
    by_score = scores()
    top = max(by_score.get(c.name, 0.0) for c in tied)
    tied = [c for c in tied if by_score.get(c.name, 0.0) == top]
    if len(tied) == 1:
        return tied[0]
    first = rank(state, sorted(tied, key=lambda c: c.name)[:TIE_LIMIT])[0]
    return next(c for c in tied if c.name == first)


def divide(
    state: CycleState, feasible: Sequence[ClusterSnapshot], scores: Scores
) -> tuple[DivisionResult, LazyReasons]:
    request = state.request
    replicas = request.replicas
    previous = request.previous
    current = {c.name: previous[c.name] for c in feasible if previous.get(c.name)} if previous else {}
    if request.gang:
        tiers, untiered = cluster_tiers(state, feasible)
        best = best_cluster(state, feasible, scores, tiers=tiers)
        if best is None:
            return DivisionResult(assignments={}, unplaced=replicas, reasons=untiered), None
        chosen = best
        stays = bool(previous.get(chosen.name))  # best_cluster keeps a gang where it runs

        def others() -> Mapping[str, str]:
            reason = (
                f"gang runs whole in {chosen.name} and stays there"
                if stays
                else f"gang placed whole in {chosen.name} (better tier, price or score)"
            )
            return {c.name: reason for c in feasible if c is not chosen and c.name not in untiered}

        return DivisionResult(assignments={best.name: replicas} if replicas else {}, unplaced=0, reasons=untiered), others
    strategy = request.strategy
    if strategy is DivisionStrategy.TIERED_OVERFLOW:
        return _divide_tiered(state, feasible, current)
    feasibility = state.feasibility
    available = {c.name: f.available if (f := feasibility.get(c.name)) else 0 for c in feasible}
    if strategy is DivisionStrategy.DUPLICATED:
        return divide_duplicated(replicas, list(available), available=available, current=current), None
    if strategy is DivisionStrategy.DYNAMIC_WEIGHT:
        return divide_by_dynamic_weights(replicas, available, current=current), None
    if strategy is DivisionStrategy.AGGREGATED:
        prices = {c.name: f.price for c in feasible if (f := feasibility.get(c.name)) is not None}
        return divide_aggregated(replicas, available, current=current, prices=prices), None
    replica_scheduling = request.placement.replica_scheduling
    weight_list = None
    if replica_scheduling and replica_scheduling.weight_preference:
        weight_list = replica_scheduling.weight_preference.static_weight_list
    weights = resolve_static_weights([c.view for c in feasible], weight_list)
    return divide_by_static_weights(replicas, weights, available=available, current=current), None


def tier_rows(state: CycleState, clusters: Sequence[ClusterSnapshot]) -> tuple[list[Row], dict[str, str]]:
    """Tiered overflow's rows ``(tier, price, name, available)`` for ``clusters`` (available 0
    for a cluster the GPU filter has not passed; the price as its band's start, ``pricebands``),
    and the clusters no listed tier takes."""
    replica_scheduling = state.request.placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    listed = tiered is not None and bool(tiered.tiers)
    feasibility = state.feasibility
    percent = band_percent(state)
    starts = fleet_band_starts(state, clusters, percent) if percent else ()
    rows: list[Row] = []
    untiered: dict[str, str] = {}
    for cluster in clusters:
        tier = tier_of(cluster.view, tiered) if listed else cluster.tier
        if tier is None:
            untiered[cluster.name] = UNTIERED
            continue
        found = feasibility.get(cluster.name)
        price = found.price if found is not None else cluster_price(state, cluster)
        if starts:
            price = banded(price, starts)
        rows.append((tier, price, cluster.name, found.available if found is not None else 0))
    return rows, untiered


def _break_ties(state: CycleState, rows: list[Row], feasible: Sequence[ClusterSnapshot], extra: int) -> list[Row]:
    """Sorted ``rows`` with the ties of (tier, price) that fill ``extra`` replicas in ``tiebreak``
    order (the first :data:`TIE_LIMIT` names of each, as the walk of ``verdict_walk`` ranks them;
    the rest of a tie, and the ties after those, keep name order)."""
    by_name = {c.name: c for c in feasible}
    out: list[Row] = []
    start = 0
    while start < len(rows):
        end = start + 1
        while end < len(rows) and rows[end][:2] == rows[start][:2]:
            end += 1
        group = rows[start:end]
        if extra > 0 and len(group) > 1:
            named = {row[2]: row for row in group[:TIE_LIMIT]}
            ranked = rank(state, [by_name[name] for name in named])
            group = [named[name] for name in ranked] + group[TIE_LIMIT:]
        for row in group:
            if extra > 0:
                extra -= min(extra, max(row[3], 0))
        out.extend(group)
        start = end
    return out


def _divide_tiered(
    state: CycleState, feasible: Sequence[ClusterSnapshot], current: Mapping[str, int]
) -> tuple[DivisionResult, LazyReasons]:
    """``divide_tiered_overflow`` over the clusters that can matter, with the same outcome.

    Filling in (tier, price, name) order stops at the cluster where the replicas run out;
    the clusters after it that run nothing get only "not needed". So the division is asked
    about the clusters up to that point and those running the binding, and the "not
    needed" reasons of the rest are asked of it only when the explanation is read.
    """
    request = state.request
    replicas = request.replicas
    rows, untiered = tier_rows(state, feasible)
    kept = {name: count for name, count in current.items() if count > 0}
    running = {row[2] for row in rows if row[2] in kept}
    extra = replicas - sum(kept[name] for name in running)
    rows = _break_ties(state, sorted(rows), feasible, extra)
    spare: list[tuple[int, float, str, int]] = []
    if extra >= 0:
        cut = len(rows)
        for index, row in enumerate(rows):
            if extra == 0:
                cut = index
                break
            extra -= min(extra, max(row[3], 0))
        if cut < len(rows):
            spare = [row for row in rows[cut:] if row[2] not in running]
            rows = rows[:cut] + [row for row in rows[cut:] if row[2] in running]
    else:  # scaling down touches only the clusters running the binding
        rows = [row for row in rows if row[2] in running]
    ranks = {row[2]: index for index, row in enumerate(rows)}
    candidates = [
        TierCandidate(name=name, available=free, tier=tier, price=price, rank=ranks[name])
        for tier, price, name, free in rows
    ]
    result = divide_tiered_overflow(replicas, candidates, current=current)
    division = DivisionResult(result.assignments, result.unplaced, {**untiered, **result.reasons})
    if not spare:
        return division, None

    def not_needed() -> Mapping[str, str]:
        # Nothing left to place: the division gives each of these its "not needed" reason.
        idle = [TierCandidate(name=name, available=0, tier=tier, price=price) for tier, price, name, _ in spare]
        return divide_tiered_overflow(0, idle).reasons

    return division, not_needed

