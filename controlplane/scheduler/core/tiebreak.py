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
3. the fewest free GPUs the replica accepts (it packs: the clusters with more stay whole for
   larger replicas, as best-fit does among nodes);
4. only when everything else is equal, the name (the order must be total).

A tie of many clusters compares its first :data:`TIE_LIMIT` by name (the others come after
them, in name order), so that a decision in a large fleet of equal clusters stays cheap.

The demand is learned online from the arrivals (:func:`observe`, ``SchedulerCache.demand``).
:func:`rank` records in ``CycleState.tie_reasons`` what decided, for ``gpufed explain``. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from controlplane.apis.fragmentation import GPU_MILLI, TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import BoundedMemo, SchedulerCache
from controlplane.scheduler.core.clusterfit import (
    NodeRow,
    fragmentation_growth,
    free_by_model,
    node_rows,
    scarcity,
    summed,
    task_of,
)
from controlplane.scheduler.core.framework import BindingRequest, CycleState
from controlplane.scheduler.core.pricebands import band_percent
from controlplane.scheduler.core.snapshot import ClusterSnapshot, fleet_key

#: Clusters of one tie compared: the first by name (a decision stays cheap in a large fleet of
#: equal clusters); the rest of the tie follows them in name order.
TIE_LIMIT: Final = 4
#: Costs closer than this (GPUs) are equal.
EPSILON: Final = 1e-6
#: Distinct nodes remembered per (mix version, task).
ROW_MEMO: Final = 65_536


def task_for(request: BindingRequest, cache: SchedulerCache) -> TaskShape | None:
    return cached_task(request.requirements, cache)


def cached_task(requirements: ReplicaRequirements, cache: SchedulerCache) -> TaskShape | None:
    """:func:`~controlplane.scheduler.core.clusterfit.task_of`, remembered in ``cache``."""
    if requirements in cache.tasks:
        return cache.tasks[requirements]
    return cache.tasks.remember(requirements, task_of(requirements))


def observe(request: BindingRequest, cache: SchedulerCache) -> None:
    """Record the binding's replica in the recent demand (bindings without replicas are not demand)."""
    if request.replicas <= 0:
        return
    task = task_for(request, cache)
    if task is not None:
        cache.demand.observe(request.key, task)


def scarcity_aware(state: CycleState) -> bool:
    replica_scheduling = state.request.placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    return tiered is None or tiered.scarcity_aware is not False


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

    @property
    def key(self) -> tuple[bool, float, float, str]:
        cost = round((self.fragmentation + self.scarcity) / EPSILON) * EPSILON
        return (not self.fits, cost, self.free, self.name)


def free_gpus(cluster: ClusterSnapshot, cache: SchedulerCache) -> dict[str, float]:
    """Free GPUs per model of ``cluster``, remembered per snapshot."""
    found = cache.free_by_model.get(cluster.serial)
    if found is None:
        found = cache.free_by_model.remember(cluster.serial, free_by_model(cluster))
    return found


def _rows(cluster: ClusterSnapshot, cache: SchedulerCache) -> tuple[NodeRow, ...]:
    found = cache.node_rows.get(cluster.serial)
    if found is None:
        found = cache.node_rows.remember(cluster.serial, node_rows(cluster))
    return found


def _fit(cluster: ClusterSnapshot, task: TaskShape, cache: SchedulerCache) -> tuple[bool, float, float]:
    """(hosts the task, least fragmentation growth in GPUs, free GPUs it accepts), remembered."""
    demand = cache.demand
    mix = demand.mix()
    key = (cluster.serial, demand.version, task)
    found = cache.tie_costs.get(key)
    if found is not None:
        return found
    memo = cache.growths.get(key[1:])
    if memo is None or len(memo) >= ROW_MEMO:
        memo = cache.growths.remember(key[1:], BoundedMemo(ROW_MEMO))
    growth = fragmentation_growth(_rows(cluster, cache), task, mix, memo)
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
        found = cache.fleet_free.remember(serials, summed(free_gpus(c, cache) for c in fleet))
    return found


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
    out = []
    for cluster in tied:
        fits, growth, accepted = _fit(cluster, task, cache)
        taken = scarcity(task, free_gpus(cluster, cache), fleet_models, constrained) if fleet_models else 0.0
        out.append(TieCost(cluster.name, fits, growth, taken, accepted))
    out.sort(key=lambda cost: cost.key)
    return out


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
        more_fragmentation = runner.fragmentation - best.fragmentation
        why = "scarcity" if runner.scarcity - best.scarcity > more_fragmentation else "fragmentation"
    elif best.free != runner.free:
        why = "fewest free GPUs"
    else:
        why = "name (equal in fragmentation, scarcity and free GPUs)"
    reasons = state.tie_reasons
    tied_on = "tier and price band" if band_percent(state) else "tier and price"
    for index, cost in enumerate(ranked):
        figures = (
            f"fragmentation {cost.fragmentation:+.2f} GPUs, scarcity {cost.scarcity:.2f} GPUs, "
            f"{cost.free:g} free GPUs" if cost.fits else "no node hosts it as reported"
        )
        place = "first" if index == 0 else f"#{index + 1}"
        reasons[cost.name] = (
            f"{place} of {len(ranked)} clusters tied on {tied_on}, decided by {why} ({figures})"
        )
