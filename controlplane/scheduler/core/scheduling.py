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
clusters are taken in name order, ties break by name.

**Only the verdicts a decision needs.** Tiered overflow, and a gang with nothing to break a
tie of tier and price, judge GPU feasibility cluster by cluster in (tier, price, name) order
(each cluster's tier and cheapest listed price bound its place from below, so the order is
known before the verdicts) and stop where the replicas run out. The other clusters' verdicts
only feed the explanation: they are worked out when it is first read, against the
reservations as they stood at the decision (``Reservations.checkpoint``), so it says exactly
what an eager decision would have. Any other decision (or one that leaves replicas unplaced)
judges every cluster. :func:`reserve_decision` records a
decision in :class:`Reservations` so the next binding does not take the same capacity.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.estimating import UNLIMITED
from controlplane.scheduler.core.explanation import (
    ClusterExplanation,
    cluster_explanation,
    only_placement_rejections,
    rejection_reasons,
    summarize_rejections,
)
from controlplane.scheduler.core.framework import (
    SUCCESS,
    BindingRequest,
    Code,
    CycleState,
    DeferrableFilterPlugin,
    GpuShape,
    Profile,
    Status,
    deferrable,
    run_filters,
    run_filters_deferring,
    run_scorers,
)
from controlplane.scheduler.core.plugins import DEFAULT_PROFILE, cluster_price
from controlplane.scheduler.core.reservations import Checkpoint, Demand, Reservations
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
from policies.models import ClusterAffinityTerm, DivisionStrategy, Placement, TieredOverflow


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
    terms = _affinity_terms(placement)
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


_TERMS: dict[int, tuple[Placement, list[ClusterAffinityTerm]]] = {}
"""id(placement) -> that placement and its affinity terms (the entry keeps the id from being reused)."""
_TERMS_LIMIT = 4096


def _affinity_terms(placement: Placement) -> list[ClusterAffinityTerm]:
    """``placement.affinity_terms()``, the same objects for the same placement object: bindings of
    one policy share them, and the per-term memos (``placement_key``) then hit by identity.
    (Placements are not changed in place once scheduled with; gpufed copies them to change them.)"""
    found = _TERMS.get(id(placement))
    if found is not None and found[0] is placement:
        return found[1]
    terms = placement.affinity_terms()
    if len(_TERMS) >= _TERMS_LIMIT:
        _TERMS.clear()
    _TERMS[id(placement)] = (placement, terms)
    return terms


def _schedule_term(
    state: CycleState, clusters: Sequence[ClusterSnapshot], profile: Profile, *, affinity_name: str | None
) -> ScheduleResult:
    request = state.request
    plugin = _deferring(state, profile)
    if plugin is not None:
        feasible, rejected, deferred = run_filters_deferring(profile, state, clusters)
        walk = _Walk(state, plugin, clusters, feasible, rejected, deferred)
        decided = walk.decide(affinity_name=affinity_name)
        if decided is not None:
            return decided
        feasible = walk.feasible()  # everything judged: decide as below
    else:
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


def _deferring(state: CycleState, profile: Profile) -> DeferrableFilterPlugin | None:
    """The profile's GPU feasibility filter when this decision needs only some of its verdicts.

    Tiered overflow fills clusters in (tier, price, name) order and stops where the replicas
    run out; a gang goes to the first feasible cluster in that order when nothing else can
    break the tie (no previous placement, the default scorers, no cluster taints, the
    clusters' own tiers). The rest of the verdicts are for the explanation only.
    """
    request = state.request
    if request.replicas <= 0 or request.placement.spread_constraints:
        return None
    if request.gang:
        replica_scheduling = request.placement.replica_scheduling
        tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
        if request.previous or profile is not DEFAULT_PROFILE or (tiered is not None and tiered.tiers):
            return None
    elif state.strategy is not DivisionStrategy.TIERED_OVERFLOW:
        return None
    return deferrable(profile)


Row = tuple[int, float, str, int]
"""(tier, price, cluster, available): a cluster as tiered overflow orders it."""
Bound = tuple[int, float, str]
"""(tier, lowest price, cluster): no cluster comes earlier in (tier, price, name) order than this."""


class _Order(NamedTuple):
    """The fleet in :data:`Bound` order, as :func:`_bound_order` remembers it."""

    serials: tuple[int, ...]
    tiered: TieredOverflow | None
    bounds: list[Bound | None]
    """Per position of the fleet, its bound (None: no tier)."""
    order: list[tuple[Bound, int]]
    tainted: bool


_ORDERS: dict[int, _Order] = {}
"""id(tieredOverflow) (0: the clusters' own tiers) -> the fleet's :data:`Bound` order. Holds no
snapshot, so it never keeps a replaced one alive."""
_ORDERS_LIMIT = 256


def _bound_order(
    fleet: Sequence[ClusterSnapshot], serials: tuple[int, ...], tiered: TieredOverflow | None
) -> tuple[list[tuple[Bound, int]], bool]:
    """The fleet's positions in order of the earliest place each cluster could take in (tier,
    price, name) order, whatever its verdict: its tier and its cheapest listed price (every price a
    binding pays there is one of those); and whether some cluster has taints.

    Remembered per fleet; a new report of a cluster rarely moves it (its tier and prices are in
    its spec), so a fleet that differs from the last one by reports is sorted again only then.
    """
    listed = tiered is not None and bool(tiered.tiers)
    key = id(tiered) if listed else 0
    found = _ORDERS.get(key)
    if found is not None and (found.tiered is tiered or not listed):
        if found.serials == serials:
            return found.order, found.tainted
        if len(found.serials) == len(serials):
            bounds = list(found.bounds)
            moved = False
            for index, (now, before) in enumerate(zip(serials, found.serials, strict=True)):
                if now != before:
                    bound = _bound(fleet[index], tiered if listed else None)
                    moved = moved or bound != bounds[index]
                    bounds[index] = bound
            if not moved:
                tainted = any(cluster.taints for cluster in fleet)
                _ORDERS[key] = found._replace(serials=serials, bounds=bounds, tainted=tainted)
                return found.order, tainted
    bounds = [_bound(cluster, tiered if listed else None) for cluster in fleet]
    order = sorted(((bound, index) for index, bound in enumerate(bounds) if bound is not None), key=_FIRST)
    tainted = any(cluster.taints for cluster in fleet)
    if len(_ORDERS) >= _ORDERS_LIMIT:
        _ORDERS.clear()
    _ORDERS[key] = _Order(serials, tiered if listed else None, bounds, order, tainted)
    return order, tainted


def _bound(cluster: ClusterSnapshot, tiered: TieredOverflow | None) -> Bound | None:
    tier = tier_of(cluster.view, tiered) if tiered is not None else cluster.tier
    if tier is None:
        return None
    return (tier, min(cluster.pricing.values(), default=0.0), cluster.name)


_FIRST = itemgetter(0)


class _Walk:
    """Judges the deferred clusters of one decision in (tier, price, name) order, as far as needed.

    ``decide`` returns the decision when the division is settled without the verdicts it did
    not ask for; those are worked out when the explanation is read, with the reservations as
    they were at the decision (a checkpoint), so the explanation is the one an eager decision
    gives. Otherwise (replicas left unplaced, no gang fits, ties to break) it judges every
    cluster and returns None, and the decision goes on as an eager one.
    """

    def __init__(
        self,
        state: CycleState,
        plugin: DeferrableFilterPlugin,
        clusters: Sequence[ClusterSnapshot],
        feasible: list[ClusterSnapshot],
        rejected: dict[str, Status],
        deferred: list[ClusterSnapshot],
    ) -> None:
        self.state = state
        self.plugin = plugin
        self.clusters = clusters
        self.running = feasible
        """Clusters running the binding that passed every filter (judged already)."""
        self.rejected = rejected
        self.pending: dict[str, ClusterSnapshot] = {c.name: c for c in deferred}
        """Deferred clusters not judged yet."""
        self.checkpoint: Checkpoint | None = None

    def _judge(self, cluster: ClusterSnapshot) -> bool:
        del self.pending[cluster.name]
        status = self.plugin.filter_at(self.state, cluster, self.checkpoint)
        if status is not SUCCESS and status.code is not Code.SUCCESS:
            self.rejected[cluster.name] = status
            return False
        return True

    def _judge_rest(self) -> None:
        if self.pending:
            rest = list(self.pending.values())
            self.pending.clear()
            self.rejected.update(self.plugin.filter_all_at(self.state, rest, self.checkpoint))

    def feasible(self) -> list[ClusterSnapshot]:
        """Every cluster passing every filter, in the order given (all judged first)."""
        self._judge_rest()
        passed = self.state.feasibility
        return [c for c in self.clusters if c.name in passed]

    def decide(self, *, affinity_name: str | None) -> ScheduleResult | None:
        state = self.state
        request = state.request
        replica_scheduling = request.placement.replica_scheduling
        tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
        listed = tiered is not None and bool(tiered.tiers)
        feasibility = state.feasibility
        rows, untiered = _tier_rows(state, self.running)
        order, tainted = _bound_order(self.clusters, state.fleet(self.clusters), tiered)
        if request.gang:
            if tainted:  # scores might break a tie of tier and price differently
                self._judge_rest()
                return None
            return self._gang(order, affinity_name=affinity_name)
        previous = request.previous
        kept = {name: count for name, count in previous.items() if count > 0}
        running = {row[2] for row in rows if row[2] in kept}
        extra = request.replicas - sum(kept[name] for name in running)
        if extra < 0:  # scaling down touches only the clusters running the binding
            emitted, spare = rows, list[Row]()
        else:
            emitted, spare, extra = self._fill(order, rows, running, extra)
            if extra:
                self._judge_rest()
                return None
        candidates = [TierCandidate(name=name, available=free, tier=tier, price=price) for tier, price, name, free in emitted]
        current = {c.name: previous[c.name] for c in self.running if previous.get(c.name)}
        result = divide_tiered_overflow(request.replicas, candidates, current=current)
        if result.unplaced:
            self._judge_rest()
            return None
        self._pin()
        reasons = {**untiered, **result.reasons}
        scaling_down = extra < 0

        def more_reasons() -> Mapping[str, str]:
            # The verdicts not asked for, as at the decision; the division would have called the
            # feasible ones "not needed" (or nothing when scaling down), or left them out untiered.
            fresh = list(self.pending.values())
            self._judge_rest()
            # (What ``divide_tiered_overflow(0, idle)`` says of each idle cluster, without building them.)
            out: dict[str, str] = {name: _not_needed(tier) for tier, _, name, _ in spare}
            for cluster in fresh:
                if cluster.name not in feasibility:
                    continue
                tier = tier_of(cluster.view, tiered) if listed else cluster.tier
                if tier is None:
                    out[cluster.name] = UNTIERED
                elif not scaling_down:
                    out[cluster.name] = _not_needed(tier)
            return out

        assignments = dict(result.assignments)
        condition = ScheduledCondition(
            True,
            ScheduledReason.SUCCESS,
            f"scheduled {request.replicas} replica(s) to {len(assignments)} cluster(s)",
        )
        return _result(
            state,
            self.clusters,
            assignments=assignments,
            unplaced=0,
            condition=condition,
            rejected=self.rejected,
            scores=_no_scores,
            division_reasons=reasons,
            more_reasons=more_reasons,
            affinity_name=affinity_name,
        )

    def _fill(
        self, order: Sequence[tuple[Bound, int]], rows: list[Row], running: set[str], extra: int
    ) -> tuple[list[Row], list[Row], int]:
        """Fill ``extra`` replicas in (tier, price, name) order, judging clusters only as far as that
        order needs: returns the rows the division needs (those filled before the replicas ran
        out and those running the binding), the judged rows after them, and what is left."""
        pending = self.pending
        clusters = self.clusters
        feasibility = self.state.feasibility
        heap = list(rows)
        heapq.heapify(heap)
        emitted: list[Row] = []
        position, end = 0, len(order)
        while extra:
            while position < end and (not heap or order[position][0] < heap[0][:3]):
                bound, index = order[position]
                cluster = clusters[index]
                position += 1
                if cluster.name in pending and self._judge(cluster):
                    found = feasibility[cluster.name]
                    heapq.heappush(heap, (bound[0], found.price, cluster.name, found.available))
            if not heap:
                break
            row = heapq.heappop(heap)
            emitted.append(row)
            extra -= min(extra, max(row[3], 0))
        spare = [row for row in heap if row[2] not in running]
        emitted.extend(row for row in heap if row[2] in running)
        return emitted, spare, extra

    def _gang(self, order: Sequence[tuple[Bound, int]], *, affinity_name: str | None) -> ScheduleResult | None:
        """The gang's cluster: the first feasible one in (tier, price, name) order. Every feasible
        cluster holds the whole gang and none runs it, so the default scores tie: the name decides."""
        state = self.state
        request = state.request
        pending = self.pending
        clusters = self.clusters
        feasibility = state.feasibility
        heap: list[Row] = []
        position, end = 0, len(order)
        while position < end and (not heap or order[position][0] < heap[0][:3]):
            bound, index = order[position]
            cluster = clusters[index]
            position += 1
            if cluster.name in pending and self._judge(cluster):
                found = feasibility[cluster.name]
                heapq.heappush(heap, (bound[0], found.price, cluster.name, found.available))
        if not heap:
            self._judge_rest()
            return None
        chosen = heap[0][2]
        self._pin()

        def scores() -> Mapping[str, float]:
            return run_scorers(DEFAULT_PROFILE, state, self.feasible())

        cached_scores = functools.cache(scores)

        def others() -> Mapping[str, str]:
            reason = f"gang placed whole in {chosen} (better tier, price or score)"
            return {c.name: reason for c in self.feasible() if c.name != chosen}

        condition = ScheduledCondition(
            True,
            ScheduledReason.SUCCESS,
            f"scheduled {request.replicas} replica(s) to 1 cluster(s)",
        )
        return _result(
            state,
            self.clusters,
            assignments={chosen: request.replicas},
            unplaced=0,
            condition=condition,
            rejected=self.rejected,
            scores=cached_scores,
            division_reasons={},
            more_reasons=others,
            affinity_name=affinity_name,
        )

    def _pin(self) -> None:
        """Fix the reservations the verdicts still pending are to be judged against: as now."""
        reservations = self.state.reservations
        if self.pending and reservations is not None:
            self.checkpoint = reservations.checkpoint()


@functools.lru_cache(maxsize=64)
def _not_needed(tier: int) -> str:
    """Tiered overflow's reason for a feasible cluster after the one where the replicas ran out."""
    reasons = divide_tiered_overflow(0, [TierCandidate(name="", available=0, tier=tier)]).reasons
    return reasons[""]


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
        prices = {c.name: f.price for c in feasible if (f := feasibility.get(c.name)) is not None}
        return divide_aggregated(replicas, available, current=current, prices=prices), None
    replica_scheduling = request.placement.replica_scheduling
    weight_list = None
    if replica_scheduling and replica_scheduling.weight_preference:
        weight_list = replica_scheduling.weight_preference.static_weight_list
    weights = resolve_static_weights([c.view for c in feasible], weight_list)
    return divide_by_static_weights(replicas, weights, available=available, current=current), None


def _tier_rows(state: CycleState, clusters: Iterable[ClusterSnapshot]) -> tuple[list[Row], dict[str, str]]:
    """Tiered overflow's rows ``(tier, price, name, available)`` for ``clusters`` (available 0
    for a cluster the GPU filter has not passed), and the clusters no listed tier takes."""
    replica_scheduling = state.request.placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    listed = tiered is not None and bool(tiered.tiers)
    feasibility = state.feasibility
    rows: list[Row] = []
    untiered: dict[str, str] = {}
    for cluster in clusters:
        tier = tier_of(cluster.view, tiered) if listed else cluster.tier
        if tier is None:
            untiered[cluster.name] = UNTIERED
            continue
        found = feasibility.get(cluster.name)
        if found is not None:
            rows.append((tier, found.price, cluster.name, found.available))
        else:
            rows.append((tier, cluster_price(state, cluster), cluster.name, 0))
    return rows, untiered


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
    rows, untiered = _tier_rows(state, feasible)
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
        if status is not None:
            # A rejected cluster's entry depends on the verdict and the cluster only, and verdicts
            # are reused by later decisions: so is the entry.
            memo = status.memo
            entry = memo.get(cluster.serial)
            if entry is None:
                entry = memo[cluster.serial] = ClusterExplanation(
                    cluster=name,
                    chosen=False,
                    reasons=rejection_reasons(status),
                    tier=cluster.tier,
                    price=cluster.view.price_per_gpu_hour(None),
                )
            explanation.append(entry)
            continue
        feasibility = state.feasibility.get(name)
        chosen = name in assignments
        reasons: tuple[str, ...]
        if chosen:
            reasons = (_holds(_capacity(state, name), request.previous.get(name, 0)) if not request.gang
                       else "holds the whole gang",)
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
            cluster_explanation(
                name,
                chosen=chosen,
                replicas=assignments.get(name, 0),
                reasons=reasons,
                score=scores.get(name),
                tier=cluster.tier,
                price=feasibility.price if feasibility is not None else cluster_price(state, cluster),
            )
        )
    return explanation


def _holds(capacity: int, running: int) -> str:
    """A chosen cluster's reason: how many replicas it can hold (a pod that requests nothing the
    estimator counts fits without limit, and says so rather than print the sentinel)."""
    if capacity >= UNLIMITED:
        return "holds any number of replicas (its pods request nothing that runs out)"
    return f"holds {capacity + running} replica(s)"


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
