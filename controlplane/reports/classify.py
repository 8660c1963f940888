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

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from itertools import chain
from typing import TypeVar, cast

from controlplane.reports.fleet import (
    ClusterSample,
    DeviceSample,
    FleetSample,
    NodeSample,
    PendingDemand,
    PendingReason,
)
from controlplane.reports.matching import FreeLayout, FreePool, free_layout

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
    they are, tuple and all, instead of one new object per device per sample; so is the layout
    of its free devices that matching starts from."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[NodeSample, ...], tuple[object, ...], _ClusterBase]] = {}
        #: Clusters classified anew (not found unchanged).
        self.misses = 0

    def base_states(self, cluster: ClusterSample, threshold: float) -> tuple[DeviceState, ...]:
        """The states of ``cluster``'s devices before matching (free devices free-spare)."""
        return self.base(cluster, threshold).states

    def base(self, cluster: ClusterSample, threshold: float) -> _ClusterBase:
        """``cluster``'s states before matching, with the layout of its free devices."""
        facts = (cluster.ready, cluster.schedulable, dict(cluster.pricing), threshold)
        entry = self._entries.get(cluster.name)
        if entry is not None and entry[0] is cluster.nodes and entry[1] == facts:
            return entry[2]
        base = _ClusterBase(cluster, _base_states(cluster, threshold))
        self.misses += 1
        self._entries[cluster.name] = (cluster.nodes, facts, base)
        return base

    def retain(self, names: Iterable[str]) -> None:
        """Forget the clusters not in ``names``."""
        keep = set(names)
        for name in [n for n in self._entries if n not in keep]:
            del self._entries[name]


class _ClusterBase:
    """A cluster's states before matching. What matching starts from is worked out the first
    time a pending demand needs it, then kept with the states while the cluster is unchanged:
    the layout of its free devices, and its states with the free ones of some products
    free-fragmented (the same tuple pass after pass, so its cells are not summed again)."""

    __slots__ = ("_cluster", "_edited", "_fragmented", "_layout", "states")

    def __init__(self, cluster: ClusterSample, states: tuple[DeviceState, ...]) -> None:
        self._cluster = cluster
        self.states = states
        self._layout: FreeLayout | None = None
        self._fragmented: dict[frozenset[str], tuple[DeviceState, ...]] = {}
        self._edited: tuple[frozenset[str] | None, dict[int, DeviceState], tuple[DeviceState, ...]] | None = None

    @property
    def has_layout(self) -> bool:
        return self._layout is not None

    @property
    def layout(self) -> FreeLayout:
        if self._layout is None:
            self._layout = free_layout(self._cluster, [s.state is WasteState.FREE_SPARE for s in self.states])
        return self._layout

    def fragmented(self, products: frozenset[str]) -> tuple[DeviceState, ...]:
        """The states with every free device of a ``products`` node free-fragmented."""
        states = self._fragmented.get(products)
        if states is None:
            rewritten = list(self.states)
            variants: dict[int, DeviceState] = {}
            for product in products:
                for node in self.layout.by_product.get(product, ()):
                    for index in node.all_free:
                        old = rewritten[index]
                        new = variants.get(id(old))
                        if new is None:
                            new = variants[id(old)] = replace(old, state=WasteState.FREE_FRAGMENTED)
                        rewritten[index] = new
            states = self._fragmented[products] = tuple(rewritten)
        return states

    def edited(self, stranded: frozenset[str] | None, claimed: dict[int, DeviceState]) -> tuple[DeviceState, ...]:
        """The states with ``stranded`` products' free devices fragmented and ``claimed`` ones
        needed: the tuple of the last call when it decided the same (pending demand that still
        waits for the same devices), so its cells are not summed again."""
        if self._edited is not None and self._edited[0] == stranded and self._edited[1] == claimed:
            return self._edited[2]
        rewritten = list(self.fragmented(stranded) if stranded else self.states)
        for index, state in claimed.items():
            rewritten[index] = state
        part = tuple(rewritten)
        self._edited = (stranded, claimed, part)
        return part


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


class _Marks:
    """What matching decides for the fleet's free devices, cluster by cluster (the states are
    built once it is over): the devices claimed, with their new states (one new object per old
    object and demand: devices no report names share theirs), and the products whose free
    devices are stranded."""

    def __init__(self, bases: Sequence[_ClusterBase]) -> None:
        self._bases = bases
        #: cluster number -> device index -> its free-needed state
        self.claimed: dict[int, dict[int, DeviceState]] = {}
        #: cluster number -> products whose free devices waiting demand cannot use
        self.stranded: dict[int, frozenset[str]] = {}
        self._needed: dict[tuple[int, str, str], DeviceState] = {}

    def needed(self, cluster: int, indexes: Iterable[int], demand: PendingDemand) -> None:
        """Mark the devices ``indexes`` of cluster number ``cluster`` (free ones) as needed by
        ``demand``, unless an earlier demand claimed them."""
        base = self._bases[cluster].states
        claimed = self.claimed.setdefault(cluster, {})
        for index in indexes:
            if index in claimed:
                continue
            old = base[index]
            key = (id(old), demand.namespace, demand.workload)
            new = self._needed.get(key)
            if new is None:
                new = self._needed[key] = replace(
                    old, state=WasteState.FREE_NEEDED, demand=(demand.namespace, demand.workload)
                )
            claimed[index] = new

    def part(self, cluster: int) -> tuple[DeviceState, ...]:
        """Cluster number ``cluster``'s states: its base states when matching decided nothing
        for them (the very tuple), the stranded products' free devices fragmented, the claimed
        ones needed."""
        base = self._bases[cluster]
        stranded = self.stranded.get(cluster)
        claimed = self.claimed.get(cluster)
        if claimed:
            return base.edited(stranded, claimed)
        return base.fragmented(stranded) if stranded else base.states


#: Demands matched between two turns of :func:`classify_fleet_steps`.
DEMANDS_PER_STEP = 100

T = TypeVar("T")
#: Work done in steps: a generator that yields between them and returns the result.
Steps = Generator[None, None, T]


def finish(steps: Steps[T]) -> T:
    """Run ``steps`` to the end, without a pause; its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(T, done.value)


def classify_fleet(
    sample: FleetSample,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    cap_needed_by_demand: bool = True,
    memo: ClassificationMemo | None = None,
) -> Classification:
    """Every device's state, plus the pending demand no free device could take. With ``memo``,
    the clusters unchanged since its last use and untouched by demand cost no new states."""
    return finish(
        classify_fleet_steps(sample, threshold=threshold, cap_needed_by_demand=cap_needed_by_demand, memo=memo)
    )


def classify_fleet_steps(
    sample: FleetSample,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    cap_needed_by_demand: bool = True,
    memo: ClassificationMemo | None = None,
) -> Steps[Classification]:
    """:func:`classify_fleet` in steps, for a caller on an event loop to give the loop a turn
    between them (:mod:`controlplane.reports.sampling`): a step after each cluster whose states,
    free layout or part were built (up to one per device), and after every
    :data:`DEMANDS_PER_STEP` demands matched."""
    demands = _gpu_demands(sample.pending)
    bases: list[_ClusterBase] = []
    for cluster in sample.clusters:
        misses = memo.misses if memo is not None else 0
        if memo is not None:
            bases.append(memo.base(cluster, threshold))
        else:
            bases.append(_ClusterBase(cluster, _base_states(cluster, threshold)))
        if memo is None or memo.misses > misses:
            yield
    if memo is not None:
        memo.retain(cluster.name for cluster in sample.clusters)
    marks = _Marks(bases)
    unmet: list[UnmetDemand] = []
    if demands:
        layouts: list[FreeLayout] = []
        for base in bases:
            built = not base.has_layout
            layouts.append(base.layout)
            if built:
                yield
        pool = FreePool(sample.clusters, layouts)
        for number, demand in enumerate(demands, 1):
            if cap_needed_by_demand:
                remaining = pool.match(demand, marks.needed)
            else:
                remaining = 0 if pool.claim_everywhere(demand, marks.needed) else demand.replicas
            if remaining:
                unmet.append(UnmetDemand(demand, remaining))
            if number % DEMANDS_PER_STEP == 0:
                yield
        # Matched mode: only demand still waiting strands capacity. Literal mode: any demand does.
        waiting = [u.demand for u in unmet] if cap_needed_by_demand else demands
        _mark_fragmented(sample.clusters, layouts, waiting, marks)
    parts: list[tuple[DeviceState, ...]] = []
    for index, base in enumerate(bases):
        part = marks.part(index)
        parts.append(part)
        if part is not base.states:
            yield
    states = tuple(chain.from_iterable(parts))
    return Classification(states, tuple(unmet), _never_fit(sample.pending), parts=tuple(parts))


def _mark_fragmented(
    clusters: Sequence[ClusterSample],
    layouts: Sequence[FreeLayout],
    waiting: Sequence[PendingDemand],
    marks: _Marks,
) -> None:
    """Rule 5: the free devices still spare on nodes a waiting demand allows (cluster and product)."""
    if not waiting:
        return
    for index, (cluster, layout) in enumerate(zip(clusters, layouts, strict=True)):
        stranded = frozenset(p for p in layout.by_product if any(d.allows(cluster.name, p) for d in waiting))
        if stranded:
            marks.stranded[index] = stranded


def classify(
    sample: FleetSample,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    cap_needed_by_demand: bool = True,
) -> list[DeviceState]:
    """One :class:`DeviceState` per device of ``sample``; see the module docstring for the rules."""
    return list(classify_fleet(sample, threshold=threshold, cap_needed_by_demand=cap_needed_by_demand).states)
