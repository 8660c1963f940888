"""Node-shape scarcity: recent demand that only some clusters' nodes can hold, kept its nodes.

GPU scarcity (:func:`~controlplane.scheduler.core.clusterfit.scarcity`) keeps a GPU model free
for the replicas that accept only that model; this is the same idea lifted from the GPU model to
the whole node shape. A replica of recent demand (:meth:`DemandHistory.needs
<controlplane.scheduler.core.demand.DemandHistory.needs>`: every task shape of the window with
its memory) *needs a node shape* between clusters tied on tier and price when the nodes of some
of them can hold it -- an empty node, by its allocatable CPU, memory, GPU count and GPU model --
and the nodes of others cannot (an 8-GPU replica of 120 cores, where one cluster has nodes of
128 cores and the other of 96).

* :func:`constrained_needs`: those needs, for a tie (replicas that accept only some GPU models
  are left to GPU scarcity, and replicas without GPUs weigh nothing in GPUs).
* :func:`lost_needs`: which of them one node (as reported now) stops hosting when it hosts the
  decided replica.
* :func:`weights`: per constrained need, its GPUs times ``min(1, arrivals / nodes hosting it in
  the fleet now)``: a node taken from a need with more recent arrivals than nodes is a replica of
  it left without one.
* The cost of a cluster is the least, over its nodes hosting the replica, of the weights of the
  needs that node stops hosting (the member may use a node that deprives nobody). A member that
  spreads (kube's LeastAllocated) does not look for that node: it takes the emptiest node hosting
  the replica, which for an 8-GPU replica is the node of most CPU, the rare one. For such a member
  the nodes counted are only those :func:`least_allocated_rows` (its scoring's best). Either way
  only the nodes the replica's node selector, required node affinity and tolerations let it on
  count (:func:`eligible_rows`; kube scores only the nodes that pass its filters), as for share
  remainder hints.

Counted only for a replica every cluster of the tie could hold (one that only some can hold is
itself the scarce demand). Pure: values in, numbers out. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controlplane.apis.constants import RESOURCE_GPU
from controlplane.apis.fragmentation import GPU_MILLI
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.clusterfit import RESOURCE_GPU_MILLI, gpu_vector, place_task
from controlplane.scheduler.core.demand import Need
from controlplane.scheduler.core.estimating import shape_fit
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

Capacity = tuple[str, int, int, int]
"""An empty node: GPU model, allocatable CPU (millicores), memory (bytes) and GPUs."""
ShapeRow = tuple[str, int, int, tuple[int, ...]]
"""A node as reported now: GPU model, free CPU, free memory, free thousandths per GPU."""


def capacities(cluster: ClusterSnapshot) -> frozenset[Capacity]:
    """The distinct empty nodes of ``cluster`` (what its nodes could hold at all)."""
    out = set()
    for shape in cluster.shapes:
        if not shape.count or shape.invalid_mig:
            continue
        allocatable = shape.allocatable
        gpus = max(allocatable.get(RESOURCE_GPU, 0), allocatable.get(RESOURCE_GPU_MILLI, 0) // GPU_MILLI)
        out.add((shape.product, allocatable.get("cpu", 0), allocatable.get("memory", 0), gpus))
    return frozenset(out)


def row_of(shape: NodeShape) -> ShapeRow:
    """One node of ``shape`` as reported now."""
    return (shape.product, shape.free.get("cpu", 0), shape.free.get("memory", 0), gpu_vector(shape))


def shape_rows(cluster: ClusterSnapshot) -> dict[ShapeRow, int]:
    """The distinct nodes of ``cluster`` as reported now, with how many there are."""
    out: dict[ShapeRow, int] = {}
    for shape in cluster.shapes:
        if not shape.count or shape.invalid_mig:
            continue
        row = row_of(shape)
        out[row] = out.get(row, 0) + shape.count
    return out


def eligible_rows(cluster: ClusterSnapshot, requirements: ReplicaRequirements) -> frozenset[ShapeRow]:
    """The distinct nodes of ``cluster`` (as :func:`shape_rows`) a replica of ``requirements`` may go
    to: its node selector, required node affinity and tolerations against the nodes' labels and
    taints, with its resources free, as the estimator reads them
    (:func:`~controlplane.scheduler.core.estimating.shape_fit`)."""
    return frozenset(
        row_of(shape)
        for shape in cluster.shapes
        if shape.count and not shape.invalid_mig and shape_fit(shape, requirements) > 0
    )


def holds(capacity: Capacity, need: Need) -> bool:
    """Whether an empty node of ``capacity`` holds one replica of ``need``."""
    product, cpu, memory, gpus = capacity
    task, asked = need
    if task.num_gpu and (not task.accepts(product) or gpus < task.num_gpu):
        return False
    return cpu >= task.cpu_milli and memory >= asked


def hosts(row: ShapeRow, need: Need) -> bool:
    """Whether a node reported as ``row`` hosts one replica of ``need`` now."""
    return after(row, need) is not None


def after(row: ShapeRow, need: Need) -> ShapeRow | None:
    """``row`` once it hosts one replica of ``need``; None when it cannot."""
    product, cpu, memory, gpus = row
    task, asked = need
    if (task.num_gpu and not task.accepts(product)) or cpu < task.cpu_milli or memory < asked:
        return None
    left = place_task(gpus, task)
    if left is None:
        return None
    return (product, cpu - task.cpu_milli, memory - asked, left)


def _held(capacity_sets: Sequence[frozenset[Capacity]], need: Need) -> list[bool]:
    return [any(holds(capacity, need) for capacity in capacity_set) for capacity_set in capacity_sets]


def constrained_needs(needs: Iterable[Need], capacity_sets: Sequence[frozenset[Capacity]]) -> tuple[Need, ...]:
    """The needs with GPUs and no GPU model of their own that the nodes of some of the tied
    clusters (``capacity_sets``) hold and of others do not, sorted."""
    out = []
    for need in needs:
        task = need[0]
        if not task.num_gpu or task.models:
            continue
        held = _held(capacity_sets, need)
        if any(held) and not all(held):
            out.append(need)
    return tuple(sorted(out))


def held_by_all(capacity_sets: Sequence[frozenset[Capacity]], need: Need) -> bool:
    """Whether the nodes of every tied cluster could hold ``need`` (the replica fits elsewhere)."""
    return all(_held(capacity_sets, need))


def lost_needs(row: ShapeRow, replica: Need, constrained: Sequence[Need]) -> frozenset[Need] | None:
    """The ``constrained`` needs a node reported as ``row`` hosts now and no longer once it hosts
    ``replica``; None when it cannot host ``replica``."""
    left = after(row, replica)
    if left is None:
        return None
    return frozenset(need for need in constrained if hosts(row, need) and not hosts(left, need))


def slots(rows: Mapping[ShapeRow, int], need: Need) -> int:
    """Nodes of ``rows`` hosting one replica of ``need`` now."""
    return sum(count for row, count in rows.items() if hosts(row, need))


def weights(constrained: Sequence[Need], arrivals: Mapping[Need, int], fleet_slots: Sequence[int]) -> dict[Need, float]:
    """Per constrained need: its GPUs times ``min(1, arrivals / nodes hosting it in the fleet)``."""
    out = {}
    for need, free in zip(constrained, fleet_slots, strict=True):
        task = need[0]
        gpus = task.num_gpu * task.gpu_milli / GPU_MILLI
        out[need] = gpus * min(1.0, arrivals.get(need, 0) / max(free, 1))
    return out


def cost(options: Iterable[frozenset[Need]], weight: Mapping[Need, float]) -> float:
    """The least, over a cluster's nodes hosting the replica (``options``: the needs each stops
    hosting), of the weights lost (0 when none hosts it)."""
    best: float | None = None
    for lost in options:
        value = sum(weight[need] for need in lost)
        if best is None or value < best:
            best = value
            if not best:
                break
    return best or 0.0


def least_allocated_rows(
    cluster: ClusterSnapshot, replica: Need, requirements: ReplicaRequirements | None = None
) -> frozenset[ShapeRow]:
    """The nodes of ``cluster`` (as :func:`shape_rows`) a least-allocated member puts ``replica`` on:
    of those hosting it, the ones of the highest score of kube's ``LeastAllocated`` strategy over CPU,
    memory and the GPU resource the replica asks for (whole GPUs, or thousandths for a share), each
    ``(free - asked) * 100 // allocatable``, weighed alike, the sum floor-divided by their number.
    With ``requirements`` (the replica's), only the nodes the member's filters let it on: its node
    selector, required node affinity and tolerations against the nodes' labels and taints, as the
    estimator reads them (:func:`~controlplane.scheduler.core.estimating.shape_fit`). Empty when no
    node hosts it."""
    best: list[ShapeRow] = []
    top = -1
    for shape in cluster.shapes:
        if not shape.count or shape.invalid_mig:
            continue
        if requirements is not None and shape_fit(shape, requirements) <= 0:
            continue
        score = least_allocated_score(shape, replica)
        if score < top:
            continue  # scored first: a node below the best so far is not read further
        row = row_of(shape)
        if after(row, replica) is None:
            continue
        if score > top:
            top, best = score, [row]
        else:
            best.append(row)
    return frozenset(best)


def least_allocated_score(shape: NodeShape, replica: Need) -> int:
    """kube's ``LeastAllocated`` score of one node of ``shape`` for ``replica`` (see
    :func:`least_allocated_rows`; the what-if's members score the same resources; kube's default
    profile scores CPU and memory only, which ranks empty nodes of one GPU count alike)."""
    task, asked = replica
    asks = [("cpu", task.cpu_milli), ("memory", asked)]
    if task.num_gpu:
        asks.append((RESOURCE_GPU, task.num_gpu) if task.gpu_milli >= GPU_MILLI else (RESOURCE_GPU_MILLI, task.gpu_milli))
    total = weight = 0
    for resource, amount in asks:
        capacity = shape.allocatable.get(resource, 0)
        if capacity <= 0:
            continue
        left = shape.free.get(resource, 0) - amount
        total += left * 100 // capacity if left >= 0 else 0
        weight += 1
    return total // weight if weight else 0
