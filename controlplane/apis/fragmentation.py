"""GPU fragmentation of a node for a demand mix: the measure of Fragmentation Gradient Descent.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC '23 (and its simulator, ``kubernetes-scheduler-simulator``).
A node's fragmentation for a task mix is the GPU capacity, in thousandths of a GPU, that
tasks drawn from the mix are expected to be unable to use:

``F(node) = sum over task shapes m of p(m) x frag(node, m)`` where, with the node's free
thousandths per GPU ``f_1..f_G`` and its free CPU,

* a task without GPUs (``gpu_milli`` 0): every free thousandth counts (``sum f_g``);
* a task the node cannot host at all -- a GPU model the task does not accept, fewer than
  ``num_gpu`` GPUs with ``f_g >= gpu_milli``, or too little CPU: ``sum f_g``;
* a task the node can host: only the GPUs too small for it, ``sum of f_g < gpu_milli``.

The mix (:class:`DemandMix`) is the popularity of task shapes, as the simulator builds its
"typical pods": shapes ``(cpu, gpu_milli per GPU, num_gpu, accepted models)`` counted,
sorted by count, the most popular kept until they cover 95 % of the tasks, and their
frequencies renormalised. FGD places each task where ``F`` grows least; its score is
``int(sigmoid((F_before - F_after) / 1000) x 100)`` (:func:`fgd_score`).

Pure: plain values in, numbers out, so the hub's scheduler can lift the measure from
nodes to clusters. :func:`fragmentation_terms` evaluates many nodes at once over NumPy
arrays, per shape of the mix (the member scheduler's hot path weights them by the mix's
frequencies itself); :func:`node_fragmentation` is the one-node form.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

#: Thousandths of one GPU.
GPU_MILLI: Final = 1000
#: Share of the tasks the most popular shapes must cover (the simulator's experiments use 95).
POPULARITY_THRESHOLD_PCT: Final = 95
MAX_SCORE: Final = 100

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True, order=True)
class TaskShape:
    """A task as fragmentation sees it: CPU, thousandths per GPU, GPU count, accepted GPU models.

    ``gpu_milli`` is per GPU: 1000 for whole-GPU tasks, below 1000 for a share of one GPU
    (``num_gpu`` 1), 0 for a task without GPUs. ``models`` empty means any GPU model.
    """

    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    models: tuple[str, ...] = ()

    def accepts(self, model: str) -> bool:
        if not self.models:
            return True
        return bool(model) and model in self.models


@dataclass(frozen=True, slots=True)
class DemandMix:
    """Task shapes with their frequencies (summing to 1), most popular first."""

    shapes: tuple[tuple[TaskShape, float], ...]

    @classmethod
    def from_counts(
        cls, counts: Mapping[TaskShape, float], *, threshold_pct: float = POPULARITY_THRESHOLD_PCT
    ) -> DemandMix:
        """The most popular shapes covering ``threshold_pct`` % of the tasks, renormalised."""
        total = math.fsum(counts.values())
        if total <= 0:
            return cls(())
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        wanted = threshold_pct * total / 100.0
        kept: list[tuple[TaskShape, float]] = []
        covered = 0.0
        for shape, count in ranked:
            if covered >= wanted:
                break
            kept.append((shape, count))
            covered += count
        return cls(tuple((shape, count / covered) for shape, count in kept))

    @classmethod
    def from_tasks(cls, tasks: Iterable[TaskShape], *, threshold_pct: float = POPULARITY_THRESHOLD_PCT) -> DemandMix:
        return cls.from_counts(Counter(tasks), threshold_pct=threshold_pct)

    def __bool__(self) -> bool:
        return bool(self.shapes)


def node_fragmentation(cpu_free: int, gpu_free: Sequence[int], model: str, mix: DemandMix) -> float:
    """``F(node)``: expected free GPU thousandths tasks from ``mix`` cannot use (see the module)."""
    total = sum(gpu_free)
    if not total:
        return 0.0
    out = 0.0
    for shape, freq in mix.shapes:
        if shape.gpu_milli and shape.accepts(model) and cpu_free >= shape.cpu_milli:
            fitting = sum(1 for f in gpu_free if f >= shape.gpu_milli)
            if fitting >= shape.num_gpu:
                out += freq * sum(f for f in gpu_free if f < shape.gpu_milli)
                continue
        out += freq * total
    return out


def fgd_score(before: float, after: float) -> int:
    """FGD's node score: ``int(sigmoid((before - after) / 1000) x 100)``; less growth scores higher."""
    x = (before - after) / GPU_MILLI
    if x >= 0:
        value = 1.0 / (1.0 + math.exp(-x))
    else:
        e = math.exp(x)
        value = e / (1.0 + e)
    return int(value * MAX_SCORE)


def fgd_scores(before: FloatArray, after: FloatArray) -> IntArray:
    """:func:`fgd_score` over arrays."""
    x = np.clip((before - after) / GPU_MILLI, -700.0, 700.0)
    scores: IntArray = np.trunc(MAX_SCORE / (1.0 + np.exp(-x))).astype(np.int64)
    return scores


@dataclass(frozen=True, slots=True)
class MixArrays:
    """A :class:`DemandMix` as arrays over its K shapes, for :func:`fragmentation_terms`."""

    cpu: IntArray
    milli: IntArray
    num: IntArray
    freq: FloatArray
    #: Per model name: whether each shape accepts it ("" = a node without GPUs: only unconstrained shapes).
    access: Mapping[str, NDArray[np.bool_]]

    @classmethod
    def of(cls, mix: DemandMix, models: Iterable[str]) -> MixArrays:
        shapes = [shape for shape, _ in mix.shapes]
        access = {m: np.array([s.accepts(m) for s in shapes], dtype=bool) for m in {*models, ""}}
        return cls(
            cpu=np.array([s.cpu_milli for s in shapes], dtype=np.int64),
            milli=np.array([s.gpu_milli for s in shapes], dtype=np.int64),
            num=np.array([s.num_gpu for s in shapes], dtype=np.int64),
            freq=np.array([f for _, f in mix.shapes], dtype=np.float64),
            access=access,
        )

    def access_rows(self, models: Sequence[str]) -> NDArray[np.bool_]:
        """(N, K): whether each row's GPU model is accepted by each shape."""
        if not len(models):
            return np.zeros((0, len(self.freq)), dtype=bool)
        return np.stack([self.access.get(m, self.access[""]) for m in models])


def fragmentation_terms(
    cpu_free: IntArray, gpu_free: IntArray, access: NDArray[np.bool_], mix: MixArrays
) -> FloatArray:
    """(N, K): ``frag(node, m)`` of each node for each shape, before weighting by the mix.

    Apart so a caller can work the terms out once per distinct node and still weight all
    N rows in one product: BLAS may sum a row differently depending on its place in the
    batch, and FGD's ties turn on the last bit.
    """
    total = gpu_free.sum(axis=1).astype(np.float64)
    fits = gpu_free[:, :, None] >= mix.milli[None, None, :]
    fitting = fits.sum(axis=1)
    small = np.where(fits, 0, gpu_free[:, :, None]).sum(axis=1).astype(np.float64)
    hosted = (
        (mix.milli[None, :] > 0)
        & access
        & (cpu_free[:, None] >= mix.cpu[None, :])
        & (fitting >= mix.num[None, :])
    )
    terms: FloatArray = np.where(hosted, small, total[:, None])
    return terms
