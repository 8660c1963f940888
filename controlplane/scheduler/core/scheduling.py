"""One scheduling decision: a binding and the fleet's snapshots in, clusters and replicas out.

``schedule(request, clusters, reservations=..., now=...)`` runs, for each affinity term
of the placement in order (``clusterAffinities`` fallback: the next term only when the
current one cannot hold the workload), the filter plugins, the score plugins, the spread
constraints and then the division the placement asks for (``policies.division``):

* **Duplicated** — every feasible cluster runs all replicas, but only clusters where all
  of them fit. Karmada's Duplicated ignores capacity and lets a GPU job wait forever on a
  full cluster; gpufed deliberately does not copy that.
* **Divided** — static weights (Webster), dynamic weights by available replicas,
  Aggregated (fewest clusters), or **TieredOverflow** (tier, then price order; spill the
  rest; shrink the most expensive first). Capacity comes from the estimator; replicas
  that fit nowhere are ``unplaced`` and the condition says Unschedulable.
* **Gangs** — all pods in one cluster, whatever the division mode: the best feasible one
  by tier, price, then score; a gang already running whole in a cluster stays (when its
  size is unchanged). Otherwise nothing is placed.
* **Alternative GPU shapes** — per cluster the first shape that fits (the workload's own
  request first); clusters that got an alternative appear in ``ScheduleResult.shapes``.

The result records, per cluster, why it was chosen or not. Pure and deterministic:
clusters are taken in name order, ties break by name. :func:`reserve_decision` records a
decision in :class:`Reservations` so the next binding does not take the same capacity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.explanation import (
    ClusterExplanation,
    only_placement_rejections,
    rejection_reasons,
    summarize_rejections,
)
from controlplane.scheduler.core.framework import (
    BindingRequest,
    CycleState,
    GpuShape,
    Profile,
    Status,
    run_filters,
    run_scorers,
)
from controlplane.scheduler.core.plugins import DEFAULT_PROFILE, cluster_price
from controlplane.scheduler.core.reservations import Demand, Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import select_by_spread_constraints
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


@dataclass(frozen=True, slots=True)
class ScheduledCondition:
    """The binding's ``Scheduled`` condition as decided (the controller stamps the times)."""

    status: bool
    reason: ScheduledReason
    message: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": "Scheduled",
            "status": "True" if self.status else "False",
            "reason": str(self.reason),
            "message": self.message,
        }


@dataclass(frozen=True)
class ScheduleResult:
    clusters: dict[str, int]
    """Cluster -> replicas (the new ``spec.clusters``)."""
    shapes: dict[str, dict[str, int]]
    """Cluster -> per-replica GPU request, only where an alternative GPU shape was chosen."""
    condition: ScheduledCondition
    affinity_name: str | None
    """The winning ``clusterAffinities`` term (None without ``clusterAffinities``)."""
    explanation: list[ClusterExplanation]
    unplaced: int
    requirements: dict[str, ReplicaRequirements] = field(default_factory=dict)
    """Per chosen cluster, the per-replica requirements with its GPU shape applied."""
    chosen_shapes: dict[str, GpuShape] = field(default_factory=dict)
    """Per chosen cluster where an alternative won, that alternative."""

    @property
    def placed(self) -> int:
        return sum(self.clusters.values())

    def target_clusters(self) -> list[dict[str, Any]]:
        """The ResourceBinding ``spec.clusters`` form."""
        return [{"name": name, "replicas": replicas} for name, replicas in sorted(self.clusters.items())]


def schedule(
    binding: BindingRequest,
    clusters: Sequence[ClusterSnapshot],
    *,
    reservations: Reservations | None = None,
    now: datetime,
    profile: Profile = DEFAULT_PROFILE,
) -> ScheduleResult:
    """Decide where ``binding``'s replicas go. See the module docstring for the rules."""
    ordered = sorted(clusters, key=lambda c: c.name)
    placement = binding.placement
    terms = placement.affinity_terms()
    named = bool(placement.cluster_affinities)
    start = 0
    if named and binding.previous_affinity_name:
        start = next((i for i, t in enumerate(terms) if t.affinity_name == binding.previous_affinity_name), 0)
    best: ScheduleResult | None = None
    for term in terms[start:]:
        state = CycleState(request=binding, term=term, reservations=reservations, now=now)
        result = _schedule_term(state, ordered, profile, affinity_name=term.affinity_name if named else None)
        if result.condition.status:
            return result
        if best is None or result.placed > best.placed:
            best = result
    assert best is not None  # affinity_terms() always yields at least one term
    return best


def _schedule_term(
    state: CycleState, clusters: Sequence[ClusterSnapshot], profile: Profile, *, affinity_name: str | None
) -> ScheduleResult:
    request = state.request
    feasible, rejected = run_filters(profile, state, clusters)
    # Scores decide only where the division has a free choice: a gang's one cluster, or where a
    # workload scaled to zero lives. Weighted, aggregated and tiered division follow their own
    # rules, so those decisions skip scoring (and their explanation carries no score).
    scores = run_scorers(profile, state, feasible) if request.gang or request.replicas == 0 else {}
    division_reasons: dict[str, str] = {}

    spread = request.placement.spread_constraints
    if feasible and spread:
        available = {c.name: _capacity(state, c.name) + request.previous.get(c.name, 0) for c in feasible}
        selection = select_by_spread_constraints([c.view for c in feasible], spread, available=available)
        if not selection.fits:
            division_reasons = {c.name: f"spreadConstraints: {selection.reason}" for c in feasible}
            feasible = []
        else:
            kept = set(selection.clusters)
            division_reasons = {
                c.name: "not selected by spreadConstraints (maxGroups)"
                for c in feasible
                if c.name not in kept
            }
            feasible = [c for c in feasible if c.name in kept]

    if not feasible:
        message = summarize_rejections(len(clusters), rejected)
        reason = (
            ScheduledReason.NO_CLUSTER_FIT
            if only_placement_rejections(rejected) and not division_reasons
            else ScheduledReason.UNSCHEDULABLE
        )
        if division_reasons:
            message = next(iter(division_reasons.values()))
        return _result(
            state,
            clusters,
            assignments={},
            unplaced=request.replicas,
            condition=ScheduledCondition(False, reason, message),
            rejected=rejected,
            scores=scores,
            division_reasons=division_reasons,
            affinity_name=affinity_name,
        )

    division = _divide(state, feasible, scores)
    division_reasons.update(division.reasons)
    assignments = dict(division.assignments)
    if not assignments and request.replicas == 0 and request.strategy is not DivisionStrategy.DUPLICATED:
        # Nothing to run, but the workload object still belongs somewhere (scaled to zero).
        previous_names = [c.name for c in feasible if c.name in request.previous]
        assignments = {name: 0 for name in previous_names} or {_best(state, feasible, scores).name: 0}
    elif request.strategy is DivisionStrategy.DUPLICATED and request.replicas == 0:
        assignments = {c.name: 0 for c in feasible}
    unplaced = division.unplaced
    if unplaced:
        message = (
            f"{unplaced} of {request.replicas} replicas do not fit in any cluster; "
            + summarize_rejections(len(clusters), rejected)
        )
        condition = ScheduledCondition(False, ScheduledReason.UNSCHEDULABLE, message)
    else:
        condition = ScheduledCondition(
            True,
            ScheduledReason.SUCCESS,
            f"scheduled {request.replicas} replica(s) to {len(assignments)} cluster(s)",
        )
    return _result(
        state,
        clusters,
        assignments=assignments,
        unplaced=unplaced,
        condition=condition,
        rejected=rejected,
        scores=scores,
        division_reasons=division_reasons,
        affinity_name=affinity_name,
    )


def _capacity(state: CycleState, name: str) -> int:
    feasibility = state.feasibility.get(name)
    return feasibility.available if feasibility else 0


def _best(
    state: CycleState, feasible: Sequence[ClusterSnapshot], scores: Mapping[str, float]
) -> ClusterSnapshot:
    """The best cluster for a whole workload: the one it runs in, else tier, price, score, name."""
    previous = [c for c in feasible if state.request.previous.get(c.name)]
    if len(previous) == 1:
        return previous[0]
    return min(feasible, key=lambda c: (c.tier, cluster_price(state, c), -scores.get(c.name, 0.0), c.name))


def _divide(
    state: CycleState, feasible: Sequence[ClusterSnapshot], scores: Mapping[str, float]
) -> DivisionResult:
    request = state.request
    replicas = request.replicas
    names = [c.name for c in feasible]
    current = {name: request.previous[name] for name in names if request.previous.get(name)}
    available = {name: _capacity(state, name) for name in names}
    if request.gang:
        best = _best(state, feasible, scores)
        others = {
            c.name: f"gang placed whole in {best.name} (better tier, price or score)"
            for c in feasible
            if c is not best
        }
        return DivisionResult(
            assignments={best.name: replicas} if replicas else {}, unplaced=0, reasons=others
        )
    strategy = request.strategy
    if strategy is DivisionStrategy.DUPLICATED:
        return divide_duplicated(replicas, names, available=available, current=current)
    if strategy is DivisionStrategy.DYNAMIC_WEIGHT:
        return divide_by_dynamic_weights(replicas, available, current=current)
    if strategy is DivisionStrategy.AGGREGATED:
        return divide_aggregated(replicas, available, current=current)
    replica_scheduling = request.placement.replica_scheduling
    if strategy is DivisionStrategy.TIERED_OVERFLOW:
        tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
        candidates: list[TierCandidate] = []
        untiered: dict[str, str] = {}
        for cluster in feasible:
            tier = tier_of(cluster.view, tiered)
            if tier is None:
                untiered[cluster.name] = "matches none of tieredOverflow.tiers"
                continue
            candidates.append(
                TierCandidate(
                    name=cluster.name,
                    available=available[cluster.name],
                    tier=tier,
                    price=cluster_price(state, cluster),
                )
            )
        result = divide_tiered_overflow(replicas, candidates, current=current)
        return DivisionResult(result.assignments, result.unplaced, {**untiered, **result.reasons})
    weight_list = None
    if replica_scheduling and replica_scheduling.weight_preference:
        weight_list = replica_scheduling.weight_preference.static_weight_list
    weights = resolve_static_weights([c.view for c in feasible], weight_list)
    return divide_by_static_weights(replicas, weights, available=available, current=current)


def _result(
    state: CycleState,
    clusters: Sequence[ClusterSnapshot],
    *,
    assignments: dict[str, int],
    unplaced: int,
    condition: ScheduledCondition,
    rejected: Mapping[str, Status],
    scores: Mapping[str, float],
    division_reasons: Mapping[str, str],
    affinity_name: str | None,
) -> ScheduleResult:
    request = state.request
    shapes: dict[str, dict[str, int]] = {}
    chosen_shapes: dict[str, GpuShape] = {}
    requirements: dict[str, ReplicaRequirements] = {}
    explanation: list[ClusterExplanation] = []
    for cluster in clusters:
        name = cluster.name
        status = rejected.get(name)
        feasibility = state.feasibility.get(name)
        chosen = name in assignments
        if chosen:
            requirements[name] = feasibility.requirements if feasibility else request.requirements
            if feasibility is not None and feasibility.shape is not None:
                shapes[name] = feasibility.shape.resource_map
                chosen_shapes[name] = feasibility.shape
        if status is not None:
            reasons = rejection_reasons(status)
        elif chosen:
            held = _capacity(state, name) + request.previous.get(name, 0)
            reasons = (f"holds {held} replica(s)" if not request.gang else "holds the whole gang",)
            if feasibility is not None and feasibility.shape is not None:
                reasons += (f"GPU shape {feasibility.shape.describe()} (alternative)",)
            if name in state.caps:
                reasons += ("takes no new replicas (cordoned or not Ready); keeps the ones it runs",)
        else:
            reasons = (division_reasons.get(name) or "feasible but not needed by the division",)
        explanation.append(
            ClusterExplanation(
                cluster=name,
                chosen=chosen,
                replicas=assignments.get(name, 0),
                reasons=reasons,
                score=scores.get(name),
                tier=cluster.tier,
                price=cluster_price(state, cluster)
                if status is None
                else cluster.view.price_per_gpu_hour(None),
            )
        )
    return ScheduleResult(
        clusters=assignments,
        shapes=shapes,
        condition=condition,
        affinity_name=affinity_name,
        explanation=explanation,
        unplaced=unplaced,
        requirements=requirements,
        chosen_shapes=chosen_shapes,
    )


def reserve_decision(
    reservations: Reservations, request: BindingRequest, result: ScheduleResult, *, now: datetime
) -> None:
    """Record ``result`` in ``reservations`` so the next decisions do not reuse its capacity."""
    if request.gang:
        for cluster in set(request.previous) - set(result.clusters):
            reservations.release(request.key, cluster=cluster)
        for cluster in result.clusters:
            if request.previous.get(cluster) == request.replicas:
                continue  # already running here; its reservation (if any) stays as it is
            shape = result.chosen_shapes.get(cluster)
            demands = [
                Demand(c.replicas, shape.apply(c.requirements) if shape else c.requirements)
                for c in request.gang_components()
            ]
            reservations.reserve(request.key, cluster, demands, now=now)
        return
    reservations.record_decision(
        request.key,
        previous=request.previous,
        decided=result.clusters,
        requirements=result.requirements,
        now=now,
    )
