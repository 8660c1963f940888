"""Which of several clusters tied on tier and price takes a replica: fragmentation and scarcity.

Tiered overflow fills clusters in (tier, price) order and a gang goes to the best tier and
price; what that order leaves open is decided here, never by the cluster's name alone:

1. whether some node of the cluster hosts the replica as the report shows it (those that do
   first: the estimate of the others relies on what the report does not show);
2. **cost**: the GPUs the replica leaves unusable or takes from others, lowest first, the sum of
   * *fragmentation*: how much the cluster's expected unusable GPU capacity for the recent demand
     mix grows when the replica lands where it grows least (FGD lifted to clusters,
     :mod:`~controlplane.scheduler.core.clusterfit`), in GPUs;
   * *scarcity* (unless ``tieredOverflow.scarcityAware: false``): the GPUs of recent demand that
     accepts only this cluster's GPU models the replica would take, weighed by that demand
     against the fleet's free GPUs of those models; only when the tied clusters differ in the
     GPU models they have free (otherwise constrained demand can go to any of them alike);
   * *node shapes* (unless ``tieredOverflow.nodeShapeScarcity`` or ``scarcityAware`` is false):
     the GPUs of recent demand that only some tied clusters' nodes can hold (by CPU, memory,
     GPUs) the replica would take a node from, when it lands on the node where it takes least,
     weighed by that demand's arrivals against the fleet's nodes hosting it
     (:mod:`~controlplane.scheduler.core.shapescarcity`); only for a replica every tied
     cluster's nodes could hold, and only the nodes its node selector, required node affinity
     and tolerations let it on count. For a cluster whose member reports a spreading node scoring
     (``LeastAllocated``, kube's default) the node is the one that scoring picks, the emptiest
     hosting the replica, not the one where it takes least (unless
     ``tieredOverflow.nodeShapesByMemberScoring: false``): such a member puts an 8-GPU replica
     on the node of most CPU, the rare large node the cost is there to keep;
3. for a share of one GPU between clusters whose members all pack by themselves
   (``MostAllocated``), while shares are most of the recent demand, the fewest free GPU thousandths
   a node keeps once it hosts the share (:mod:`~controlplane.scheduler.core.sharefit`; unless
   ``tieredOverflow.shareFitTies: false``);
4. the fewest free GPUs the replica accepts (it packs: the clusters with more stay whole for
   larger replicas, as best-fit does among nodes);
5. only when everything else is equal, the name (the order must be total).

A tie of many clusters compares its first :data:`TIE_LIMIT` by name (the others come after
them, in name order), so that a decision in a large fleet of equal clusters stays cheap.

The demand is learned online from the arrivals (:func:`observe`, ``SchedulerCache.demand``).
:func:`rank` records in ``CycleState.tie_reasons`` what decided, for ``gpufed explain``. No I/O.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from controlplane.apis.cluster_v1alpha1 import SPREADING_SCORINGS, NodeScoring
from controlplane.apis.fragmentation import GPU_MILLI, TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core import shapescarcity
from controlplane.scheduler.core.cache import BoundedMemo, FleetFree, SchedulerCache
from controlplane.scheduler.core.clusterfit import (
    NodeRow,
    fragmentation_growth,
    free_by_model,
    node_rows,
    scarcity,
    summed,
    task_of,
)
from controlplane.scheduler.core.demand import Need
from controlplane.scheduler.core.framework import BindingRequest, CycleState
from controlplane.scheduler.core.pricebands import band_percent
from controlplane.scheduler.core.sharefit import share_fit_wanted, tightest_left
from controlplane.scheduler.core.snapshot import ClusterSnapshot, fleet_key
from policies.models import TieredOverflow

K = TypeVar("K")
R = TypeVar("R")
T = TypeVar("T")

#: Clusters of one tie compared: the first by name (a decision stays cheap in a large fleet of
#: equal clusters); the rest of the tie follows them in name order.
TIE_LIMIT: Final = 4
#: Costs closer than this (GPUs) are equal.
EPSILON: Final = 1e-6
#: Distinct nodes remembered per (mix version, task) and per (replica, constrained needs).
ROW_MEMO: Final = 65_536
#: Whether ties weigh node-shape scarcity when the policy does not say (``tieredOverflow.nodeShapeScarcity``).
NODE_SHAPES_DEFAULT: Final = True
#: Whether a spreading member's node-shape cost is taken where it puts the replica when the policy
#: does not say (``tieredOverflow.nodeShapesByMemberScoring``).
NODE_SHAPES_BY_SCORING_DEFAULT: Final = True
#: :attr:`TieCost.left` of a cluster no node of which hosts the share (after every other).
NO_NODE: Final = 1 << 62
#: The spreading scoring the explanation names (the one :data:`SPREADING_SCORINGS` holds).
LEAST_ALLOCATED: Final = NodeScoring.LEAST_ALLOCATED.value


def task_for(request: BindingRequest, cache: SchedulerCache) -> TaskShape | None:
    return cached_task(request.requirements, cache)


def cached_task(requirements: ReplicaRequirements, cache: SchedulerCache) -> TaskShape | None:
    """:func:`~controlplane.scheduler.core.clusterfit.task_of`, remembered in ``cache``."""
    if requirements in cache.tasks:
        return cache.tasks[requirements]
    return cache.tasks.remember(requirements, task_of(requirements))


def _row_memo(table: BoundedMemo[K, BoundedMemo[R, T]], key: K) -> BoundedMemo[R, T]:
    """The per-distinct-node memo ``table`` keeps under ``key`` (a fresh one when it is full)."""
    memo = table.get(key)
    if memo is None or len(memo) >= ROW_MEMO:
        memo = table.remember(key, BoundedMemo(ROW_MEMO))
    return memo


def growth_memo(cache: SchedulerCache, task: TaskShape) -> BoundedMemo[NodeRow, float | None]:
    """Per distinct node, its fragmentation growth for the current demand mix when it hosts ``task``
    (``SchedulerCache.growths``; read after ``cache.demand.mix()``, which may start a new version)."""
    return _row_memo(cache.growths, (cache.demand.version, task))


def memo_of(table: BoundedMemo[int, T], cluster: ClusterSnapshot, make: Callable[[ClusterSnapshot], T]) -> T:
    """``make(cluster)``, remembered in ``table`` per snapshot."""
    found = table.get(cluster.serial)
    if found is None:
        found = table.remember(cluster.serial, make(cluster))
    return found


def memory_of(requirements: ReplicaRequirements) -> int:
    """Memory (bytes) one replica asks for."""
    return next((value for key, value in requirements.resources if key == "memory"), 0)


def observe(request: BindingRequest, cache: SchedulerCache) -> None:
    """Record the binding's replica in the recent demand (bindings without replicas are not demand)."""
    if request.replicas <= 0:
        return
    task = task_for(request, cache)
    if task is not None:
        cache.demand.observe(request.key, task, memory_of(request.requirements))


def _tiered(state: CycleState) -> TieredOverflow | None:
    replica_scheduling = state.request.placement.replica_scheduling
    return replica_scheduling.tiered_overflow if replica_scheduling else None


def scarcity_aware(state: CycleState) -> bool:
    """Whether ties weigh GPU-model scarcity (``tieredOverflow.scarcityAware``, default true)."""
    tiered = _tiered(state)
    return tiered is None or tiered.scarcity_aware is not False


def node_shape_scarcity(state: CycleState) -> bool:
    """Whether ties weigh node-shape scarcity (``tieredOverflow.nodeShapeScarcity``, default
    :data:`NODE_SHAPES_DEFAULT`; off whenever the scarcity switch is)."""
    tiered = _tiered(state)
    asked = tiered.node_shape_scarcity if tiered is not None else None
    return (NODE_SHAPES_DEFAULT if asked is None else asked) and scarcity_aware(state)


def shapes_by_member_scoring(state: CycleState) -> bool:
    """Whether the node-shape cost of a cluster whose member reports a spreading scoring is taken at
    the node that scoring picks (``tieredOverflow.nodeShapesByMemberScoring``, default
    :data:`NODE_SHAPES_BY_SCORING_DEFAULT`)."""
    tiered = _tiered(state)
    asked = tiered.node_shapes_by_member_scoring if tiered is not None else None
    return NODE_SHAPES_BY_SCORING_DEFAULT if asked is None else asked


@dataclass(frozen=True, slots=True)
class TieCost:
    name: str
    fits: bool
    """Whether a node of the cluster hosts the replica (as :mod:`clusterfit` models it)."""
    fragmentation: float
    """GPUs of expected unusable capacity the replica adds."""
    scarcity: float
    """GPUs of constrained demand the replica takes."""
    free: float
    """Free GPUs the replica accepts."""
    shapes: float = 0.0
    """GPUs of recent demand needing a node shape the replica takes a node from."""
    spread: bool = False
    """Whether :attr:`shapes` was counted where the member's spreading scoring puts the replica."""
    left: int | None = None
    """For a share tied between packing members (:mod:`~controlplane.scheduler.core.sharefit`): the
    fewest free GPU thousandths a node of the cluster keeps once it hosts it (None: not compared, or
    no node hosts it)."""
    tightest: bool = False
    """Whether :attr:`left` was compared in this tie."""

    @property
    def key(self) -> tuple[bool, float, int, float, str]:
        cost = round((self.fragmentation + self.scarcity + self.shapes) / EPSILON) * EPSILON
        left = NO_NODE if self.left is None else self.left
        return (not self.fits, cost, left, self.free, self.name)


def free_gpus(cluster: ClusterSnapshot, cache: SchedulerCache) -> dict[str, float]:
    """Free GPUs per model of ``cluster``, remembered per snapshot."""
    return memo_of(cache.free_by_model, cluster, free_by_model)


def _rows(cluster: ClusterSnapshot, cache: SchedulerCache) -> tuple[NodeRow, ...]:
    return memo_of(cache.node_rows, cluster, node_rows)


def _fit(cluster: ClusterSnapshot, task: TaskShape, cache: SchedulerCache) -> tuple[bool, float, float]:
    """(hosts the task, least fragmentation growth in GPUs, free GPUs it accepts), remembered."""
    demand = cache.demand
    mix = demand.mix()
    key = (cluster.serial, demand.version, task)
    found = cache.tie_costs.get(key)
    if found is not None:
        return found
    growth = fragmentation_growth(_rows(cluster, cache), task, mix, growth_memo(cache, task))
    free = free_gpus(cluster, cache)
    accepted = sum(f for m, f in free.items() if task.accepts(m)) if task.models else sum(free.values())
    return cache.tie_costs.remember(key, (growth is not None, (growth or 0.0) / GPU_MILLI, accepted))


def fleet_free(state: CycleState, fallback: Sequence[ClusterSnapshot]) -> dict[str, float]:
    """Free GPUs per model of the decision's fleet (``fallback`` when it has none), remembered."""
    cache = state.cache
    fleet = state.fleet_clusters or fallback
    serials = state.fleet(fleet) if fleet is state.fleet_clusters else fleet_key(fleet)
    found = cache.fleet_free.get(serials)
    if found is None:
        found = cache.fleet_free.remember(serials, summed_free(cache, fleet, serials))
    return found


def summed_free(
    cache: SchedulerCache, fleet: Sequence[ClusterSnapshot], serials: tuple[int, ...]
) -> dict[str, float]:
    """:func:`~controlplane.scheduler.core.clusterfit.summed` of the fleet's :func:`free_gpus`.

    A fleet of as many clusters as the one last summed (``SchedulerCache.last_fleet_free``) starts
    from it: only the positions whose snapshot changed are read, and only their models are summed
    again, over every position in order, the additions a full sum makes (so the same floats).
    """
    last = cache.last_fleet_free
    if last is None or len(last.serials) != len(serials):
        frees = [free_gpus(c, cache) for c in fleet]
        total = summed(frees)
    else:
        frees = list(last.frees)
        total = dict(last.total)
        models: set[str] = set()
        for i, (was, now) in enumerate(zip(last.serials, serials, strict=True)):
            if was != now:
                models.update(frees[i])
                frees[i] = free_gpus(fleet[i], cache)
                models.update(frees[i])
        for model in models:
            held = [free[model] for free in frees if model in free]
            if held:
                total[model] = functools.reduce(operator.add, held)
            else:
                del total[model]
    cache.last_fleet_free = FleetFree(serials, frees, total)
    return total


def costs(state: CycleState, tied: Sequence[ClusterSnapshot]) -> list[TieCost]:
    """Each tied cluster's cost for this cycle's replica, best first (see the module)."""
    cache = state.cache
    task = task_for(state.request, cache)
    if task is None:
        out = [TieCost(c.name, True, 0.0, 0.0, sum(free_gpus(c, cache).values())) for c in tied]
        out.sort(key=lambda cost: cost.key)
        return out
    constrained = cache.demand.constrained() if scarcity_aware(state) and task.num_gpu else {}
    if constrained and len({frozenset(m for m, f in free_gpus(c, cache).items() if f > 0) for c in tied}) < 2:
        constrained = {}  # every tied cluster offers the same models: none deprives constrained demand
    fleet_models = fleet_free(state, tied) if constrained else {}
    fitting = [_fit(cluster, task, cache) for cluster in tied]
    replica = (task, memory_of(state.request.requirements))
    shapes = _shape_costs(state, replica, tied) if node_shape_scarcity(state) else {}
    by_scoring = bool(shapes) and shapes_by_member_scoring(state)
    tightest = share_fit_wanted(state, task, tied)
    requirements = state.request.requirements
    out = []
    for cluster, (fits, growth, accepted) in zip(tied, fitting, strict=True):
        taken = scarcity(task, free_gpus(cluster, cache), fleet_models, constrained) if fleet_models else 0.0
        shape_cost = shapes.get(cluster.name, 0.0)
        spread = bool(shape_cost) and spreads(cluster, by_scoring)
        left = tightest_left(cluster, requirements, task, replica[1], cache) if tightest else None
        out.append(TieCost(cluster.name, fits, growth, taken, accepted, shape_cost, spread, left, tightest))
    out.sort(key=lambda cost: cost.key)
    return out


def _shape_costs(state: CycleState, replica: Need, tied: Sequence[ClusterSnapshot]) -> dict[str, float]:
    """Per tied cluster, the GPUs of demand needing a node shape the replica deprives
    (:mod:`~controlplane.scheduler.core.shapescarcity`); empty when no need is constrained."""
    cache = state.cache
    demand = cache.demand
    key = (demand.version, tuple(memo_of(cache.capacities, c, shapescarcity.capacities) for c in tied))
    constrained = cache.constrained_needs.get(key)
    if constrained is None:
        constrained = cache.constrained_needs.remember(key, shapescarcity.constrained_needs(demand.needs(), key[1]))
    if not constrained or not shapescarcity.held_by_all(key[1], replica):
        return {}
    fleet = state.fleet_clusters or tied
    counts = [sum(_slots(cache, c, need) for c in fleet) for need in constrained]
    weight = shapescarcity.weights(constrained, demand.needs(), counts)
    by_scoring = shapes_by_member_scoring(state)
    requirements = state.request.requirements
    return {
        c.name: shapescarcity.cost(
            _lost_options(cache, c, replica, requirements, constrained, spreads(c, by_scoring)), weight
        )
        for c in tied
    }


def spreads(cluster: ClusterSnapshot, by_scoring: bool) -> bool:
    """Whether ``cluster``'s node-shape cost is taken where its member's scoring puts the replica
    (``by_scoring``: :func:`shapes_by_member_scoring`; the member reports a spreading scoring)."""
    return by_scoring and cluster.node_scoring in SPREADING_SCORINGS


def _slots(cache: SchedulerCache, cluster: ClusterSnapshot, need: Need) -> int:
    key = (cluster.serial, need)
    found = cache.slot_counts.get(key)
    if found is None:
        rows = memo_of(cache.shape_rows, cluster, shapescarcity.shape_rows)
        found = cache.slot_counts.remember(key, shapescarcity.slots(rows, need))
    return found


def _lost_options(
    cache: SchedulerCache,
    cluster: ClusterSnapshot,
    replica: Need,
    requirements: ReplicaRequirements,
    constrained: tuple[Need, ...],
    spreading: bool,
) -> frozenset[frozenset[Need]]:
    """The needs each node of ``cluster`` hosting ``replica`` stops hosting (distinct sets), of the
    nodes the replica's ``requirements`` let it on
    (:func:`~controlplane.scheduler.core.shapescarcity.eligible_rows`); with ``spreading``, only of
    those a least-allocated member picks
    (:func:`~controlplane.scheduler.core.shapescarcity.least_allocated_rows`)."""
    key = (cluster.serial, replica, requirements, constrained, spreading)
    found = cache.lost_options.get(key)
    if found is not None:
        return found
    memo = _row_memo(cache.lost_rows, (replica, constrained))
    options = set()
    if spreading:
        rows = shapescarcity.least_allocated_rows(cluster, replica, requirements)
    else:
        rows = shapescarcity.eligible_rows(cluster, requirements)
    for row in rows:
        if row in memo:
            lost = memo[row]
        else:
            lost = memo[row] = shapescarcity.lost_needs(row, replica, constrained)
        if lost is not None:
            options.add(lost)
    return cache.lost_options.remember(key, frozenset(options))


def rank(state: CycleState, tied: Sequence[ClusterSnapshot]) -> list[str]:
    """The names of ``tied`` best first; records the reasons in ``state.tie_reasons``."""
    ranked = costs(state, tied)
    if len(ranked) > 1:
        _explain(state, ranked)
    return [cost.name for cost in ranked]


def _explain(state: CycleState, ranked: Sequence[TieCost]) -> None:
    """Each cluster of the tie: what put the first one ahead of the second, and its own figures."""
    best, runner = ranked[0], ranked[1]
    if best.fits != runner.fits:
        why = "fit"
    elif abs(best.key[1] - runner.key[1]) > EPSILON:
        shares = {
            "fragmentation": runner.fragmentation - best.fragmentation,
            "scarcity": runner.scarcity - best.scarcity,
            "node-shape scarcity": runner.shapes - best.shapes,
        }
        why = max(shares, key=lambda name: shares[name])
    elif best.key[2] != runner.key[2]:
        why = "tightest node for the share"
    elif best.free != runner.free:
        why = "fewest free GPUs"
    else:
        why = "name (equal in fragmentation, scarcity and free GPUs)"
    reasons = state.tie_reasons
    tied_on = "tier and price band" if band_percent(state) else "tier and price"
    any_shapes = any(cost.shapes for cost in ranked)
    for index, cost in enumerate(ranked):
        at = f" where its {LEAST_ALLOCATED} scoring puts it" if cost.spread else ""
        shapes = f"node shapes {cost.shapes:.2f} GPUs{at}, " if any_shapes else ""
        shown = cost.tightest and cost.left is not None
        left = f"{cost.left} thousandths left on its tightest node, " if shown else ""
        figures = (
            f"fragmentation {cost.fragmentation:+.2f} GPUs, scarcity {cost.scarcity:.2f} GPUs, "
            f"{shapes}{left}{cost.free:g} free GPUs" if cost.fits else "no node hosts it as reported"
        )
        place = "first" if index == 0 else f"#{index + 1}"
        reasons[cost.name] = (
            f"{place} of {len(ranked)} clusters tied on {tied_on}, decided by {why} ({figures})"
        )
