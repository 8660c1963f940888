"""Returns toward a policy's own preference, beyond tiered overflow's cheaper tiers (pure).

Tiered overflow ranks clusters by tier and price (:mod:`~controlplane.scheduler.core.returning`).
Other policies state a preference the placement can fall short of when capacity was missing
at the time of the decision, and which the scheduler, keeping running replicas where they
are, never meets on its own afterwards:

* **clusterAffinities** (Karmada's ordered affinity terms, any Divided division): a binding that
  fell over to a later term (``status.schedulerObservingAffinityName``) prefers the first term.
* **staticWeightList** (Weighted with static weights): the replicas divided in proportion to
  the weights; a cluster that was full got fewer and the others more.

Dynamic weights and Aggregated divide by the room there is and keep what runs, so within one
affinity term they state nothing a move could meet better; Duplicated runs every replica in
every cluster, so there is no count to move.

The preferred placement is the decision the policy takes now from its first affinity term,
with room judged exactly as in any decision (:func:`~controlplane.scheduler.core.deciding.schedule`
with ``previous_affinity_name`` cleared: replicas run in clusters of that term stay counted
where they run). Where it differs from what runs, :func:`preferred_move` picks one step toward
it: from the cluster that loses most to the one that gains most, at most ``surge`` replicas.
:func:`pinned_decision` writes a step down as a decision (the added replicas judged by the
filters, nothing else decided again), so the controller can surge and then shrink.

In: a :class:`~controlplane.scheduler.core.framework.BindingRequest` (``previous``: what runs),
the fleet's snapshots, reservations. Out: a :class:`PreferredMove` or why none; a
:class:`~controlplane.scheduler.core.outcome.ScheduleResult`. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from operator import attrgetter

from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.estimator import can_ever_run
from controlplane.scheduler.core.framework import BindingRequest, CycleState, Status, run_filters
from controlplane.scheduler.core.outcome import ScheduleResult, decision_result, no_scores, scheduled
from controlplane.scheduler.core.plugins import DEFAULT_PROFILE
from controlplane.scheduler.core.plugins.scores import price_for
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import cluster_matches_affinity
from policies.division import divide_by_static_weights, resolve_static_weights
from policies.models import ClusterAffinityTerm, DivisionStrategy, Placement

_NAME = attrgetter("name")


@dataclass(frozen=True)
class PreferredMove:
    """``replicas`` replicas go from ``source`` to ``target``, toward ``why`` (the preference)."""

    source: str
    target: str
    replicas: int
    why: str


def has_fallback_terms(placement: Placement) -> bool:
    """Whether the placement lists ordered ``clusterAffinities`` (two terms or more)."""
    return len(placement.cluster_affinities or ()) > 1


def fell_back(request: BindingRequest) -> bool:
    """Whether the binding runs under a later ``clusterAffinities`` term than the first."""
    terms = request.placement.cluster_affinities or []
    return has_fallback_terms(request.placement) and bool(request.previous_affinity_name) and (
        request.previous_affinity_name != terms[0].affinity_name
    )


def states_preference(request: BindingRequest) -> bool:
    """Whether the policy states a preference a move toward could meet (see the module docstring):
    static weights, or ordered affinity terms with a Divided division. Never for a gang (it moves
    whole, between runs) or a Duplicated workload."""
    if request.gang or request.strategy is DivisionStrategy.DUPLICATED:
        return False
    return request.strategy is DivisionStrategy.STATIC_WEIGHT or has_fallback_terms(request.placement)


def _term_index(terms: Sequence[ClusterAffinityTerm], snapshot: ClusterSnapshot) -> int | None:
    """The first term ``snapshot``'s cluster matches, or None."""
    return next((i for i, term in enumerate(terms) if cluster_matches_affinity(snapshot.view, term).fits), None)


def preference_unmet(
    request: BindingRequest,
    placed: Mapping[str, int],
    snapshots: Sequence[ClusterSnapshot],
    *,
    affinity_name: str | None,
) -> bool:
    """Whether ``placed`` (under ``affinity_name``) falls short of the policy's preference, ignoring
    room: a later affinity term than the first, or a division the static weights alone would not
    make (among the clusters the term admits that could ever run a replica). A cheap test that says which bindings a report of
    more room should look at again; :func:`preferred_move` judges the room."""
    if not states_preference(request) or not any(placed.values()):
        return False
    terms = request.placement.affinity_terms()
    if has_fallback_terms(request.placement) and affinity_name and affinity_name != terms[0].affinity_name:
        return True
    if request.strategy is not DivisionStrategy.STATIC_WEIGHT:
        return False
    term = next((t for t in terms if t.affinity_name == affinity_name), terms[0])
    admitted = [
        s.view
        for s in sorted(snapshots, key=_NAME)
        if cluster_matches_affinity(s.view, term).fits and (s.name in placed or can_ever_run(s, request.requirements))
    ]
    scheduling = request.placement.replica_scheduling
    weight_list = scheduling.weight_preference.static_weight_list if scheduling and scheduling.weight_preference else None
    ideal = divide_by_static_weights(request.replicas, resolve_static_weights(admitted, weight_list)).assignments
    return dict(ideal) != {name: n for name, n in placed.items() if n > 0}


def preferred_move(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    *,
    surge: int,
    reservations: Reservations | None,
    now: datetime,
    cache: SchedulerCache | None = None,
) -> PreferredMove | str:
    """One step from what runs (``request.previous``) toward the preferred placement, or why none.

    The source is the cluster that would lose most replicas (then the dearer, then the last
    name), the target the one that would gain most (then the cheaper, then the first name);
    the step moves as many as both differ by, at most ``surge``."""
    previous = {name: n for name, n in request.previous.items() if n > 0}
    probe = schedule(
        replace(request, previous_affinity_name=None), snapshots, reservations=reservations, now=now, cache=cache
    )
    if not probe.condition.status:
        return "the policy's preferred placement does not fit now"
    decided = probe.clusters
    gains = {name: n - previous.get(name, 0) for name, n in decided.items() if n > previous.get(name, 0)}
    losses = {name: n - decided.get(name, 0) for name, n in previous.items() if n > decided.get(name, 0)}
    if not gains or not losses:
        return "the placement meets the policy's preference"
    by_name = {s.name: s for s in snapshots}

    def price(name: str) -> float:
        snapshot = by_name.get(name)
        return price_for(snapshot, request.requirements, ()) if snapshot is not None else 0.0

    source = max(losses, key=lambda name: (losses[name], price(name), name))
    target = min(gains, key=lambda name: (-gains[name], price(name), name))
    count = min(losses[source], gains[target], max(1, surge))
    if has_fallback_terms(request.placement) and probe.affinity_name != request.previous_affinity_name:
        why = f"back to clusterAffinities term {probe.affinity_name}"
    elif request.strategy is DivisionStrategy.STATIC_WEIGHT:
        why = "toward the staticWeightList division"
    else:
        why = "toward the policy's preferred division"
    return PreferredMove(source=source, target=target, replicas=count, why=why)


def observed_term(placement: Placement, snapshots: Mapping[str, ClusterSnapshot], clusters: Mapping[str, int],
                  *, current: str | None) -> str | None:
    """The ``clusterAffinities`` term a binding running ``clusters`` observes: the latest term one of
    them needs (each cluster counts at the first term it matches), so a binding that came back
    whole to the first term observes it again. None without ``clusterAffinities``; ``current``
    when a cluster matches no term or is not reported."""
    if not placement.cluster_affinities:
        return None
    terms = placement.affinity_terms()
    latest = -1
    for name, n in clusters.items():
        snapshot = snapshots.get(name)
        index = _term_index(terms, snapshot) if snapshot is not None and n > 0 else None
        if n > 0 and index is None:
            return current
        latest = max(latest, index if index is not None else -1)
    return terms[latest].affinity_name if latest >= 0 else current


def pinned_decision(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    clusters: Mapping[str, int],
    *,
    why: str,
    reservations: Reservations | None,
    now: datetime,
    cache: SchedulerCache | None = None,
) -> ScheduleResult | None:
    """The decision that runs exactly ``clusters`` (one step of a move), or None when a cluster
    that gains replicas cannot take them now (each judged by every filter under the first
    affinity term it matches). Clusters that keep or lose replicas are not judged again: a step
    never takes away more than it says. ``why`` is the explanation of the clusters that keep theirs."""
    if cache is None:
        cache = SchedulerCache()
    ordered = sorted(snapshots, key=_NAME)
    by_name = {s.name: s for s in ordered}
    placement = request.placement
    terms = placement.affinity_terms()
    named = bool(placement.cluster_affinities)
    affinity_name = observed_term(placement, by_name, clusters, current=request.previous_affinity_name)
    # One filter pass per term the clusters of the step first match (usually one).
    wanted: dict[int, list[str]] = {}
    for name, n in clusters.items():
        snapshot = by_name.get(name)
        index = _term_index(terms, snapshot) if snapshot is not None else None
        if index is None and n > request.previous.get(name, 0):
            return None  # a cluster that gains replicas must be one the policy's terms allow
        if index is not None and n > 0:
            wanted.setdefault(index, []).append(name)
    main_index = next((i for i, t in enumerate(terms) if t.affinity_name == affinity_name), 0) if named else 0
    states: dict[int, CycleState] = {}
    rejected_by: dict[int, Mapping[str, Status]] = {}
    for index in sorted({main_index, *wanted}):
        state = CycleState(
            request=request, term=terms[index], reservations=reservations, now=now, cache=cache, fleet_clusters=ordered
        )
        _, rejected = run_filters(DEFAULT_PROFILE, state, ordered)
        states[index], rejected_by[index] = state, rejected
    main = states[main_index]
    for index, names in wanted.items():
        for name in names:
            found = states[index].feasibility.get(name)
            gain = clusters[name] - request.previous.get(name, 0)
            if gain > 0 and (found is None or name in states[index].caps or found.available < gain):
                return None
            if found is not None:
                main.feasibility[name] = found
    assignments = {name: n for name, n in sorted(clusters.items()) if n > 0}
    for name, n in assignments.items():
        if n <= request.previous.get(name, 0):
            main.caps.setdefault(name, n)
            main.cap_reasons.setdefault(name, why)
    rejected_main = {name: status for name, status in rejected_by[main_index].items() if name not in assignments}
    return decision_result(
        main,
        ordered,
        assignments=assignments,
        unplaced=0,
        condition=scheduled(sum(assignments.values()), len(assignments)),
        rejected=rejected_main,
        scores=no_scores,
        division_reasons={},
        affinity_name=affinity_name if named else None,
    )
