"""Packing a small replica, inside the cluster it goes to, onto nodes that already run GPU work.

The hub picks the cluster; the member's scheduler picks the node. Under kube's default scoring
(least-allocated) a member spreads 1-GPU replicas over its empty 8-GPU nodes, and then 8-GPU
replicas find no whole node (docs/benchmarks.md, "The seven cells under pooled-best-fit"). The
agent names, per node shape, the nodes whose GPUs are partly in use
(``nodeShapes[].hostnames``), so the hub knows where GPU work already runs. Under TieredOverflow
(``tieredOverflow.packingHints``, on by default for the clusters and the demand below), the Work
sent to a cluster for a replica that asks for fewer GPUs than a node holds carries one more
``preferredDuringSchedulingIgnoredDuringExecution`` node-affinity term: prefer the nodes
``kubernetes.io/hostname In`` :func:`hinted_hosts`, weight :data:`PACKING_WEIGHT`.

Which nodes (:func:`hinted_hosts`): the named nodes of shapes that hold the replica (its node
selector, required affinity, tolerations and resources, as the estimator judges a shape), the
fewest free GPUs first, at most :data:`MAX_HINTED`. The bound keeps the term small: the Work
repeats it in every pod template that asks for a GPU, and every member node is matched against
it; the fullest nodes are the ones worth filling first, and the member's own scoring still ranks
the hinted nodes among themselves. 32 names are also what the agent lists per shape
(:data:`~controlplane.apis.cluster_v1alpha1.MAX_SHAPE_HOSTNAMES`), so the fullest shape that fits
can fill a hint alone. No term for a replica without GPUs, for one that asks for MIG slices or
time-sliced shares (the shapes do not say which node has which), for one that fills a node (it
never fits a node already in use), for one the user pins to nodes by name (a
``kubernetes.io/hostname`` selector or requirement, or ``matchFields``: the hub's shapes do not
carry the names those are matched against), or when no named node has room.

Which clusters (:func:`packs`): with ``packingHintsScope: SpreadingMembers`` (the default) those
whose agent reports a spreading node scoring (``status.nodeScoring`` in
:data:`~controlplane.apis.cluster_v1alpha1.SPREADING_SCORINGS`: LeastAllocated, kube's default); a
member that already packs (MostAllocated, a bin-packing RequestedToCapacityRatio, FragmentationAware)
keeps its own node choice: there the hint only pulls replicas away from the node its scoring chose
(docs/benchmarks.md, "Packing hints"). ``AllMembers``: every cluster. ``packingHints: false``: none.

When (:func:`multi_gpu_demand`): keeping whole nodes free pays only while replicas that need them keep
coming. Hints on every LeastAllocated member lifted the multi-GPU-heavy benchmark cells and cost the
traces of few such replicas 0.7-2.8 points (docs/benchmarks.md, "Packing hints by member scoring"), so
by default they are given only while replicas of two GPUs or more asked for at least
``packingHintsMultiGPUPercent`` (default :data:`MULTI_GPU_PERCENT_DEFAULT`) of the GPUs of the hub's
recent arrivals (its learned demand, :mod:`~controlplane.scheduler.core.demand`), and only once the
window holds :data:`MIN_MULTI_GPU_ARRIVALS` of them: right after the hub starts, a few arrivals would
otherwise decide (on the benchmark's traces of few multi-GPU replicas, 8 % of the GPUs, one or two
8-GPU replicas among the first dozens of arrivals put the share over 20 %). 0 gives hints whatever
the demand. While they wait, a share of one GPU (``nvidia.com/gpu-milli``) in a spreading member is
packed toward the tightest remainder that holds it instead (:func:`share_remainder_enabled`,
:mod:`~controlplane.scheduler.core.sharehints`).

Weight 1, the lowest kube accepts, as steering's (:mod:`~controlplane.scheduler.core.steering`):
alone it decides between the named nodes and the others (kube's NodeAffinity weighs 2 against
the resource score's 1); next to the user's own preferred terms, kept as written, it can at most
even out a difference of their weights. A preference, not a requirement: when the named nodes
are full by the time the member schedules, the replica runs elsewhere.

:func:`packing_hints` is what the decision records per cluster (``ScheduleResult.packing``), the
binding controller writes into the Work (:func:`preferred_term`) and the what-if hands its
simulated members. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.apis.cluster_v1alpha1 import MAX_SHAPE_HOSTNAMES, SPREADING_SCORINGS
from controlplane.apis.constants import LABEL_HOSTNAME
from controlplane.apis.fragmentation import GPU_MILLI
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.clusterfit import gpu_vector
from controlplane.scheduler.core.estimating import shape_fit
from controlplane.scheduler.core.framework import CycleState
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from controlplane.scheduler.core.tiebreak import cached_task
from policies.models import DivisionStrategy, TieredOverflow

#: ``tieredOverflow.packingHintsScope`` values: every member (the default), or those that spread.
ALL_MEMBERS: Final = "AllMembers"
SPREADING_MEMBERS: Final = "SpreadingMembers"
#: Weight of the packing term (kube's lowest; see the module).
PACKING_WEIGHT: Final = 1
#: Node names one hint lists at most (see the module).
MAX_HINTED: Final = MAX_SHAPE_HOSTNAMES
#: Defaults of ``packingHints``, ``packingHintsScope`` and ``packingHintsMultiGPUPercent`` (see the module).
PACKING_DEFAULT: Final = True
SCOPE_DEFAULT: Final = SPREADING_MEMBERS
MULTI_GPU_PERCENT_DEFAULT: Final = 20.0
#: Default of ``shareRemainderHints`` (:mod:`~controlplane.scheduler.core.sharehints`).
SHARE_REMAINDER_DEFAULT: Final = True
#: Multi-GPU arrivals the window holds at least before their share counts (see the module).
MIN_MULTI_GPU_ARRIVALS: Final = 4


def _tiered(state: CycleState) -> TieredOverflow | None:
    replica_scheduling = state.request.placement.replica_scheduling
    return replica_scheduling.tiered_overflow if replica_scheduling else None


def multi_gpu_percent(state: CycleState) -> float:
    """The decision's policy's ``packingHintsMultiGPUPercent`` (default :data:`MULTI_GPU_PERCENT_DEFAULT`)."""
    tiered = _tiered(state)
    asked = tiered.packing_hints_multi_gpu_percent if tiered is not None else None
    return MULTI_GPU_PERCENT_DEFAULT if asked is None else asked


def _packs_at_all(state: CycleState) -> bool:
    """Whether the decision's policy asks for packing hints of any kind (``packingHints``, default
    :data:`PACKING_DEFAULT`). Only TieredOverflow packs (other divisions have no block to turn it
    off in)."""
    if state.request.strategy is not DivisionStrategy.TIERED_OVERFLOW:
        return False
    tiered = _tiered(state)
    asked = tiered.packing_hints if tiered is not None else None
    return PACKING_DEFAULT if asked is None else asked


def packing_scope(state: CycleState) -> str | None:
    """Which clusters the decision's policy packs: None (no hints), :data:`ALL_MEMBERS` or
    :data:`SPREADING_MEMBERS` (``tieredOverflow.packingHints`` and ``packingHintsScope``, defaults
    :data:`PACKING_DEFAULT` and :data:`SCOPE_DEFAULT`); None too while multi-GPU demand is under
    ``packingHintsMultiGPUPercent`` (:func:`multi_gpu_demand`)."""
    if not _packs_at_all(state) or not multi_gpu_demand(state, multi_gpu_percent(state)):
        return None
    tiered = _tiered(state)
    scope = tiered.packing_hints_scope if tiered is not None else None
    return scope or SCOPE_DEFAULT


def share_remainder_enabled(state: CycleState) -> bool:
    """Whether the decision's policy packs shares of a GPU in thousandths toward the tightest remainder now
    (:mod:`~controlplane.scheduler.core.sharehints`): ``shareRemainderHints`` (default
    :data:`SHARE_REMAINDER_DEFAULT`) and ``packingHints``, while multi-GPU demand keeps the hints
    above closed."""
    if not _packs_at_all(state):
        return False
    tiered = _tiered(state)
    asked = tiered.share_remainder_hints if tiered is not None else None
    if not (SHARE_REMAINDER_DEFAULT if asked is None else asked):
        return False
    return not multi_gpu_demand(state, multi_gpu_percent(state))


def multi_gpu_demand(state: CycleState, percent: float) -> bool:
    """Whether replicas of two GPUs or more asked for at least ``percent`` of the GPUs of the hub's
    recent arrivals (:meth:`~controlplane.scheduler.core.demand.DemandHistory.multi_gpu_percent`),
    and the window holds at least :data:`MIN_MULTI_GPU_ARRIVALS` of them; always, for 0."""
    if percent <= 0:
        return True
    demand = state.cache.demand
    return demand.multi_gpu_arrivals() >= MIN_MULTI_GPU_ARRIVALS and demand.multi_gpu_percent() >= percent


def packing_enabled(state: CycleState) -> bool:
    """Whether the decision's policy asks for packing hints now (those of shares:
    :func:`~controlplane.scheduler.core.sharehints.share_hints_wanted`)."""
    return packing_scope(state) is not None


def packs(cluster: ClusterSnapshot, scope: str | None) -> bool:
    """Whether ``cluster`` gets packing hints under ``scope`` (:func:`packing_scope`; see the module)."""
    if scope == SPREADING_MEMBERS:
        return cluster.node_scoring in SPREADING_SCORINGS
    return scope is not None


def by_scoring(state: CycleState, cluster: ClusterSnapshot) -> str | None:
    """The member scoring a packing hint was given for (None: the policy packs every member)."""
    return cluster.node_scoring if packing_scope(state) == SPREADING_MEMBERS else None


def pinned_by_name(requirements: ReplicaRequirements) -> bool:
    """Whether the user's node selector or required node affinity names nodes (see the module)."""
    if any(key == LABEL_HOSTNAME for key, _ in requirements.node_selector):
        return True
    return any(
        term.has_field_selector or any(e.key == LABEL_HOSTNAME for e in term.expressions)
        for term in requirements.node_affinity
    )


def hinted_hosts(cluster: ClusterSnapshot, requirements: ReplicaRequirements, gpus: float) -> tuple[str, ...]:
    """The nodes of ``cluster`` a replica of ``requirements`` asking for ``gpus`` GPUs (a share: a
    fraction) is packed toward, sorted; () when no named node holds it. A replica that fills a node
    never fits one already in use, so it gets none (nor is any needed: it breaks no whole node)."""
    if gpus <= 0 or pinned_by_name(requirements):
        return ()
    ranked = sorted(
        (sum(gpu_vector(s)), s.hostnames)
        for s in cluster.shapes
        if s.hostnames and shape_fit(s, requirements) > 0
    )
    chosen: dict[str, None] = {}
    for _, names in ranked:
        for name in names:
            if len(chosen) >= MAX_HINTED:
                return tuple(sorted(chosen))
            chosen[name] = None
    return tuple(sorted(chosen))


def packing_hints(
    state: CycleState, fresh: Sequence[ClusterSnapshot], requirements: Mapping[str, ReplicaRequirements]
) -> dict[str, tuple[str, ...]]:
    """Per cluster of ``fresh`` (those that get their first replicas; ``requirements`` per replica,
    by cluster), the nodes its replicas are packed toward; clusters with none are left out. A
    cluster already running replicas keeps what its Work has (the binding controller's part)."""
    scope = packing_scope(state)
    if not fresh or scope is None:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for cluster in fresh:
        if not packs(cluster, scope):
            continue
        needs = requirements[cluster.name]
        task = cached_task(needs, state.cache)
        hosts = hinted_hosts(cluster, needs, task.num_gpu * task.gpu_milli / GPU_MILLI) if task else ()
        if hosts:
            out[cluster.name] = hosts
    return out


def preferred_term(hosts: Sequence[str]) -> dict[str, Any]:
    """The ``preferredDuringSchedulingIgnoredDuringExecution`` entry that packs toward ``hosts``."""
    expression = {"key": LABEL_HOSTNAME, "operator": "In", "values": list(hosts)}
    return {"weight": PACKING_WEIGHT, "preference": {"matchExpressions": [expression]}}


def by_demand(state: CycleState) -> tuple[float, float] | None:
    """The multi-GPU demand a packing hint waited for: (percent seen, the policy's
    ``packingHintsMultiGPUPercent``); None when the policy does not wait for it."""
    percent = multi_gpu_percent(state)
    return (state.cache.demand.multi_gpu_percent(), percent) if percent > 0 else None


def describe(hosts: Sequence[str], scoring: str | None = None, demand: tuple[float, float] | None = None) -> str:
    """The explanation's words for a packing hint; ``scoring``: the member scoring that turned it on
    (:func:`by_scoring`); ``demand``: the multi-GPU demand it waited for (:func:`by_demand`)."""
    why = (
        f"; added because the member reports node scoring {scoring}, which spreads replicas over empty nodes "
        "(packingHintsScope: SpreadingMembers)"
        if scoring
        else ""
    )
    if demand is not None:
        seen, percent = demand
        why += (
            f"; replicas of two GPUs or more asked for {seen:.0f} % of the GPUs of recent arrivals "
            f"(packingHintsMultiGPUPercent: {percent:g})"
        )
    return (
        f"packed inside the cluster toward {len(hosts)} node(s) already running GPU work ({first_names(hosts)}; "
        f"preferred node affinity, weight {PACKING_WEIGHT}): whole nodes stay free for larger replicas{why}"
    )


def first_names(names: Sequence[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names`` and how many more."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
