"""What GPU feasibility remembers of a fleet between decisions, and verdicts worked out from it.

:class:`KindVerdicts` is one request kind's verdicts over a fleet as of a reservations clock
(kept in ``Reservations.verdicts_by_kind`` by :class:`~controlplane.scheduler.core.plugins.feasibility.GpuFeasibility`);
:class:`VerdictBasis` is what a feasible verdict saw, so that after other pods of the same
request were reserved the verdict is worked out by counting (:func:`taken_since`) instead of
replaying the reservations. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.estimating import UNLIMITED, Estimate
from controlplane.scheduler.core.framework import Feasibility, Status
from controlplane.scheduler.core.reservations import Journal
from controlplane.scheduler.core.snapshot import ClusterSnapshot


class KindVerdicts(NamedTuple):
    """One request kind's verdicts over a fleet, as of a reservations clock (see ``_filter_fleet``)."""

    serials: tuple[int, ...]
    names: tuple[str, ...]
    positions: dict[str, int]
    clock: int
    passed: list[int]
    """Positions of the clusters that passed, in order."""
    failed: dict[str, Status]
    feasible: dict[str, Feasibility]
    bases: dict[str, VerdictBasis]
    """Per feasible cluster of a single-shape request, what its verdict was worked out from."""


class VerdictBasis(NamedTuple):
    """The reservations a feasible verdict saw: the cluster's journal generation and length, and
    the estimate's replicas per GPU product then."""

    generation: int
    length: int
    by_product: Mapping[str, int]


def remember_basis(
    bases: dict[str, VerdictBasis],
    name: str,
    cluster: ClusterSnapshot,
    snapshot: ClusterSnapshot,
    requirements: ReplicaRequirements,
) -> None:
    estimate: Estimate | None = snapshot.estimates.get(requirements)
    if estimate is None:
        return
    if snapshot is cluster:
        bases[name] = VerdictBasis(0, 0, estimate.by_product)
        return
    cached = cluster.memo.adjustment
    if cached is not None and cached.snapshot is snapshot:
        bases[name] = VerdictBasis(cached.generation, cached.replayed, estimate.by_product)


def left_since(
    basis: VerdictBasis, before: Feasibility | None, journal: Journal, requirements: ReplicaRequirements
) -> tuple[str, int] | None:
    """The GPU product and the replicas of ``requirements`` the cluster holds after the journal
    entries added since ``basis``, when they all took pods of ``requirements``: None when that
    cannot be told without replaying.

    Placing a pod lowers the replicas of its own requirements its node holds by exactly one
    (every resource it asks for, and the pod slot, go down by one request), and best fit only
    places pods where one fits; so ``n`` such pods lower the estimate by exactly ``n``. When the
    estimate counted replicas of one GPU product only, they all came from it, so products and
    price stay while some are left. Anything else (a give-back, another request, several
    products, none left, a new journal) is judged on the replayed snapshot.
    """
    if before is None or journal.generation != basis.generation or len(journal.entries) < basis.length:
        return None
    counted = [(product, count) for product, count in basis.by_product.items() if count > 0]
    if len(counted) != 1 or not requirements.resources:
        return None
    [(product, count)] = counted
    if count != before.available or count >= UNLIMITED:
        return None
    taken = 0
    for entry in journal.entries[basis.length :]:
        if len(entry.demands) != 1 or entry.demands[0].requirements != requirements:
            return None
        taken += entry.demands[0].replicas
    left = count - taken
    return (product, left) if left > 0 else None


def taken_since(
    basis: VerdictBasis,
    before: Feasibility | None,
    journal: Journal,
    requirements: ReplicaRequirements,
    need: int,
    bases: dict[str, VerdictBasis],
    name: str,
) -> Feasibility | None:
    """The verdict for a cluster not running the binding after the entries since ``basis`` (see
    :func:`left_since`), when it still holds ``need``; None otherwise."""
    found = left_since(basis, before, journal, requirements)
    if found is None or found[1] < need:
        return None
    assert before is not None
    product, left = found
    bases[name] = VerdictBasis(basis.generation, len(journal.entries), {product: left})
    return Feasibility(
        available=left, requirements=before.requirements, products=before.products, price=before.price
    )
