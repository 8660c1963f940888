"""FGD scoring for the member scheduler: per-node GPU slots and the fragmentation delta of a placement.

:class:`FgdRows` keeps, for every node row of :class:`~.cluster_state.ClusterState`, the
free thousandths of each of its GPUs ("slots", padded with 0) and its GPU model, and scores
feasible rows for a pod with :mod:`controlplane.apis.fragmentation`: the fragmentation of
the node now, and after the pod, as FGD (Weng et al., ATC '23) does:

* a share of one GPU (:data:`~.model.RESOURCE_GPU_MILLI`) is tried on every GPU that holds
  it; the node's score is the best GPU's, and that GPU is the one the share gets (the
  lowest index on ties, as the paper's simulator picks);
* whole GPUs take fully free GPUs (which ones does not change the measure);
* a task without GPUs changes only the node's free CPU;
* other GPU resources (MIG instances, time-sliced shares) take the devices the node would
  hand out, worked out per node by the caller (``after`` rows).

The fragmentation of a node now is cached per row and recomputed only after the row
changes. Rows in the same state (GPU model, free CPU, slots) are worked out once per
pod: a fill's candidates are mostly alike. Pure: arrays in, scores out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from controlplane.apis.constants import LABEL_GPU_PRODUCT, RESOURCE_GPU
from controlplane.apis.fragmentation import (
    GPU_MILLI,
    DemandMix,
    MixArrays,
    TaskShape,
    fgd_scores,
    fragmentation_terms,
)
from controlplane.apis.gpus import is_nvidia_resource
from simulator.scheduling.model import RESOURCE_GPU_MILLI, NodeState, PodRequest

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
IndexArray = NDArray[np.intp]
#: (first position of each group of alike rows, each position's group)
Groups = tuple[IndexArray, IndexArray]
_NO_GPU: Final = -1
#: Free CPU values per state id in the rows' one-integer key (thousandths of a core: 2,000,000 cores).
_CPU_SPAN: Final = 2**31


@dataclass(frozen=True, slots=True)
class FgdDemand:
    """What a pod takes, as FGD counts it: CPU, and GPUs as a share of one, whole ones, or neither."""

    cpu_milli: int
    share_milli: int = 0
    whole_gpus: int = 0


class FgdRows:
    """GPU slots and models per node row, the mix's arrays, and the cached fragmentation per row.

    Scoring works each distinct row state (model, free CPU, slots) out once and hands the
    result to every row in it: in a fill most candidates are alike (every empty node of
    one type), so that is a few states instead of a thousand rows. Each row carries the
    id of its (model, slots), numbered as they are first seen, so finding the distinct
    states is a sort of one integer per row.
    """

    def __init__(self, rows: int, width: int) -> None:
        self.slots: IntArray = np.zeros((rows, max(width, 1)), dtype=np.int64)
        self.models: list[str] = [""] * rows
        #: Each row's model as an index into ``_model_names``, so rows pick their access in one take.
        self._model_index: IndexArray = np.zeros(rows, dtype=np.intp)
        self._model_names: list[str] = [""]
        self._model_ids: dict[str, int] = {"": 0}
        self._state: IntArray = np.zeros(rows, dtype=np.int64)
        self._state_ids: dict[tuple[int, bytes], int] = {(0, self.slots[0].tobytes() if rows else b""): 0}
        self._frag: FloatArray = np.zeros(rows, dtype=np.float64)
        self._fresh: NDArray[np.bool_] = np.zeros(rows, dtype=bool)
        self._mix: DemandMix | None = None
        self._arrays: MixArrays | None = None
        self._access: NDArray[np.bool_] | None = None
        self._access_of: MixArrays | None = None

    def set_row(self, row: int, slots: Sequence[int], model: str) -> None:
        line = self.slots[row]
        line[:] = 0
        count = min(len(slots), len(line))
        line[:count] = slots[:count]
        self.models[row] = model
        model_id = self._model_id(model)
        self._model_index[row] = model_id
        self._state[row] = self._state_ids.setdefault((model_id, line.tobytes()), len(self._state_ids))
        self._fresh[row] = False

    def _model_id(self, model: str) -> int:
        known = self._model_ids.get(model)
        if known is None:
            known = self._model_ids[model] = len(self._model_names)
            self._model_names.append(model)
        return known

    def use_mix(self, mix: DemandMix) -> MixArrays:
        if mix is not self._mix or self._arrays is None:
            self._mix = mix
            self._arrays = MixArrays.of(mix, self.models)
            self._fresh[:] = False
        return self._arrays

    def _access_by_model(self, mix: MixArrays) -> NDArray[np.bool_]:
        """(models, K): ``mix.access_rows`` of every model seen, rebuilt when the mix or the models change."""
        names = self._model_names
        if self._access is None or self._access_of is not mix or len(self._access) != len(names):
            self._access = mix.access_rows(names)
            self._access_of = mix
        return self._access

    def fragmentation(self, rows: IndexArray, cpu_free: IntArray, mix: MixArrays) -> FloatArray:
        """Fragmentation of the rows now (``cpu_free`` per row), from the cache where it holds."""
        stale_at = ~self._fresh[rows]
        if stale_at.any():
            stale = rows[stale_at]
            cpu = cpu_free[stale_at]
            groups = self._groups(stale, cpu)
            access = self._access_by_model(mix)
            models = self._model_index[stale]
            self._frag[stale] = _grouped_fragmentation(groups, cpu, self.slots[stale], models, access, mix)
            self._fresh[stale] = True
        values: FloatArray = self._frag[rows]
        return values

    def scores(
        self,
        rows: IndexArray,
        cpu_free: IntArray,
        demand: FgdDemand,
        mix: MixArrays,
        *,
        after: IntArray | None = None,
    ) -> tuple[IntArray, IntArray]:
        """Per row: FGD's score for the pod and, for a share, the GPU it would take (else -1).

        ``after`` (N, width) gives the rows' slots after the pod when the pod takes devices
        the generic rules here do not cover.
        """
        before = self.fragmentation(rows, cpu_free, mix)
        cpu_after = cpu_free - demand.cpu_milli
        slots = self.slots[rows]
        models = self._model_index[rows]
        access = self._access_by_model(mix)
        no_gpu = np.full(len(rows), _NO_GPU, dtype=np.int64)
        if demand.share_milli:
            groups = self._groups(rows, cpu_free)
            return _share_scores(groups, slots, cpu_after, models, access, mix, before, demand.share_milli)
        if after is not None:
            groups = _distinct(np.column_stack((models, cpu_free, after)))
        else:
            groups = self._groups(rows, cpu_free)
            after = slots
            if demand.whole_gpus:
                full = slots >= GPU_MILLI
                taken = full & (np.cumsum(full, axis=1) <= demand.whole_gpus)
                after = np.where(taken, 0, slots)
        frag_after = _grouped_fragmentation(groups, cpu_after, after, models, access, mix)
        return fgd_scores(before, frag_after), no_gpu

    def _groups(self, rows: IndexArray, cpu_free: IntArray) -> Groups:
        """The rows' distinct (model, slots, free CPU) states, from the rows' state ids."""
        if not len(rows):
            return _distinct(np.zeros((0, 1), dtype=np.int64))
        low = int(cpu_free.min())
        span = cpu_free - low
        if int(span.max()) >= _CPU_SPAN:
            return _distinct(np.column_stack((self._state[rows], cpu_free)))
        return _distinct_values(self._state[rows] * _CPU_SPAN + span)


def _distinct(key: IntArray) -> Groups:
    """The first row of each distinct row of ``key`` (N, C), and each row's distinct one."""
    packed = np.ascontiguousarray(key)
    # Rows as single opaque values: a 1-D unique sorts them far faster than ``axis=0``.
    return _distinct_values(packed.view(np.dtype((np.void, packed.itemsize * packed.shape[1]))).ravel())


def _distinct_values(key: NDArray[np.generic]) -> Groups:
    """The first position of each distinct value of ``key`` (N,), and each position's distinct one."""
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first.astype(np.intp), inverse.reshape(-1).astype(np.intp)


def _grouped_fragmentation(
    groups: Groups,
    cpu_free: IntArray,
    slots: IntArray,
    models: IndexArray,
    access: NDArray[np.bool_],
    mix: MixArrays,
) -> FloatArray:
    """Each row's fragmentation (:func:`~controlplane.apis.fragmentation.fragmentation_terms`
    weighted by the mix), each group of alike rows (``groups``) worked out once.

    The weighting by the mix stays one product over all N rows, as over the rows
    themselves: BLAS sums a row differently depending on its place in the batch.
    """
    if not len(mix.freq):
        return np.zeros(len(slots), dtype=np.float64)
    first, inverse = groups
    terms = fragmentation_terms(cpu_free[first], slots[first], access[models[first]], mix)
    result: FloatArray = terms[inverse] @ mix.freq
    return result


def _share_scores(
    groups: Groups,
    slots: IntArray,
    cpu_after: IntArray,
    models: IndexArray,
    access: NDArray[np.bool_],
    mix: MixArrays,
    before: FloatArray,
    milli: int,
) -> tuple[IntArray, IntArray]:
    """Every GPU holding the share as a candidate; the best GPU's score per row.

    ``access`` is per model (``models`` gives each row's). The fragmentation after the
    share, per GPU, is worked out once per group of alike rows; the score against each
    row's own ``before``.
    """
    rows = len(slots)
    if not len(mix.freq):
        return np.full(rows, 50, dtype=np.int64), np.argmax(slots >= milli, axis=1).astype(np.int64)
    first, inverse = groups
    after = _share_fragmentation(slots[first], cpu_after[first], access[models[first]], mix, milli)[inverse]
    candidate = slots >= milli
    scores = fgd_scores(np.repeat(before[:, None], slots.shape[1], axis=1), after)
    scores = np.where(candidate, scores, -1)
    best = np.argmax(scores, axis=1)
    chosen: IntArray = best.astype(np.int64)
    result: IntArray = scores[np.arange(rows), best]
    return result, chosen


def _share_fragmentation(
    slots: IntArray, cpu_after: IntArray, access: NDArray[np.bool_], mix: MixArrays, milli: int
) -> FloatArray:
    """(N, G): the fragmentation of each row after the share goes on each of its GPUs.

    Only the chosen GPU's contribution changes, so the after-state of all (row, GPU)
    candidates is the row's sums corrected for that one GPU. NumPy's stacked product
    weights each row's (G, K) slice on its own, so, unlike a 2-D product, a row's sums do
    not depend on the other rows (tests/whatif/test_fgd_distinct_states.py holds it so).
    """
    m = mix.milli[None, None, :]
    fits = slots[:, :, None] >= m
    fitting = fits.sum(axis=1)
    small = np.where(fits, 0, slots[:, :, None]).sum(axis=1)
    total = slots.sum(axis=1)
    reduced = slots - milli
    fits_after = reduced[:, :, None] >= m
    fitting_g = fitting[:, None, :] - fits + fits_after
    small_g = (
        small[:, None, :]
        - np.where(fits, 0, slots[:, :, None])
        + np.where(fits_after, 0, reduced[:, :, None])
    )
    hosted = (
        (mix.milli[None, None, :] > 0)
        & access[:, None, :]
        & (cpu_after[:, None, None] >= mix.cpu[None, None, :])
        & (fitting_g >= mix.num[None, None, :])
    )
    frag = np.where(hosted, small_g, (total - milli)[:, None, None]).astype(np.float64)
    after: FloatArray = frag @ mix.freq
    return after


def pod_task(pod: PodRequest, units: Mapping[str, int]) -> tuple[TaskShape, FgdDemand, bool]:
    """The pod as a task of the mix, what it takes, and whether it takes only whole GPUs or shares.

    ``units`` gives the thousandths of a GPU one unit of a GPU resource is (MIG instances,
    time-sliced shares); such pods count as a share of one GPU of that size in the mix,
    and their after-state is the caller's (the third value is False).
    """
    requests = pod.requests
    cpu = requests.get("cpu", 0)
    models = _accepted_models(pod)
    share = requests.get(RESOURCE_GPU_MILLI, 0)
    whole = requests.get(RESOURCE_GPU, 0)
    if share:
        return TaskShape(cpu, share, 1, models), FgdDemand(cpu, share_milli=share), True
    others = {r: a for r, a in requests.items() if is_nvidia_resource(r) and r != RESOURCE_GPU and a}
    if whole and not others:
        return TaskShape(cpu, GPU_MILLI, whole, models), FgdDemand(cpu, whole_gpus=whole), True
    if not others and not whole:
        return TaskShape(cpu, 0, 0, models), FgdDemand(cpu), True
    milli = min(GPU_MILLI, sum(units.get(r, 0) * a for r, a in others.items()) + whole * GPU_MILLI)
    return TaskShape(cpu, milli, 1, models), FgdDemand(cpu), False


def _accepted_models(pod: PodRequest) -> tuple[str, ...]:
    """GPU models the pod accepts through ``nodeSelector`` or one required affinity term (else any)."""
    selected = pod.node_selector.get(LABEL_GPU_PRODUCT)
    if selected:
        return (selected,)
    if pod.affinity is not None and len(pod.affinity) == 1:
        for requirement in pod.affinity[0]:
            if requirement.key == LABEL_GPU_PRODUCT and requirement.operator == "In" and not requirement.field:
                return tuple(sorted(requirement.values))
    return ()


def device_slots(node: NodeState) -> list[int]:
    """Free thousandths of each of the node's GPUs, from its free devices (by GPU index)."""
    inventory = node.inventory
    if inventory is None or not inventory.gpus:
        return []
    slots = [0] * len(inventory.gpus)
    for devices in node.free_devices.values():
        for device in devices:
            if 0 <= device.gpu_index < len(slots):
                slots[device.gpu_index] += round(device.share * GPU_MILLI)
    return [min(slot, GPU_MILLI) for slot in slots]


def slots_after(node: NodeState, slots: Sequence[int], pod: PodRequest) -> list[int]:
    """``slots`` after ``pod`` takes the devices the node hands out first (as the scheduler binds)."""
    out = list(slots)
    for resource, amount in pod.requests.items():
        for device in node.free_devices.get(resource, [])[:amount]:
            if 0 <= device.gpu_index < len(out):
                out[device.gpu_index] = max(out[device.gpu_index] - round(device.share * GPU_MILLI), 0)
    return out
