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

Reservations are subtracted greedily before estimating (:func:`place_pods`): each
reserved pod goes to the eligible node shape where the fewest such pods fit (best fit),
node by node. The member's own scheduler may spread pods differently, so this is an
approximation of where they will land; it is exact for the totals, and errs towards
keeping large holes free. Reserved pods that no longer fit anywhere are dropped (the
cluster's capacity shrank; the next report tells the truth).

Answers are memoised: per node shape the replicas one node holds, per snapshot the
estimate per requirements, per cluster the reservation-adjusted snapshot per reservations
version. When reservations were only added since the last adjustment, just the new ones
are subtracted and every memoised estimate is carried over by looking only at the shapes
that changed, so the hot path stays a few dict lookups per cluster. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from controlplane.apis.quantity import format_quantity
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import (
    RESOURCE_PODS,
    ReplicaRequirements,
    Taint,
    is_gpu_resource,
    untolerated,
)
from controlplane.scheduler.core.reservations import Reservation, Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

UNLIMITED = 1 << 30
"""Replicas of a pod that requests nothing, on nodes that do not report a pod limit."""

_GANG = "gang"
_ADJUSTED = "reservations"


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


def _node_fit(shape: NodeShape, req: ReplicaRequirements) -> int:
    """Replicas one node of ``shape`` holds, resources only."""
    free = shape.free
    fit = free.get(RESOURCE_PODS, UNLIMITED)
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
        explain=lambda: _explain(cluster, req),
        by_product=by_product,
    )


def _carry_estimates(
    before: ClusterSnapshot, after: ClusterSnapshot, removed: list[NodeShape], added: list[NodeShape]
) -> None:
    """Derive ``after``'s estimates from ``before``'s by looking only at the shapes that changed.

    Adjusting for a new reservation replaces a few shapes and keeps the others (same
    objects), so each estimate moves by the replicas of the ``removed`` and ``added`` shapes.
    """
    if not before.estimates:
        return
    gone = {id(s) for s in removed}
    new = {id(s) for s in added}
    # A shape made by one demand and split again by the next is in both lists: it never existed.
    removed = [s for s in removed if id(s) not in new]
    added = [s for s in added if id(s) not in gone]
    for key, estimate in before.estimates.items():
        if not isinstance(key, ReplicaRequirements):
            continue  # gang answers are not additive
        by_product = dict(estimate.by_product)
        for shape in removed:
            fit = shape_fit(shape, key)
            if fit:
                by_product[shape.product] -= fit * shape.count
        for shape in added:
            fit = shape_fit(shape, key)
            if fit:
                by_product[shape.product] = by_product.get(shape.product, 0) + fit * shape.count
        after.estimates[key] = _estimate(after, key, by_product)


def _explain(cluster: ClusterSnapshot, req: ReplicaRequirements) -> tuple[str, ...]:
    """kube-scheduler-style reasons for the nodes of ``cluster`` that hold no replica of ``req``."""
    total_nodes = cluster.node_count
    if not total_nodes:
        return ("0/0 nodes are available: the cluster reports no Ready, schedulable nodes",)
    wants_gpu = any(is_gpu_resource(name) for name, _ in req.resources)
    selector_misses = affinity_misses = invalid_mig = 0
    taint_misses: dict[Taint, int] = {}
    invalid_products: set[str] = set()
    # resource -> [nodes short of it, largest free on one node, free in total]
    short: dict[str, list[int]] = {}
    needs = list(req.resources)
    for shape in cluster.shapes:
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


def adjusted_snapshot(cluster: ClusterSnapshot, reservations: Reservations | None) -> ClusterSnapshot:
    """``cluster`` with the capacity reserved in it subtracted (memoised per reservations version)."""
    if reservations is None:
        return cluster
    version = reservations.version(cluster.name)
    if not version:
        return cluster
    cached = cluster.adjusted.get(_ADJUSTED)
    if cached is not None and cached[0] == version:
        adjusted: ClusterSnapshot = cached[1]
        return adjusted
    current = reservations.for_cluster(cluster.name)
    epoch = reservations.epoch(cluster.name)
    base = cluster
    todo: Sequence[Reservation] = current
    if cached is not None and cached[2] == epoch and cached[3] <= len(current):
        # Reservations were only added since: subtract just the new ones.
        base = cached[1]
        todo = current[cached[3] :]
    shapes = base.shapes
    removed: list[NodeShape] = []
    added: list[NodeShape] = []
    for reservation in todo:
        for demand in reservation.demands:
            shapes, _ = place_pods(shapes, demand.requirements, demand.replicas, removed=removed, added=added)
    adjusted = cluster.with_shapes(shapes)
    _carry_estimates(base, adjusted, removed, added)
    cluster.adjusted[_ADJUSTED] = (version, adjusted, epoch, len(current))
    return adjusted


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
        found = cache[requirements] = _compute(snapshot, requirements)
    result: Estimate = found
    return result


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
) -> tuple[tuple[NodeShape, ...], int]:
    """Place ``replicas`` pods greedily on ``shapes``; return the remaining shapes and pods placed.

    Best fit: eligible shapes where the fewest such pods fit per node are filled first,
    each node as full as it gets, so large holes stay free for large pods. A shape group
    is split into the nodes that took pods and those that did not. The shapes replaced
    and the ones replacing them are appended to ``removed`` and ``added`` when given.
    """
    if replicas <= 0:
        return tuple(shapes), 0
    candidates: list[tuple[int, int]] = []
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
        candidates.sort()
        order = candidates
    pieces: dict[int, list[NodeShape]] = {}
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
        if removed is not None and added is not None:
            removed.append(shape)
            added.extend(split)
        remaining -= take
        if not remaining:
            break
    if len(pieces) == 1:
        [(i, split)] = pieces.items()
        return (*shapes[:i], *split, *shapes[i + 1 :]), replicas - remaining
    out: list[NodeShape] = []
    for i, shape in enumerate(shapes):
        out.extend(pieces.get(i, (shape,)))
    return tuple(out), replicas - remaining


def _envelope(components: Sequence[Component]) -> ReplicaRequirements | None:
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
    snapshot = adjusted_snapshot(cluster, reserved)
    key = (_GANG, tuple(components))
    cached = snapshot.estimates.get(key)
    if cached is not None:
        result: tuple[bool, tuple[str, ...]] = cached
        return result
    shapes = snapshot.shapes
    reasons: list[str] = []
    ok = True
    for component in components:
        # Cheap necessary condition first: each role alone must fit (these estimates are cached).
        if (
            component.replicas
            and estimate_max_replicas(snapshot, component.requirements).replicas < component.replicas
        ):
            ok = False
            alone = estimate_max_replicas(snapshot, component.requirements)
            reasons.append(
                f"gang does not fit: {component.name} needs {component.replicas} pod(s), "
                f"{alone.replicas} fit even alone"
            )
            reasons.extend(alone.reasons)
            break
    if ok:
        envelope = _envelope(components)
        total = sum(c.replicas for c in components)
        if envelope is not None and estimate_max_replicas(snapshot, envelope).replicas >= total:
            # Sufficient: every pod fits in a slot sized for the largest request of each resource.
            snapshot.estimates[key] = (True, ())
            return (True, ())
    for component in sorted(components, key=_size_key, reverse=True) if ok else ():
        shapes, placed = place_pods(shapes, component.requirements, component.replicas)
        if placed < component.replicas:
            ok = False
            reasons.append(
                f"gang does not fit: {component.name} needs {component.replicas} pod(s), "
                f"{placed} fit after placing the larger roles"
            )
            # Why the rest do not fit, on the capacity left after placing what did.
            reasons.extend(_explain(snapshot.with_shapes(shapes), component.requirements))
            break
    result = (ok, tuple(reasons))
    snapshot.estimates[key] = result
    return result
