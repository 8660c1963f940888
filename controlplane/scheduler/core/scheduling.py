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
  by tier (``tieredOverflow.tiers`` when listed: a cluster matching none is not used),
  price, then score; a gang already running whole in a cluster stays (when its size is
  unchanged and the cluster can still run its pods). Otherwise nothing is placed.
* **Alternative GPU shapes** — per cluster the first shape that fits (the workload's own
  request first); clusters that got an alternative appear in ``ScheduleResult.shapes``.

The result records, per cluster, why it was chosen or not. Pure and deterministic:
clusters are taken in name order, ties break by name. :func:`reserve_decision` records a
decision in :class:`Reservations` so the next binding does not take the same capacity.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
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


Explanation = list[ClusterExplanation]


class ScheduleResult:
    """What :func:`schedule` decided. Immutable.

    ``explanation`` (one entry per cluster looked at) is built when first read, from
    values fixed at decision time, so reading it later gives the same answer; decisions
    whose explanation is never read do not pay for it.
    """

    __slots__ = (
        "_explain",
        "_explanation",
        "affinity_name",
        "chosen_shapes",
        "clusters",
        "condition",
        "requirements",
        "shapes",
        "unplaced",
    )

    clusters: dict[str, int]
    """Cluster -> replicas (the new ``spec.clusters``)."""
    shapes: dict[str, dict[str, int]]
    """Cluster -> per-replica GPU request, only where an alternative GPU shape was chosen."""
    condition: ScheduledCondition
    affinity_name: str | None
    """The winning ``clusterAffinities`` term (None without ``clusterAffinities``)."""
    unplaced: int
    requirements: dict[str, ReplicaRequirements]
    """Per chosen cluster, the per-replica requirements with its GPU shape applied."""
    chosen_shapes: dict[str, GpuShape]
    """Per chosen cluster where an alternative won, that alternative."""
    _explanation: Explanation | None
    _explain: Callable[[], Explanation] | None

    def __init__(
        self,
        clusters: dict[str, int],
        shapes: dict[str, dict[str, int]],
        condition: ScheduledCondition,
        affinity_name: str | None,
        explanation: Explanation | None,
        unplaced: int,
        requirements: dict[str, ReplicaRequirements] | None = None,
        chosen_shapes: dict[str, GpuShape] | None = None,
        *,
        explain: Callable[[], Explanation] | None = None,
    ) -> None:
        """``explanation`` as a list, or None with ``explain`` building it on first read."""
        init = object.__setattr__
        init(self, "clusters", clusters)
        init(self, "shapes", shapes)
        init(self, "condition", condition)
        init(self, "affinity_name", affinity_name)
        init(self, "unplaced", unplaced)
        init(self, "requirements", {} if requirements is None else requirements)
        init(self, "chosen_shapes", {} if chosen_shapes is None else chosen_shapes)
        init(self, "_explanation", explanation if explanation is not None or explain is None else None)
        init(self, "_explain", None if explanation is not None else explain)
        if explanation is None and explain is None:
            init(self, "_explanation", [])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ScheduleResult is immutable (cannot set {name})")

    @property
    def explanation(self) -> Explanation:
        """Per cluster looked at, in name order: chosen or not, and why."""
        explanation: Explanation | None = self._explanation
        if explanation is None:
            explain = self._explain
            assert explain is not None
            explanation = explain()
            object.__setattr__(self, "_explanation", explanation)
            object.__setattr__(self, "_explain", None)
        return explanation

    @property
    def placed(self) -> int:
        return sum(self.clusters.values())

    def target_clusters(self) -> list[dict[str, Any]]:
        """The ResourceBinding ``spec.clusters`` form."""
        return [{"name": name, "replicas": replicas} for name, replicas in sorted(self.clusters.items())]

    def _fields(self) -> tuple[object, ...]:
        return (
            self.clusters,
            self.shapes,
            self.condition,
            self.affinity_name,
            self.explanation,
            self.unplaced,
            self.requirements,
            self.chosen_shapes,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScheduleResult):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable dicts inside, as the dataclass was

    def __repr__(self) -> str:
        return (
            f"ScheduleResult(clusters={self.clusters!r}, shapes={self.shapes!r}, condition={self.condition!r}, "
            f"affinity_name={self.affinity_name!r}, unplaced={self.unplaced!r}, "
            f"requirements={self.requirements!r}, chosen_shapes={self.chosen_shapes!r})"
        )


_NAME = attrgetter("name")


def schedule(
    binding: BindingRequest,
    clusters: Sequence[ClusterSnapshot],
    *,
    reservations: Reservations | None = None,
    now: datetime,
    profile: Profile = DEFAULT_PROFILE,
) -> ScheduleResult:
    """Decide where ``binding``'s replicas go. See the module docstring for the rules."""
    ordered = sorted(clusters, key=_NAME)
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
    # rules, so those decisions skip scoring (and their explanation carries no score). Even
    # then scores only break ties of tier and price, so they are worked out when first needed.
    scores: Scores = (
        functools.cache(functools.partial(run_scorers, profile, state, feasible))
        if request.gang or request.replicas == 0
        else _no_scores
    )
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

    division, more_reasons = _divide(state, feasible, scores)
    division_reasons.update(division.reasons)
    assignments = dict(division.assignments)
    if not assignments and request.replicas == 0 and request.strategy is not DivisionStrategy.DUPLICATED:
        # Nothing to run, but the workload object still belongs somewhere (scaled to zero).
        tiers, _ = _tiers(state, feasible)
        previous_names = [c.name for c in feasible if c.name in request.previous and c.name in tiers]
        if previous_names:
            assignments = {name: 0 for name in previous_names}
        else:
            best = _best(state, feasible, scores, tiers=tiers)
            assignments = {best.name: 0} if best is not None else {}
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
        more_reasons=more_reasons,
        affinity_name=affinity_name,
    )


def _capacity(state: CycleState, name: str) -> int:
    feasibility = state.feasibility.get(name)
    return feasibility.available if feasibility else 0


UNTIERED = "matches none of tieredOverflow.tiers"
"""Division reason of a cluster left out because the placement lists tiers and it matches none."""


def _tiers(state: CycleState, feasible: Sequence[ClusterSnapshot]) -> tuple[dict[str, int], dict[str, str]]:
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


def _best(
    state: CycleState,
    feasible: Sequence[ClusterSnapshot],
    scores: Scores,
    *,
    tiers: Mapping[str, int],
) -> ClusterSnapshot | None:
    """The best cluster for a whole workload among those with a tier in ``tiers``: the one it
    runs in, else tier, price, score, name (None when no cluster has a tier)."""
    candidates = [c for c in feasible if c.name in tiers]
    previous = [c for c in candidates if state.request.previous.get(c.name)]
    if len(previous) == 1:
        return previous[0]
    if not candidates:
        return None
    feasibility = state.feasibility
    keyed = [
        (tiers[c.name], found.price if (found := feasibility.get(c.name)) is not None else cluster_price(state, c), c)
        for c in candidates
    ]
    lowest = min((tier, price) for tier, price, _ in keyed)
    tied = [c for tier, price, c in keyed if (tier, price) == lowest]
    if len(tied) == 1:
        return tied[0]
    by_score = scores()
    return min(tied, key=lambda c: (-by_score.get(c.name, 0.0), c.name))


Scores = Callable[[], Mapping[str, float]]
"""Scores per feasible cluster, worked out when first called (then remembered)."""


def _no_scores() -> Mapping[str, float]:
    return {}


LazyReasons = Callable[[], Mapping[str, str]] | None
"""Division reasons worked out only when the explanation is read (None: there are none)."""


def _divide(
    state: CycleState, feasible: Sequence[ClusterSnapshot], scores: Scores
) -> tuple[DivisionResult, LazyReasons]:
    request = state.request
    replicas = request.replicas
    previous = request.previous
    current = {c.name: previous[c.name] for c in feasible if previous.get(c.name)} if previous else {}
    if request.gang:
        tiers, untiered = _tiers(state, feasible)
        best = _best(state, feasible, scores, tiers=tiers)
        if best is None:
            return DivisionResult(assignments={}, unplaced=replicas, reasons=untiered), None
        chosen = best

        def others() -> Mapping[str, str]:
            reason = f"gang placed whole in {chosen.name} (better tier, price or score)"
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
        return divide_aggregated(replicas, available, current=current), None
    replica_scheduling = request.placement.replica_scheduling
    weight_list = None
    if replica_scheduling and replica_scheduling.weight_preference:
        weight_list = replica_scheduling.weight_preference.static_weight_list
    weights = resolve_static_weights([c.view for c in feasible], weight_list)
    return divide_by_static_weights(replicas, weights, available=available, current=current), None


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
    replica_scheduling = request.placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    listed = tiered is not None and bool(tiered.tiers)
    feasibility = state.feasibility
    rows: list[tuple[int, float, str, int]] = []
    untiered: dict[str, str] = {}
    for cluster in feasible:
        tier = tier_of(cluster.view, tiered) if listed else cluster.tier
        if tier is None:
            untiered[cluster.name] = UNTIERED
            continue
        found = feasibility.get(cluster.name)
        if found is not None:
            rows.append((tier, found.price, cluster.name, found.available))
        else:
            rows.append((tier, cluster_price(state, cluster), cluster.name, 0))
    rows.sort()
    kept = {name: count for name, count in current.items() if count > 0}
    running = {row[2] for row in rows if row[2] in kept}
    extra = replicas - sum(kept[name] for name in running)
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
    candidates = [TierCandidate(name=name, available=free, tier=tier, price=price) for tier, price, name, free in rows]
    result = divide_tiered_overflow(replicas, candidates, current=current)
    division = DivisionResult(result.assignments, result.unplaced, {**untiered, **result.reasons})
    if not spare:
        return division, None

    def not_needed() -> Mapping[str, str]:
        # Nothing left to place: the division gives each of these its "not needed" reason.
        idle = [TierCandidate(name=name, available=0, tier=tier, price=price) for tier, price, name, _ in spare]
        return divide_tiered_overflow(0, idle).reasons

    return division, not_needed


def _result(
    state: CycleState,
    clusters: Sequence[ClusterSnapshot],
    *,
    assignments: dict[str, int],
    unplaced: int,
    condition: ScheduledCondition,
    rejected: Mapping[str, Status],
    scores: Scores,
    division_reasons: Mapping[str, str],
    affinity_name: str | None,
    more_reasons: LazyReasons = None,
) -> ScheduleResult:
    request = state.request
    feasibility_of = state.feasibility
    shapes: dict[str, dict[str, int]] = {}
    chosen_shapes: dict[str, GpuShape] = {}
    requirements: dict[str, ReplicaRequirements] = {}
    for name in sorted(assignments):
        feasibility = feasibility_of.get(name)
        requirements[name] = feasibility.requirements if feasibility else request.requirements
        if feasibility is not None and feasibility.shape is not None:
            shapes[name] = feasibility.shape.resource_map
            chosen_shapes[name] = feasibility.shape
    decided = dict(assignments)

    def explain() -> Explanation:
        reasons_of = {**division_reasons, **more_reasons()} if more_reasons is not None else division_reasons
        return _explanation(state, clusters, decided, rejected, scores(), reasons_of)

    return ScheduleResult(
        clusters=assignments,
        shapes=shapes,
        condition=condition,
        affinity_name=affinity_name,
        explanation=None,
        unplaced=unplaced,
        requirements=requirements,
        chosen_shapes=chosen_shapes,
        explain=explain,
    )


def _explanation(
    state: CycleState,
    clusters: Sequence[ClusterSnapshot],
    assignments: Mapping[str, int],
    rejected: Mapping[str, Status],
    scores: Mapping[str, float],
    division_reasons: Mapping[str, str],
) -> Explanation:
    request = state.request
    explanation: Explanation = []
    for cluster in clusters:
        name = cluster.name
        status = rejected.get(name)
        feasibility = state.feasibility.get(name)
        chosen = name in assignments
        reasons: tuple[str, ...]
        if status is not None:
            reasons = rejection_reasons(status)
        elif chosen:
            held = _capacity(state, name) + request.previous.get(name, 0)
            reasons = (f"holds {held} replica(s)" if not request.gang else "holds the whole gang",)
            if feasibility is not None and feasibility.shape is not None:
                reasons += (f"GPU shape {feasibility.shape.describe()} (alternative)",)
            if name in state.caps:
                reasons += (
                    state.cap_reasons.get(name)
                    or "takes no new replicas (cordoned or not Ready); keeps the ones it runs",
                )
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
    return explanation


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
