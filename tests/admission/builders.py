"""ClusterQueues of the admission core, written as a table of flavors and quotas: the one
builder the admission tests and the admission benchmark share."""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.admission.core import ClusterQueue, FlavorQuotas, QueueingStrategy, Quota, ResourceGroup


def cluster_queue(
    name: str,
    flavors: Mapping[str, Mapping[str, Quota | int]],
    *,
    cohort: str | None = None,
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
    try_next: bool = False,
    inactive: str | None = None,
) -> ClusterQueue:
    """One resource group covering the resources of the first flavor; a bare number is a
    nominal quota."""
    covered = tuple(next(iter(flavors.values())))
    fqs = tuple(
        FlavorQuotas(f, {r: q if isinstance(q, Quota) else Quota(q) for r, q in quotas.items()})
        for f, quotas in flavors.items()
    )
    return ClusterQueue(name, (ResourceGroup(covered, fqs),), cohort, strategy, try_next, inactive)
