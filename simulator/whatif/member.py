"""One simulated member cluster in the what-if replay: its scheduler, its GPU sharing, its reports.

The replay places thousands of jobs per second of wall time, so a member here is not the
HTTP-serving ``sim-cluster`` but its pure core: :class:`simulator.scheduling.ClusterState`
(kube-scheduler filters and scoring, MIG and time-sliced devices) over the nodes
:mod:`simulator.nodes` builds from the fleet profile. Two things are added here:

* **GPU sharing by thousandths** (:class:`SharingClusterState`). The Alibaba trace asks for
  fractions of one GPU (``gpu_milli`` 470 = 47 % of a GPU), packed per device as Alibaba's
  GPU-sharing scheduler (open-gpu-share) does. Nodes with plain whole GPUs (no MIG, no
  time-slicing) advertise :data:`RESOURCE_GPU_MILLI` = 1000 per GPU; a share pod requests
  that resource and must fit on *one* GPU; the GPU is chosen best-fit (the fullest GPU that
  still fits), or at random under random scoring. A GPU hosting shares is no longer a whole
  ``nvidia.com/gpu``, so whole-GPU pods only get GPUs nobody shares.
* **What the hub sees** (:meth:`MemberCluster.snapshot`): the ``Cluster.status`` the member
  agent would report (``nodeScoring`` its scoring's, :attr:`Scoring.node_scoring`), its node shapes read node by node as :func:`member_agent.capacity.summarize`
  reports a node alone (:func:`member_agent.capacity.node_shape_key`) and maintained
  incrementally (only nodes that changed are read again), turned into the hub's
  :class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot`. In that report a
  GPU hosting shares counts as allocated ``nvidia.com/gpu`` and every pod's thousandths as
  allocated :data:`RESOURCE_GPU_MILLI`. The agent is modelled as reporting at once after
  every change, so the hub needs no reservations here.

In: a :class:`~simulator.profile.ClusterProfile` (or prebuilt nodes and inventories).
Out: :meth:`MemberCluster.place` / :meth:`MemberCluster.release`, the hub snapshot and the
cluster-wide free totals a Karmada-style estimator reads. Pure: no I/O.
"""

from __future__ import annotations

import heapq
import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final, NamedTuple

from controlplane.apis.cluster_v1alpha1 import MAX_SHAPE_HOSTNAMES
from controlplane.apis.constants import LABEL_GPU_PRODUCT, RESOURCE_GPU
from controlplane.apis.fragmentation import DemandMix, TaskShape
from controlplane.apis.gpus import gpus_partly_used
from controlplane.apis.quantity import format_quantity
from controlplane.scheduler.core.packhints import preferred_term as packing_term
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape
from controlplane.scheduler.core.steering import preferred_term
from member_agent.capacity import node_shape_key, summarize, trim_node
from simulator.devices import NodeInventory
from simulator.nodes import build_inventory, build_nodes
from simulator.profile import ClusterProfile
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.model import RESOURCE_GPU_MILLI as RESOURCE_GPU_MILLI  # re-exported for the what-if
from simulator.scheduling.model import Allocation, NodeState, PodRequest, Requirement, Scoring
from simulator.scheduling.reading import node_state, preferred_terms
from simulator.whatif.trace import MILLI_PER_GPU, Job

#: ``lastReportTime`` of every what-if report: the replay has no wall clock.
REPORT_TIME: Final = "2023-01-01T00:00:00Z"
NAMESPACE: Final = "whatif"
#: Array column of the largest free thousandths on one GPU of a node (-1 without a ledger).
LARGEST_FREE_GPU_COLUMN: Final = "largest free gpu-milli"


class MemberScoring(StrEnum):
    """Member scoring choices of the what-if: the member scheduler's :class:`Scoring`.

    ``fgd-best-fit`` is another name for ``best-fit`` (which is the FGD paper's Best-fit),
    kept so that earlier commands still run.
    """

    LEAST_ALLOCATED = "least-allocated"
    MOST_ALLOCATED = "most-allocated"
    BEST_FIT = "best-fit"
    FGD = "fgd"
    RANDOM = "random"
    FGD_BEST_FIT = "fgd-best-fit"

    @property
    def scoring(self) -> Scoring:
        return Scoring.BEST_FIT if self is MemberScoring.FGD_BEST_FIT else Scoring(self.value)


@dataclass(slots=True)
class GpuLedger:
    """Free thousandths of each GPU of one plain-GPU node, and which GPUs host shares."""

    free: list[int]
    shared: set[int] = field(default_factory=set)

    @property
    def fully_free(self) -> int:
        return sum(1 for f in self.free if f == MILLI_PER_GPU)


class SharingClusterState(ClusterState):
    """:class:`ClusterState` plus per-GPU packing of :data:`RESOURCE_GPU_MILLI` requests.

    On a node with a ledger, ``requested["nvidia.com/gpu"]`` counts whole-GPU pods' GPUs
    *and* GPUs hosting shares, and ``requested[RESOURCE_GPU_MILLI]`` counts every pod's
    thousandths, so kube's per-node fit on those two resources stays exact; the one extra
    check is that a share fits on a single GPU (the :data:`LARGEST_FREE_GPU_COLUMN` the
    base class's arrays carry for it). Under best-fit a ledger node's GPU left is its free
    :data:`RESOURCE_GPU_MILLI`, as the FGD paper's simulator counts it.
    """

    def __init__(
        self,
        *,
        scoring: Scoring = Scoring.LEAST_ALLOCATED,
        seed: int | None = None,
        percentage_of_nodes_to_score: int = 100,
        demand_mix: DemandMix | None = None,
    ) -> None:
        super().__init__(
            scoring=scoring,
            seed=seed,
            percentage_of_nodes_to_score=percentage_of_nodes_to_score,
            demand_mix=demand_mix,
        )
        self.ledgers: dict[str, GpuLedger] = {}
        self._shares: dict[str, tuple[str, int, int]] = {}
        self._gpu_rng = random.Random(None if seed is None else seed + 1)

    def add_nodes(
        self, nodes: Sequence[Mapping[str, Any]], inventories: Mapping[str, NodeInventory]
    ) -> list[dict[str, Any]]:
        """Add many nodes at once (one re-index instead of one per node).

        Returns the nodes as their kubelet reports them: plain-GPU nodes with
        :data:`RESOURCE_GPU_MILLI` added to capacity and allocatable.
        """
        out = []
        for node in nodes:
            name = str(node["metadata"]["name"])
            inventory = inventories.get(name)
            if inventory is not None and _plain_gpus(inventory):
                node = _with_milli(node, len(inventory.gpus))
                self.ledgers[name] = GpuLedger([MILLI_PER_GPU] * len(inventory.gpus))
            self.nodes[name] = node_state(node, inventory)
            out.append(dict(node))
        self._reindex()
        return out

    # --- fit ---------------------------------------------------------------------------

    def _extra_free(self, node: NodeState) -> Mapping[str, int]:
        ledger = self.ledgers.get(node.name)
        return {LARGEST_FREE_GPU_COLUMN: max(ledger.free, default=0) if ledger is not None else -1}

    def _gpu_slots(self, node: NodeState) -> list[int]:
        ledger = self.ledgers.get(node.name)
        return list(ledger.free) if ledger is not None else super()._gpu_slots(node)

    def _extra_demand(self, pod: PodRequest) -> Mapping[str, int]:
        milli = pod.requests.get(RESOURCE_GPU_MILLI)
        return {} if milli is None else {LARGEST_FREE_GPU_COLUMN: milli}

    # --- allocation ----------------------------------------------------------------------

    def _allocate(
        self, pod: PodRequest, state: NodeState, *, device_ids: Sequence[str] | None = None
    ) -> Allocation:
        ledger = self.ledgers.get(state.name)
        if ledger is None:
            return super()._allocate(pod, state, device_ids=device_ids)
        milli = pod.requests.get(RESOURCE_GPU_MILLI, 0)
        if milli:
            index = self.fgd_gpu(pod, state) if self.scoring is Scoring.FGD else -1
            if index < 0:
                index = self._pick_gpu(ledger, milli)
            allocation = super()._allocate(pod, state)
            if ledger.free[index] == MILLI_PER_GPU:
                ledger.shared.add(index)
                state.requested[RESOURCE_GPU] = state.requested.get(RESOURCE_GPU, 0) + 1
                state.free_devices[RESOURCE_GPU] = [
                    d for d in state.free_devices.get(RESOURCE_GPU, []) if d.gpu_index != index
                ]
            ledger.free[index] -= milli
            self._shares[pod.key] = (state.name, index, milli)
            self._node_changed(state)
            return allocation
        allocation = super()._allocate(pod, state, device_ids=device_ids)
        for device in allocation.devices:
            if device.resource == RESOURCE_GPU:
                ledger.free[device.gpu_index] = 0
                state.requested[RESOURCE_GPU_MILLI] = (
                    state.requested.get(RESOURCE_GPU_MILLI, 0) + MILLI_PER_GPU
                )
        self._node_changed(state)
        return allocation

    def _pick_gpu(self, ledger: GpuLedger, milli: int) -> int:
        fitting = [i for i, f in enumerate(ledger.free) if f >= milli]
        if self.scoring is Scoring.RANDOM:
            return self._gpu_rng.choice(fitting)
        # Best fit: the GPU with the least room that still holds the share (lowest index on ties).
        return min(fitting, key=lambda i: (ledger.free[i], i))

    def release(self, pod_key: str) -> Allocation | None:
        allocation = self.allocations.get(pod_key)
        if allocation is None:
            return None
        state = self.nodes.get(allocation.node)
        ledger = self.ledgers.get(allocation.node)
        if state is not None and ledger is not None:
            share = self._shares.pop(pod_key, None)
            if share is not None:
                _, index, milli = share
                ledger.free[index] += milli
                if ledger.free[index] == MILLI_PER_GPU:
                    ledger.shared.discard(index)
                    state.requested[RESOURCE_GPU] -= 1
                    inventory = state.inventory
                    if inventory is not None:
                        devices = inventory.devices.get(RESOURCE_GPU, ())
                        free = state.free_devices.setdefault(RESOURCE_GPU, [])
                        free.extend(d for d in devices if d.gpu_index == index)
                        order = {d.id: i for i, d in enumerate(devices)}
                        free.sort(key=lambda d: order.get(d.id, 0))
            for device in allocation.devices:
                if device.resource == RESOURCE_GPU:
                    ledger.free[device.gpu_index] = MILLI_PER_GPU
                    state.requested[RESOURCE_GPU_MILLI] -= MILLI_PER_GPU
        return super().release(pod_key)

    def gpu_index_of(self, pod_key: str) -> int | None:
        share = self._shares.get(pod_key)
        return share[1] if share else None


def _plain_gpus(inventory: NodeInventory) -> bool:
    """Whole GPUs advertised one device each: the GPUs that can be shared by thousandths."""
    devices = inventory.devices.get(RESOURCE_GPU, ())
    return (
        bool(inventory.gpus)
        and not inventory.mig_instances
        and len(devices) == len(inventory.gpus)
        and all(d.share == 1.0 and d.mig is None for d in devices)
    )


def _with_milli(node: Mapping[str, Any], gpus: int) -> dict[str, Any]:
    status = dict(node.get("status") or {})
    amount = str(gpus * MILLI_PER_GPU)
    status["allocatable"] = {**(status.get("allocatable") or {}), RESOURCE_GPU_MILLI: amount}
    status["capacity"] = {**(status.get("capacity") or {}), RESOURCE_GPU_MILLI: amount}
    return {**node, "status": status}


# ------------------------------------------------------------------------------------------ jobs as pods


@dataclass(frozen=True, slots=True)
class PodShape:
    """One way to ask for a job's GPUs: the GPU resources, and the GPUs' worth it holds."""

    resources: tuple[tuple[str, int], ...]
    held_gpus: float
    label: str = ""

    @property
    def resource_map(self) -> dict[str, int]:
        return dict(self.resources)


def pod_request(
    name: str,
    *,
    shape: PodShape,
    cpu_milli: int,
    memory_bytes: int,
    products: tuple[str, ...] = (),
) -> PodRequest:
    """The member scheduler's view of one job's pod."""
    requests = dict(shape.resources)
    if cpu_milli:
        requests["cpu"] = cpu_milli
    if memory_bytes:
        requests["memory"] = memory_bytes
    affinity = ((Requirement(LABEL_GPU_PRODUCT, "In", products),),) if products else None
    return PodRequest(
        key=f"{NAMESPACE}/{name}",
        namespace=NAMESPACE,
        name=name,
        requests=requests,
        affinity=affinity,
    )


class InsideHints(NamedTuple):
    """What the hub's Work adds to a job's pod for its cluster's scheduler: steering away from GPU
    models (:func:`~controlplane.scheduler.core.steering.preferred_term`) and packing toward nodes
    (:func:`~controlplane.scheduler.core.packhints.preferred_term`)."""

    steering: Sequence[str] = ()
    packing: Sequence[str] = ()


def steered(pod: PodRequest, hints: InsideHints) -> PodRequest:
    """``pod`` with the hub's preferred terms of ``hints`` added to its preferred node affinity, as
    the Work carries them, read as the member reads a pod's."""
    terms = ([preferred_term(hints.steering)] if hints.steering else []) + (
        [packing_term(hints.packing)] if hints.packing else []
    )
    if not terms:
        return pod
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}
    return replace(pod, preferred=pod.preferred + preferred_terms(affinity))


def _pod_object(pod: PodRequest, node: str, requests: Mapping[str, int]) -> dict[str, Any]:
    quantities = {res: format_quantity(res, amount) for res, amount in sorted(requests.items()) if amount}
    return {
        "metadata": {"name": pod.name, "namespace": pod.namespace},
        "spec": {"nodeName": node, "containers": [{"name": "job", "resources": {"requests": quantities}}]},
        "status": {"phase": "Running"},
    }


# ------------------------------------------------------------------------------------------ the member


@dataclass(frozen=True, slots=True)
class Placed:
    cluster: str
    node: str
    shape: PodShape
    product: str


class MemberCluster:
    """A member cluster of the replay: its scheduler state, its GPU facts and its reports."""

    def __init__(
        self,
        profile: ClusterProfile,
        *,
        scoring: MemberScoring | None = None,
        seed: int = 0,
        percentage_of_nodes_to_score: int = 100,
        demand_mix: DemandMix | None = None,
        nodes: Sequence[Mapping[str, Any]] | None = None,
        inventories: Mapping[str, NodeInventory] | None = None,
        name: str | None = None,
    ) -> None:
        self.profile = profile
        self.name = name or profile.name
        node_objects = list(nodes) if nodes is not None else build_nodes(profile)
        inventory = dict(inventories) if inventories is not None else build_inventory(profile)
        chosen = scoring or MemberScoring(profile.simulation.scoring.value)
        #: What its agent reports of the scoring (``status.nodeScoring``).
        self.node_scoring = chosen.scoring.node_scoring
        self.state = SharingClusterState(
            scoring=chosen.scoring,
            seed=seed,
            percentage_of_nodes_to_score=percentage_of_nodes_to_score,
            demand_mix=demand_mix,
        )
        node_objects = self.state.add_nodes(node_objects, inventory)
        self.products: dict[str, str] = {}
        self.gpu_count: dict[str, int] = {}
        #: MIG resources by name -> the share of a GPU one device is.
        self.mig_resources: dict[str, float] = {}
        #: Time-sliced resources -> shares per GPU.
        self.shared_resources: dict[str, int] = {}
        for name, state in self.state.nodes.items():
            inv = inventory.get(name)
            self.products[name] = state.labels.get(LABEL_GPU_PRODUCT, "")
            self.gpu_count[name] = len(inv.gpus) if inv is not None else 0
            if inv is None:
                continue
            for resource, devices in inv.devices.items():
                for device in devices:
                    if device.mig is not None and resource.startswith("nvidia.com/mig-"):
                        self.mig_resources[resource] = device.share
                    elif device.replica is not None:
                        self.shared_resources[resource] = round(1 / device.share)
        self.capacity_gpus = sum(self.gpu_count.values())
        self.product_gpus: Counter[str] = Counter()
        for name, count in self.gpu_count.items():
            if count:
                self.product_gpus[self.products[name]] += count
        self.held: dict[str, Placed] = {}
        self.held_gpus = 0.0
        self._trimmed = {str(n["metadata"]["name"]): trim_node(n) for n in node_objects}
        self._pods: dict[str, dict[str, dict[str, Any]]] = {}
        self._dirty: set[str] = set(self.state.nodes)
        self._node_key: dict[str, str | None] = {}
        self._protos: dict[str, NodeShape] = {}
        self._counts: Counter[str] = Counter()
        self._shape_objs: dict[str, NodeShape] = {}
        #: Per shape key, its nodes whose GPUs are partly in use (the report's ``hostnames``).
        self._named: dict[str, set[str]] = {}
        self._base: ClusterSnapshot | None = None
        self._snapshot: ClusterSnapshot | None = None
        self._free_by_node: dict[str, dict[str, int]] = {}
        self._free_totals: Counter[str] = Counter()

    # --- facts ---------------------------------------------------------------------------

    @property
    def price(self) -> Mapping[str, float]:
        return self.profile.pricing

    def mean_price(self) -> float:
        """$ per GPU-hour averaged over the cluster's GPUs (unlisted products cost 0)."""
        if not self.capacity_gpus:
            return 0.0
        total = sum(self.profile.pricing.get(p, 0.0) * n for p, n in self.product_gpus.items())
        return total / self.capacity_gpus

    def has_products(self, products: tuple[str, ...]) -> bool:
        return not products or any(self.product_gpus.get(p) for p in products)

    # --- placing -------------------------------------------------------------------------

    def place(self, pod_for: Mapping[PodShape, PodRequest], shapes: Sequence[PodShape]) -> Placed | None:
        """Bind the job's pod using the first shape some node fits; None when none does."""
        for shape in shapes:
            pod = pod_for[shape]
            result = self.state.schedule([pod])
            if result.bindings:
                node = result.bindings[0].node
                placed = Placed(self.name, node, shape, self.products.get(node, ""))
                self.held[pod.key] = placed
                self.held_gpus += shape.held_gpus
                allocation = self.state.allocations[pod.key]
                self._record_pod(pod, node, allocation.requests)
                return placed
        return None

    def fits_somewhere(self, pod: PodRequest) -> bool:
        return self.state.fits_somewhere(pod)

    def release(self, pod_key: str) -> Placed | None:
        placed = self.held.pop(pod_key, None)
        if placed is None:
            return None
        self.held_gpus -= placed.shape.held_gpus
        self.state.release(pod_key)
        pods = self._pods.get(placed.node)
        if pods is not None:
            pods.pop(pod_key, None)
        self._touch(placed.node)
        return placed

    def _record_pod(self, pod: PodRequest, node: str, requests: Mapping[str, int]) -> None:
        reported = dict(requests)
        if node in self.state.ledgers and reported.get(RESOURCE_GPU):
            reported[RESOURCE_GPU_MILLI] = reported[RESOURCE_GPU] * MILLI_PER_GPU
        self._pods.setdefault(node, {})[pod.key] = _pod_object(pod, node, reported)
        self._touch(node)

    def _touch(self, node: str) -> None:
        self._dirty.add(node)
        self._snapshot = None

    # --- reports -------------------------------------------------------------------------

    def _node_view(self, name: str) -> dict[str, Any]:
        """The node as the agent lists it; a GPU hosting shares is not a whole GPU any more."""
        node = self._trimmed[name]
        ledger = self.state.ledgers.get(name)
        if ledger is None or not ledger.shared:
            return node
        status = dict(node["status"])
        allocatable = dict(status["allocatable"])
        allocatable[RESOURCE_GPU] = str(len(ledger.free) - len(ledger.shared))
        status["allocatable"] = allocatable
        return {**node, "status": status}

    def _refresh(self) -> None:
        for name in self._dirty:
            state = self.state.nodes[name]
            free = (
                {}
                if state.unschedulable
                else {res: amount - state.requested.get(res, 0) for res, amount in state.allocatable.items()}
            )
            old = self._free_by_node.get(name)
            if old is not None:
                self._free_totals.subtract(old)
            self._free_by_node[name] = free
            self._free_totals.update(free)
            key = node_shape_key(self._node_view(name), self._pods.get(name, {}).values())
            if key is not None and key not in self._protos:
                self._protos[key] = NodeShape.from_dict({**json.loads(key), "count": 1})
            previous = self._node_key.get(name)
            if previous != key:
                for changed, delta in ((previous, -1), (key, 1)):
                    if changed is None:
                        continue
                    self._counts[changed] += delta
                    self._name(changed, name, delta > 0)
                    count = self._counts[changed]
                    if count <= 0:
                        del self._counts[changed]
                        self._shape_objs.pop(changed, None)
                    else:
                        self._shape_objs[changed] = self._shape(changed, count)
                self._node_key[name] = key
        self._dirty.clear()

    def _name(self, key: str, node: str, present: bool) -> None:
        """Keep ``node`` among shape ``key``'s named nodes while it is of that shape, when the
        shape's GPUs are partly in use."""
        proto = self._protos[key]
        allocated = {res: amount - proto.free.get(res, 0) for res, amount in proto.allocatable.items()}
        if not gpus_partly_used(proto.allocatable, allocated):
            return
        names = self._named.setdefault(key, set())
        if present:
            names.add(node)
        else:
            names.discard(node)

    def _shape(self, key: str, count: int) -> NodeShape:
        """The hub's shape ``key`` with ``count`` nodes, named as the agent's report names them."""
        proto = self._protos[key]
        names = self._named.get(key)
        if not names:
            return proto.with_free(proto.free, count)
        return proto.with_free(proto.free, count).named(tuple(heapq.nsmallest(MAX_SHAPE_HOSTNAMES, names)), count)

    def cluster_object(self) -> dict[str, Any]:
        """The ``Cluster`` the hub stores for this member (status as :func:`summarize` reports it)."""
        profile = self.profile
        spec: dict[str, Any] = {"provider": profile.provider, "pricing": dict(profile.pricing)}
        for key in ("region", "zone", "tier"):
            value = getattr(profile, key)
            if value is not None:
                spec[key] = value
        if profile.taints:
            spec["taints"] = [t.model_dump(mode="json", exclude_defaults=True) for t in profile.taints]
        views = [self._node_view(name) for name in sorted(self._trimmed)]
        pods = [pod for by_node in self._pods.values() for pod in by_node.values()]
        status = {**summarize(views, pods, now=REPORT_TIME), "nodeScoring": self.node_scoring.value}
        return {
            "metadata": {"name": self.name, "labels": dict(profile.labels)},
            "spec": spec,
            "status": status,
        }

    def snapshot(self) -> ClusterSnapshot:
        """The hub's view of this member now."""
        if self._snapshot is not None:
            return self._snapshot
        self._refresh()
        if self._base is None:
            self._base = ClusterSnapshot.from_cluster(self.cluster_object())
        self._snapshot = self._base.with_shapes(tuple(self._shape_objs.values()))
        return self._snapshot

    def free_totals(self) -> Mapping[str, int]:
        """Free resources summed over the cluster's schedulable nodes (a ``resourceSummary`` view)."""
        self._refresh()
        return self._free_totals


def job_task(job: Job) -> TaskShape:
    """A trace job as a task of FGD's mix (its GPU models as the member labels them)."""
    return TaskShape(job.cpu_milli, job.gpu_milli if job.num_gpu else 0, job.num_gpu, job.gpu_products)


def trace_mix(jobs: Sequence[Job]) -> DemandMix:
    """FGD's task mix of a trace: its most popular task shapes (see :class:`DemandMix`)."""
    return DemandMix.from_tasks(job_task(job) for job in jobs)
