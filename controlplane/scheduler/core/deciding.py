"""One scheduling decision: a binding and the fleet's snapshots in, clusters and replicas out.

``schedule(request, clusters, reservations=..., now=..., cache=...)`` runs, for each affinity term
of the placement in order (``clusterAffinities`` fallback: the next term only when the
current one cannot hold the workload), the filter plugins, the score plugins, the spread
constraints and then the division the placement asks for (``policies.division``):

* **Duplicated** — every feasible cluster runs all replicas, but only clusters where all
  of them fit. Karmada's Duplicated ignores capacity and lets a GPU job wait forever on a
  full cluster; gpufed deliberately does not copy that.
* **Divided** — static weights (Webster), dynamic weights by available replicas,
  Aggregated (fewest clusters), or **TieredOverflow** (tier, then price order; spill the
  rest; shrink the most expensive first). Capacity comes from the estimator; replicas
  that fit nowhere are ``unplaced`` and the condition says Unschedulable. A workload scaled
  to zero stays where it was (or goes to the best cluster).
* **A kind without replicas** (``has_replicas`` False: ConfigMap, Service, a CRD without a
  scale subresource) — the whole object goes to every feasible cluster, whatever the division.
* **Gangs** — all pods in one cluster, whatever the division mode: the best feasible one
  by tier (``tieredOverflow.tiers`` when listed: a cluster matching none is not used),
  price, then score; a gang already running whole in a cluster stays (when its size is
  unchanged and the cluster can still run its pods). Otherwise nothing is placed.
* **Alternative GPU shapes** — per cluster the first shape that fits (the workload's own
  request first); clusters that got an alternative appear in ``ScheduleResult.shapes``.
* **Steering** — under TieredOverflow unless ``tieredOverflow.scarcitySteering`` (or
  ``scarcityAware``) is false, a cluster that gets the first replicas of a replica accepting
  several GPU models may be told to prefer nodes without the models constrained demand needs
  (``ScheduleResult.steering``, :mod:`~controlplane.scheduler.core.steering`).
* **Packing hints** — with ``tieredOverflow.packingHints``, a cluster that gets the first replicas
  of a replica smaller than its nodes may be told to prefer the nodes already running GPU work
  (``ScheduleResult.packing``, :mod:`~controlplane.scheduler.core.packhints`).

The result records, per cluster, why it was chosen or not. Pure and deterministic given the
scheduler cache's recent demand: clusters are taken in name order; ties of tier and price of
tiered overflow and gangs are broken by fragmentation and scarcity
(:mod:`~controlplane.scheduler.core.tiebreak`), other ties by name.

**Only the verdicts a decision needs.** Tiered overflow, and a gang with nothing to break a
tie of tier and price, judge GPU feasibility cluster by cluster in (tier, price, name) order
(each cluster's tier and cheapest listed price bound its place from below, so the order is
known before the verdicts) and stop where the replicas run out
(:mod:`~controlplane.scheduler.core.verdict_walk`). The other clusters' verdicts
only feed the explanation: they are worked out when it is first read, against the
reservations as they stood at the decision (``Reservations.checkpoint``), so it says exactly
what an eager decision would have. Any other decision (or one that leaves replicas unplaced)
judges every cluster. :func:`reserve_decision` records a decision in :class:`Reservations` so the next
binding does not take the same capacity.

This module runs the decision; the division lives in :mod:`~controlplane.scheduler.core.dividing`,
and the result, its condition and its explanation in :mod:`~controlplane.scheduler.core.outcome`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter

from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.dividing import best_cluster, cluster_tiers, divide
from controlplane.scheduler.core.explanation import only_placement_rejections, summarize_rejections
from controlplane.scheduler.core.framework import (
    BindingRequest,
    CycleState,
    DeferrableFilterPlugin,
    Profile,
    deferrable,
    run_filters,
    run_filters_deferring,
    run_scorers,
)
from controlplane.scheduler.core.outcome import (
    ScheduledCondition,
    ScheduleResult,
    Scores,
    capacity_of,
    decision_result,
    no_scores,
    scheduled,
)
from controlplane.scheduler.core.plugins import DEFAULT_PROFILE
from controlplane.scheduler.core.reservations import Demand, Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from controlplane.scheduler.core.tiebreak import observe
from controlplane.scheduler.core.verdict_walk import VerdictWalk
from policies.affinity import select_by_spread_constraints
from policies.models import ClusterAffinityTerm, DivisionStrategy, Placement

_NAME = attrgetter("name")


def schedule(
    binding: BindingRequest,
    clusters: Sequence[ClusterSnapshot],
    *,
    reservations: Reservations | None = None,
    now: datetime,
    profile: Profile = DEFAULT_PROFILE,
    cache: SchedulerCache | None = None,
) -> ScheduleResult:
    """Decide where ``binding``'s replicas go. See the module docstring for the rules.

    ``cache``: the scheduler's cache (memos shared by its decisions); None decides with a fresh one.
    """
    if cache is None:
        cache = SchedulerCache()
    observe(binding, cache)
    ordered = sorted(clusters, key=_NAME)
    placement = binding.placement
    terms = _affinity_terms(placement, cache)
    named = bool(placement.cluster_affinities)
    start = 0
    if named and binding.previous_affinity_name:
        start = next((i for i, t in enumerate(terms) if t.affinity_name == binding.previous_affinity_name), 0)
    best: ScheduleResult | None = None
    for term in terms[start:]:
        state = CycleState(
            request=binding, term=term, reservations=reservations, now=now, cache=cache, fleet_clusters=ordered
        )
        result = _schedule_term(state, ordered, profile, affinity_name=term.affinity_name if named else None)
        if result.condition.status:
            return result
        if best is None or result.placed > best.placed:
            best = result
    assert best is not None  # affinity_terms() always yields at least one term
    return best


def _affinity_terms(placement: Placement, cache: SchedulerCache) -> list[ClusterAffinityTerm]:
    """``placement.affinity_terms()``, the same objects for the same placement object: bindings of
    one policy share them, and the per-term memos (``placement_key``) then hit by identity.
    (Placements are not changed in place once scheduled with; gpufed copies them to change them.)"""
    found = cache.affinity_terms.get(id(placement))
    if found is not None and found[0] is placement:
        return found[1]
    terms = placement.affinity_terms()
    cache.affinity_terms.remember(id(placement), (placement, terms))
    return terms


def _schedule_term(
    state: CycleState, clusters: Sequence[ClusterSnapshot], profile: Profile, *, affinity_name: str | None
) -> ScheduleResult:
    request = state.request
    plugin = _deferring(state, profile)
    if plugin is not None:
        feasible, rejected, deferred = run_filters_deferring(profile, state, clusters)
        walk = VerdictWalk(state, plugin, clusters, feasible, rejected, deferred)
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
        else no_scores
    )
    division_reasons: dict[str, str] = {}

    spread = request.placement.spread_constraints
    if feasible and spread:
        available = {c.name: capacity_of(state, c.name) + request.previous.get(c.name, 0) for c in feasible}
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
        return decision_result(
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

    division, more_reasons = divide(state, feasible, scores)
    division_reasons.update(division.reasons)
    assignments = dict(division.assignments)
    if not request.has_replicas:
        # A kind without replicas (ConfigMap, Service, a CRD without a scale subresource) goes whole to
        # every feasible cluster, whatever the division, as Karmada's assignReplicas does (a listed
        # tieredOverflow.tiers still leaves out the clusters matching none).
        tiers, _ = cluster_tiers(state, feasible)
        assignments = {c.name: 0 for c in feasible if c.name in tiers}
    elif not assignments and request.replicas == 0 and request.strategy is not DivisionStrategy.DUPLICATED:
        # Nothing to run, but the workload object still belongs somewhere (scaled to zero).
        tiers, _ = cluster_tiers(state, feasible)
        previous_names = [c.name for c in feasible if c.name in request.previous and c.name in tiers]
        if previous_names:
            assignments = {name: 0 for name in previous_names}
        else:
            best = best_cluster(state, feasible, scores, tiers=tiers)
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
    elif not request.has_replicas:
        condition = ScheduledCondition(
            True,
            ScheduledReason.SUCCESS,
            f"scheduled to {len(assignments)} cluster(s): a kind without replicas goes to every feasible cluster",
        )
    else:
        condition = scheduled(request.replicas, len(assignments))
    return decision_result(
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
