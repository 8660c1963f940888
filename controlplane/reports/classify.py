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


def classify_fleet(
    sample: FleetSample,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    cap_needed_by_demand: bool = True,
) -> Classification:
    """Every device's state, plus the pending demand no free device could take."""
    states: list[DeviceState] = []
    free_nodes: list[_FreeNode] = []
    for cluster in sample.clusters:
        for node in cluster.nodes:
            free_node = _FreeNode(cluster, node, {}, [])
            for device in node.devices:
                if not (cluster.ready and node.ready):
                    state = WasteState.UNAVAILABLE
                elif device.allocated_to is not None:
                    state = _allocated_state(device, threshold)
                elif not (cluster.schedulable and node.schedulable):
                    state = WasteState.UNAVAILABLE
                else:
                    # Provisionally spare; matching below decides needed / fragmented.
                    state = WasteState.FREE_SPARE
                    free_node.all_free.append(len(states))
                    if device.resource is not None:
                        free_node.free.setdefault(device.resource, []).append(len(states))
                states.append(_state_of(cluster, node, device, state))
            if free_node.all_free:
                free_nodes.append(free_node)

    demands = _gpu_demands(sample.pending)
    unmet: list[UnmetDemand] = []
    if cap_needed_by_demand:
        for demand in demands:
            remaining = _match(demand, free_nodes, states)
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
                        _mark_needed(states, index, demand)
            if not fits_anywhere:
                unmet.append(UnmetDemand(demand, demand.replicas))

    # Matched mode: only demand still waiting strands capacity. Literal mode: any demand does.
    _mark_fragmented(states, free_nodes, [u.demand for u in unmet] if cap_needed_by_demand else demands)
    return Classification(tuple(states), tuple(unmet), _never_fit(sample.pending))


def _mark_needed(states: list[DeviceState], index: int, demand: PendingDemand) -> None:
    old = states[index]
    if old.state == WasteState.FREE_SPARE:
        states[index] = replace(old, state=WasteState.FREE_NEEDED, demand=(demand.namespace, demand.workload))


def _match(demand: PendingDemand, free_nodes: Sequence[_FreeNode], states: list[DeviceState]) -> int:
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
                _mark_needed(states, index, demand)
        remaining -= take
    return remaining


def _mark_fragmented(
    states: list[DeviceState], free_nodes: Sequence[_FreeNode], waiting: Sequence[PendingDemand]
) -> None:
    if not waiting:
        return
    for free_node in free_nodes:
        if not any(d.allows(free_node.cluster.name, free_node.node.product) for d in waiting):
            continue
        for index in free_node.all_free:
            if states[index].state == WasteState.FREE_SPARE:
                states[index] = replace(states[index], state=WasteState.FREE_FRAGMENTED)


def classify(
    sample: FleetSample,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    cap_needed_by_demand: bool = True,
) -> list[DeviceState]:
    """One :class:`DeviceState` per device of ``sample``; see the module docstring for the rules."""
    return list(classify_fleet(sample, threshold=threshold, cap_needed_by_demand=cap_needed_by_demand).states)
