"""Node scores for one pod shape over the scheduler's node arrays: kube's least- and
most-allocated (NodeResourcesFit's strategies) and the FGD paper's best-fit.

In: the pod's :class:`~.demand.Demand`, the rows of the nodes to score and the arrays
:class:`~.cluster_state.ClusterState` keeps (allocatable, free, GPU thousandths per unit and
left); out: one integer score per row, higher is better. FGD's own scores are :mod:`.fgd`'s.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from simulator.scheduling.demand import Demand, IndexArray, IntArray
from simulator.scheduling.model import GPU_MILLI

#: best-fit's normalisation, as in the FGD paper's simulator: a node of 128 cores and 8 GPUs.
BEST_FIT_MAX_CPU_MILLI: Final = 128_000
BEST_FIT_MAX_GPU_MILLI: Final = 8 * GPU_MILLI
_BEST_FIT_WEIGHT: Final = 0.5


def allocated_scores(demand: Demand, rows: IndexArray, *, alloc: IntArray, free: IntArray, most: bool) -> IntArray:
    """kube's least-allocated score per row (``most``: most-allocated) over cpu, memory and the
    GPU resources the pod asks for, each resource weighed alike."""
    columns = demand.score_columns
    capacity = alloc.take(columns, axis=1).take(rows, axis=0)
    left = free.take(columns, axis=1).take(rows, axis=0)
    used = capacity - left + demand.score_amounts
    present = capacity > 0
    divisor = np.where(present, capacity, 1)
    if most:
        part = np.where(used > capacity, 100, used * 100 // divisor)
    else:
        part = np.where(used > capacity, 0, (capacity - used) * 100 // divisor)
    total = np.where(present, part, 0).sum(axis=1)
    weight = present.sum(axis=1)
    scores: IntArray = np.where(weight > 0, total // np.maximum(weight, 1), 0)
    return scores


def best_fit_scores(
    demand: Demand, rows: IndexArray, *, cpu_free: IntArray, gpu_left: IntArray, units: IntArray
) -> IntArray:
    """The FGD paper's best-fit score per row: the less CPU and GPU a node has left after the pod,
    the higher. ``cpu_free`` and ``gpu_left`` are the rows' own; ``units`` is every node's GPU
    thousandths per unit."""
    cpu_left = cpu_free - demand.cpu
    if len(demand.gpu_columns):
        per_unit = units.take(demand.gpu_columns, axis=1).take(rows, axis=0)
        gpu_left = gpu_left - (per_unit * demand.gpu_amounts).sum(axis=1)
    # The FGD simulator's expression, term by term, so the float rounding is the same.
    left = (
        cpu_left / BEST_FIT_MAX_CPU_MILLI * _BEST_FIT_WEIGHT
        + gpu_left / BEST_FIT_MAX_GPU_MILLI * _BEST_FIT_WEIGHT
    )
    scores: IntArray = np.trunc((1.0 - left) * 100.0).astype(np.int64)
    return scores
