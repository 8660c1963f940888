"""Rare node steering: a spreading member's few nodes that alone hold recent large replicas, kept.

Node-shape scarcity (:mod:`~controlplane.scheduler.core.shapescarcity`) orders clusters tied on tier
and price; it cannot choose the node inside the cluster. A member that spreads (kube's
``LeastAllocated``) puts every small replica on the emptiest node that holds it, and for a replica
asking little, that is the node of most CPU and memory: often the rare large node that the recent
8-GPU replicas of 120 cores need (the openb trace's G3 nodes, 128 cores, where every other 8-GPU
node has 96). Packing hints (:mod:`~controlplane.scheduler.core.packhints`) name only nodes already
in use, so the first small replicas of a cluster, and every one no named node has room for, still
break those nodes.

So, while packing hints are given (``tieredOverflow.packingHints`` and the multi-GPU demand they
wait for) and ``tieredOverflow.rareNodeSteering`` is not turned off (default :data:`RARE_DEFAULT`),
the Work sent to a cluster whose agent reports a spreading scoring carries, for a replica asking
for fewer GPUs than such a replica (none too: a replica without GPUs takes the node's CPU), the
steering term (:func:`~controlplane.scheduler.core.steering.preferred_term`:
prefer nodes whose ``nvidia.com/gpu.product`` is NOT one of the models, weight 1) against
:func:`rare_models`.

Which models: a recent replica shape (:meth:`DemandHistory.multi_gpu_needs
<controlplane.scheduler.core.demand.DemandHistory.multi_gpu_needs>`, whole GPUs, two or more) with
at least :data:`MIN_ARRIVALS` arrivals in the window is *rare* when the empty nodes of the fleet that
hold it (by GPU model, allocatable CPU, memory and GPUs:
:func:`~controlplane.scheduler.core.shapescarcity.holds`) are of some of the GPU models whose nodes
have that many GPUs, not all; its models are those of the nodes that hold it. Kept per shape as a
tally over the fleet (:class:`RareTally`): a decision reads again only the clusters that reported
since the last, each cluster's part remembered per its distinct empty nodes. A preference, not a requirement: when only those nodes have room the replica
still runs there. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from controlplane.apis.cluster_v1alpha1 import SPREADING_SCORINGS
from controlplane.apis.explanations import RARE_NODES
from controlplane.apis.fragmentation import GPU_MILLI, TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core import packhints
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.demand import Need
from controlplane.scheduler.core.framework import CycleState
from controlplane.scheduler.core.shapescarcity import Capacity, capacities, holds
from controlplane.scheduler.core.snapshot import ClusterSnapshot, fleet_key
from controlplane.scheduler.core.tiebreak import cached_task, memo_of

#: Default of ``tieredOverflow.rareNodeSteering``.
RARE_DEFAULT: Final = True
#: Arrivals of a shape the window holds at least before its nodes are kept (as the multi-GPU floor).
MIN_ARRIVALS: Final = packhints.MIN_MULTI_GPU_ARRIVALS

RareNeed = tuple[int, frozenset[str]]
"""A rare recent shape: its GPUs and the GPU models of the nodes that alone hold it."""


def rare_enabled(state: CycleState) -> bool:
    """Whether the decision's policy keeps rare nodes now: ``rareNodeSteering`` (default
    :data:`RARE_DEFAULT`) while packing hints are given (:func:`~controlplane.scheduler.core.packhints.packing_scope`)."""
    replica_scheduling = state.request.placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    asked = tiered.rare_node_steering if tiered is not None else None
    if not (RARE_DEFAULT if asked is None else asked):
        return False
    return packhints.packing_scope(state) is not None


def parts(need: Need, nodes: Iterable[Capacity]) -> tuple[frozenset[str], frozenset[str]]:
    """Of the empty ``nodes``, the GPU models with a node of ``need``'s GPUs (that it accepts), and
    those with a node that holds it."""
    task = need[0]
    large: set[str] = set()
    held: set[str] = set()
    for capacity in nodes:
        product, gpus = capacity[0], capacity[3]
        if gpus < task.num_gpu or not task.accepts(product):
            continue
        large.add(product)
        if holds(capacity, need):
            held.add(product)
    return frozenset(large), frozenset(held)


def rare_models(large: frozenset[str], held: frozenset[str]) -> frozenset[str]:
    """The models that hold a need when they are some, not all, of the ``large`` ones (:func:`parts`);
    empty otherwise."""
    return held if held and held < large else frozenset()


def replica_gpus(task: TaskShape) -> int:
    """Whole GPUs a replica takes of a node (a share of one counts as one, none as none)."""
    return task.num_gpu if task.gpu_milli >= GPU_MILLI else min(task.num_gpu, 1)


def kept_models(task: TaskShape, rare: Sequence[RareNeed], models: Iterable[str]) -> tuple[str, ...]:
    """Of a cluster's GPU ``models``, those a replica ``task`` is steered away from: the models of the
    rare shapes asking for more GPUs than it, sorted (a replica without GPUs too: spread, it takes the
    CPU of the node with the most)."""
    gpus = replica_gpus(task)
    avoid: set[str] = set()
    for need_gpus, need_models in rare:
        if gpus < need_gpus:
            avoid |= need_models
    return tuple(sorted(avoid.intersection(models)))


Part = tuple[frozenset[str], frozenset[str]]
"""Of one cluster, for one need: its GPU models with nodes of the need's GPUs, and those that hold it."""


@dataclass(eq=False)
class RareTally:
    """One recent need over the fleet of the last decision that read it: per position of the fleet,
    its cluster's serial and part; how many clusters give each model to either side; and the rare
    models they make. A new fleet generation re-reads only the clusters that reported since."""

    serials: tuple[int, ...]
    parts: list[Part]
    large: Counter[str] = field(default_factory=Counter)
    held: Counter[str] = field(default_factory=Counter)
    models: frozenset[str] = frozenset()

    def put(self, position: int, part: Part) -> None:
        """``part`` at ``position`` in place of what was there."""
        old = self.parts[position]
        if old == part:
            return
        self.large.subtract(old[0])
        self.held.subtract(old[1])
        self.large.update(part[0])
        self.held.update(part[1])
        self.parts[position] = part

    def settle(self) -> None:
        """Work the rare models out of the counts."""
        large = frozenset(model for model, count in self.large.items() if count > 0)
        held = frozenset(model for model, count in self.held.items() if count > 0)
        self.models = rare_models(large, held)


_NO_PART: Part = (frozenset(), frozenset())


def _part(cache: SchedulerCache, cluster: ClusterSnapshot, need: Need) -> Part:
    """``cluster``'s :func:`parts` of ``need``, remembered per its distinct empty nodes."""
    own = memo_of(cache.capacities, cluster, capacities)
    memo = cache.rare_parts.get(own)
    if memo is None:
        memo = cache.rare_parts.remember(own, {})
    found = memo.get(need)
    if found is None:
        found = memo[need] = parts(need, own)
    return found


def _tally(
    cache: SchedulerCache, need: Need, fleet: Sequence[ClusterSnapshot], serials: tuple[int, ...]
) -> RareTally:
    """``need``'s tally over ``fleet`` (of ``serials``), from the last one when it is of as many clusters."""
    tally = cache.rare_tallies.get(need)
    if tally is not None and tally.serials == serials:
        return tally
    if tally is None or len(tally.serials) != len(serials):
        tally = cache.rare_tallies.remember(need, RareTally(serials, [_NO_PART] * len(serials)))
        changed: Iterable[int] = range(len(serials))
    else:
        changed = [i for i, (old, new) in enumerate(zip(tally.serials, serials, strict=True)) if old != new]
    for position in changed:
        tally.put(position, _part(cache, fleet[position], need))
    tally.serials = serials
    tally.settle()
    return tally


def _rare(state: CycleState, fleet: Sequence[ClusterSnapshot]) -> list[RareNeed]:
    """The rare recent shapes of ``fleet`` (see the module)."""
    cache = state.cache
    serials = state.fleet(fleet) if fleet is state.fleet_clusters else fleet_key(fleet)
    out = []
    for need, arrivals in cache.demand.multi_gpu_needs().items():
        if arrivals < MIN_ARRIVALS or need[0].gpu_milli < GPU_MILLI:
            continue
        models = _tally(cache, need, fleet, serials).models
        if models:
            out.append((need[0].num_gpu, models))
    return out


def rare_steering(
    state: CycleState,
    fresh: Sequence[ClusterSnapshot],
    clusters: Sequence[ClusterSnapshot],
    requirements: Mapping[str, ReplicaRequirements],
) -> dict[str, tuple[str, ...]]:
    """Per spreading cluster of ``fresh`` (those getting their first replicas; ``clusters`` the
    decision's, for the fleet when it has none; ``requirements`` per replica, by cluster), the models
    its replicas are steered away from to keep the rare nodes; clusters with none are left out."""
    spreading = [c for c in fresh if c.node_scoring in SPREADING_SCORINGS]
    if not spreading or not rare_enabled(state):
        return {}
    rare = _rare(state, state.fleet_clusters or clusters)
    if not rare:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for cluster in spreading:
        task = cached_task(requirements[cluster.name], state.cache)
        if task is None:
            continue
        models = {capacity[0] for capacity in memo_of(state.cache.capacities, cluster, capacities)}
        kept = kept_models(task, rare, models)
        if kept:
            out[cluster.name] = kept
    return out


def merged(
    steered: Mapping[str, tuple[str, ...]], kept: Mapping[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """Per cluster, the models of both steering terms as one (the Work carries one such term)."""
    out = dict(steered)
    for name, models in kept.items():
        out[name] = tuple(sorted(set(out.get(name, ())) | set(models)))
    return out


def describe(models: Sequence[str]) -> str:
    """The explanation's words for a rare node steering term."""
    return (
        f"steered inside the cluster away from {', '.join(models)} (preferred node affinity, weight 1): "
        f"{RARE_NODES}, and the member reports node scoring "
        "LeastAllocated, which would put this replica on them first"
    )
