"""ClusterQueues of the admission core, written as a table of flavors and quotas: the one
builder the admission tests and the admission benchmark share."""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.admission.core import (
    ClusterQueue,
    FlavorFungibility,
    FlavorQuotas,
    QueueingStrategy,
    Quota,
    ResourceGroup,
    WhenCanBorrow,
    WhenCanPreempt,
)


def cluster_queue(
    name: str,
    flavors: Mapping[str, Mapping[str, Quota | int]],
    *,
    cohort: str | None = None,
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
    try_next: bool = False,
    preempt_first: bool = False,
    inactive: str | None = None,
) -> ClusterQueue:
    """One resource group covering the resources of the first flavor; a bare number is a
    nominal quota. ``try_next``: ``whenCanBorrow: TryNextFlavor``; ``preempt_first``:
    ``whenCanPreempt: Preempt``."""
    covered = tuple(next(iter(flavors.values())))
    fqs = tuple(
        FlavorQuotas(f, {r: q if isinstance(q, Quota) else Quota(q) for r, q in quotas.items()})
        for f, quotas in flavors.items()
    )
    fungibility = FlavorFungibility(
        WhenCanBorrow.TRY_NEXT_FLAVOR if try_next else WhenCanBorrow.BORROW,
        WhenCanPreempt.PREEMPT if preempt_first else WhenCanPreempt.TRY_NEXT_FLAVOR,
    )
    return ClusterQueue(name, (ResourceGroup(covered, fqs),), cohort, strategy, fungibility, inactive)
