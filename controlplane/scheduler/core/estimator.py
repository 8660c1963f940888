"""How many replicas of a pod fit in a cluster: exact per node, MIG-aware, reservation-aware.

In: a :class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot` (the cluster's
free node shapes as its agent reported them), a
:class:`~controlplane.interpreter.requirements.ReplicaRequirements`, and optionally the
:class:`~controlplane.scheduler.core.reservations.Reservations` promised but not yet
reported. Out: an :class:`Estimate` (replicas, and kube-scheduler-style reasons for the
nodes that cannot take one), or for gangs ``fits_gang`` -> (fits, reasons).

Per node shape the answer is ``min over requested resources of floor(free / request)``
(cpu millicores, memory bytes, ``nvidia.com/gpu``, every ``nvidia.com/mig-*``,
``nvidia.com/gpu.shared``, and one ``pods`` slot when the node reports it), times the
number of identical nodes; nodes that fail the nodeSelector, the required node affinity
or carry an untolerated NoSchedule/NoExecute taint count 0. So eight nodes with one free
GPU each hold no 4-GPU replica, and free 1g slices never hold a 3g request: each MIG
profile is its own resource, exactly as the device plugin advertises it. A node whose
single-strategy MIG layout is invalid (``gpu.product=…-MIG-INVALID``) offers no GPUs.

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

Answers are memoised: per node shape the replicas one node holds, per snapshot the
estimate per requirements, per cluster the reservation-adjusted snapshot per reservations
version. The adjusted snapshot keeps a ledger of which reserved pods each node shape
holds, so a later adjustment replays only the journal entries added since, and remembers
which shapes changed: an estimate the previous snapshot knew is then carried over by
looking only at those shapes, when it is first asked for (most decisions ask about one
or two requirements, so carrying all of them eagerly would be wasted). A freshly reported
snapshot built with ``previous`` carries the previous report's estimates the same way, by
the node shapes the report changed. The hot path stays a few dict lookups per cluster.
:func:`base_holding_as_many` tells when adjustments since an earlier snapshot touched only
nodes that hold none of a request (so an answer about it carries over unchanged), and
:func:`adjusted_at` replays a journal as it was at a :class:`Checkpoint`. No I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

from controlplane.apis.quantity import format_quantity
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import (
    RESOURCE_PODS,
    ReplicaRequirements,
    Taint,
    is_gpu_resource,
    untolerated,
)
from controlplane.scheduler.core.reservations import Checkpoint, Demand, Entry, Reservations
from controlplane.scheduler.core.snapshot import PREVIOUS_REPORT, ClusterSnapshot, NodeShape, ReportChange

UNLIMITED = 1 << 30
"""Replicas of a pod that requests nothing, on nodes that do not report a pod limit."""

_GANG = "gang"
_RUNNABLE = "runnable"
"""Key prefix in a snapshot's memo: ``(_RUNNABLE, requirements)`` -> :func:`can_ever_run`."""
ADJUSTED = "reservations"
"""Key in a snapshot's ``adjusted`` memo: (reservations version, adjusted snapshot, journal generation,
journal entries replayed)."""
_LEDGER = "ledger"
"""Key in an adjusted snapshot's memo: its :class:`_Ledger` (taken over by the next adjustment)."""
_ORIGIN = "origin"
"""Key in an adjusted snapshot's memo: its :class:`_Origin`."""
_FITS = "fits"
"""Key prefix in a snapshot's memo: ``(_FITS, requirements)`` -> its fit vector."""
_CHAIN = 8
"""How many adjustments back an estimate or fit vector is carried from; further back, it is computed afresh."""
_NO_FIT = UNLIMITED + 1
"""A fit vector's entry for a shape that holds no replica (above any real count, so ``min`` skips it;
small enough to stay a one-word int, which ``min`` compares fastest)."""

Splice = tuple[int, tuple[NodeShape, ...]]
"""``shapes[i]`` was replaced by these shapes (the pieces :func:`place_pods` split it into)."""


class _Origin(NamedTuple):
    """How an adjusted snapshot was made from the one before: what estimates and fit vectors carry over."""

    base: ClusterSnapshot
    removed: list[NodeShape]
    added: list[NodeShape]
    splices: list[Splice]
    """In order, each relative to the shapes as the splices before it left them."""

GangReasons = Callable[[], tuple[str, ...]]
"""Why a gang does not fit, worked out when first called (then remembered)."""


def _no_reasons() -> tuple[str, ...]:
    return ()


class Estimate:
    """How many replicas fit, and why the nodes that hold none do not.

    ``reasons`` are worked out on first access: most decisions only need the count.
    """

    __slots__ = ("_explain", "_reasons", "by_product", "products", "replicas")

    def __init__(
        self,
        replicas: int,
        reasons: tuple[str, ...] | None = (),
        products: tuple[str, ...] = (),
        *,
        explain: Callable[[], tuple[str, ...]] | None = None,
        by_product: Mapping[str, int] | None = None,
    ) -> None:
        self.replicas = replicas
        self.products = products
        """GPU products (``nvidia.com/gpu.product``) of the nodes that hold at least one replica."""
        self.by_product: Mapping[str, int] = by_product or {}
        """Replicas per GPU product ("" for nodes without one); lets estimates update incrementally."""
        self._reasons = reasons if explain is None else None
        self._explain = explain

    @property
    def reasons(self) -> tuple[str, ...]:
        if self._reasons is None:
            assert self._explain is not None
            self._reasons = self._explain()
            self._explain = None
        return self._reasons

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Estimate):
            return NotImplemented
        return (self.replicas, self.products, self.reasons) == (other.replicas, other.products, other.reasons)

    def __hash__(self) -> int:
        return hash((self.replicas, self.products))

    def __repr__(self) -> str:
        return f"Estimate(replicas={self.replicas}, reasons={self.reasons!r}, products={self.products!r})"


def _eligible(shape: NodeShape, req: ReplicaRequirements) -> bool:
    labels = shape.labels
    for key, value in req.node_selector:
        if labels.get(key) != value:
            return False
    if req.node_affinity and not any(term.matches(labels) for term in req.node_affinity):
        return False
    return not (shape.taints and untolerated(shape.taints, req.tolerations))


def node_eligible(shape: NodeShape, req: ReplicaRequirements) -> bool:
    """Whether nodes of ``shape`` pass ``req``'s nodeSelector, required node affinity and taints."""
    return _eligible(shape, req)


def _node_fit(shape: NodeShape, req: ReplicaRequirements) -> int:
    """Replicas one node of ``shape`` holds, resources only."""
    free = shape.free
    fit = min(free.get(RESOURCE_PODS, UNLIMITED), UNLIMITED)  # no node holds more than UNLIMITED
    no_gpu = shape.invalid_mig
    for name, amount in req.resources:
        have = 0 if no_gpu and is_gpu_resource(name) else free.get(name, 0)
        q = have // amount
        if q < fit:
            fit = q
            if not fit:
                return 0
    return fit


def shape_fit(shape: NodeShape, req: ReplicaRequirements) -> int:
    """Replicas one node of ``shape`` holds, 0 when the node is not eligible (memoised on the shape)."""
    fits = shape.fits
    fit = fits.get(req)
    if fit is None:
        fit = fits[req] = _node_fit(shape, req) if _eligible(shape, req) else 0
    return fit


def _describe_selector(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f"{k}={v}" for k, v in pairs)


def _compute(cluster: ClusterSnapshot, req: ReplicaRequirements) -> Estimate:
    by_product: dict[str, int] = {}
    for shape in cluster.shapes:
        fit = shape_fit(shape, req)
        if fit:
            product = shape.product
            by_product[product] = by_product.get(product, 0) + fit * shape.count
    return _estimate(cluster, req, by_product)


def _estimate(cluster: ClusterSnapshot, req: ReplicaRequirements, by_product: dict[str, int]) -> Estimate:
    return Estimate(
        min(sum(by_product.values()), UNLIMITED),
        products=tuple(sorted(p for p, n in by_product.items() if p and n > 0)),
        # The shapes, not the snapshot: the snapshot memoises this estimate, and a reference
        # back would make every superseded snapshot garbage that only the cycle collector frees.
        explain=functools.partial(_explain_shapes, cluster.shapes, req),
        by_product=by_product,
    )


def _derive(snapshot: ClusterSnapshot, req: ReplicaRequirements) -> Estimate:
    """``snapshot``'s estimate for ``req``: carried down from the nearest snapshot it was
    adjusted from that knows it (at most ``_CHAIN`` adjustments back), or from the previous
    report of the snapshot those were adjusted from, else computed over every shape.
    Estimates carried through are remembered on the way."""
    chain: list[tuple[ClusterSnapshot, _Origin]] = []
    node = snapshot
    while True:
        origin: _Origin | None = node.adjusted.get(_ORIGIN)
        if origin is None:
            break
        if len(chain) == _CHAIN:
            return _compute(snapshot, req)
        chain.append((node, origin))
        before: Estimate | None = origin.base.estimates.get(req)
        if before is not None:
            return _carry_down(chain, req, before)
        node = origin.base
    # ``node`` is the reported snapshot the chain starts from: try the report before it.
    change: ReportChange | None = node.adjusted.get(PREVIOUS_REPORT)
    previous: Estimate | None = change.estimates.get(req) if change is not None else None
    if change is None or previous is None:
        return _compute(snapshot, req)
    reported = node.estimates[req] = _carry(node, req, previous, change.removed, change.added)
    return _carry_down(chain, req, reported) if chain else reported


def _carry_down(chain: list[tuple[ClusterSnapshot, _Origin]], req: ReplicaRequirements, before: Estimate) -> Estimate:
    """Carry ``before`` (known on the base of the last link) down ``chain`` to its first snapshot.

    The snapshots in between are superseded adjustments nobody asks again, so the counts are
    moved through all links at once and only the first snapshot remembers an estimate.
    """
    by_product = dict(before.by_product)
    for _, link in reversed(chain):
        _move(by_product, req, link.removed, link.added)
    snapshot = chain[0][0]
    found = snapshot.estimates[req] = _estimate(snapshot, req, by_product)
    return found


def _fit_vector(snapshot: ClusterSnapshot, req: ReplicaRequirements) -> list[int]:
    """Per shape of ``snapshot``, the replicas of ``req`` one node holds (``_NO_FIT`` for none).

    Memoised per snapshot; an adjusted snapshot splices the vector of the one it was made
    from (at most ``_CHAIN`` adjustments back) instead of looking at every shape again.
    Callers must not change the list.
    """
    key = (_FITS, req)
    found: list[int] | None = snapshot.adjusted.get(key)
    if found is not None:
        return found
    chain: list[tuple[ClusterSnapshot, _Origin]] = []
    node = snapshot
    while len(chain) < _CHAIN:
        origin: _Origin | None = node.adjusted.get(_ORIGIN)
        if origin is None:
            break
        chain.append((node, origin))
        found = origin.base.adjusted.get(key)
        if found is not None:
            for step, link in reversed(chain):
                found = step.adjusted[key] = _spliced(found, link.splices, req)
            return found
        node = origin.base
    vector = snapshot.adjusted[key] = [shape_fit(shape, req) or _NO_FIT for shape in snapshot.shapes]
    return vector


def _spliced(vector: list[int], splices: Sequence[Splice], req: ReplicaRequirements) -> list[int]:
    """A copy of ``vector`` with ``splices`` applied (the fits of ``req`` on the new pieces)."""
    out = list(vector)
    _splice(out, splices, req)
    return out


def _splice(vector: list[int], splices: Sequence[Splice], req: ReplicaRequirements) -> None:
    """Apply ``splices`` to ``vector`` in place."""
    for i, pieces in splices:
        vector[i : i + 1] = [shape_fit(piece, req) or _NO_FIT for piece in pieces]


def _carry(
    snapshot: ClusterSnapshot,
    req: ReplicaRequirements,
    before: Estimate,
    removed: Sequence[NodeShape],
    added: Sequence[NodeShape],
) -> Estimate:
    """``before`` (the estimate on the snapshot ``snapshot`` was derived from) moved by the
    replicas of the shapes that derivation ``removed`` and ``added``."""
    by_product = dict(before.by_product)
    _move(by_product, req, removed, added)
    return _estimate(snapshot, req, by_product)


def _move(
    by_product: dict[str, int], req: ReplicaRequirements, removed: Sequence[NodeShape], added: Sequence[NodeShape]
) -> None:
    """Replicas per product, in place: less those of ``removed`` shapes, plus those of ``added`` ones."""
    for shape in removed:
        fit = shape_fit(shape, req)
        if fit:
            by_product[shape.product] -= fit * shape.count
    for shape in added:
        fit = shape_fit(shape, req)
        if fit:
            by_product[shape.product] = by_product.get(shape.product, 0) + fit * shape.count


def _explain(cluster: ClusterSnapshot, req: ReplicaRequirements) -> tuple[str, ...]:
    """kube-scheduler-style reasons for the nodes of ``cluster`` that hold no replica of ``req``."""
    return _explain_shapes(cluster.shapes, req)


def _explain_shapes(shapes: Sequence[NodeShape], req: ReplicaRequirements) -> tuple[str, ...]:
    """:func:`_explain` over a cluster's node shapes."""
    total_nodes = sum(s.count for s in shapes)
    if not total_nodes:
        return ("0/0 nodes are available: the cluster reports no Ready, schedulable nodes",)
    wants_gpu = any(is_gpu_resource(name) for name, _ in req.resources)
    selector_misses = affinity_misses = invalid_mig = 0
    taint_misses: dict[Taint, int] = {}
    invalid_products: set[str] = set()
    # resource -> [nodes short of it, largest free on one node, free in total]
    short: dict[str, list[int]] = {}
    needs = list(req.resources)
    for shape in shapes:
        count = shape.count
        labels = shape.labels
        if req.node_selector and any(labels.get(k) != v for k, v in req.node_selector):
            selector_misses += count
            continue
        if req.node_affinity and not any(t.matches(labels) for t in req.node_affinity):
            affinity_misses += count
            continue
        if shape.taints:
            bad = untolerated(shape.taints, req.tolerations)
            if bad:
                taint_misses[bad[0]] = taint_misses.get(bad[0], 0) + count
                continue
        if shape_fit(shape, req):
            continue
        if wants_gpu and shape.invalid_mig:
            invalid_mig += count
            invalid_products.add(shape.product)
            continue
        pods_free = shape.free.get(RESOURCE_PODS)
        checks = [*needs, (RESOURCE_PODS, 1)] if pods_free is not None else needs
        for name, amount in checks:
            have = shape.free.get(name, 0)
            if have < amount:
                entry = short.setdefault(name, [0, 0, 0])
                entry[0] += count
                entry[1] = max(entry[1], have)
                entry[2] += have * count
    reasons: list[str] = []
    if selector_misses:
        reasons.append(
            f"{total_nodes - selector_misses}/{total_nodes} nodes match nodeSelector "
            f"{_describe_selector(req.node_selector)}"
        )
    if affinity_misses:
        terms = " or ".join(
            "(" + ", ".join(e.describe() for e in t.expressions) + ")" for t in req.node_affinity
        )
        reasons.append(f"{affinity_misses} node(s) didn't match required node affinity {terms}")
    for taint, count in sorted(taint_misses.items(), key=lambda kv: (kv[0].key, kv[0].value, kv[0].effect)):
        reasons.append(f"{count} node(s) had untolerated taint {taint.describe()}")
    if invalid_mig:
        reasons.append(
            f"{invalid_mig} node(s) have an unusable MIG layout "
            f"(nvidia.com/gpu.product={','.join(sorted(invalid_products))})"
        )
    amounts = dict(req.resources)
    for name in sorted(short):
        nodes, largest, total = short[name]
        need = amounts.get(name, 1)
        reason = (
            f"insufficient {name}: need {format_quantity(name, need)}, "
            f"{format_quantity(name, largest)} free (most on one node; {nodes} node(s) short)"
        )
        if total >= need:
            reason += f"; {format_quantity(name, total)} free in total but fragmented across nodes"
        reasons.append(reason)
    return tuple(reasons)


Spilled = tuple[tuple[str, int], ...]
"""GPU resources a promise that fits no node whole holds on one node: ``((resource, amount), ...)``."""
Hold = tuple[str, ReplicaRequirements, int | Spilled]
"""``(binding, requirements, pods)``: each node of a piece runs ``pods`` reserved pods of the binding;
or ``(binding, requirements, spilled)``: each node holds ``spilled`` GPUs of pods that fit no node whole."""


class _Missing:
    """Pods of a reservation that did not fit when taken (``pods`` of ``requirements``)."""

    __slots__ = ("pods", "requirements")

    def __init__(self, requirements: ReplicaRequirements, pods: int) -> None:
        self.requirements = requirements
        self.pods = pods


class _Ledger:
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

    def __init__(self, base: ClusterSnapshot, ledger: _Ledger) -> None:
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
            _splice(vector, step, req)
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
            _splice(vector, step, other)
        self.splices.extend(step)

    def _place(self, binding: str, req: ReplicaRequirements, replicas: int) -> int:
        vectors = self.vectors
        vector = vectors.get(req)
        if vector is None:
            vector = vectors[req] = _spliced(_fit_vector(self.base, req), self.splices, req)  # a copy of our own
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
                _splice(other_vector, step, other)
            self.splices.extend(step)
        return placed


def adjusted_snapshot(cluster: ClusterSnapshot, reservations: Reservations | None) -> ClusterSnapshot:
    """``cluster`` with the capacity reserved in it subtracted (memoised per reservations version).

    The cluster's journal (``Reservations.journal``) is replayed on its shapes; when the
    journal only grew since the last adjustment, just the new entries are.
    """
    if reservations is None:
        return cluster
    version = reservations.version(cluster.name)
    if not version:
        return cluster
    cached = cluster.adjusted.get(ADJUSTED)
    if cached is not None and cached[0] == version:
        adjusted: ClusterSnapshot = cached[1]
        return adjusted
    generation, entries = reservations.journal(cluster.name)
    base = cluster
    todo: Sequence[Entry] = entries
    ledger: _Ledger | None = None
    if cached is not None and cached[2] == generation and cached[3] <= len(entries):
        ledger = cached[1].adjusted.pop(_LEDGER, None)
        if ledger is not None:
            base = cached[1]
            todo = entries[cached[3] :]
    if ledger is None:
        ledger = _Ledger([()] * len(cluster.shapes), {})
    replay = _Replay(base, ledger)
    for entry in todo:
        replay.apply(entry)
    shapes, removed, added = replay.shapes, replay.removed, replay.added
    adjusted = cluster.with_shapes(shapes)
    memo = adjusted.adjusted
    for req, vector in replay.vectors.items():
        memo[(_FITS, req)] = vector
    memo[_LEDGER] = ledger
    # A shape made by one entry and replaced again by the next is in both lists: it never existed.
    gone = {id(s) for s in removed}
    new = {id(s) for s in added}
    if len(removed) + len(added) < len(shapes):  # carrying looks at each changed shape; else recompute
        memo[_ORIGIN] = _Origin(
            base,
            [s for s in removed if id(s) not in new],
            [s for s in added if id(s) not in gone],
            replay.splices,
        )
        # Answers are carried at most _CHAIN adjustments back: cut the link past that, so
        # the superseded snapshots behind it can be freed.
        node = base
        for _ in range(_CHAIN - 1):
            origin: _Origin | None = node.adjusted.get(_ORIGIN)
            if origin is None:
                break
            node = origin.base
        else:
            node.adjusted.pop(_ORIGIN, None)
    cluster.adjusted[ADJUSTED] = (version, adjusted, generation, len(entries))
    return adjusted


def adjusted_at(cluster: ClusterSnapshot, checkpoint: Checkpoint) -> ClusterSnapshot:
    """``cluster`` with the capacity reserved in it at ``checkpoint`` subtracted.

    The adjusted snapshot memoised for that version when there is one; else the journal as it
    was then, replayed afresh on a copy that nothing else shares (the cluster's own memo keeps
    serving the current reservations). Same answer as :func:`adjusted_snapshot` gave then.
    """
    version = checkpoint.version(cluster.name)
    if not version:
        return cluster
    cached = cluster.adjusted.get(ADJUSTED)
    if cached is not None and cached[0] == version:
        adjusted: ClusterSnapshot = cached[1]
        return adjusted
    replay = _Replay(cluster, _Ledger([()] * len(cluster.shapes), {}))
    for entry in checkpoint.journal(cluster.name).entries:
        replay.apply(entry)
    return cluster.with_shapes(replay.shapes)


def base_holding_as_many(
    snapshot: ClusterSnapshot, requirements: Sequence[ReplicaRequirements], *, knows: Callable[[ClusterSnapshot], bool]
) -> ClusterSnapshot | None:
    """The nearest snapshot ``snapshot`` was adjusted from (at most ``_CHAIN`` adjustments back) that
    ``knows`` something, when every adjustment since changed only node shapes that hold no
    replica of any of ``requirements``: then every estimate of those requirements counts the
    same replicas per GPU product on both. None otherwise."""
    links: list[_Origin] = []
    node = snapshot
    for _ in range(_CHAIN):
        origin: _Origin | None = node.adjusted.get(_ORIGIN)
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


def estimate_max_replicas(
    cluster: ClusterSnapshot,
    requirements: ReplicaRequirements,
    *,
    reserved: Reservations | None = None,
) -> Estimate:
    """Replicas of ``requirements`` that fit in ``cluster`` after ``reserved`` capacity, with reasons."""
    snapshot = adjusted_snapshot(cluster, reserved)
    cache = snapshot.estimates
    found = cache.get(requirements)
    if found is None:
        found = cache[requirements] = _derive(snapshot, requirements)
    result: Estimate = found
    return result


def room_without(
    cluster: ClusterSnapshot,
    requirements: Sequence[ReplicaRequirements],
    *,
    reserved: Reservations,
    binding: str,
) -> int:
    """The most replicas of any of ``requirements`` that fit in ``cluster`` with every
    reservation there but ``binding``'s subtracted (0 without requirements).

    Asks whether a fresh report leaves room for pods of ``binding`` that its member could not
    place: their own promise set aside, the others kept. Works on a copy of the snapshot, so
    the reservation-adjusted view decisions use stays cached.
    """
    others = reserved.without(binding, cluster=cluster.name)
    copy = cluster.with_shapes(cluster.shapes)
    return max((estimate_max_replicas(copy, req, reserved=others).replicas for req in requirements), default=0)


def can_ever_run(cluster: ClusterSnapshot, requirements: ReplicaRequirements) -> bool:
    """Whether some node of ``cluster`` could run one replica of ``requirements`` were it empty.

    The node must be eligible (nodeSelector, required node affinity, taints) and its
    allocatable resources (its free ones where the agent reports no allocatable) must cover
    the request. Unlike :func:`estimate_max_replicas` this ignores what runs there now: it
    says whether replicas a cluster already runs could be running under ``requirements``.
    Memoised on the snapshot.
    """
    key = (_RUNNABLE, requirements)
    memo = cluster.estimates
    found: bool | None = memo.get(key)
    if found is None:
        found = False
        for shape in cluster.shapes:
            # Per node, remembered with its other answers (shared by nodes of equal content).
            fits = shape.fits
            runs = fits.get(key)
            if runs is None:
                runs = fits[key] = int(_eligible(shape, requirements) and _holds_one_when_empty(shape, requirements))
            if runs:
                found = True
                break
        memo[key] = found
    return found


def _holds_one_when_empty(shape: NodeShape, req: ReplicaRequirements) -> bool:
    allocatable, free = shape.allocatable, shape.free
    for name, amount in (*req.resources, (RESOURCE_PODS, 1)):
        if name == RESOURCE_PODS and name not in allocatable and name not in free:
            continue  # the node reports no pod limit
        if shape.invalid_mig and is_gpu_resource(name):
            return False
        if max(allocatable.get(name, 0), free.get(name, 0)) < amount:
            return False
    return True


def _subtract(free: Mapping[str, int], req: ReplicaRequirements, pods: int) -> dict[str, int]:
    out = dict(free)
    for name, amount in req.resources:
        out[name] = out.get(name, 0) - amount * pods
    if RESOURCE_PODS in out:
        out[RESOURCE_PODS] -= pods
    return out


def place_pods(
    shapes: Sequence[NodeShape],
    req: ReplicaRequirements,
    replicas: int,
    *,
    removed: list[NodeShape] | None = None,
    added: list[NodeShape] | None = None,
    fits: Sequence[int] | None = None,
    splices: list[Splice] | None = None,
    taken: list[tuple[int, ...]] | None = None,
) -> tuple[tuple[NodeShape, ...], int]:
    """Place ``replicas`` pods greedily on ``shapes``; return the remaining shapes and pods placed.

    Best fit: eligible shapes where the fewest such pods fit per node are filled first,
    each node as full as it gets, so large holes stay free for large pods. A shape group
    is split into the nodes that took pods and those that did not. The shapes replaced
    and the ones replacing them are appended to ``removed`` and ``added`` when given;
    each replacement is appended to ``splices`` (highest index first) when given, and
    with it to ``taken`` the pods each node of every piece took (0 for the untouched ones).
    ``fits`` is the fit vector of ``req`` over ``shapes`` when the caller has it (see
    :func:`_fit_vector`): the tightest shape is then found without looking at every shape.
    """
    if replicas <= 0:
        return tuple(shapes), 0
    if fits is not None:
        least = min(fits, default=_NO_FIT)
        if least == _NO_FIT:
            return tuple(shapes), 0
        tightest = (least, fits.index(least))
        candidates = None
    else:
        candidates = []
        for i, shape in enumerate(shapes):
            fit = shape.fits.get(req)
            if fit is None:
                fit = shape_fit(shape, req)
            if fit:
                candidates.append((fit, i))
        if not candidates:
            return tuple(shapes), 0
        tightest = min(candidates)
    if tightest[0] * shapes[tightest[1]].count >= replicas:
        order = [tightest]  # the usual case: one shape group takes every pod
    else:
        if candidates is None:
            assert fits is not None
            candidates = [(fit, i) for i, fit in enumerate(fits) if fit != _NO_FIT]
        candidates.sort()
        order = candidates
    pieces: dict[int, list[NodeShape]] = {}
    pods: dict[int, tuple[int, ...]] = {}
    remaining = replicas
    for fit, i in order:
        shape = shapes[i]
        take = min(remaining, fit * shape.count)
        full, rest = divmod(take, fit)
        split: list[NodeShape] = []
        untouched = shape.count - full - (1 if rest else 0)
        if untouched:
            split.append(shape.with_count(untouched))
        if full:
            split.append(shape.with_free(_subtract(shape.free, req, fit), full))
        if rest:
            split.append(shape.with_free(_subtract(shape.free, req, rest), 1))
        pieces[i] = split
        if taken is not None:
            pods[i] = (*((0,) if untouched else ()), *((fit,) if full else ()), *((rest,) if rest else ()))
        if removed is not None and added is not None:
            removed.append(shape)
            added.extend(split)
        remaining -= take
        if not remaining:
            break
    if splices is not None:
        for i in sorted(pieces, reverse=True):
            splices.append((i, tuple(pieces[i])))
            if taken is not None:
                taken.append(pods[i])
    if len(pieces) == 1:
        [(i, split)] = pieces.items()
        return (*shapes[:i], *split, *shapes[i + 1 :]), replicas - remaining
    out: list[NodeShape] = []
    start = 0
    for i in sorted(pieces):
        out.extend(shapes[start:i])
        out.extend(pieces[i])
        start = i + 1
    out.extend(shapes[start:])
    return tuple(out), replicas - remaining


def spill_gpus(
    shapes: Sequence[NodeShape],
    req: ReplicaRequirements,
    replicas: int,
    *,
    removed: list[NodeShape] | None = None,
    added: list[NodeShape] | None = None,
    splices: list[Splice] | None = None,
    taken: list[tuple[Spilled, ...]] | None = None,
) -> tuple[NodeShape, ...]:
    """Take the GPUs of ``replicas`` pods of ``req`` that fit no node whole from ``shapes``.

    Each GPU resource of the request (``replicas`` x its amount) is taken from the eligible
    nodes with the most free of the request's GPU resources first, as much as each node has,
    until it is all taken or nothing is left. So a promise the hub cannot place still counts
    against the cluster's total, and against its largest holes first: whatever the member did
    with it, no estimate is larger than the truth because of it. Only GPUs are taken (they are
    what the federation places by); nodes with an unusable MIG layout offer none. Returns the
    remaining shapes; ``removed``, ``added``, ``splices`` (highest index first) and ``taken``
    (per piece, the amounts each of its nodes gave, empty for untouched ones) as in
    :func:`place_pods`.
    """
    remaining = {name: amount * replicas for name, amount in req.resources if is_gpu_resource(name)}
    if replicas <= 0 or not remaining:
        return tuple(shapes)
    order = sorted(
        (-sum(shape.free.get(name, 0) for name in remaining), i)
        for i, shape in enumerate(shapes)
        if not shape.invalid_mig and _eligible(shape, req)
    )
    pieces: dict[int, list[NodeShape]] = {}
    gave: dict[int, tuple[Spilled, ...]] = {}
    for most, i in order:
        if not most or not any(remaining.values()):
            break
        shape = shapes[i]
        left = shape.count
        split: list[NodeShape] = []
        amounts: list[Spilled] = []
        while left:
            give = {
                name: min(shape.free.get(name, 0), need) for name, need in remaining.items() if need > 0
            }
            give = {name: amount for name, amount in give.items() if amount > 0}
            if not give:
                break
            nodes = min(left, min(remaining[name] // amount for name, amount in give.items()))
            free = dict(shape.free)
            for name, amount in give.items():
                free[name] -= amount
                remaining[name] -= amount * nodes
            split.append(shape.with_free(free, nodes))
            amounts.append(tuple(sorted(give.items())))
            left -= nodes
        if not split:
            continue
        if left:
            split.insert(0, shape.with_count(left))
            amounts.insert(0, ())
        pieces[i] = split
        gave[i] = tuple(amounts)
        if removed is not None and added is not None:
            removed.append(shape)
            added.extend(split)
    if not pieces:
        return tuple(shapes)
    if splices is not None:
        for i in sorted(pieces, reverse=True):
            splices.append((i, tuple(pieces[i])))
            if taken is not None:
                taken.append(gave[i])
    out: list[NodeShape] = []
    start = 0
    for i in sorted(pieces):
        out.extend(shapes[start:i])
        out.extend(pieces[i])
        start = i + 1
    out.extend(shapes[start:])
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _envelope(components: tuple[Component, ...]) -> ReplicaRequirements | None:
    """A pod that needs, of every resource, the most any component needs; None when the
    components differ in where they may run (selectors, affinity, tolerations)."""
    first = components[0].requirements if components else None
    if first is None:
        return None
    largest: dict[str, int] = {}
    for component in components:
        req = component.requirements
        if (req.node_selector, req.node_affinity, req.tolerations) != (
            first.node_selector,
            first.node_affinity,
            first.tolerations,
        ):
            return None
        for name, amount in req.resources:
            if amount > largest.get(name, 0):
                largest[name] = amount
    return ReplicaRequirements(
        resources=tuple(sorted(largest.items())),
        node_selector=first.node_selector,
        node_affinity=first.node_affinity,
        tolerations=first.tolerations,
    ).interned()


def _size_key(component: Component) -> tuple[int, int, int]:
    resources = component.requirements.resource_map
    gpus = sum(v for k, v in resources.items() if is_gpu_resource(k))
    return (gpus, resources.get("cpu", 0), resources.get("memory", 0))


def fits_gang(
    cluster: ClusterSnapshot,
    components: Sequence[Component],
    *,
    reserved: Reservations | None = None,
) -> tuple[bool, tuple[str, ...]]:
    """Whether every pod of the gang fits in ``cluster`` at once, and why not.

    Two cheap checks settle most cases: a role that does not fit even alone rules the
    cluster out; room for as many "envelope" pods (the largest request of every resource)
    as the gang has pods proves it fits. Otherwise first-fit decreasing: components in
    decreasing size (GPUs, then cpu, then memory), each placed with :func:`place_pods` on
    the capacity the larger ones left.
    """
    ok, reasons = gang_fit(cluster, components, reserved=reserved)
    return ok, reasons()


def gang_fit(
    cluster: ClusterSnapshot,
    components: Sequence[Component],
    *,
    reserved: Reservations | None = None,
) -> tuple[bool, GangReasons]:
    """:func:`fits_gang` with the reasons left to work out when they are read (memoised per snapshot)."""
    snapshot = adjusted_snapshot(cluster, reserved)
    gang = tuple(components)
    key = (_GANG, gang)
    cached = snapshot.estimates.get(key)
    if cached is None:
        cached = snapshot.estimates[key] = _gang_fit(snapshot, gang)
    result: tuple[bool, GangReasons] = cached
    return result


def _gang_fit(snapshot: ClusterSnapshot, components: tuple[Component, ...]) -> tuple[bool, GangReasons]:
    envelope = _envelope(components)
    if envelope is not None and estimate_max_replicas(snapshot, envelope).replicas >= sum(
        c.replicas for c in components
    ):
        # Sufficient: every pod fits in a slot sized for the largest request of each resource
        # (so each role alone fits too). Settles most gangs with one estimate.
        return True, _no_reasons
    ordered = _by_size(components)
    for component in ordered:
        # Necessary: each role alone must fit. The largest roles are the likeliest to fail, so
        # they are asked first; the reasons name the first role (in the gang's order) that fails.
        if component.replicas and estimate_max_replicas(snapshot, component.requirements).replicas < component.replicas:
            return False, functools.cache(functools.partial(_alone_reasons, snapshot.shapes, components))
    shapes = snapshot.shapes
    for component in ordered:
        shapes, placed = place_pods(shapes, component.requirements, component.replicas)
        if placed < component.replicas:
            return False, functools.cache(
                functools.partial(_placed_reasons, shapes, component, placed)
            )
    return True, _no_reasons


@functools.lru_cache(maxsize=1024)
def _by_size(components: tuple[Component, ...]) -> tuple[Component, ...]:
    """The gang's roles in decreasing size (GPUs, then cpu, then memory)."""
    return tuple(sorted(components, key=_size_key, reverse=True))


def _alone_reasons(shapes: Sequence[NodeShape], components: tuple[Component, ...]) -> tuple[str, ...]:
    # The shapes, not the snapshot: the snapshot memoises the verdict holding this function.
    for component in components:
        if not component.replicas:
            continue
        by_product: dict[str, int] = {}
        for shape in shapes:
            fit = shape_fit(shape, component.requirements)
            if fit:
                by_product[shape.product] = by_product.get(shape.product, 0) + fit * shape.count
        alone = min(sum(by_product.values()), UNLIMITED)
        if alone < component.replicas:
            return (
                f"gang does not fit: {component.name} needs {component.replicas} pod(s), "
                f"{alone} fit even alone",
                *_explain_shapes(shapes, component.requirements),
            )
    return ()


def _placed_reasons(left: tuple[NodeShape, ...], component: Component, placed: int) -> tuple[str, ...]:
    # Why the rest do not fit, on the capacity left after placing what did.
    return (
        f"gang does not fit: {component.name} needs {component.replicas} pod(s), "
        f"{placed} fit after placing the larger roles",
        *_explain_shapes(left, component.requirements),
    )
