"""How many replicas of a pod fit in one cluster snapshot: exact per node, MIG-aware.

In: a :class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot` (the cluster's free
node shapes as its agent reported them, or as :mod:`~controlplane.scheduler.core.replaying`
left them after subtracting reservations) and a
:class:`~controlplane.interpreter.requirements.ReplicaRequirements`. Out: an
:class:`Estimate` (replicas, and kube-scheduler-style reasons for the nodes that cannot
take one), the per-shape fit vector the packing reads, and the memo keys and carry-over
links (:class:`Origin`) that replaying leaves on adjusted snapshots.

Per node shape the answer is ``min over requested resources of floor(free / request)``
(cpu millicores, memory bytes, ``nvidia.com/gpu``, every ``nvidia.com/mig-*``,
``nvidia.com/gpu.shared``, and one ``pods`` slot when the node reports it), times the
number of identical nodes; nodes that fail the nodeSelector, the required node affinity
or carry an untolerated NoSchedule/NoExecute taint count 0. So eight nodes with one free
GPU each hold no 4-GPU replica, and free 1g slices never hold a 3g request: each MIG
profile is its own resource, exactly as the device plugin advertises it. A node whose
single-strategy MIG layout is invalid (``gpu.product=…-MIG-INVALID``) offers no GPUs.
Requirements with :attr:`~controlplane.interpreter.requirements.ReplicaRequirements.shared`
devices (the DRA ResourceClaims a workload's pods name directly) are one set for the cluster,
allocated on one node, where every replica must then run: a node holds replicas only with the
shared devices free beside them, taken once, and the cluster holds what its best node holds.

Answers are memoised: per node shape the replicas one node holds, per snapshot the
estimate per requirements. An adjusted snapshot remembers which shapes changed since the
one it was made from (:class:`Origin`): an estimate the previous snapshot knew is then
carried over by looking only at those shapes, when it is first asked for (most decisions
ask about one or two requirements, so carrying all of them eagerly would be wasted). A
freshly reported snapshot built with ``previous`` carries the previous report's estimates
the same way, by the node shapes the report changed. No I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.pods import FrozenTaint, untolerated
from controlplane.apis.quantity import format_quantity
from controlplane.interpreter.requirements import RESOURCE_PODS, ReplicaRequirements
from controlplane.scheduler.core.slots import worked_out
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape, ReportChange

UNLIMITED = 1 << 30
"""Replicas of a pod that requests nothing, on nodes that do not report a pod limit."""

CHAIN = 8
"""How many adjustments back an estimate or fit vector is carried from; further back, it is computed afresh."""
NO_FIT = UNLIMITED + 1
"""A fit vector's entry for a shape that holds no replica (above any real count, so ``min`` skips it;
small enough to stay a one-word int, which ``min`` compares fastest)."""

Splice = tuple[int, tuple[NodeShape, ...]]
"""``shapes[i]`` was replaced by these shapes (the pieces :func:`~controlplane.scheduler.core.packing.place_pods` split it into)."""


class Origin(NamedTuple):
    """How an adjusted snapshot was made from the one before: what estimates and fit vectors carry over."""

    base: ClusterSnapshot
    removed: list[NodeShape]
    added: list[NodeShape]
    splices: list[Splice]
    """In order, each relative to the shapes as the splices before it left them."""


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
        reasons = self._reasons
        if reasons is None:
            reasons = worked_out(self, "_reasons", self._explain)
        return reasons

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Estimate):
            return NotImplemented
        return (self.replicas, self.products, self.reasons) == (other.replicas, other.products, other.reasons)

    def __hash__(self) -> int:
        return hash((self.replicas, self.products))

    def __repr__(self) -> str:
        return f"Estimate(replicas={self.replicas}, reasons={self.reasons!r}, products={self.products!r})"


def node_eligible(shape: NodeShape, req: ReplicaRequirements) -> bool:
    """Whether nodes of ``shape`` pass ``req``'s nodeSelector, required node affinity and taints."""
    labels = shape.labels
    for key, value in req.node_selector:
        if labels.get(key) != value:
            return False
    if req.node_affinity and not any(term.matches(labels) for term in req.node_affinity):
        return False
    return not (shape.taints and untolerated(shape.taints, req.tolerations))



def _node_fit(shape: NodeShape, req: ReplicaRequirements) -> int:
    """Replicas one node of ``shape`` holds, resources only (with the devices they share, once)."""
    free = shape.free
    fit = min(free.get(RESOURCE_PODS, UNLIMITED), UNLIMITED)  # no node holds more than UNLIMITED
    no_gpu = shape.invalid_mig
    if req.shared:
        free = dict(free)
        for name, amount in req.shared:
            have = 0 if no_gpu and is_gpu_resource(name) else free.get(name, 0)
            if have < amount:
                return 0
            free[name] = have - amount
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
        fit = fits[req] = _node_fit(shape, req) if node_eligible(shape, req) else 0
    return fit


def _describe_selector(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f"{k}={v}" for k, v in pairs)


def _compute(cluster: ClusterSnapshot, req: ReplicaRequirements) -> Estimate:
    if req.shared:
        # The replicas' shared claims are allocated on one node and each replica must run where its
        # claims are (kube's DynamicResources filter): the cluster holds what its best node holds.
        fit, product = max(((shape_fit(shape, req), shape.product) for shape in cluster.shapes), default=(0, ""))
        return _estimate(cluster, req, {product: fit} if fit else {})
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
        explain=functools.partial(explain_shapes, cluster.shapes, req),
        by_product=by_product,
    )


def derive_estimate(snapshot: ClusterSnapshot, req: ReplicaRequirements) -> Estimate:
    """``snapshot``'s estimate for ``req``: carried down from the nearest snapshot it was
    adjusted from that knows it (at most ``CHAIN`` adjustments back), or from the previous
    report of the snapshot those were adjusted from, else computed over every shape.
    Estimates carried through are remembered on the way."""
    if req.shared:
        return _compute(snapshot, req)  # a best node, not a sum: nothing to carry
    chain: list[tuple[ClusterSnapshot, Origin]] = []
    node = snapshot
    while True:
        origin = node.memo.origin
        if origin is None:
            break
        if len(chain) == CHAIN:
            return _compute(snapshot, req)
        chain.append((node, origin))
        before: Estimate | None = origin.base.estimates.get(req)
        if before is not None:
            return _carry_down(chain, req, before)
        node = origin.base
    # ``node`` is the reported snapshot the chain starts from: try the report before it.
    change: ReportChange | None = node.memo.previous_report
    previous: Estimate | None = change.estimates.get(req) if change is not None else None
    if change is None or previous is None:
        return _compute(snapshot, req)
    reported = node.estimates[req] = _carry(node, req, previous, change.removed, change.added)
    return _carry_down(chain, req, reported) if chain else reported


def _carry_down(chain: list[tuple[ClusterSnapshot, Origin]], req: ReplicaRequirements, before: Estimate) -> Estimate:
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


def fit_vector(snapshot: ClusterSnapshot, req: ReplicaRequirements) -> list[int]:
    """Per shape of ``snapshot``, the replicas of ``req`` one node holds (``NO_FIT`` for none).

    Memoised per snapshot; an adjusted snapshot splices the vector of the one it was made
    from (at most ``CHAIN`` adjustments back) instead of looking at every shape again.
    Callers must not change the list.
    """
    found = snapshot.memo.fit_vectors.get(req)
    if found is not None:
        return found
    chain: list[tuple[ClusterSnapshot, Origin]] = []
    node = snapshot
    while len(chain) < CHAIN:
        origin = node.memo.origin
        if origin is None:
            break
        chain.append((node, origin))
        found = origin.base.memo.fit_vectors.get(req)
        if found is not None:
            for step, link in reversed(chain):
                found = step.memo.fit_vectors[req] = spliced(found, link.splices, req)
            return found
        node = origin.base
    vector = snapshot.memo.fit_vectors[req] = [shape_fit(shape, req) or NO_FIT for shape in snapshot.shapes]
    return vector


def spliced(vector: list[int], splices: Sequence[Splice], req: ReplicaRequirements) -> list[int]:
    """A copy of ``vector`` with ``splices`` applied (the fits of ``req`` on the new pieces)."""
    out = list(vector)
    splice(out, splices, req)
    return out


def splice(vector: list[int], splices: Sequence[Splice], req: ReplicaRequirements) -> None:
    """Apply ``splices`` to ``vector`` in place."""
    for i, pieces in splices:
        vector[i : i + 1] = [shape_fit(piece, req) or NO_FIT for piece in pieces]


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
    return explain_shapes(cluster.shapes, req)


def explain_shapes(shapes: Sequence[NodeShape], req: ReplicaRequirements) -> tuple[str, ...]:
    """:func:`_explain` over a cluster's node shapes."""
    total_nodes = sum(s.count for s in shapes)
    if not total_nodes:
        return ("0/0 nodes are available: the cluster reports no Ready, schedulable nodes",)
    amounts = req.first_replica  # a node short of the shared devices holds no replica either
    wants_gpu = any(is_gpu_resource(name) for name in amounts)
    selector_misses = affinity_misses = invalid_mig = 0
    taint_misses: dict[FrozenTaint, int] = {}
    invalid_products: set[str] = set()
    # resource -> [nodes short of it, largest free on one node, free in total]
    short: dict[str, list[int]] = {}
    needs = list(amounts.items())
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

