"""The ``utilization`` part of the Cluster status report: its wire format, written and read.

The agent writes it (:func:`encode_utilization`, in the compact columnar encoding below) and
the hub reads it (:func:`expand_utilization`, in either encoding an agent may write); both
live here so the format has one home.

Why this module exists: the hub's waste accounting needs, for every GPU device of the member
(a whole GPU, a MIG instance, a time-sliced share), who holds it and how busy it is. Written
as one JSON object per device and per pod, that was 3.6 MiB for a 1,000-node x 8-GPU cluster,
more than etcd accepts in one request (1.5 MiB by default), so such a report could not even be
stored. This encoding keeps only what the accounting reads and writes it as parallel arrays
with small lookup tables: a fully allocated 1,000-node x 8-GPU cluster (17,000 devices, 12,800
GPU pods of 1,800 Deployments) stores as a 380 KiB Cluster object, and half-filled as about
310 KiB (tests/member_agent/test_report_size.py holds the bound).

Why inside ``Cluster.status`` rather than an object of its own (a ``ClusterUtilization`` kind or
sharded objects): one status write per report keeps capacity and utilization from the same
instant and needs no new hub kind, authorization rule or garbage collection; and at this size
one object is well within etcd's limit. Everything below is a list or a small table, never a
map keyed by node or pod: the hub's field ownership tracking (managedFields) treats a list as
one field, so it stays small too.

In: per node, the facts :func:`member_agent.capacity.summarize` gathers (:class:`NodeUtilization`:
the DCGM device samples of :func:`member_agent.dcgm.utilization_by_node`, the node's GPU pods
with their GPU requests, owner and labels). Out (:func:`encode_utilization`), with ``N`` nodes, ``D``
devices and ``P`` pods::

    version: 2
    sampleTime: RFC 3339 | null      # when DCGM was scraped
    products: [str]                  # GPU product names, indexed by nodes.product
    labelSets: [{k: v}]              # distinct node label sets, indexed by nodes.labels
    layouts: [{gpu: [int|str], profile?: [str|null]}]
                                     # distinct device layouts: per device its GPU index and MIG
                                     # profile (null: a whole GPU or a share; "": a MIG instance
                                     # of unknown profile; no list when no device is MIG)
    namespaces: [str]                # indexed by podGroups.namespace
    kinds: [str]                     # workload kinds, indexed by podGroups.kind
    requests: [{res: int}]           # distinct per-pod GPU requests, indexed by podGroups.request
    podLabelSets: [{k: v}]           # distinct pod label sets, indexed by podGroups.labels
    podGroups:                       # G entries each: pods of one workload, name stem and request
      namespace: [int]
      kind: [int]                    # -1: bare pods (no owner)
      name: [str|null]               # the owning workload (a ReplicaSet's pods: its Deployment)
      request: [int]                 # what each pod of the group requests
      podPrefix: [str]               # the start the group's pod names share; one that starts
                                     # with "-" continues the workload's name (a pod name never
                                     # starts with "-"), as in "-7d4b9c8f5-" for a ReplicaSet
      labels: [int]                  # the labels every pod of the group has (its template's;
                                     # not a StatefulSet pod's own name label); -1: none known
    nodes:                           # N entries each
      name: [str]
      product: [int]
      labels: [int]
      ready: [0|1]
      schedulable: [0|1]             # Ready and not cordoned
      sharedReplicas: [int]          # time-slicing shares per GPU (1: not shared)
      layout: [int]                  # the node's devices are layouts[layout], in its order
      podCount: [int]                # how many entries of ``pods`` are this node's
    devices:                         # D entries each, node by node, in the layouts' order
      pod: [int]                     # index among the node's pods; -1: nobody holds it
      utilization: [int|null]        # percent (0..100, utilization rounded to 0.01)
    pods:                            # P entries each, node by node, by (namespace, name)
      group: [int]                   # index into podGroups
      name: [str]                    # the pod's name without its group's podPrefix

Pods of one group share owner, request and the start of their names: a group is one
ReplicaSet, Job or StatefulSet (its pods' names up to the last "-"), so a pod costs its
random suffix and two small numbers. A group's labels (what a FederatedHPA's selector is
matched against) are kept once per distinct set, so they cost what the workloads' pod templates
do, however many pods there are.

Only nodes with DCGM devices are listed (the hub fills in GPUs that no exporter reported from
``gpuSummary``), and per node only its pods that request GPUs or hold a device. A device's
UUID and framebuffer use are not reported: the accounting reads neither.

The current agent reports the aggregated form (``version: 3``,
:mod:`controlplane.reports.aggregated`), which the waste accounting reads; it carries this
encoding as its ``perDevice`` field while that stays small (and null for a large member), for
the pod views. The reader, :func:`expand_utilization`, turns a ``status.utilization`` of any
version into per-node entries: a version 3 one's ``perDevice`` (none when left out), the
compact one above (``version: 2``) and the original list of per-node
objects (``{sampleTime, nodes: [{name, devices: [{gpu, uuid, profile?, instance?, pod?,
namespace?, utilization, fbUsedMiB?}], pods: [{pod, namespace, resources, owner?: {kind,
name}}]}]}``, no ``version``), so agents of both kinds can report to one hub. The hub's waste
accounting (:mod:`controlplane.reports.snapshot`) and the scheduler controller's bound-pod
counts (:mod:`controlplane.controllers.pods`) read it. No I/O happens here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from controlplane.apis.untyped import as_int, as_list, as_mapping

#: ``status.utilization.version`` of this encoding (the original per-node object list had none).
UTILIZATION_VERSION = 2
#: ``status.utilization.version`` of the aggregated form, whose ``perDevice`` field holds this encoding.
AGGREGATED_VERSION = 3
#: ``devices.pod`` of a device nobody holds.
NO_POD = -1
#: ``podGroups.kind`` of bare pods.
NO_OWNER = -1
#: The product of a node whose GPU product is not known.
UNKNOWN_PRODUCT = "unknown"


@dataclass(frozen=True, slots=True)
class PodAllocation:
    """A pod on a node that requests GPUs (or holds a device): its GPU requests, owner and labels."""

    namespace: str
    name: str
    resources: Mapping[str, int] = field(default_factory=dict)
    owner_kind: str | None = None
    owner_name: str | None = None
    labels: Mapping[str, str] | None = None
    """None: not known (a pod only a device names)."""


@dataclass(frozen=True, slots=True)
class NodeUtilization:
    """What the report carries about one node."""

    name: str
    product: str
    ready: bool
    schedulable: bool
    shared_replicas: int
    labels: Mapping[str, str]
    #: DCGM device samples in report order (:func:`member_agent.dcgm.utilization_by_node`).
    devices: Sequence[Mapping[str, Any]]
    pods: Sequence[PodAllocation] = ()


def device_order(value: str) -> tuple[int, str]:
    """Sort key of a DCGM ``gpu`` or GPU-instance id: numbers in numeric order, then any other text."""
    try:
        return (int(value), "")
    except ValueError:
        return (1 << 30, value)


class InternTable:
    """Distinct values in first-seen order, each with its index: the lookup tables of this
    encoding and of the aggregated one (:mod:`controlplane.reports.aggregated`)."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._index: dict[Any, int] = {}

    def index(self, key: Any, value: Any = None) -> int:
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.values)
            self.values.append(key if value is None else value)
        return found


def _percent(value: Any) -> int | None:
    if type(value) is not float:  # DCGM samples are floats; anything else is checked
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        value = float(value)
    ratio: float = value
    if ratio != ratio:  # NaN
        return None
    return round(min(max(ratio, 0.0), 1.0) * 100)


def _common_prefix(names: Sequence[str]) -> str:
    """The longest start all ``names`` share (that of the first and last in sort order)."""
    first, last = min(names), max(names)
    size = 0
    for a, b in zip(first, last, strict=False):
        if a != b:
            break
        size += 1
    return first[:size]


def _profile(device: Mapping[str, Any]) -> str | None:
    """A MIG instance's profile ("" when the exporter did not name it); None for a GPU or share."""
    profile = device.get("profile")
    if profile:
        return str(profile)
    return "" if device.get("instance") is not None else None


def _pod_key(namespace: Any, pod: Any) -> tuple[str, str]:
    return (str(namespace or ""), str(pod))


def _node_pods(node: NodeUtilization) -> list[PodAllocation]:
    """The node's pods, plus any pod a device names that the node's pod list lacks (the
    exporter can see a pod before the agent's cache does), sorted by (namespace, name)."""
    pods = {(p.namespace, p.name): p for p in node.pods}
    for device in node.devices:
        if device.get("pod"):
            key = _pod_key(device.get("namespace"), device["pod"])
            if key not in pods:
                pods[key] = PodAllocation(namespace=key[0], name=key[1])
    return [pods[key] for key in sorted(pods)]


_GroupKey = tuple[str, str, str, str, tuple[tuple[str, int], ...]]


def _group_key(pod: PodAllocation) -> _GroupKey:
    """The pod's group: namespace, owner, the stem of its name (up to its last ``-``), and its
    GPU request."""
    request = tuple(sorted((str(k), int(v)) for k, v in pod.resources.items()))
    stem = pod.name.rpartition("-")[0]
    if pod.owner_kind and pod.owner_name:
        return (pod.namespace, pod.owner_kind, pod.owner_name, stem, request)
    return (pod.namespace, "", "", stem, request)


def _group_labels(
    node_pods: Sequence[Sequence[PodAllocation]], node_keys: Sequence[Sequence[_GroupKey]]
) -> dict[_GroupKey, dict[str, str] | None]:
    """Per group, the labels all its pods have (None when a pod's labels are not known)."""
    shared: dict[_GroupKey, dict[str, str] | None] = {}
    for pods, keys in zip(node_pods, node_keys, strict=True):
        for pod, key in zip(pods, keys, strict=True):
            labels = None if pod.labels is None else {str(k): str(v) for k, v in pod.labels.items()}
            if key not in shared:
                shared[key] = labels
            elif (known := shared[key]) is not None:
                shared[key] = None if labels is None else {k: v for k, v in known.items() if labels.get(k) == v}
    return shared


def _pod_groups(
    node_pods: Sequence[Sequence[PodAllocation]], node_keys: Sequence[Sequence[_GroupKey]]
) -> tuple[dict[_GroupKey, int], dict[_GroupKey, str], dict[str, Any]]:
    """Group index and full name prefix per group key, and the encoded tables."""
    names: dict[_GroupKey, list[str]] = {}
    for pods, keys in zip(node_pods, node_keys, strict=True):
        for pod, key in zip(pods, keys, strict=True):
            names.setdefault(key, []).append(pod.name)
    keys = sorted(names)
    prefixes = {key: _common_prefix(group) for key, group in names.items()}
    group_labels = _group_labels(node_pods, node_keys)
    namespaces, kinds, requests, label_sets = InternTable(), InternTable(), InternTable(), InternTable()
    columns: dict[str, list[Any]] = {key: [] for key in ("namespace", "kind", "name", "request", "podPrefix", "labels")}
    for key in keys:
        namespace, kind, name, _, request = key
        prefix = prefixes[key]
        columns["namespace"].append(namespaces.index(namespace))
        columns["kind"].append(kinds.index(kind) if kind else NO_OWNER)
        columns["name"].append(name or None)
        columns["request"].append(requests.index(request, dict(request)))
        continued = f"{name}-"
        columns["podPrefix"].append(prefix[len(name) :] if name and prefix.startswith(continued) else prefix)
        labels = group_labels.get(key)
        if labels is None:
            columns["labels"].append(-1)
        else:
            ordered = tuple(sorted(labels.items()))
            columns["labels"].append(label_sets.index(ordered, dict(ordered)))
    tables = {
        "namespaces": namespaces.values,
        "kinds": kinds.values,
        "requests": requests.values,
        "podLabelSets": label_sets.values,
        "podGroups": columns,
    }
    return {key: index for index, key in enumerate(keys)}, prefixes, tables


#: The columns of ``nodes`` in the compact encoding, in the order :func:`expand_utilization` reads them.
_NODE_COLUMNS: Final = ("name", "product", "labels", "ready", "schedulable", "sharedReplicas", "layout", "podCount")


def encode_utilization(nodes: Sequence[NodeUtilization], *, sample_time: str | None) -> dict[str, Any]:
    """``Cluster.status.utilization`` for ``nodes`` (in report order) sampled at ``sample_time``."""
    reported = [node for node in nodes if node.devices]
    products, label_sets, layouts = InternTable(), InternTable(), InternTable()
    node_pods = [_node_pods(node) for node in reported]
    node_keys = [[_group_key(pod) for pod in pods] for pods in node_pods]
    group_index, prefixes, tables = _pod_groups(node_pods, node_keys)

    columns: dict[str, list[Any]] = {key: [] for key in _NODE_COLUMNS}
    device_pods: list[int] = []
    device_utilization: list[int | None] = []
    pod_group: list[int] = []
    pod_name: list[str] = []
    for node, pods, keys in zip(reported, node_pods, node_keys, strict=True):
        columns["name"].append(node.name)
        columns["product"].append(products.index(node.product))
        labels = tuple(sorted((str(k), str(v)) for k, v in node.labels.items()))
        columns["labels"].append(label_sets.index(labels, dict(labels)))
        columns["ready"].append(int(node.ready))
        columns["schedulable"].append(int(node.schedulable))
        columns["sharedReplicas"].append(max(int(node.shared_replicas), 1))
        columns["podCount"].append(len(pods))
        local = {(p.namespace, p.name): index for index, p in enumerate(pods)}
        for pod, key in zip(pods, keys, strict=True):
            pod_group.append(group_index[key])
            pod_name.append(pod.name[len(prefixes[key]) :])
        gpus: list[Any] = []
        profiles: list[str | None] = []
        for device in node.devices:
            get = device.get
            gpus.append(get("gpu", ""))
            profiles.append(_profile(device))
            holder = get("pod")
            device_pods.append(local[_pod_key(get("namespace"), holder)] if holder else NO_POD)
            device_utilization.append(_percent(get("utilization")))
        layout: dict[str, Any] = {"gpu": gpus}
        if any(profile is not None for profile in profiles):
            layout["profile"] = profiles
        columns["layout"].append(layouts.index((tuple(gpus), tuple(profiles)), layout))

    return {
        "version": UTILIZATION_VERSION,
        "sampleTime": sample_time,
        "products": products.values,
        "labelSets": label_sets.values,
        "layouts": layouts.values,
        **tables,
        "nodes": columns,
        "devices": {"pod": device_pods, "utilization": device_utilization},
        "pods": {"group": pod_group, "name": pod_name},
    }


# ---------------------------------------------------------------------------------------------
# Reading (the hub)
# ---------------------------------------------------------------------------------------------


def _at(values: Sequence[Any], index: int, default: Any = None) -> Any:
    return values[index] if 0 <= index < len(values) else default


def _columns(value: Any, *names: str) -> list[list[Any]]:
    table = as_mapping(value)
    return [as_list(table.get(name)) for name in names]


@dataclass(frozen=True, slots=True)
class _PodGroup:
    namespace: str
    kind: str | None
    name: str | None
    resources: Mapping[str, Any]
    prefix: str
    labels: Mapping[str, Any] | None = None


_UNKNOWN_GROUP = _PodGroup("", None, None, MappingProxyType({}), "")


def _decode_pod_groups(raw: Mapping[str, Any]) -> list[_PodGroup]:
    """The ``podGroups`` of a compact utilization, with their names' prefixes made whole."""
    namespaces, kinds, requests, label_sets = (
        as_list(raw.get(k)) for k in ("namespaces", "kinds", "requests", "podLabelSets"))
    namespace_at, kind_at, names, request_at, prefixes, labels_at = _columns(
        raw.get("podGroups"), "namespace", "kind", "name", "request", "podPrefix", "labels"
    )
    groups = []
    for index, name in enumerate(names):
        kind = _at(kinds, as_int(_at(kind_at, index), -1))
        prefix = str(_at(prefixes, index) or "")
        if prefix.startswith("-") and name:
            prefix = f"{name}{prefix}"  # continues the workload's name (pod names never start with "-")
        groups.append(
            _PodGroup(
                namespace=str(_at(namespaces, as_int(_at(namespace_at, index), -1)) or ""),
                kind=str(kind) if kind else None,
                name=str(name) if name else None,
                resources=as_mapping(_at(requests, as_int(_at(request_at, index), -1))),
                prefix=prefix,
                labels=_label_set(_at(label_sets, as_int(_at(labels_at, index), -1))),
            )
        )
    return groups


def _label_set(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def expand_utilization(utilization: Any) -> list[dict[str, Any]]:
    """The per-node entries of a ``status.utilization``, whichever encoding wrote it.

    Out, per node that reported DCGM devices: ``{name, product, ready, schedulable,
    sharedReplicas, labels, devices: [{gpu, uuid, profile?, instance?, pod?, namespace?,
    utilization?}], pods: [{pod, namespace, resources, owner?: {kind, name}, labels?}]}`` (the original
    encoding, which is returned as it is). In the compact encoding a device has no UUID
    (``uuid`` is ``""``), a MIG instance's ``instance`` is its position on the node, and
    ``utilization`` is the reported percent / 100 (absent when unknown). Entries that point
    outside their tables are skipped, so a malformed report loses only what it garbled.
    """
    raw = as_mapping(utilization)
    if as_int(raw.get("version"), 1) == AGGREGATED_VERSION:
        raw = as_mapping(raw.get("perDevice"))
        if not raw:
            return []
    if as_int(raw.get("version"), 1) < 2:
        return [dict(as_mapping(node)) for node in as_list(raw.get("nodes"))]
    products, label_sets, layouts = (as_list(raw.get(k)) for k in ("products", "labelSets", "layouts"))
    names, node_products, node_labels, ready, schedulable, replicas, node_layouts, pod_counts = _columns(
        raw.get("nodes"), *_NODE_COLUMNS
    )
    device_pods, device_utilization = _columns(raw.get("devices"), "pod", "utilization")
    pod_groups, pod_names = _columns(raw.get("pods"), "group", "name")
    groups = _decode_pod_groups(raw)

    out: list[dict[str, Any]] = []
    device_at = pod_at = 0
    for index, name in enumerate(names):
        layout = as_mapping(_at(layouts, as_int(_at(node_layouts, index), -1)))
        gpus, profiles = as_list(layout.get("gpu")), as_list(layout.get("profile"))
        pods: list[dict[str, Any]] = []
        for position in range(pod_at, pod_at + max(as_int(_at(pod_counts, index)), 0)):
            group = _at(groups, as_int(_at(pod_groups, position), -1), _UNKNOWN_GROUP)
            pod: dict[str, Any] = {
                "pod": f"{group.prefix}{_at(pod_names, position) or ''}",
                "namespace": group.namespace,
                "resources": dict(group.resources),
            }
            if group.kind and group.name:
                pod["owner"] = {"kind": group.kind, "name": group.name}
            if group.labels is not None:
                pod["labels"] = dict(group.labels)
            pods.append(pod)
        pod_at += len(pods)
        devices: list[dict[str, Any]] = []
        for offset, gpu in enumerate(gpus):
            position = device_at + offset
            device: dict[str, Any] = {"gpu": gpu, "uuid": ""}
            profile = _at(profiles, offset)
            if profile is not None:
                if profile:
                    device["profile"] = str(profile)
                device["instance"] = offset
            holder = as_mapping(_at(pods, as_int(_at(device_pods, position), -1)))
            if holder:
                device["pod"], device["namespace"] = holder["pod"], holder["namespace"]
            percent = _at(device_utilization, position)
            if isinstance(percent, int | float) and not isinstance(percent, bool):
                device["utilization"] = percent / 100
            devices.append(device)
        device_at += len(gpus)
        out.append(
            {
                "name": str(name),
                "product": str(_at(products, as_int(_at(node_products, index), -1)) or UNKNOWN_PRODUCT),
                "ready": bool(_at(ready, index, 1)),
                "schedulable": bool(_at(schedulable, index, 1)),
                "sharedReplicas": max(as_int(_at(replicas, index), 1), 1),
                "labels": dict(as_mapping(_at(label_sets, as_int(_at(node_labels, index), -1)))),
                "devices": devices,
                "pods": pods,
            }
        )
    return out


def node_entries(nodes: Sequence[NodeUtilization]) -> list[dict[str, Any]]:
    """What :func:`expand_utilization` reads back from :func:`encode_utilization` of ``nodes``,
    built without the encoding (the agent's own view of what it reports: per-device entries
    whose utilization is rounded to the percent, devices without UUIDs, MIG instances numbered
    by their position on the node)."""
    out: list[dict[str, Any]] = []
    reported = [node for node in nodes if node.devices]
    node_pods = [_node_pods(node) for node in reported]
    node_keys = [[_group_key(pod) for pod in pods] for pods in node_pods]
    group_labels = _group_labels(node_pods, node_keys)
    for node, allocations, keys in zip(reported, node_pods, node_keys, strict=True):
        pods: list[dict[str, Any]] = []
        for allocation, key in zip(allocations, keys, strict=True):
            pod: dict[str, Any] = {
                "pod": allocation.name,
                "namespace": allocation.namespace,
                "resources": dict(sorted((str(k), int(v)) for k, v in allocation.resources.items())),
            }
            if allocation.owner_kind and allocation.owner_name:
                pod["owner"] = {"kind": allocation.owner_kind, "name": allocation.owner_name}
            if (labels := group_labels.get(key)) is not None:
                pod["labels"] = dict(sorted(labels.items()))
            pods.append(pod)
        devices: list[dict[str, Any]] = []
        for offset, source in enumerate(node.devices):
            get = source.get
            device: dict[str, Any] = {"gpu": get("gpu", ""), "uuid": ""}
            profile = _profile(source)
            if profile is not None:
                if profile:
                    device["profile"] = profile
                device["instance"] = offset
            if holder := get("pod"):
                namespace, name = _pod_key(get("namespace"), holder)
                device["pod"], device["namespace"] = name, namespace
            percent = _percent(get("utilization"))
            if percent is not None:
                device["utilization"] = percent / 100
            devices.append(device)
        out.append(
            {
                "name": node.name,
                "product": node.product or UNKNOWN_PRODUCT,
                "ready": bool(int(node.ready)),
                "schedulable": bool(int(node.schedulable)),
                "sharedReplicas": max(int(node.shared_replicas), 1),
                "labels": dict(sorted((str(k), str(v)) for k, v in node.labels.items())),
                "devices": devices,
                "pods": pods,
            }
        )
    return out


def encoded_size_at_least(nodes: Sequence[NodeUtilization]) -> int:
    """A lower bound of the JSON size of :func:`encode_utilization` of ``nodes`` (compact
    separators): per reported node its name as a string and the other seven node columns as
    one-digit numbers, per device two one-digit numbers (holder, utilization), each with its
    separator (less one per column, which has no separator after its last value). Spares
    encoding a report only to find it too large to keep."""
    size = 0
    for node in nodes:
        if node.devices:
            size += len(node.name) + 3 + 2 * (len(_NODE_COLUMNS) - 1) + 4 * len(node.devices)
    return max(size - len(_NODE_COLUMNS) - 2, 0)
