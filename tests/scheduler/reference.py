"""A straightforward estimator for checking the scheduler's cached one: no memo, no index.

It replays a cluster's reservation journal (``Reservations.journal``) on the reported node
shapes, the way the accounting is specified: a binding's pods go best fit (the shape group
where the fewest fit per node first, then the earlier group), each node as full as it gets;
pods that fit no node whole still hold their GPUs, taken from the eligible nodes with the
most free of them first; giving back returns exactly what the binding's own pods (and
spilled GPUs) took, to those nodes, and then the promises that did not fit take their
spilled GPUs back, place what fits whole in the order they were taken, and spill the rest
again. Then it sums the replicas of a request per node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.apis.gpus import is_gpu_resource
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot

UNLIMITED = 1 << 30

Spilled = tuple[tuple[str, int], ...]
Hold = tuple[str, ReplicaRequirements, int | Spilled]
"""(binding, requirements, pods per node) or (binding, requirements, GPUs spilled per node)."""


@dataclasses.dataclass
class Node:
    """``count`` identical nodes, and the reserved pods each of them holds."""

    count: int
    labels: Mapping[str, str]
    taints: Sequence[Any]
    free: dict[str, int]
    invalid: bool
    holds: tuple[Hold, ...] = ()


def nodes_of(cluster: ClusterSnapshot) -> list[Node]:
    return [
        Node(s.count, s.labels, s.taints, dict(s.free), s.product.endswith("-MIG-INVALID")) for s in cluster.shapes
    ]


def reference_fit(node: Node, req: ReplicaRequirements) -> int:
    if any(node.labels.get(k) != v for k, v in req.node_selector):
        return 0
    if req.node_affinity and not any(t.matches(node.labels) for t in req.node_affinity):
        return 0
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in req.tolerations):
            return 0
    fit = min(node.free.get("pods", UNLIMITED), UNLIMITED)
    for name, amount in req.resources:
        have = 0 if node.invalid and is_gpu_resource(name) else node.free.get(name, 0)
        fit = min(fit, have // amount)
    return max(fit, 0)


def _moved(free: Mapping[str, int], req: ReplicaRequirements, pods: int) -> dict[str, int]:
    """``free`` after ``pods`` pods of ``req`` arrive (negative ``pods``: leave)."""
    out = dict(free)
    for name, amount in req.resources:
        out[name] = out.get(name, 0) - amount * pods
    if "pods" in out:
        out["pods"] -= pods
    return out


def reference_place(
    nodes: list[Node], req: ReplicaRequirements, replicas: int, binding: str = ""
) -> tuple[list[Node], int]:
    """Best fit, group by group; returns the nodes and the pods placed."""
    order = sorted((fit, i) for i, node in enumerate(nodes) if (fit := reference_fit(node, req)) > 0)
    pieces: dict[int, list[Node]] = {}
    left = replicas
    for fit, i in order:
        if not left:
            break
        node = nodes[i]
        take = min(left, fit * node.count)
        full, rest = divmod(take, fit)
        split: list[Node] = []
        if node.count - full - (1 if rest else 0):
            split.append(dataclasses.replace(node, count=node.count - full - (1 if rest else 0)))
        for pods, count in ((fit, full), (rest, 1 if rest else 0)):
            if count:
                split.append(
                    dataclasses.replace(
                        node, count=count, free=_moved(node.free, req, pods), holds=(*node.holds, (binding, req, pods))
                    )
                )
        pieces[i] = split
        left -= take
    return [piece for i, node in enumerate(nodes) for piece in pieces.get(i, [node])], replicas - left


def reference_spill(nodes: list[Node], req: ReplicaRequirements, replicas: int, binding: str) -> list[Node]:
    """Take the GPUs of ``replicas`` pods that fit no node whole: most free first, node by node."""
    remaining = {name: amount * replicas for name, amount in req.resources if is_gpu_resource(name)}
    if not remaining:
        return nodes
    eligible = [
        (-sum(node.free.get(name, 0) for name in remaining), i)
        for i, node in enumerate(nodes)
        if not node.invalid and reference_eligible(node, req)
    ]
    pieces: dict[int, list[Node]] = {}
    for most, i in sorted(eligible):
        if not most or not any(remaining.values()):
            break
        node = nodes[i]
        split: list[Node] = []
        untouched = 0
        for _ in range(node.count):  # one node at a time; the untouched ones stay first, as one group
            give = {name: min(node.free.get(name, 0), need) for name, need in remaining.items()}
            give = {name: amount for name, amount in give.items() if amount > 0}
            if not give:
                untouched += 1
                continue
            for name, amount in give.items():
                remaining[name] -= amount
            free = dict(node.free)
            for name, amount in give.items():
                free[name] -= amount
            spilled = tuple(sorted(give.items()))
            split.append(dataclasses.replace(node, count=1, free=free, holds=(*node.holds, (binding, req, spilled))))
        if untouched:
            split.insert(0, dataclasses.replace(node, count=untouched))
        pieces[i] = split
    return [piece for i, node in enumerate(nodes) for piece in pieces.get(i, [node])]


def reference_eligible(node: Node, req: ReplicaRequirements) -> bool:
    if any(node.labels.get(k) != v for k, v in req.node_selector):
        return False
    if req.node_affinity and not any(t.matches(node.labels) for t in req.node_affinity):
        return False
    return not any(
        taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in req.tolerations)
        for taint in node.taints
    )


def _returned(free: Mapping[str, int], hold: Hold) -> dict[str, int]:
    _, req, pods = hold
    if isinstance(pods, int):
        return _moved(free, req, -pods)
    out = dict(free)
    for name, amount in pods:
        out[name] = out.get(name, 0) + amount
    return out


def reference_give_back(nodes: list[Node], bindings: set[str], *, spills_only: bool = False) -> tuple[list[Node], bool]:
    """Every node holding pods (or only spilled GPUs) of ``bindings`` gets their capacity back; whether any did."""
    out: list[Node] = []
    returned = False

    def gone(hold: Hold) -> bool:
        return hold[0] in bindings and not (spills_only and isinstance(hold[2], int))

    for node in nodes:
        free = node.free
        for hold in node.holds:
            if gone(hold):
                free = _returned(free, hold)
                returned = True
        holds = tuple(h for h in node.holds if not gone(h))
        out.append(dataclasses.replace(node, free=free, holds=holds))
    return out, returned


def reference_replay(cluster: ClusterSnapshot, reservations: Reservations) -> list[Node]:
    """The cluster's nodes after its journal, replayed from its reported shapes."""
    nodes = nodes_of(cluster)
    short: dict[str, list[list[Any]]] = {}
    for binding, demands in reservations.journal(cluster.name).entries:
        if demands:
            for demand in demands:
                nodes, placed = reference_place(nodes, demand.requirements, demand.replicas, binding)
                if placed < demand.replicas:
                    short.setdefault(binding, []).append([demand.requirements, demand.replicas - placed])
                    nodes = reference_spill(nodes, demand.requirements, demand.replicas - placed, binding)
            continue
        short.pop(binding, None)
        nodes, returned = reference_give_back(nodes, {binding})
        if not returned:
            continue
        waiting = [(other, wants) for other, wants in short.items() if any(want[1] for want in wants)]
        nodes, _ = reference_give_back(nodes, {other for other, _ in waiting}, spills_only=True)
        for other, wants in waiting:
            for want in wants:
                if want[1]:
                    nodes, placed = reference_place(nodes, want[0], want[1], other)
                    want[1] -= placed
        for other, wants in waiting:
            for want in wants:
                if want[1]:
                    nodes = reference_spill(nodes, want[0], want[1], other)
            if not any(want[1] for want in wants):
                del short[other]
    return nodes


def reference_estimate(
    cluster: ClusterSnapshot, reservations: Reservations, req: ReplicaRequirements
) -> tuple[int, tuple[str, ...]]:
    """Replicas of ``req`` that fit after the journal, and the GPU products of the nodes holding them."""
    by_product: dict[str, int] = {}
    for node in reference_replay(cluster, reservations):
        fit = reference_fit(node, req)
        if fit:
            product = node.labels.get("nvidia.com/gpu.product", "")
            by_product[product] = by_product.get(product, 0) + fit * node.count
    total = min(sum(by_product.values()), UNLIMITED)
    return total, tuple(sorted(p for p, n in by_product.items() if p and n > 0))
