"""Pending GPU demand matched against the fleet's free devices, shape by shape.

Why this module exists: the waste classification (:mod:`controlplane.reports.classify`, rule
4) lets every pending replica claim the free devices it needs on one node, the nodes tried in
the order the hub's scheduler prefers. Done node by node, that sorted every free node of the
fleet for every pending demand: at 100 clusters x 5,000 nodes with 2,000 demands, minutes of
one core, holding the hub's event loop. But a fleet's free nodes come in few *shapes*: nodes of
one cluster with the same product and the same free devices per resource are interchangeable
for matching, and their place in the order differs only by their names. So the free nodes are
kept in buckets of one shape each (:class:`FreePool`), a demand is matched bucket by bucket,
and only the nodes it actually takes devices from are visited, one by one, in name order.

In: per cluster, its nodes and which of its devices are free (:func:`free_layout`; the layout
is immutable and may be cached while the cluster is unchanged). Out: the devices each demand
claims, as indexes into the cluster's devices, handed to a callback; the replicas left
unmatched. The order and the choices are exactly those of matching node by node:

* candidates are the nodes the demand allows (cluster and product) with room for one replica,
  ordered by cluster tier, GPU price, the node's free devices now (after earlier demands'
  claims), cluster name, node name, and then their place in the sample;
* each takes as many replicas as it fits, up to what remains; of every requested resource it
  gives its first free devices, in device order.

No I/O happens here.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from controlplane.reports.fleet import ClusterSample, PendingDemand

#: A shape's free devices: ``(resource, count)`` pairs, sorted, counts positive.
Counts = tuple[tuple[str, int], ...]
#: Where a free node sorts among nodes of one bucket: its name, then its place in the cluster.
NodeKey = tuple[str, int]
#: Called with (cluster index, indexes of the cluster's devices, demand) for every claim.
Claim = Callable[[int, Sequence[int], PendingDemand], None]


@dataclass(frozen=True, slots=True)
class FreeNode:
    """A node with free devices; indexes count the cluster's devices, in node and device order."""

    position: int
    """The node's index in its cluster's nodes."""
    name: str
    product: str
    free: Mapping[str, tuple[int, ...]]
    """Resource -> the free devices advertised as exactly that resource."""
    all_free: tuple[int, ...]
    """Every free device, including ones no resource advertises (a MIG GPU's unpartitioned rest)."""


@dataclass(frozen=True, slots=True)
class FreeLayout:
    """One cluster's free nodes before any matching: by product, and grouped by shape."""

    nodes: Mapping[int, FreeNode]
    """By position in the cluster."""
    by_product: Mapping[str, tuple[FreeNode, ...]]
    shapes: Mapping[tuple[str, Counts], tuple[NodeKey, ...]]
    """(product, free counts) -> its nodes in name order."""


def _counts(free: Mapping[str, Sequence[int]]) -> Counts:
    return tuple(sorted((resource, len(devices)) for resource, devices in free.items() if devices))


def free_layout(cluster: ClusterSample, free: Sequence[bool]) -> FreeLayout:
    """The layout of ``cluster``'s free devices; ``free[i]`` says whether its i-th device (in
    node and device order) is free and schedulable."""
    nodes: dict[int, FreeNode] = {}
    by_product: dict[str, list[FreeNode]] = {}
    shapes: dict[tuple[str, Counts], list[NodeKey]] = {}
    index = 0
    for position, node in enumerate(cluster.nodes):
        per_resource: dict[str, list[int]] = {}
        all_free: list[int] = []
        for device in node.devices:
            if free[index]:
                all_free.append(index)
                if device.resource is not None:
                    per_resource.setdefault(device.resource, []).append(index)
            index += 1
        if not all_free:
            continue
        free_node = FreeNode(
            position, node.name, node.product, {r: tuple(v) for r, v in per_resource.items()}, tuple(all_free)
        )
        nodes[position] = free_node
        by_product.setdefault(node.product, []).append(free_node)
        counts = _counts(per_resource)
        if counts:
            shapes.setdefault((node.product, counts), []).append((node.name, position))
    return FreeLayout(
        nodes,
        {product: tuple(group) for product, group in by_product.items()},
        {shape: tuple(sorted(keys)) for shape, keys in shapes.items()},
    )


def replicas_fitting(counts: Counts, requests: Mapping[str, int]) -> int:
    """How many replicas requesting ``requests`` (per replica) a node with ``counts`` free holds."""
    have = dict(counts)
    return min(have.get(resource, 0) // amount for resource, amount in requests.items())


#: Where a bucket's nodes sort: cluster tier, GPU price, free devices, cluster name.
Order = tuple[int, float, int, str]


@dataclass(slots=True)
class _Bucket:
    """The nodes of one cluster with one product and one free shape at this point of matching:
    the layout's (name-ordered, shared) minus the ones taken from, plus the ones moved in."""

    cluster: int
    product: str
    counts: Counts
    order: Order
    initial: tuple[NodeKey, ...] = ()
    taken: int = 0
    """How many of ``initial`` have been taken from (always the first ones: taking goes in name order)."""
    moved_in: list[NodeKey] = field(default_factory=list)
    """A heap of the nodes that came to this shape after a claim."""
    fits: dict[tuple[tuple[str, int], ...], int] = field(default_factory=dict)
    """Replicas of a request (its items) that one node of the shape holds, as asked."""

    def __bool__(self) -> bool:
        return self.taken < len(self.initial) or bool(self.moved_in)

    def fit(self, requests: Mapping[str, int]) -> int:
        key = tuple(requests.items())
        fit = self.fits.get(key)
        if fit is None:
            fit = self.fits[key] = replicas_fitting(self.counts, requests)
        return fit

    def top(self) -> tuple[str, int, int]:
        """The first node: its name, cluster and position (how nodes of equal order sort)."""
        first = self.initial[self.taken] if self.taken < len(self.initial) else None
        if self.moved_in and (first is None or self.moved_in[0] < first):
            first = self.moved_in[0]
        assert first is not None
        return (first[0], self.cluster, first[1])

    def pop(self) -> NodeKey:
        name, _, position = self.top()
        if self.moved_in and self.moved_in[0] == (name, position):
            heapq.heappop(self.moved_in)
        else:
            self.taken += 1
        return (name, position)


class FreePool:
    """The fleet's free nodes while demands claim devices, one bucket per (cluster, product,
    free shape), the buckets kept in the order their nodes are tried. A demand walks them from
    the front until it has what it needs: its cost is the buckets it passes plus the nodes it
    takes from, whatever the number of free nodes."""

    def __init__(self, clusters: Sequence[ClusterSample], layouts: Sequence[FreeLayout]) -> None:
        self._clusters = clusters
        self._layouts = layouts
        #: (cluster index, product) -> free counts -> bucket
        self._buckets: dict[tuple[int, str], dict[Counts, _Bucket]] = {}
        #: Every bucket as (order, creation number, bucket), sorted.
        self._ordered: list[tuple[Order, int, _Bucket]] = []
        #: Buckets created while a demand is matched, added to the order after it.
        self._created: list[tuple[Order, int, _Bucket]] = []
        #: What each node taken from has given so far: (cluster index, position) -> resource -> count.
        self._given: dict[tuple[int, int], dict[str, int]] = {}
        #: Literal mode: (bucket, resource) pairs whose devices were all claimed already.
        self._claimed_whole: set[tuple[int, str]] = set()
        for index, layout in enumerate(layouts):
            for (product, counts), keys in layout.shapes.items():
                self._bucket(index, product, counts).initial = keys
        self._ordered.extend(self._created)
        self._ordered.sort(key=lambda entry: entry[:2])
        self._created.clear()

    def _bucket(self, index: int, product: str, counts: Counts) -> _Bucket:
        shapes = self._buckets.setdefault((index, product), {})
        bucket = shapes.get(counts)
        if bucket is None:
            cluster = self._clusters[index]
            order = (cluster.tier, cluster.price(product), sum(n for _, n in counts), cluster.name)
            bucket = shapes[counts] = _Bucket(index, product, counts, order)
            self._created.append((order, len(self._ordered) + len(self._created), bucket))
        return bucket

    def _groups(self, demand: PendingDemand, requests: Mapping[str, int]) -> Iterator[list[_Bucket]]:
        """The buckets with room for one of ``demand``'s replicas, in order, those of equal
        order together."""
        allowed: dict[tuple[int, str], bool] = {}
        for _, same_order in groupby(self._ordered, key=lambda entry: entry[0]):
            group = []
            for _, _, bucket in same_order:
                if not bucket or bucket.fit(requests) < 1:
                    continue
                pair = (bucket.cluster, bucket.product)
                ok = allowed.get(pair)
                if ok is None:
                    ok = allowed[pair] = demand.allows(self._clusters[bucket.cluster].name, bucket.product)
                if ok:
                    group.append(bucket)
            if group:
                yield group

    def match(self, demand: PendingDemand, claim: Claim) -> int:
        """Claim devices for ``demand``'s replicas (``claim`` is told which); return how many
        replicas found no room."""
        requests = demand.gpu_requests
        remaining = demand.replicas
        try:
            for group in self._groups(demand, requests):
                for bucket in _in_name_order(group):
                    take = min(bucket.fit(requests), remaining)
                    self._take(bucket, take, requests, demand, claim)
                    remaining -= take
                    if remaining == 0:
                        return 0
            return remaining
        finally:
            # A node taken from sorts before its old bucket (fewer free devices): a bucket
            # created meanwhile is one this demand has passed already.
            for entry in self._created:
                insort(self._ordered, entry, key=lambda e: e[:2])
            self._created.clear()

    def _take(
        self, bucket: _Bucket, replicas: int, requests: Mapping[str, int], demand: PendingDemand, claim: Claim
    ) -> None:
        """Take ``replicas`` replicas' devices from the first node of ``bucket`` and move the node
        to the bucket of the shape it has left."""
        name, position = bucket.pop()
        node = self._layouts[bucket.cluster].nodes[position]
        given = self._given.setdefault((bucket.cluster, position), {})
        for resource, amount in requests.items():
            start = given.get(resource, 0)
            end = start + replicas * amount
            claim(bucket.cluster, node.free[resource][start:end], demand)
            given[resource] = end
        left = tuple(
            (resource, count - replicas * requests.get(resource, 0))
            for resource, count in bucket.counts
            if count > replicas * requests.get(resource, 0)
        )
        if left:  # else nothing any demand could ask for is left on the node
            heapq.heappush(self._bucket(bucket.cluster, bucket.product, left).moved_in, (name, position))

    def claim_everywhere(self, demand: PendingDemand, claim: Claim) -> bool:
        """Literal mode (no replica takes anything away): claim, for ``demand``, every free device
        of a resource it requests on every node where one of its replicas fits; False when there
        is no such node. A bucket's devices of one resource are handed over once, to the first
        demand that fits them (the first claim is the one that counts)."""
        requests = demand.gpu_requests
        found = False
        for group in self._groups(demand, requests):
            found = True
            for bucket in group:
                layout = self._layouts[bucket.cluster]
                for resource in requests:
                    if (id(bucket), resource) in self._claimed_whole:
                        continue
                    self._claimed_whole.add((id(bucket), resource))
                    for _, position in bucket.initial:
                        claim(bucket.cluster, layout.nodes[position].free[resource], demand)
        return found


def _in_name_order(group: list[_Bucket]) -> Iterator[_Bucket]:
    """Each bucket once per node it holds, the nodes of all of them in name order (then cluster
    and position), as long as they hold any."""
    if len(group) == 1:
        [only] = group
        while only:
            yield only
        return
    while True:
        live = [bucket for bucket in group if bucket]
        if not live:
            return
        yield min(live, key=_Bucket.top)


__all__ = ["Claim", "Counts", "FreeLayout", "FreeNode", "FreePool", "free_layout", "replicas_fitting"]
