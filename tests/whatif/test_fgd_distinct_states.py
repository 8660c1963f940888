"""FGD's row scoring, which works each distinct row state out once, against the row-by-row original.

:class:`~simulator.scheduling.fgd.FgdRows` scores every distinct (model, free CPU, slots)
state once and hands the result to the rows in it. The reference below is the scoring
as it was before, copied verbatim: every row on its own, the access of each row looked
up by name. Seeded random clusters (rows that repeat a few states, as a fill's empty
nodes do; GPU models some shapes refuse; mixes that change) get random demands over
random row subsets, and rows change between them; the cached fragmentation, every
score and every chosen GPU must be the same to the last bit -- a fill's ties turn on it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from controlplane.apis.fragmentation import GPU_MILLI, DemandMix, MixArrays, TaskShape, fgd_scores
from simulator.scheduling.fgd import FgdDemand, FgdRows

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
IndexArray = NDArray[np.intp]
MODELS = ("A100", "T4", "V100", "")
CASES = 300


def _reference_fragmentation_rows(
    cpu_free: IntArray, gpu_free: IntArray, access: NDArray[np.bool_], mix: MixArrays
) -> FloatArray:
    total = gpu_free.sum(axis=1).astype(np.float64)
    if not len(mix.freq):
        return np.zeros(len(total), dtype=np.float64)
    fits = gpu_free[:, :, None] >= mix.milli[None, None, :]
    fitting = fits.sum(axis=1)
    small = np.where(fits, 0, gpu_free[:, :, None]).sum(axis=1).astype(np.float64)
    hosted = (
        (mix.milli[None, :] > 0)
        & access
        & (cpu_free[:, None] >= mix.cpu[None, :])
        & (fitting >= mix.num[None, :])
    )
    frag = np.where(hosted, small, total[:, None])
    result: FloatArray = frag @ mix.freq
    return result


class _ReferenceRows:
    """The row-by-row scoring, as :class:`FgdRows` had it."""

    def __init__(self, rows: int, width: int) -> None:
        self.slots: IntArray = np.zeros((rows, max(width, 1)), dtype=np.int64)
        self.models: list[str] = [""] * rows
        self._frag: FloatArray = np.zeros(rows, dtype=np.float64)
        self._fresh: NDArray[np.bool_] = np.zeros(rows, dtype=bool)
        self._mix: DemandMix | None = None
        self._arrays: MixArrays | None = None

    def set_row(self, row: int, slots: Sequence[int], model: str) -> None:
        line = self.slots[row]
        line[:] = 0
        count = min(len(slots), len(line))
        line[:count] = slots[:count]
        self.models[row] = model
        self._fresh[row] = False

    def use_mix(self, mix: DemandMix) -> MixArrays:
        if mix is not self._mix or self._arrays is None:
            self._mix = mix
            self._arrays = MixArrays.of(mix, self.models)
            self._fresh[:] = False
        return self._arrays

    def fragmentation(self, rows: IndexArray, cpu_free: IntArray, mix: MixArrays) -> FloatArray:
        stale = rows[~self._fresh[rows]]
        if len(stale):
            position = {int(r): i for i, r in enumerate(rows)}
            cpu = cpu_free[[position[int(r)] for r in stale]]
            access = mix.access_rows([self.models[int(r)] for r in stale])
            self._frag[stale] = _reference_fragmentation_rows(cpu, self.slots[stale], access, mix)
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
        before = self.fragmentation(rows, cpu_free, mix)
        cpu_after = cpu_free - demand.cpu_milli
        slots = self.slots[rows]
        access = mix.access_rows([self.models[int(r)] for r in rows])
        no_gpu = np.full(len(rows), -1, dtype=np.int64)
        if demand.share_milli:
            return _reference_share_scores(slots, cpu_after, access, mix, before, demand.share_milli)
        if after is None:
            after = slots
            if demand.whole_gpus:
                full = slots >= GPU_MILLI
                taken = full & (np.cumsum(full, axis=1) <= demand.whole_gpus)
                after = np.where(taken, 0, slots)
        frag_after = _reference_fragmentation_rows(cpu_after, after, access, mix)
        return fgd_scores(before, frag_after), no_gpu


def _reference_share_scores(
    slots: IntArray,
    cpu_after: IntArray,
    access: NDArray[np.bool_],
    mix: MixArrays,
    before: FloatArray,
    milli: int,
) -> tuple[IntArray, IntArray]:
    rows = len(slots)
    if not len(mix.freq):
        return np.full(rows, 50, dtype=np.int64), np.argmax(slots >= milli, axis=1).astype(np.int64)
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
    after = frag @ mix.freq
    candidate = slots >= milli
    scores = fgd_scores(np.repeat(before[:, None], slots.shape[1], axis=1), after)
    scores = np.where(candidate, scores, -1)
    best = np.argmax(scores, axis=1)
    chosen: IntArray = best.astype(np.int64)
    result: IntArray = scores[np.arange(rows), best]
    return result, chosen


def _random_mix(rng: random.Random) -> DemandMix:
    counts: dict[TaskShape, float] = {}
    for _ in range(rng.choice([0, 1, 3, 8, 20, 40])):
        num = rng.choice([0, 1, 1, 1, 2, 4, 8])
        milli = 0 if num == 0 else (rng.choice([50, 100, 250, 300, 500, 700, 1000]) if num == 1 else 1000)
        models = rng.choice([(), (), (), ("A100",), ("T4", "V100"), ("H800",)])
        counts[TaskShape(rng.choice([0, 1000, 4000, 8000, 16000, 64000]), milli, num, models)] = rng.random()
    return DemandMix.from_counts(counts, threshold_pct=rng.choice([95, 100]))


def _random_state(rng: random.Random, width: int, pool: list[tuple[list[int], str, int]]) -> tuple[list[int], str, int]:
    """Slots, model and free CPU of a row: mostly one of a few shared states, as a fill's nodes are."""
    if pool and rng.random() < 0.7:
        return rng.choice(pool)
    gpus = rng.randint(0, width)
    slots = [rng.choice([0, 0, 100, 250, 300, 500, 750, 1000, 1000, 1000]) for _ in range(gpus)]
    state = (slots, rng.choice(MODELS), rng.choice([0, 500, 2000, 8000, 16000, 64000, 96000, 2**33]))
    pool.append(state)
    return state


def _random_demand(rng: random.Random) -> FgdDemand:
    cpu = rng.choice([0, 500, 1000, 4000, 8000, 16000])
    kind = rng.choice(["share", "whole", "cpu"])
    if kind == "share":
        return FgdDemand(cpu, share_milli=rng.choice([50, 100, 250, 300, 500, 700]))
    if kind == "whole":
        return FgdDemand(cpu, whole_gpus=rng.choice([1, 2, 4, 8]))
    return FgdDemand(cpu)


@pytest.mark.parametrize("seed", range(CASES))
def test_distinct_state_scoring_matches_row_by_row(seed: int) -> None:
    rng = random.Random(seed)
    width = rng.randint(1, 8)
    count = rng.randint(1, 80)
    new, old = FgdRows(count, width), _ReferenceRows(count, width)
    pool: list[tuple[list[int], str, int]] = []
    cpu = np.zeros(count, dtype=np.int64)

    def set_row(row: int) -> None:
        slots, model, free = _random_state(rng, width, pool)
        new.set_row(row, slots, model)
        old.set_row(row, slots, model)
        cpu[row] = free

    for row in range(count):
        set_row(row)
    mix = _random_mix(rng)
    for _ in range(6):
        if rng.random() < 0.3:
            mix = _random_mix(rng)
        new_arrays, old_arrays = new.use_mix(mix), old.use_mix(mix)
        rows = np.array(rng.sample(range(count), rng.randint(1, count)), dtype=np.intp)
        demand = _random_demand(rng)
        after = None
        if rng.random() < 0.2 and not demand.share_milli:
            # a pod taking devices the generic rules do not cover: some GPUs lose a random part
            taken = np.array([[rng.choice([0, 0, 250, 1000]) for _ in range(new.slots.shape[1])] for _ in rows])
            after = np.maximum(new.slots[rows] - taken, 0).astype(np.int64)
        got = new.scores(rows, cpu[rows], demand, new_arrays, after=after)
        want = old.scores(rows, cpu[rows], demand, old_arrays, after=after)
        before = new.fragmentation(rows, cpu[rows], new_arrays)
        assert np.array_equal(before, old.fragmentation(rows, cpu[rows], old_arrays))
        assert np.array_equal(got[0], want[0]), (demand, rows, got[0], want[0])
        assert np.array_equal(got[1], want[1]), (demand, rows, got[1], want[1])
        for row in rng.sample(range(count), rng.randint(0, min(count, 4))):
            set_row(row)
