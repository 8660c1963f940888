"""The node part of the capacity report, kept up to date one node change at a time.

In: the member's Node objects (whole, or as :class:`member_agent.capacity.NodeTrimmer` keeps
them), given once and then as the node informer changes them (:meth:`NodeTotals.update`); at
report time, what the pods hold on each node that holds some. Out: the report's node counts,
``gpuSummary``, ``resourceSummary`` and ``nodeShapes`` (:meth:`NodeTotals.summary`), by the
rules of :mod:`member_agent.capacity`.

Why: every report walked every node, so a member of 5,000 nodes paid for 5,000 nodes on every
report however few held pods (100 such agents share one ``gpufed sim-fleet`` process, whose
worker threads then hold the GIL against the agents' loops). Here what a node adds to the
report while it holds no pod is read once per change of that node, once for all the nodes
that share their cached parts (a :class:`NodeKind`), and summed into totals that keep, beside
each sum, how many nodes it counts (so taking a node out is exact, and an entry no node has
any more is gone). A report then starts from the totals and changes only the nodes that hold
pods: their allocations are added, and each moves from the shape it has empty to the shape it
has with its pods. It so costs the nodes changed since the last report and the nodes holding
pods, not every node. No I/O happens here.
"""

from __future__ import annotations

import heapq
import json
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis import spot
from controlplane.apis.cluster_v1alpha1 import MAX_SHAPE_HOSTNAMES
from controlplane.apis.gpus import gpus_partly_used, is_nvidia_resource
from member_agent.nodes import (
    UNKNOWN_PRODUCT,
    gpu_info,
    gpu_is_unusable,
    node_allocatable,
    node_capacity,
    node_is_ready,
    node_is_schedulable,
    node_taints,
    selection_labels,
    shared_replicas,
)

CPU_ROUNDING = 1000  # millicores
MEMORY_ROUNDING = 2**30  # bytes

#: A ``gpuSummary`` entry's identity: (resource, product, shared replicas).
GpuKey = tuple[str, str, int]
#: A node kind's identity: the ids of its labels, spec and status, and the node's name when
#: a label's value is its name.
KindKey = tuple[int, int, int, str | None]

_NOTHING: Mapping[str, int] = MappingProxyType({})


def add_amounts(into: dict[str, int], more: Mapping[str, int]) -> None:
    """``into`` += ``more``, resource by resource (a resource ``more`` names at 0 is kept)."""
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


@dataclass(frozen=True, slots=True)
class NodeKind:
    """What a node adds to the report while it holds no pod, one for all the nodes that hold the
    same labels, spec and status objects (a :class:`~member_agent.capacity.NodeTrimmer`'s nodes of
    one pool); a node with a label whose value is its own name is a kind of its own (its shape's
    labels leave that label out for it alone)."""

    #: The node's parts (held, so that their ids stay theirs while the kind is kept).
    labels: Any
    spec: Any
    status: Any
    key: KindKey
    unusable: bool
    allocatable: dict[str, int]
    capacity: dict[str, int]
    ready: bool
    schedulable: bool
    spot: bool
    product: str
    #: Per GPU resource the node advertises: its entry, capacity, and allocatable as counted
    #: (none while the node is not Ready).
    gpus: tuple[tuple[GpuKey, int, int], ...]
    #: Its ``nodeShapes`` keys; None when it is not schedulable (it has no shape).
    shape: _Shape | None

    @classmethod
    def read(cls, name: str, node: Mapping[str, Any]) -> NodeKind:
        """Node ``name``'s kind, read from ``node`` (the parts :mod:`member_agent.nodes` reads)."""
        labels = (node.get("metadata") or {}).get("labels")
        view = _view(name, labels, node.get("spec"), node.get("status"))
        allocatable, capacity, ready = node_allocatable(view), node_capacity(view), node_is_ready(view)
        product = str((labels or {}).get(c.LABEL_GPU_PRODUCT, UNKNOWN_PRODUCT))
        gpus = tuple(
            ((resource, product, shared_replicas(labels or {}, resource)),
             capacity.get(resource, 0),
             allocatable.get(resource, 0) if ready else 0)
            for resource in sorted(set(capacity) | set(allocatable))
            if is_nvidia_resource(resource)
        )
        shape = _Shape.read(view, allocatable)
        return cls(
            labels=labels, spec=node.get("spec"), status=node.get("status"),
            key=_kind_key(name, node),
            unusable=gpu_is_unusable(view), allocatable=allocatable, capacity=capacity, ready=ready,
            schedulable=shape is not None, spot=spot.is_spot(labels or {}), product=product, gpus=gpus,
            shape=shape,
        )

    def view(self, name: str) -> dict[str, Any]:
        """Node ``name`` of this kind, as much of it as :mod:`member_agent.nodes` reads."""
        return _view(name, self.labels, self.spec, self.status)

    def gpu_key(self, resource: str) -> GpuKey:
        return (resource, self.product, shared_replicas(self.labels or {}, resource))


def _view(name: str, labels: Any, spec: Any, status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": spec, "status": status}


def _kind_key(name: str, node: Mapping[str, Any]) -> KindKey:
    labels = (node.get("metadata") or {}).get("labels")
    return (id(labels), id(node.get("spec")), id(node.get("status")), name if name in (labels or {}).values() else None)


def shape_key(name: str, node: Mapping[str, Any], allocated: Mapping[str, int]) -> str | None:
    """Node ``name``'s ``nodeShapes`` key while its pods hold ``allocated`` (the shape but for its
    count, as JSON with sorted keys and no spaces); None when it has no shape. Only the shape is
    read, not the node's whole :class:`NodeKind`."""
    view = _view(name, (node.get("metadata") or {}).get("labels"), node.get("spec"), node.get("status"))
    shape = _Shape.read(view, node_allocatable(view))
    return None if shape is None else shape.holding(allocated)


#: ``json.dumps(value, sort_keys=True, separators=(",", ":"))``, without making an encoder per call.
_encoded = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class _Shape:
    """A node's ``nodeShapes`` key but for its free resources, encoded once (the key is the
    shape's JSON with sorted keys, the same for every allocation but for ``free``), and its key
    while it holds no pod."""

    allocatable: dict[str, int]
    before_free: str
    after_free: str
    empty: str

    @classmethod
    def read(cls, node: Mapping[str, Any], allocatable: dict[str, int]) -> _Shape | None:
        """``node``'s keys, given its allocatable; None when it is not schedulable (no shape)."""
        if not node_is_schedulable(node):
            return None
        shape: dict[str, Any] = {
            "labels": selection_labels(node),
            "taints": node_taints(node),
            "free": {},
            "allocatable": allocatable,
            "gpu": gpu_info(node, allocatable),
        }
        if spot.is_spot(node["metadata"]["labels"] or {}):
            shape["spot"] = True
        # The first '"free":{}' is the key's: only "allocatable" (resource names to integers)
        # comes before it.
        before, _, after = _encoded(shape).partition(',"free":{}')
        before += ',"free":'
        return cls(allocatable, before, after, before + _free(allocatable, _NOTHING) + after)

    def holding(self, allocated: Mapping[str, int]) -> str:
        """The key while the node's pods hold ``allocated``."""
        return self.before_free + _free(self.allocatable, allocated) + self.after_free


def _free(allocatable: Mapping[str, int], allocated: Mapping[str, int]) -> str:
    """A shape's ``free``, encoded: cpu rounded down to whole cores, memory to whole GiB (rounding
    down never promises capacity that is not there)."""
    free = {res: max(amount - allocated.get(res, 0), 0) for res, amount in allocatable.items()}
    if "cpu" in free:
        free["cpu"] -= free["cpu"] % CPU_ROUNDING
    if "memory" in free:
        free["memory"] -= free["memory"] % MEMORY_ROUNDING
    return _encoded(free)


@dataclass(slots=True)
class _GpuEntry:
    resource: str
    product: str
    replicas: int
    unusable: bool
    capacity: int = 0
    allocatable: int = 0
    allocated: int = 0

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "resource": self.resource,
            "product": self.product,
            "capacity": self.capacity,
            "allocatable": self.allocatable,
            "allocated": self.allocated,
        }
        if self.replicas > 1:
            entry["sharedReplicas"] = self.replicas
            entry["gpuEquivalent"] = {
                "capacity": round(self.capacity / self.replicas, 3),
                "allocatable": round(self.allocatable / self.replicas, 3),
                "allocated": round(self.allocated / self.replicas, 3),
            }
        if self.unusable:
            entry["unusable"] = True
        return entry


@dataclass(slots=True)
class _GpuSum:
    """One ``gpuSummary`` entry's sums over the nodes that advertise its resource."""

    nodes: int = 0
    unusable_nodes: int = 0
    capacity: int = 0
    allocatable: int = 0


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """The node part of one report."""

    total: int
    ready: int
    spot: int
    #: Names of the nodes whose GPUs are unusable (an invalid MIG layout), in name order.
    invalid: list[str]
    gpu_summary: list[dict[str, Any]]
    allocatable: dict[str, int]
    allocated: dict[str, int]
    node_shapes: list[dict[str, Any]]


class NodeTotals:
    """The node part of a member's capacity report, kept over node changes.

    :meth:`changed` is called on the event loop as the node informer changes (it only notes
    the node); :meth:`update` applies what was noted and :meth:`summary` builds a report's node
    part, one report at a time, in the reporter's worker thread. A node costs an entry naming
    its kind (its name is the informer's key, so the string is shared); the kinds are kept once
    while some node is of them. Node names must be unique (as a cluster's are)."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeKind] = {}
        self._kinds: dict[KindKey, NodeKind] = {}
        self._kind_nodes: Counter[KindKey] = Counter()
        self._ready = 0
        self._spot = 0
        self._invalid: set[str] = set()
        #: Per resource: the summed allocatable of Ready nodes, and how many nodes name it.
        self._allocatable: dict[str, int] = {}
        self._allocatable_nodes: Counter[str] = Counter()
        self._gpus: dict[GpuKey, _GpuSum] = {}
        #: Shapes of the schedulable nodes, each as it is while it holds no pod.
        self._shapes: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._noted: dict[str, Mapping[str, Any] | None] = {}

    @classmethod
    def of(cls, nodes: Iterable[Mapping[str, Any]]) -> NodeTotals:
        """The totals of ``nodes``."""
        totals = cls()
        totals.apply({str((node.get("metadata") or {}).get("name")): node for node in nodes})
        return totals

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def kinds(self) -> int:
        """Distinct node kinds kept (each while some node is of it)."""
        return len(self._kinds)

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    def get(self, name: str) -> NodeKind | None:
        return self._nodes.get(name)

    def changed(self, name: str, node: Mapping[str, Any] | None) -> None:
        """Node ``name`` is now ``node`` (None: gone), applied by the next :meth:`update`."""
        with self._lock:
            self._noted[name] = node

    def update(self) -> None:
        """Apply the changes :meth:`changed` noted since the last update."""
        with self._lock:
            noted, self._noted = self._noted, {}
        self.apply(noted)

    def apply(self, changes: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Node name -> the node now (None: gone)."""
        moved: dict[KindKey, tuple[NodeKind, int]] = {}  # per kind, nodes in less nodes out
        for name, node in changes.items():
            old = self._nodes.pop(name, None)
            if old is not None:
                moved[old.key] = (old, moved.get(old.key, (old, 0))[1] - 1)
                if old.unusable:
                    self._invalid.discard(name)
            if node is not None:
                kind = self._nodes[name] = self._kind(name, node)
                moved[kind.key] = (kind, moved.get(kind.key, (kind, 0))[1] + 1)
                if kind.unusable:
                    self._invalid.add(name)
        for kind, nodes in moved.values():
            if nodes:
                self._count(kind, nodes)

    def _kind(self, name: str, node: Mapping[str, Any]) -> NodeKind:
        kind = self._kinds.get(_kind_key(name, node))
        if kind is None:
            kind = NodeKind.read(name, node)
            self._kinds[kind.key] = kind
        return kind

    def _count(self, kind: NodeKind, nodes: int) -> None:
        """``nodes`` more nodes of ``kind`` (fewer when negative)."""
        self._kind_nodes[kind.key] += nodes
        if not self._kind_nodes[kind.key]:
            del self._kind_nodes[kind.key], self._kinds[kind.key]
        self._ready += nodes * kind.ready
        self._spot += nodes * kind.spot
        if kind.ready:
            for resource, amount in kind.allocatable.items():
                self._allocatable[resource] = self._allocatable.get(resource, 0) + nodes * amount
                self._allocatable_nodes[resource] += nodes
                if not self._allocatable_nodes[resource]:
                    del self._allocatable_nodes[resource], self._allocatable[resource]
        for gpu_key, capacity, allocatable in kind.gpus:
            entry = self._gpus.get(gpu_key)
            if entry is None:
                entry = self._gpus[gpu_key] = _GpuSum()
            entry.nodes += nodes
            entry.unusable_nodes += nodes * kind.unusable
            entry.capacity += nodes * capacity
            entry.allocatable += nodes * allocatable
            if not entry.nodes:
                del self._gpus[gpu_key]
        if kind.shape is not None:
            self._shapes[kind.shape.empty] += nodes
            if not self._shapes[kind.shape.empty]:
                del self._shapes[kind.shape.empty]

    def summary(self, allocated_by_node: Mapping[str, Mapping[str, int]]) -> NodeSummary:
        """The report's node part, given what the pods hold on each node that holds some (by
        node name; names these totals do not count are left out)."""
        entries = {
            key: _GpuEntry(key[0], key[1], key[2], sums.unusable_nodes > 0, sums.capacity, sums.allocatable)
            for key, sums in self._gpus.items()
        }
        # Nodes of one kind whose pods hold the same are worked out once (the kinds are kept
        # while their nodes are: their ids are their own for the whole report).
        alike: dict[tuple[int, tuple[tuple[str, int], ...]], tuple[NodeKind, Mapping[str, int], list[str]]] = {}
        for name, allocated in allocated_by_node.items():
            kind = self._nodes.get(name)
            if kind is None or not allocated:
                continue
            key = (id(kind), tuple(sorted(allocated.items())))
            if (group := alike.get(key)) is None:
                alike[key] = (kind, allocated, [name])
            else:
                group[2].append(name)
        allocated_total: dict[str, int] = {}
        shapes = Counter(self._shapes)
        named: dict[str, list[str]] = {}  # shape key -> its nodes whose GPUs are partly in use
        for kind, allocated, names in alike.values():
            nodes = len(names)
            for resource, amount in allocated.items():
                allocated_total[resource] = allocated_total.get(resource, 0) + amount * nodes
                if not is_nvidia_resource(resource):
                    continue
                gpu_key = kind.gpu_key(resource)
                entry = entries.get(gpu_key)
                if entry is None:
                    entry = entries[gpu_key] = _GpuEntry(*gpu_key, kind.unusable)
                entry.unusable = entry.unusable or kind.unusable
                entry.allocated += amount * nodes
            if kind.shape is not None:
                shapes[kind.shape.empty] -= nodes
                holding = kind.shape.holding(allocated)
                shapes[holding] += nodes
                if gpus_partly_used(kind.allocatable, allocated):
                    named.setdefault(holding, []).extend(names)
        ranked = sorted(((key, n) for key, n in shapes.items() if n), key=lambda item: (-item[1], item[0]))
        return NodeSummary(
            total=len(self._nodes),
            ready=self._ready,
            spot=self._spot,
            invalid=sorted(self._invalid),
            gpu_summary=[entries[key].as_dict() for key in sorted(entries)],
            allocatable=dict(sorted(self._allocatable.items())),
            allocated=dict(sorted(allocated_total.items())),
            node_shapes=[_shape_entry(key, count, named.get(key)) for key, count in ranked],
        )


def _shape_entry(key: str, count: int, names: list[str] | None) -> dict[str, Any]:
    """A ``nodeShapes`` entry, with the first names (in name order) of its nodes whose GPUs are
    partly in use, when it has some."""
    entry = {"count": count, **json.loads(key)}
    if names:
        entry["hostnames"] = heapq.nsmallest(MAX_SHAPE_HOSTNAMES, names)
    return entry
