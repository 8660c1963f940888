"""Reservations subtracted from a reported snapshot: the cluster's journal replayed on its shapes.

In: a :class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot` and the
:class:`~controlplane.scheduler.core.reservations.Reservations` promised but not yet
reported. Out: the reservation-adjusted snapshot estimates are asked of.

Reservations are subtracted before estimating by replaying the cluster's journal
(``Reservations.journal``): pods a binding takes go greedily (:func:`place_pods`) to the
eligible node shape where the fewest such pods fit (best fit), node by node; a binding
that gives back returns exactly what its own pods took, to those nodes, and the others
stay where they are. The member's own scheduler may spread pods differently, so this is
an approximation of where they will land; it is exact for the totals, and errs towards
keeping large holes free. Reserved pods that do not fit anywhere whole still hold their GPUs:
those are taken from the eligible nodes with the most free of them first, in whatever pieces
are there (:func:`spill_gpus`), so the cluster's total is never sold twice. The member may
well have placed the promised pods where the hub's best fit did not expect them (its
scheduler spreads), so the estimate stays conservative, never optimistic. When capacity is
given back, such spilled promises take their GPUs back and are placed again, whole pods
first.

The adjusted snapshot is memoised per cluster and reservations version. It keeps a ledger of
which reserved pods each node shape holds, so a later adjustment replays only the journal
entries added since, and remembers which shapes changed
(:class:`~controlplane.scheduler.core.estimating.Origin`), so estimates and fit vectors
carry over by looking only at those. :func:`base_holding_as_many` tells when adjustments
since an earlier snapshot touched only nodes that hold none of a request (so an answer about
it carries over unchanged), and :func:`adjusted_at` replays a journal as it was at a
:class:`~controlplane.scheduler.core.reservations.Checkpoint`. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from controlplane.interpreter.requirements import RESOURCE_PODS, ReplicaRequirements
from controlplane.scheduler.core.estimating import (
    CHAIN,
    Origin,
    Splice,
    fit_vector,
    shape_fit,
    splice,
    spliced,
)
from controlplane.scheduler.core.packing import Spilled, place_pods, spill_gpus
from controlplane.scheduler.core.reservations import Checkpoint, Demand, Entry, Reservations
from controlplane.scheduler.core.snapshot import Adjustment, ClusterSnapshot, NodeShape

Hold = tuple[str, ReplicaRequirements, int | Spilled]
"""``(binding, requirements, pods)``: each node of a piece runs ``pods`` reserved pods of the binding;
or ``(binding, requirements, spilled)``: each node holds ``spilled`` GPUs of pods that fit no node whole."""


class _Missing:
    """Pods of a reservation that did not fit when taken (``pods`` of ``requirements``)."""

    __slots__ = ("pods", "requirements")

    def __init__(self, requirements: ReplicaRequirements, pods: int) -> None:
        self.requirements = requirements
        self.pods = pods


class Ledger:
    """Who holds what on an adjusted snapshot's pieces, so a binding can give back its own pods.

    ``holds`` runs parallel to the snapshot's shapes. ``short`` lists, per binding in the
    order they took, the pods that did not fit when taken. Owned by one
    adjusted snapshot at a time: the next adjustment takes it over and changes it.
    """

    __slots__ = ("holds", "short")

    def __init__(self, holds: list[tuple[Hold, ...]], short: dict[str, list[_Missing]]) -> None:
        self.holds = holds
        self.short = short


class _Replay:
    """Replays journal entries on a snapshot's shapes, keeping what estimates carry over."""

    __slots__ = ("added", "base", "holds", "removed", "shapes", "short", "splices", "vectors")

    def __init__(self, base: ClusterSnapshot, ledger: Ledger) -> None:
        self.base = base
        self.shapes: tuple[NodeShape, ...] = base.shapes
        self.holds = ledger.holds
        self.short = ledger.short
        self.removed: list[NodeShape] = []
        self.added: list[NodeShape] = []
        self.splices: list[Splice] = []
        self.vectors: dict[ReplicaRequirements, list[int]] = {}
        """Fit vectors of the requirements placed so far, kept in step with ``shapes``."""

    def apply(self, entry: Entry) -> None:
        if entry.demands:
            self.take(entry.binding, entry.demands)
        else:
            self.give_back(entry.binding)

    def take(self, binding: str, demands: Sequence[Demand]) -> None:
        for demand in demands:
            placed = self._place(binding, demand.requirements, demand.replicas)
            if placed < demand.replicas:
                missing = demand.replicas - placed
                self.short.setdefault(binding, []).append(_Missing(demand.requirements, missing))
                self._spill(binding, demand.requirements, missing)

    def give_back(self, binding: str) -> None:
        """Return the capacity ``binding``'s pods took to the nodes they took it from."""
        self.short.pop(binding, None)
        if not self._return((binding,), spills_only=False):
            return
        # Capacity came back: promises that did not fit when made take their spilled GPUs back
        # and are placed again, whole pods first (in the order they were taken), then what
        # still does not fit spills again.
        shorts = [(other, wants) for other, wants in self.short.items() if any(want.pods for want in wants)]
        if not shorts:
            return
        self._return({other for other, _ in shorts}, spills_only=True)
        full: set[ReplicaRequirements] = set()
        for other, wants in shorts:
            for want in wants:
                if want.pods and want.requirements not in full:
                    placed = self._place(other, want.requirements, want.pods)
                    if not placed:
                        full.add(want.requirements)  # placing only takes capacity: no room later either
                    want.pods -= placed
        for other, wants in shorts:
            for want in wants:
                if want.pods:
                    self._spill(other, want.requirements, want.pods)
            if not any(want.pods for want in wants):
                del self.short[other]

    def _return(self, bindings: Collection[str], *, spills_only: bool) -> bool:
        """Give the capacity held by ``bindings`` (only their spilled GPUs when ``spills_only``)
        back to the nodes it was taken from; whether there was any."""
        holds = self.holds
        step: list[Splice] = []
        for i, held in enumerate(holds):
            if not held:
                continue
            mine = [
                hold for hold in held if hold[0] in bindings and not (spills_only and isinstance(hold[2], int))
            ]
            if not mine:
                continue
            shape = self.shapes[i]
            free = dict(shape.free)
            for _, req, pods in mine:
                if isinstance(pods, int):
                    for name, amount in req.resources:
                        free[name] = free.get(name, 0) + amount * pods
                    if RESOURCE_PODS in free:
                        free[RESOURCE_PODS] += pods
                else:
                    for name, amount in pods:
                        free[name] = free.get(name, 0) + amount
            piece = shape.with_free(free, shape.count)
            holds[i] = tuple(hold for hold in held if not any(hold is gone for gone in mine))
            step.append((i, (piece,)))
            self.removed.append(shape)
            self.added.append(piece)
        if not step:
            return False
        shapes = list(self.shapes)
        for i, (piece,) in step:
            shapes[i] = piece
        self.shapes = tuple(shapes)
        for req, vector in self.vectors.items():
            splice(vector, step, req)
        self.splices.extend(step)
        return True

    def _spill(self, binding: str, req: ReplicaRequirements, replicas: int) -> None:
        """Hold the GPUs of ``replicas`` pods that fit no node whole (see :func:`spill_gpus`)."""
        step: list[Splice] = []
        taken: list[tuple[Spilled, ...]] = []
        self.shapes = spill_gpus(
            self.shapes, req, replicas, removed=self.removed, added=self.added, splices=step, taken=taken
        )
        if not step:
            return
        holds = self.holds
        for (i, _), amounts in zip(step, taken, strict=True):
            held = holds[i]
            holds[i : i + 1] = [(*held, (binding, req, spilled)) if spilled else held for spilled in amounts]
        for other, vector in self.vectors.items():
            splice(vector, step, other)
        self.splices.extend(step)

    def _place(self, binding: str, req: ReplicaRequirements, replicas: int) -> int:
        vectors = self.vectors
        vector = vectors.get(req)
        if vector is None:
            vector = vectors[req] = spliced(fit_vector(self.base, req), self.splices, req)  # a copy of our own
        step: list[Splice] = []
        taken: list[tuple[int, ...]] = []
        self.shapes, placed = place_pods(
            self.shapes, req, replicas, removed=self.removed, added=self.added, fits=vector, splices=step, taken=taken
        )
        if step:
            holds = self.holds
            for (i, _), pods in zip(step, taken, strict=True):
                held = holds[i]
                holds[i : i + 1] = [(*held, (binding, req, n)) if n else held for n in pods]
            for other, other_vector in vectors.items():
                splice(other_vector, step, other)
            self.splices.extend(step)
        return placed


def _known_adjustment(cluster: ClusterSnapshot, version: int) -> ClusterSnapshot | None:
    """``cluster`` adjusted for reservations ``version`` without a replay: itself when nothing is
    reserved in it (version 0), the memoised adjustment when it is for that version; else None."""
    if not version:
        return cluster
    cached = cluster.memo.adjustment
    if cached is not None and cached.version == version:
        return cached.snapshot
    return None


def adjusted_snapshot(cluster: ClusterSnapshot, reservations: Reservations | None) -> ClusterSnapshot:
    """``cluster`` with the capacity reserved in it subtracted (memoised per reservations version).

    The cluster's journal (``Reservations.journal``) is replayed on its shapes; when the
    journal only grew since the last adjustment, just the new entries are.
    """
    if reservations is None:
        return cluster
    version = reservations.version(cluster.name)
    known = _known_adjustment(cluster, version)
    if known is not None:
        return known
    cached = cluster.memo.adjustment
    generation, entries = reservations.journal(cluster.name)
    base = cluster
    todo: Sequence[Entry] = entries
    ledger: Ledger | None = None
    if cached is not None and cached.generation == generation and cached.replayed <= len(entries):
        before = cached.snapshot.memo
        ledger, before.ledger = before.ledger, None
        if ledger is not None:
            base = cached.snapshot
            todo = entries[cached.replayed :]
    if ledger is None:
        ledger = Ledger([()] * len(cluster.shapes), {})
    replay = _Replay(base, ledger)
    for entry in todo:
        replay.apply(entry)
    shapes, removed, added = replay.shapes, replay.removed, replay.added
    adjusted = cluster.with_shapes(shapes)
    memo = adjusted.memo
    memo.fit_vectors.update(replay.vectors)
    memo.ledger = ledger
    # A shape made by one entry and replaced again by the next is in both lists: it never existed.
    gone = {id(s) for s in removed}
    new = {id(s) for s in added}
    if len(removed) + len(added) < len(shapes):  # carrying looks at each changed shape; else recompute
        memo.origin = Origin(
            base,
            [s for s in removed if id(s) not in new],
            [s for s in added if id(s) not in gone],
            replay.splices,
        )
        # Answers are carried at most CHAIN adjustments back: cut the link past that, so
        # the superseded snapshots behind it can be freed.
        node = base
        for _ in range(CHAIN - 1):
            origin = node.memo.origin
            if origin is None:
                break
            node = origin.base
        else:
            node.memo.origin = None
    cluster.memo.adjustment = Adjustment(version, adjusted, generation, len(entries))
    return adjusted


def adjusted_at(cluster: ClusterSnapshot, checkpoint: Checkpoint) -> ClusterSnapshot:
    """``cluster`` with the capacity reserved in it at ``checkpoint`` subtracted.

    The adjusted snapshot memoised for that version when there is one; else the journal as it
    was then, replayed afresh on a copy that nothing else shares (the cluster's own memo keeps
    serving the current reservations). Same answer as :func:`adjusted_snapshot` gave then.
    """
    known = _known_adjustment(cluster, checkpoint.version(cluster.name))
    if known is not None:
        return known
    replay = _Replay(cluster, Ledger([()] * len(cluster.shapes), {}))
    for entry in checkpoint.journal(cluster.name).entries:
        replay.apply(entry)
    return cluster.with_shapes(replay.shapes)


def base_holding_as_many(
    snapshot: ClusterSnapshot, requirements: Sequence[ReplicaRequirements], *, knows: Callable[[ClusterSnapshot], bool]
) -> ClusterSnapshot | None:
    """The nearest snapshot ``snapshot`` was adjusted from (at most ``CHAIN`` adjustments back) that
    ``knows`` something, when every adjustment since changed only node shapes that hold no
    replica of any of ``requirements``: then every estimate of those requirements counts the
    same replicas per GPU product on both. None otherwise."""
    links: list[Origin] = []
    node = snapshot
    for _ in range(CHAIN):
        origin = node.memo.origin
        if origin is None:
            return None
        links.append(origin)
        node = origin.base
        if knows(node):
            break
    else:
        return None
    for origin in reversed(links):  # oldest first: a change of the same kind of GPU is likelier there
        for req in requirements:
            for shape in origin.removed:
                if shape_fit(shape, req):
                    return None
            for shape in origin.added:
                if shape_fit(shape, req):
                    return None
    return node
