"""Kueue's partial admission: the largest pod counts, down to each pod set's ``minCount``, that fit.

Kueue (feature PartialAdmission, on by default) tries fewer pods only after the full counts
neither fit nor find preemption targets. The counts shrink together: a total reduction ``r`` of
the pod sets' summed slack (``count - minCount``) takes ``slack * r // slack total`` pods from
each (Kueue's ``PodSetReducer``), and a binary search over ``r`` finds the smallest reduction that
fits, so the largest counts that are admitted. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

R = TypeVar("R")

#: A pod set's (count, minCount or None).
Bounds = tuple[int, int | None]


def floor(count: int, min_count: int | None) -> int:
    """The fewest pods a pod set accepts (its count when it has no usable ``minCount``)."""
    return count if min_count is None else min(count, max(0, min_count))


def reducible(bounds: Sequence[Bounds]) -> bool:
    """Whether some pod set may be admitted with fewer pods than its count."""
    return any(m is not None and floor(c, m) < c for c, m in bounds)


def counts_at(bounds: Sequence[Bounds], reduction: int) -> tuple[int, ...]:
    """The counts after ``reduction`` pods of the summed slack, shared in proportion to each slack."""
    total = sum(c - floor(c, m) for c, m in bounds)
    return tuple(c - (c - floor(c, m)) * reduction // total for c, m in bounds) if total else tuple(c for c, _ in bounds)


def reduce(bounds: Sequence[Bounds], fits: Callable[[tuple[int, ...]], R | None]) -> R | None:
    """What ``fits`` answers for the largest counts it accepts (None: it accepts none, even with
    every pod set at its ``minCount``). ``fits`` is called about log2(summed slack) + 1 times."""
    total = sum(c - floor(c, m) for c, m in bounds)
    best: R | None = None
    # The smallest fitting reduction lies in [lo, hi) (hi > total: none found yet); 0, the full
    # counts, was tried before.
    lo, hi = 1, total + 1
    while total > 0 and lo < hi:
        mid = (lo + hi) // 2
        found = fits(counts_at(bounds, mid))
        if found is None:
            lo = mid + 1
        else:
            best, hi = found, mid  # each fit is at a smaller reduction than the one before
    return best
