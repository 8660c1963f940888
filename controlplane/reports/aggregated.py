"""The aggregated utilization report (``status.utilization`` version 3): written and read.

Why this module exists: a per-device report grows with the member (the compact per-device
encoding of :mod:`controlplane.apis.utilization` is 380 KiB at 1,000 nodes x 8 GPUs and about
1.9 MiB at 5,000, past etcd's 1.5 MiB request limit). This form carries only what the waste
accounting reads, so its size follows the member's workloads and node *kinds*, not its node
or pod count:

* a node is one small integer (its class), run-length encoded in name order: a class is the
  node's product, readiness, cordon and its free devices in order (what the demand matching
  and the "move" recommendations look at);
* held devices are counted per (workload, product, node readiness, device kind, waste state),
  with the sum of their utilization percent: the state (busy / idle-allocated at the report's
  ``threshold``, or unmeasured) and the utilization sum are what the accounting adds up;
* pods are counted per (workload, product, readiness, the device kinds they hold): a move
  recommendation moves whole pods. A pod without an owner keeps its name (the hub may still
  put it under a propagated workload by name).

The agent builds it from the same node samples the hub would build from a per-device report
(:func:`aggregate` over :func:`controlplane.reports.nodes.node_sample`), so the hub's
figures are the same from either form (tests/member_agent/test_report_size.py compares them). The
hub turns it back into node samples (:func:`expand`): one per node, named ``n000000``... in
the original order (so every tie the accounting breaks by node name falls the same way), the
free devices on their node, each held device on the first node of its product and readiness,
with the mean utilization of its group. Per-device identities (node names, GPU indexes,
UUIDs, pod names of owned pods) are not carried.

Format, ``W`` workloads, ``C`` node classes::

    version: 3
    sampleTime: RFC 3339 | null
    threshold: float                  # busy at or above this utilization (the accounting's)
    products: [str]
    kinds: [[profile|null, share, resource|null]]   # device kinds
    namespaces: [str]
    ownerKinds: [str]
    workloads: {namespace: [int], kind: [int] (-1: a pod without owner), name: [str], pods: [int]}
    nodeClasses: [{product: int, ready: 0|1, schedulable: 0|1, free: [[kind, count]]}]
    nodes: {class: [int], count: [int]}                 # runs, in node name order
    held: {workload, product, ready, kind, state (0 busy, 1 idle, 2 unmeasured), count, percent: [int]}
    shapes: [[[kind, count]]]                           # what one pod holds
    pods: {workload, product, ready, shape, count: [int]}
    perDevice: {...} | null           # the per-device encoding, for the pod views, while it is
                                      # small (:mod:`controlplane.reports.agentreport`)

``workloads.pods`` is how many GPU pods of the workload the agent saw bound (also those no
device series names yet); the scheduler controller counts them (:func:`pods_by_owner`).
No I/O happens here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.untyped import as_int, as_list, as_mapping
from controlplane.apis.utilization import AGGREGATED_VERSION, InternTable
from controlplane.reports.classify import DEFAULT_THRESHOLD
from controlplane.reports.fleet import DeviceSample, NodeSample, PodRef

#: ``held.state`` values.
BUSY, IDLE, UNMEASURED = 0, 1, 2
__all__ = ["AGGREGATED_VERSION", "BUSY", "IDLE", "UNMEASURED", "aggregate", "expand", "is_aggregated",
           "mean_utilization_by_owner", "node_count", "pods_by_owner"]
_HELD: Final = ("workload", "product", "ready", "kind", "state", "count", "percent")
_PODS: Final = ("workload", "product", "ready", "shape", "count")

Kind = tuple[str | None, float, str | None]
_Runs = tuple[tuple[int, int], ...]


def _runs(values: Iterable[int]) -> _Runs:
    out: list[list[int]] = []
    for value in values:
        if out and out[-1][0] == value:
            out[-1][1] += 1
        else:
            out.append([value, 1])
    return tuple((value, count) for value, count in out)


def _kind(device: DeviceSample) -> Kind:
    return (device.profile, device.share, device.resource)


def _state(utilization: float | None, threshold: float) -> int:
    if utilization is None:
        return UNMEASURED
    return BUSY if utilization >= threshold else IDLE


def aggregate(
    nodes: Sequence[NodeSample],
    bound_pods: Iterable[tuple[str, str | None, str | None]] = (),
    *,
    sample_time: str | None,
    threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any]:
    """The version 3 ``status.utilization`` of ``nodes`` (in name order).

    ``bound_pods``: (namespace, owner kind, owner name) of every GPU pod the agent lists,
    counted per workload for ``workloads.pods``.
    """
    products, kinds, namespaces, owner_kinds, workloads, classes, shapes = (InternTable() for _ in range(7))
    held: dict[tuple[int, int, int, int, int], list[int]] = {}
    pods: Counter[tuple[int, int, int, int]] = Counter()
    node_classes: list[int] = []

    def workload(ref: PodRef) -> int:
        if ref.kind and ref.name:
            return workloads.index((namespaces.index(ref.namespace), owner_kinds.index(ref.kind), ref.name))
        return workloads.index((namespaces.index(ref.namespace), -1, ref.pod))

    for node in nodes:
        product, ready = products.index(node.product), int(node.ready)
        free = _runs(kinds.index(_kind(d)) for d in node.devices if d.allocated_to is None)
        node_classes.append(classes.index((product, ready, int(node.schedulable), free)))
        by_pod: dict[PodRef, list[int]] = {}
        for device in node.devices:
            if device.allocated_to is None:
                continue
            kind = kinds.index(_kind(device))
            by_pod.setdefault(device.allocated_to, []).append(kind)
            state = _state(device.utilization, threshold)
            key = (workload(device.allocated_to), product, ready, kind, state)
            slot = held.setdefault(key, [0, 0])
            slot[0] += 1
            if device.utilization is not None:
                slot[1] += round(device.utilization * 100)
        for ref, held_kinds in by_pod.items():
            shape = tuple(sorted(Counter(held_kinds).items()))
            pods[(workload(ref), product, ready, shapes.index(shape))] += 1

    pod_counts: Counter[int] = Counter()
    for namespace, owner_kind, owner_name in bound_pods:
        if owner_kind and owner_name:
            pod_counts[workload(PodRef(namespace, "", owner_kind, owner_name))] += 1
    rows = workloads.values
    return {
        "version": AGGREGATED_VERSION,
        "sampleTime": sample_time,
        "threshold": threshold,
        "products": products.values,
        "kinds": [list(kind) for kind in kinds.values],
        "namespaces": namespaces.values,
        "ownerKinds": owner_kinds.values,
        "workloads": {
            "namespace": [row[0] for row in rows],
            "kind": [row[1] for row in rows],
            "name": [row[2] for row in rows],
            "pods": [pod_counts[index] for index in range(len(rows))],
        },
        "nodeClasses": [
            {"product": p, "ready": r, "schedulable": s, "free": [list(run) for run in free]}
            for p, r, s, free in classes.values
        ],
        "nodes": _columns_of(_runs(node_classes), ("class", "count")),
        "held": _columns_of([(*key, *value) for key, value in held.items()], _HELD),
        "shapes": [[list(entry) for entry in shape] for shape in shapes.values],
        "pods": _columns_of([(*key, count) for key, count in pods.items()], _PODS),
    }


def _columns_of(rows: Iterable[Sequence[int]], names: Sequence[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {name: [] for name in names}
    for row in rows:
        for name, value in zip(names, row, strict=True):
            out[name].append(value)
    return out


# ---------------------------------------------------------------------------------------------
# Reading (the hub)
# ---------------------------------------------------------------------------------------------


def is_aggregated(utilization: Any) -> bool:
    """Whether a ``status.utilization`` is of this form (``AGGREGATED_VERSION``, re-exported)."""
    return as_int(as_mapping(utilization).get("version"), 1) == AGGREGATED_VERSION


def _rows(raw: Any, names: Sequence[str]) -> list[tuple[int, ...]]:
    """The rows of a column table, as ints; rows with a missing or non-integer cell are dropped."""
    columns = [as_list(as_mapping(raw).get(name)) for name in names]
    size = min((len(column) for column in columns), default=0)
    out = []
    for index in range(size):
        row = tuple(as_int(column[index], -1) for column in columns)
        if all(value >= 0 for value in row):
            out.append(row)
    return out


def _at(values: Sequence[Any], index: int, default: Any = None) -> Any:
    return values[index] if 0 <= index < len(values) else default


def _decoded_kind(raw: Any) -> Kind | None:
    values = as_list(raw)
    if len(values) != 3:
        return None
    profile, share, resource = values
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0.0 < share <= 1.0:
        return None
    return (str(profile) if profile else None, float(share), str(resource) if resource else None)


@dataclass(frozen=True, slots=True)
class _Workload:
    namespace: str
    kind: str | None
    name: str
    pods: int

    def holder(self, index: int) -> PodRef:
        if self.kind:
            return PodRef(self.namespace, f"{self.kind}/{self.name}#{index}", self.kind, self.name)
        return PodRef(self.namespace, self.name)


def _workloads(raw: Mapping[str, Any]) -> list[_Workload]:
    namespaces, owner_kinds = as_list(raw.get("namespaces")), as_list(raw.get("ownerKinds"))
    table = as_mapping(raw.get("workloads"))
    names = as_list(table.get("name"))
    namespace_at, kind_at, pods_at = (as_list(table.get(k)) for k in ("namespace", "kind", "pods"))
    out = []
    for index, name in enumerate(names):
        kind = _at(owner_kinds, as_int(_at(kind_at, index), -1))
        out.append(
            _Workload(
                namespace=str(_at(namespaces, as_int(_at(namespace_at, index), -1)) or ""),
                kind=str(kind) if kind else None,
                name=str(name or ""),
                pods=max(as_int(_at(pods_at, index), 0), 0),
            )
        )
    return out


def pods_by_owner(utilization: Any) -> Counter[tuple[str, str, str]]:
    """GPU pods bound per (namespace, owner kind, owner name), as the report counts them."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for workload in _workloads(as_mapping(utilization)):
        if workload.kind and workload.pods:
            counts[(workload.namespace, workload.kind, workload.name)] += workload.pods
    return counts


def mean_utilization_by_owner(utilization: Any) -> dict[tuple[str, str, str], float]:
    """The mean utilization percent of the measured devices each workload holds, per (namespace,
    owner kind, owner name); workloads with no measured device are left out."""
    raw = as_mapping(utilization)
    workloads = _workloads(raw)
    totals: dict[tuple[str, str, str], tuple[int, int]] = {}
    for workload_at, _product, _ready, _kind, state, count, percent in _rows(raw.get("held"), _HELD):
        workload = _at(workloads, workload_at)
        if state == UNMEASURED or workload is None or not workload.kind or count <= 0:
            continue
        key = (workload.namespace, workload.kind, workload.name)
        devices, total = totals.get(key, (0, 0))
        totals[key] = (devices + count, total + percent)
    return {key: total / devices for key, (devices, total) in totals.items()}


def node_count(utilization: Any) -> int:
    """How many nodes with GPU devices the report covers."""
    return sum(max(as_int(count, 0), 0) for count in as_list(as_mapping(as_mapping(utilization).get("nodes")).get("count")))


def _node_name(position: int) -> str:
    # Zero-padded, so names sort as the nodes did; they start with a letter, like a node name,
    # so they sort after the hub's "(unreported…)" nodes as real names do.
    return f"n{position:06d}"


def expand(utilization: Any) -> list[NodeSample]:
    """Node samples equivalent, for the waste accounting, to the nodes the report aggregates.

    Entries that point outside their tables are skipped, so a malformed report loses only what
    it garbled.
    """
    raw = as_mapping(utilization)
    products = [str(p) for p in as_list(raw.get("products"))]
    kinds = [_decoded_kind(k) for k in as_list(raw.get("kinds"))]
    workloads = _workloads(raw)

    # Held devices: per (workload, product, ready, kind), utilization values in state order
    # (reversed: taken from the end).
    pools: dict[tuple[int, int, int, int], list[float | None]] = {}
    for workload, product, ready, kind, state, count, percent in sorted(_rows(raw.get("held"), _HELD)):
        if _at(kinds, kind) is None or count <= 0:
            continue
        mean = None if state == UNMEASURED else percent / (100 * count)
        pools.setdefault((workload, product, ready, kind), []).extend([mean] * count)
    for pool in pools.values():
        pool.reverse()
    shapes = [
        [(as_int(_at(as_list(e), 0), -1), as_int(_at(as_list(e), 1), 0)) for e in as_list(s)]
        for s in as_list(raw.get("shapes"))
    ]
    held_on: dict[tuple[int, int], list[DeviceSample]] = {}
    serial: Counter[int] = Counter()
    for workload, product, ready, shape, count in _rows(raw.get("pods"), _PODS):
        owner = _at(workloads, workload)
        if owner is None:
            continue
        for _ in range(count):
            holder = owner.holder(serial[workload])
            serial[workload] += 1
            target = held_on.setdefault((product, ready), [])
            for kind, amount in _at(shapes, shape, []):
                pool, known = pools.get((workload, product, ready, kind), []), _at(kinds, kind)
                if known is None:
                    continue
                for _ in range(min(amount, len(pool))):
                    profile, share, resource = known
                    target.append(
                        DeviceSample(str(len(target)), "", profile, share, holder, pool.pop(), resource)
                    )

    out: list[NodeSample] = []
    classes = as_list(raw.get("nodeClasses"))
    for class_index, count in _rows(raw.get("nodes"), ("class", "count")):
        node_class = as_mapping(_at(classes, class_index))
        if not node_class:
            continue
        product_index = as_int(node_class.get("product"), -1)
        product = _at(products, product_index)
        if product is None:
            continue
        ready = as_int(node_class.get("ready"), 1)
        free: list[DeviceSample] = []
        for run in as_list(node_class.get("free")):
            kind_index, amount = as_int(_at(as_list(run), 0), -1), as_int(_at(as_list(run), 1), 0)
            known = _at(kinds, kind_index)
            if known is not None:
                profile, share, resource = known
                free.extend(DeviceSample("", "", profile, share, resource=resource) for _ in range(amount))
        for _ in range(count):
            devices = list(free) + held_on.pop((product_index, ready), [])
            numbered = tuple(
                DeviceSample(str(i), "", d.profile, d.share, d.allocated_to, d.utilization, d.resource)
                for i, d in enumerate(devices)
            )
            out.append(
                NodeSample(
                    name=_node_name(len(out)),
                    product=product,
                    devices=numbered,
                    ready=bool(ready),
                    schedulable=bool(as_int(node_class.get("schedulable"), 1)),
                )
            )
    return out
