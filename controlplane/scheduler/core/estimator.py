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

Answers are memoised on the snapshot per requirements (and adjusted snapshots per
reservations version), so the hot path is a dict lookup. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from controlplane.apis.quantity import format_quantity
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import (
    RESOURCE_PODS,
    ReplicaRequirements,
    Taint,
    is_gpu_resource,
    untolerated,
)
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

UNLIMITED = 1 << 30
"""Replicas of a pod that requests nothing, on nodes that do not report a pod limit."""

_GANG = "gang"


@dataclass(frozen=True, slots=True)
class Estimate:
    """How many replicas fit, and why the nodes that hold none do not."""

    replicas: int
    reasons: tuple[str, ...] = ()
    products: tuple[str, ...] = ()
    """GPU products (``nvidia.com/gpu.product``) of the nodes that hold at least one replica."""


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


def _describe_selector(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f"{k}={v}" for k, v in pairs)


def _compute(cluster: ClusterSnapshot, req: ReplicaRequirements) -> Estimate:
    total_nodes = cluster.node_count
    if not total_nodes:
        return Estimate(0, ("0/0 nodes are available: the cluster reports no Ready, schedulable nodes",))
    wants_gpu = any(is_gpu_resource(name) for name, _ in req.resources)
    selector_misses = affinity_misses = invalid_mig = 0
    taint_misses: dict[Taint, int] = {}
    invalid_products: set[str] = set()
    # resource -> [nodes short of it, largest free on one node, free in total]
    short: dict[str, list[int]] = {}
    replicas = 0
    products: set[str] = set()
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
        fit = _node_fit(shape, req)
        if fit:
            replicas = min(UNLIMITED, replicas + fit * count)
            if shape.product:
                products.add(shape.product)
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
    return Estimate(replicas, tuple(reasons), tuple(sorted(products)))


def adjusted_snapshot(cluster: ClusterSnapshot, reservations: Reservations | None) -> ClusterSnapshot:
    """``cluster`` with the capacity reserved in it subtracted (memoised per reservations version)."""
    if reservations is None:
        return cluster
    version = reservations.version(cluster.name)
    if not version:
        return cluster
    cached = cluster.adjusted.get(cluster.name)
    if cached is not None and cached[0] == version:
        adjusted: ClusterSnapshot = cached[1]
        return adjusted
    shapes: tuple[NodeShape, ...] = cluster.shapes
    for reservation in reservations.for_cluster(cluster.name):
        for demand in reservation.demands:
            shapes, _ = place_pods(shapes, demand.requirements, demand.replicas)
    adjusted = cluster.with_shapes(shapes)
    cluster.adjusted[cluster.name] = (version, adjusted)
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
    shapes: Sequence[NodeShape], req: ReplicaRequirements, replicas: int
) -> tuple[tuple[NodeShape, ...], int]:
    """Place ``replicas`` pods greedily on ``shapes``; return the remaining shapes and pods placed.

    Best fit: eligible shapes where the fewest such pods fit per node are filled first,
    each node as full as it gets, so large holes stay free for large pods. A shape group
    is split into the nodes that took pods and those that did not.
    """
    if replicas <= 0:
        return tuple(shapes), 0
    fits = [(_node_fit(s, req), i) for i, s in enumerate(shapes) if _eligible(s, req)]
    order = sorted((fit, i) for fit, i in fits if fit)
    pieces: dict[int, list[NodeShape]] = {}
    remaining = replicas
    for fit, i in order:
        shape = shapes[i]
        take = min(remaining, fit * shape.count)
        full, rest = divmod(take, fit)
        split: list[NodeShape] = []
        untouched = shape.count - full - (1 if rest else 0)
        if untouched:
            split.append(shape.with_free(shape.free, untouched))
        if full:
            split.append(shape.with_free(_subtract(shape.free, req, fit), full))
        if rest:
            split.append(shape.with_free(_subtract(shape.free, req, rest), 1))
        pieces[i] = split
        remaining -= take
        if not remaining:
            break
    out: list[NodeShape] = []
    for i, shape in enumerate(shapes):
        out.extend(pieces.get(i, (shape,)))
    return tuple(out), replicas - remaining


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

    First-fit decreasing: components in decreasing size (GPUs, then cpu, then memory),
    each placed with :func:`place_pods` on the capacity the larger ones left.
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
    for component in sorted(components, key=_size_key, reverse=True):
        shapes, placed = place_pods(shapes, component.requirements, component.replicas)
        if placed < component.replicas:
            ok = False
            reasons.append(
                f"gang does not fit: {component.name} needs {component.replicas} pod(s), "
                f"{placed} fit after placing the larger roles"
            )
            # Why the rest do not fit, on the capacity left after placing what did.
            reasons.extend(_compute(snapshot.with_shapes(shapes), component.requirements).reasons)
            break
    result = (ok, tuple(reasons))
    snapshot.estimates[key] = result
    return result
