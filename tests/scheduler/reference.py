"""A straightforward estimator for checking the scheduler's cached one: no memo, no index.

It replays a cluster's reservation journal (``Reservations.journal``) on the reported node
shapes, the way the accounting is specified: a binding's pods go best fit (the shape group
where the fewest fit per node first, then the earlier group), each node as full as it gets;
giving back returns exactly what the binding's own pods took, to those nodes, and then
places the pods that did not fit earlier, in the order they were taken. Then it sums the
replicas of a request per node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.interpreter.requirements import ReplicaRequirements, is_gpu_resource
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot

UNLIMITED = 1 << 30

Hold = tuple[str, ReplicaRequirements, int]


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


def reference_give_back(nodes: list[Node], binding: str) -> tuple[list[Node], bool]:
    """Every node holding pods of ``binding`` gets their capacity back; whether any did."""
    out: list[Node] = []
    returned = False
    for node in nodes:
        free = node.free
        for holder, req, pods in node.holds:
            if holder == binding:
                free = _moved(free, req, -pods)
                returned = True
        holds = tuple(h for h in node.holds if h[0] != binding)
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
            continue
        short.pop(binding, None)
        nodes, returned = reference_give_back(nodes, binding)
        if not returned:
            continue
        for other, wants in list(short.items()):
            for want in wants:
                if want[1]:
                    nodes, placed = reference_place(nodes, want[0], want[1], other)
                    want[1] -= placed
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
