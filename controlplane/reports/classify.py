"""Which waste state every GPU device of the fleet is in at one instant.

In: a :class:`~controlplane.reports.fleet.FleetSample`. Out: one :class:`DeviceState` per
device (a whole GPU, a MIG instance weighted by its share of the GPU, or a time-sliced share),
in exactly one of the states of DESIGN.md's table. Pure; no I/O.

The rules, in the order they are applied:

1. **unavailable** -- the device's cluster or node is not Ready. The holder (if any) is kept
   so per-workload reports can show it, but the device is neither busy nor waste.
2. **busy** / **idle-allocated** / **unmeasured** -- the device is allocated to a pod: busy
   when its utilization is at least ``threshold`` (default 10 %), idle-allocated below it, and
   unmeasured ("allocated, not measured") when no utilization is known (no DCGM value, e.g. a
   member whose agent has no ``--dcgm-url``): neither busy nor idle, so a report never claims
   a waste figure, high or low, it did not measure.
3. **unavailable** -- a free device on a cordoned node or in a cordoned cluster: an operator
   took it out of service, so no pending work can use it either.
4. **free-needed** -- a free device that a pending replica could run on. A pending demand
   *fits* a node when the demand allows the cluster and the node's GPU product (its product
   selector/affinity and cluster affinity) and, for every GPU-like resource the replica
   requests, the node has at least that many free devices advertised as exactly that resource
   (``nvidia.com/gpu`` needs whole GPUs, ``nvidia.com/mig-3g.40gb`` needs 3g.40gb instances; a
   4-GPU replica does not fit a node with 3 free GPUs). CPU, memory and node taints are left to
   the member's scheduler.

   By default (``cap_needed_by_demand=True``) demand is *matched*: each pending replica claims
   the devices it needs on one node, so only as many devices are free-needed as the waiting
   replicas could actually use (one waiting 1-GPU replica makes one GPU free-needed, not every
   free GPU in the fleet). Demands are matched largest per-replica request first; nodes are
   tried in the order the hub's scheduler prefers (lower cluster tier, then cheaper GPU, then
   the node with the fewest free devices, then names), so the result is deterministic. With
   ``cap_needed_by_demand=False`` every free device that any pending replica fits is
   free-needed, the literal reading of the table.
5. **free-fragmented** -- a free device that is not free-needed while some pending demand
   that is still unmet (not every replica matched) allows the device's cluster and product but
   cannot use it: wrong resource (a 1g.10gb slice while 3g.40gb requests wait, a whole GPU
   while MIG requests wait, the unpartitioned remainder of a MIG GPU) or too few free devices
   on the node for one replica. That capacity is stranded by its shape.
6. **free-spare** -- every other free device: nothing pending could use it (no GPU demand,
   or demand only for other clusters or products, or demand already fully matched).

Demand that can never fit (:attr:`~controlplane.reports.fleet.PendingReason.NEVER_FITS`: no
node of the fleet could hold one of its pods even empty) takes part in neither rule 4 nor rule
5: no free device could ever serve it, so it neither makes GPUs needed nor strands them. It is
returned apart (``Classification.never_fit``) for the report to list.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from controlplane.reports.fleet import (
    ClusterSample,
    DeviceSample,
    FleetSample,
    NodeSample,
    PendingDemand,
    PendingReason,
)

DEFAULT_THRESHOLD = 0.10


class WasteState(StrEnum):
    """The state a GPU (or its share) is in during one interval; see DESIGN.md."""

    BUSY = "busy"
    IDLE_ALLOCATED = "idle-allocated"
    UNMEASURED = "unmeasured"
    """Allocated to a pod, utilization not measured (no DCGM value): neither busy nor idle."""
    FREE_NEEDED = "free-needed"
    FREE_FRAGMENTED = "free-fragmented"
    FREE_SPARE = "free-spare"
    UNAVAILABLE = "unavailable"


#: Every state, in report order.
STATES: tuple[WasteState, ...] = tuple(WasteState)
#: States counted as waste in ``waste_pct`` (free-spare is idle cost, unavailable is apart).
WASTE_STATES = frozenset({WasteState.IDLE_ALLOCATED, WasteState.FREE_NEEDED, WasteState.FREE_FRAGMENTED})
ALLOCATED_STATES = frozenset({WasteState.BUSY, WasteState.IDLE_ALLOCATED, WasteState.UNMEASURED})
#: Allocated states whose utilization was measured (the ones an idle share is taken of).
MEASURED_STATES = frozenset({WasteState.BUSY, WasteState.IDLE_ALLOCATED})
FREE_STATES = frozenset({WasteState.FREE_NEEDED, WasteState.FREE_FRAGMENTED, WasteState.FREE_SPARE})


@dataclass(frozen=True, slots=True)
class DeviceState:
    """One device's state. ``share`` weights it (MIG 3g = 3/7); ``price_per_gpu_hour`` is its
    cluster's price for its product, so the device costs ``share * price_per_gpu_hour`` per hour.
    ``demand`` names the pending ``(namespace, workload)`` a free-needed device was matched to."""

    cluster: str
    node: str
    product: str
    profile: str | None
    share: float
    state: WasteState
    namespace: str | None = None
    workload: str | None = None
    pod: str | None = None
    utilization: float | None = None
    gpu: str = ""
    uuid: str = ""
    resource: str | None = None
    price_per_gpu_hour: float = 0.0
    demand: tuple[str, str] | None = None

    @property
    def cost_per_hour(self) -> float:
        return self.share * self.price_per_gpu_hour


@dataclass(frozen=True, slots=True)
class UnmetDemand:
    """A pending demand and how many of its replicas no free device could take."""

    demand: PendingDemand
    replicas: int


@dataclass(frozen=True, slots=True)
class Classification:
    states: tuple[DeviceState, ...]
    unmet: tuple[UnmetDemand, ...]
    never_fit: tuple[PendingDemand, ...] = ()
    """Pending demand no node of the fleet could ever hold, left out of the states."""
    parts: tuple[tuple[DeviceState, ...], ...] = ()
    """The same states cluster by cluster, in the sample's order (empty when not split): an
    unchanged cluster's part is the very tuple of the last classification (:class:`ClassificationMemo`)."""


class ClassificationMemo:
    """Each cluster's device states as classified before any demand is matched, kept while the
    cluster's sample is unchanged: the same nodes tuple (as
    :class:`~controlplane.reports.snapshot.ClusterNodesCache` keeps it) and the same readiness,
    cordon and prices. The states of a cluster no pending demand touches are then reused as
    they are, tuple and all, instead of one new object per device per sample."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[NodeSample, ...], tuple[object, ...], tuple[DeviceState, ...]]] = {}
        #: Clusters classified anew (not found unchanged).
        self.misses = 0

    def base_states(self, cluster: ClusterSample, threshold: float) -> tuple[DeviceState, ...]:
        """The states of ``cluster``'s devices before matching (free devices free-spare)."""
        facts = (cluster.ready, cluster.schedulable, dict(cluster.pricing), threshold)
        entry = self._entries.get(cluster.name)
        if entry is not None and entry[0] is cluster.nodes and entry[1] == facts:
            return entry[2]
        states = _base_states(cluster, threshold)
        self.misses += 1
        self._entries[cluster.name] = (cluster.nodes, facts, states)
        return states

    def retain(self, names: Iterable[str]) -> None:
        """Forget the clusters not in ``names``."""
        keep = set(names)
        for name in [n for n in self._entries if n not in keep]:
            del self._entries[name]


@dataclass(slots=True)
class _FreeNode:
    cluster: ClusterSample
    node: NodeSample
    #: resource -> indexes (into the classification's device list) of still-free devices
    free: dict[str, list[int]]
    #: indexes of every free device of the node, including ones no resource advertises
    all_free: list[int]

    def replicas_fitting(self, requests: dict[str, int]) -> int:
        return min(len(self.free.get(resource, ())) // amount for resource, amount in requests.items())

    def order(self) -> tuple[int, float, int, str, str]:
        return (
            self.cluster.tier,
            self.cluster.price(self.node.product),
            sum(len(v) for v in self.free.values()),
            self.cluster.name,
            self.node.name,
        )


def _state_of(
    cluster: ClusterSample, node: NodeSample, device: DeviceSample, state: WasteState
) -> DeviceState:
    holder = device.allocated_to
    return DeviceState(
        cluster=cluster.name,
        node=node.name,
        product=node.product,
        profile=device.profile,
        share=device.share,
        state=state,
        namespace=holder.namespace if holder else None,
        workload=holder.workload if holder else None,
        pod=holder.pod if holder else None,
        utilization=device.utilization,
        gpu=device.gpu,
        uuid=device.uuid,
        resource=device.resource,
        price_per_gpu_hour=cluster.price(node.product),
    )


def _allocated_state(device: DeviceSample, threshold: float) -> WasteState:
    if device.utilization is None:
        return WasteState.UNMEASURED
    if device.utilization >= threshold:
        return WasteState.BUSY
    return WasteState.IDLE_ALLOCATED


def _never_fit(pending: Iterable[PendingDemand]) -> tuple[PendingDemand, ...]:
    return tuple(d for d in pending if d.replicas > 0 and d.reason == PendingReason.NEVER_FITS)


def _gpu_demands(pending: Iterable[PendingDemand]) -> list[PendingDemand]:
    demands = [
        d for d in pending if d.replicas > 0 and d.gpu_requests and d.reason != PendingReason.NEVER_FITS
    ]
    demands.sort(key=lambda d: (-sum(d.gpu_requests.values()), d.namespace, d.workload, d.reason))
    return demands


def _base_states(cluster: ClusterSample, threshold: float) -> tuple[DeviceState, ...]:
    """Rules 1-3 for every device of ``cluster``; a free device is provisionally free-spare
    (matching decides needed / fragmented)."""
    states: list[DeviceState] = []
    for node in cluster.nodes:
        # A device sample repeated on a node (the GPUs no report names) has one state object.
        known: dict[int, DeviceState] = {}
        for device in node.devices:
            if (same := known.get(id(device))) is not None:
                states.append(same)
                continue
            if not (cluster.ready and node.ready):
                state = WasteState.UNAVAILABLE
            elif device.allocated_to is not None:
                state = _allocated_state(device, threshold)
            elif not (cluster.schedulable and node.schedulable):
                state = WasteState.UNAVAILABLE
            else:
                state = WasteState.FREE_SPARE
            states.append(known.setdefault(id(device), _state_of(cluster, node, device, state)))
    return tuple(states)


def _free_nodes(cluster: ClusterSample, states: Sequence[DeviceState], offset: int) -> list[_FreeNode]:
    """The nodes of ``cluster`` with free devices; its states start at ``offset`` in ``states``."""
    out: list[_FreeNode] = []
    index = offset
    for node in cluster.nodes:
        free_node = _FreeNode(cluster, node, {}, [])
        for device in node.devices:
            if states[index].state is WasteState.FREE_SPARE:
                free_node.all_free.append(index)
                if device.resource is not None:
                    free_node.free.setdefault(device.resource, []).append(index)
            index += 1
        if free_node.all_free:
            out.append(free_node)
    return out


def classify_fleet(
    sample: FleetSample,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    cap_needed_by_demand: bool = True,
    memo: ClassificationMemo | None = None,
) -> Classification:
    """Every device's state, plus the pending demand no free device could take. With ``memo``,
    the clusters unchanged since its last use and untouched by demand cost no new states."""
    demands = _gpu_demands(sample.pending)
    states: list[DeviceState] = []
    bases: list[tuple[DeviceState, ...]] = []
    free_nodes: list[_FreeNode] = []
    for cluster in sample.clusters:
        base = memo.base_states(cluster, threshold) if memo is not None else _base_states(cluster, threshold)
        if demands:
            offset = len(states)
            states.extend(base)
            free_nodes.extend(_free_nodes(cluster, states, offset))
        else:
            states.extend(base)
        bases.append(base)
    if memo is not None:
        memo.retain(cluster.name for cluster in sample.clusters)
    changed: set[int] = set()
    unmet: list[UnmetDemand] = []
    if cap_needed_by_demand:
        for demand in demands:
            remaining = _match(demand, free_nodes, states, changed)
            if remaining:
                unmet.append(UnmetDemand(demand, remaining))
    else:
        for demand in demands:
            fits_anywhere = False
            for free_node in free_nodes:
                if not demand.allows(free_node.cluster.name, free_node.node.product):
                    continue
                requests = demand.gpu_requests
                if free_node.replicas_fitting(requests) < 1:
                    continue
                fits_anywhere = True
                for resource in requests:
                    for index in free_node.free[resource]:
                        _mark_needed(states, index, demand, changed)
            if not fits_anywhere:
                unmet.append(UnmetDemand(demand, demand.replicas))

    # Matched mode: only demand still waiting strands capacity. Literal mode: any demand does.
    _mark_fragmented(states, free_nodes, [u.demand for u in unmet] if cap_needed_by_demand else demands, changed)
    return Classification(
        tuple(states), tuple(unmet), _never_fit(sample.pending), parts=_parts(bases, states, changed)
    )


def _parts(
    bases: Sequence[tuple[DeviceState, ...]], states: Sequence[DeviceState], changed: set[int]
) -> tuple[tuple[DeviceState, ...], ...]:
    """Per cluster, its base states when matching changed none of them, else its new states."""
    if not changed:
        return tuple(bases)
    parts: list[tuple[DeviceState, ...]] = []
    marked = sorted(changed)
    offset = 0
    for base in bases:
        end = offset + len(base)
        first = bisect_left(marked, offset)
        touched = first < len(marked) and marked[first] < end
        parts.append(tuple(states[offset:end]) if touched else base)
        offset = end
    return tuple(parts)


def _mark_needed(states: list[DeviceState], index: int, demand: PendingDemand, changed: set[int]) -> None:
    old = states[index]
    if old.state == WasteState.FREE_SPARE:
        states[index] = replace(old, state=WasteState.FREE_NEEDED, demand=(demand.namespace, demand.workload))
        changed.add(index)


def _match(
    demand: PendingDemand, free_nodes: Sequence[_FreeNode], states: list[DeviceState], changed: set[int]
) -> int:
    """Claim devices for ``demand``'s replicas; return how many replicas found no room."""
    requests = demand.gpu_requests
    remaining = demand.replicas
    candidates = sorted(
        (n for n in free_nodes if demand.allows(n.cluster.name, n.node.product)),
        key=_FreeNode.order,
    )
    for free_node in candidates:
        if remaining == 0:
            break
        take = min(free_node.replicas_fitting(requests), remaining)
        if take <= 0:
            continue
        for resource, amount in requests.items():
            claimed = free_node.free[resource][: take * amount]
            del free_node.free[resource][: take * amount]
            for index in claimed:
                _mark_needed(states, index, demand, changed)
        remaining -= take
    return remaining


def _mark_fragmented(
    states: list[DeviceState], free_nodes: Sequence[_FreeNode], waiting: Sequence[PendingDemand], changed: set[int]
) -> None:
    if not waiting:
        return
    for free_node in free_nodes:
        if not any(d.allows(free_node.cluster.name, free_node.node.product) for d in waiting):
            continue
        for index in free_node.all_free:
            if states[index].state == WasteState.FREE_SPARE:
                states[index] = replace(states[index], state=WasteState.FREE_FRAGMENTED)
                changed.add(index)


def classify(
    sample: FleetSample,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    cap_needed_by_demand: bool = True,
) -> list[DeviceState]:
    """One :class:`DeviceState` per device of ``sample``; see the module docstring for the rules."""
    return list(classify_fleet(sample, threshold=threshold, cap_needed_by_demand=cap_needed_by_demand).states)
