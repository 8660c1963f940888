"""FGD's fragmentation and GPU scarcity lifted from nodes to clusters, from the agent's node shapes.

* :func:`task_of`: a replica's requirements as a task of FGD's mix (CPU, thousandths per GPU,
  GPU count, accepted GPU models from ``nvidia.com/gpu.product`` selectors and affinity).
* :func:`gpu_vector`: a node shape's free thousandths per GPU. The report gives whole free GPUs
  (``nvidia.com/gpu``), free thousandths (``nvidia.com/gpu-milli``) and the GPUs hosting shares
  (those the allocatable ``nvidia.com/gpu`` no longer counts); the thousandths left on shared
  GPUs are taken as evenly spread over them (the report does not say more).
* :func:`fragmentation_growth`: how much the cluster's fragmentation for a mix grows when one
  replica lands where it grows least (FGD's choice inside the cluster), in thousandths of a GPU;
  None when no node hosts it. Computed over the cluster's distinct nodes (:func:`node_rows`),
  with a memo per distinct node the caller keeps per task and mix.
* :func:`free_by_model` and :func:`scarcity`: free GPUs per model, and the constrained demand a
  replica would take capacity from in a cluster: per GPU model of the cluster, the share of
  the cluster's free GPUs it has times ``min(1, demand / fleet free)``, scaled by the replica's
  GPUs.

Pure: values in, numbers out. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Final

from controlplane.apis.constants import LABEL_GPU_PRODUCT, RESOURCE_GPU
from controlplane.apis.fragmentation import GPU_MILLI, DemandMix, TaskShape, node_fragmentation
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

#: Thousandths of a GPU a GPU-sharing node advertises (1000 per GPU), as the agent reports them.
RESOURCE_GPU_MILLI: Final = "nvidia.com/gpu-milli"

NodeRow = tuple[str, int, tuple[int, ...]]
"""A node as fragmentation sees it: GPU model, free CPU (millicores), free thousandths per GPU."""


def _accepted_models(requirements: ReplicaRequirements) -> tuple[str, ...]:
    for key, value in requirements.node_selector:
        if key == LABEL_GPU_PRODUCT:
            return (value,)
    models: set[str] = set()
    for term in requirements.node_affinity:
        found = [e for e in term.expressions if e.key == LABEL_GPU_PRODUCT and e.operator == "In"]
        if not found:
            return ()  # a term without a model constraint accepts any model
        models.update(found[0].values)
    return tuple(sorted(models))


def task_of(requirements: ReplicaRequirements) -> TaskShape | None:
    """One replica as an FGD task; None when it asks for GPU resources other than whole GPUs or
    thousandths of one (MIG slices, time-sliced shares), which fragmentation does not model."""
    resources = dict(requirements.resources)
    cpu = resources.get("cpu", 0)
    whole = resources.get(RESOURCE_GPU, 0)
    milli = resources.get(RESOURCE_GPU_MILLI, 0)
    if any(k != RESOURCE_GPU and k != RESOURCE_GPU_MILLI for k in requirements.gpu_resources):
        return None
    models = _accepted_models(requirements)
    if whole:
        return TaskShape(cpu, GPU_MILLI, whole, models)
    if milli:
        return TaskShape(cpu, min(milli, GPU_MILLI), 1, models)
    return TaskShape(cpu, 0, 0, ())


def gpu_vector(shape: NodeShape) -> tuple[int, ...]:
    """Free thousandths per GPU of one node of ``shape``, largest first (see the module)."""
    free = shape.free
    allocatable = shape.allocatable
    whole = max(free.get(RESOURCE_GPU, 0), 0)
    total = shape.gpu.count if shape.gpu is not None and shape.gpu.count else 0
    if RESOURCE_GPU_MILLI not in allocatable:
        return (GPU_MILLI,) * whole
    total = total or allocatable[RESOURCE_GPU_MILLI] // GPU_MILLI
    rest = max(free.get(RESOURCE_GPU_MILLI, 0) - whole * GPU_MILLI, 0)
    shared = max(total - allocatable.get(RESOURCE_GPU, total), 0)
    if not shared or not rest:
        return (GPU_MILLI,) * whole
    each, extra = divmod(rest, shared)
    partial = [min(each + (1 if i < extra else 0), GPU_MILLI - 1) for i in range(shared)]
    return (GPU_MILLI,) * whole + tuple(partial)


def place_task(gpus: tuple[int, ...], task: TaskShape) -> tuple[int, ...] | None:
    """The node's free thousandths per GPU after hosting ``task`` (best-fit GPU for a share)."""
    if not task.num_gpu:
        return gpus
    if task.gpu_milli >= GPU_MILLI:
        if sum(1 for f in gpus if f >= GPU_MILLI) < task.num_gpu:
            return None
        return (0,) * task.num_gpu + gpus[task.num_gpu :]
    fitting = [(f, i) for i, f in enumerate(gpus) if f >= task.gpu_milli]
    if not fitting:
        return None
    _, index = min(fitting)
    out = list(gpus)
    out[index] -= task.gpu_milli
    return tuple(out)


def node_row(shape: NodeShape) -> NodeRow:
    """One node of ``shape`` as fragmentation sees it (GPU model, free CPU, free GPUs)."""
    return (shape.product, shape.free.get("cpu", 0), gpu_vector(shape))


def node_rows(cluster: ClusterSnapshot) -> tuple[NodeRow, ...]:
    """The distinct nodes of ``cluster`` as fragmentation sees them (:func:`node_row`)."""
    return tuple(
        sorted({node_row(shape) for shape in cluster.shapes if shape.count and not shape.invalid_mig})
    )


def row_growth(row: NodeRow, task: TaskShape, mix: DemandMix) -> float | None:
    """How much one node ``row`` grows in fragmentation for ``mix`` when it hosts ``task``
    (None when it cannot host it)."""
    product, cpu, gpus = row
    if (task.num_gpu and not task.accepts(product)) or cpu < task.cpu_milli:
        return None
    after = place_task(gpus, task)
    if after is None:
        return None
    before = node_fragmentation(cpu, gpus, product, mix)
    return node_fragmentation(cpu - task.cpu_milli, after, product, mix) - before


def fragmentation_growth(
    rows: Sequence[NodeRow], task: TaskShape, mix: DemandMix, memo: MutableMapping[NodeRow, float | None]
) -> float | None:
    """Least growth of a cluster's fragmentation for ``mix`` when one ``task`` lands on one of its
    node ``rows`` (FGD's choice inside the cluster); ``memo``: row -> growth for this task and mix."""
    best: float | None = None
    for row in rows:
        if row in memo:
            growth = memo[row]
        else:
            growth = memo[row] = row_growth(row, task, mix)
        if growth is not None and (best is None or growth < best):
            best = growth
    return best


def free_by_model(cluster: ClusterSnapshot) -> dict[str, float]:
    """Free GPUs per GPU model of ``cluster`` (shares of a GPU count as fractions)."""
    out: dict[str, float] = {}
    for shape in cluster.shapes:
        if not shape.product or shape.invalid_mig:
            continue
        free = sum(gpu_vector(shape)) / GPU_MILLI * shape.count
        if free:
            out[shape.product] = out.get(shape.product, 0.0) + free
    return out


def scarcity(
    task: TaskShape,
    cluster_free: Mapping[str, float],
    fleet_free: Mapping[str, float],
    constrained: Mapping[str, float],
) -> float:
    """GPUs of constrained demand ``task`` would take in a cluster with ``cluster_free`` (see the module)."""
    accepted = {m: f for m, f in cluster_free.items() if task.accepts(m)}
    total = sum(accepted.values())
    if not total or not task.num_gpu:
        return 0.0
    pressure = 0.0
    for model, free in accepted.items():
        demand = constrained.get(model, 0.0)
        if demand:
            pressure += free / total * min(1.0, demand / max(fleet_free.get(model, 0.0), 1.0))
    return pressure * task.num_gpu * task.gpu_milli / GPU_MILLI


def summed(free: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Free GPUs per model (:func:`free_by_model`) of several clusters, summed."""
    out: dict[str, float] = {}
    for by_model in free:
        for model, gpus in by_model.items():
            out[model] = out.get(model, 0.0) + gpus
    return out
