"""One snapshot of the fleet's GPUs, as the waste accounting consumes it.

The accounting (:mod:`controlplane.reports.classify`, :mod:`controlplane.reports.accounting`)
works on frozen dataclasses, independent of the wire format: a :class:`FleetSample` is every
cluster's nodes and their GPU devices (whole GPUs, MIG instances, time-sliced shares) at one
instant, who holds each device and how busy it is, plus the fleet's pending GPU demand.

:func:`sample_from_cluster_statuses` is the adapter from hub objects (plain dicts as stored):

* ``Cluster`` objects: ``spec.pricing/provider/tier/unschedulable``, the Ready condition and
  ``status.utilization`` (written by :func:`member_agent.capacity.summarize`), with
  ``gpuSummary`` and ``nodeShapes`` filling in GPUs that no DCGM series reported. The
  utilization is read in both encodings an agent may write
  (:func:`controlplane.apis.utilization.expand_utilization`): the compact columnar one
  (``version: 2``) and the original list of per-node objects (``{sampleTime, nodes: [{name, devices: [{gpu, uuid,
  profile?, instance?, pod?, namespace?, utilization, fbUsedMiB?}], pods: [{pod, namespace,
  resources, owner?: {kind, name}}]}]}``, no ``version``), so agents of both kinds can report
  to one hub.
* ``ResourceBinding`` objects: replicas the scheduler has not placed
  (``spec.replicas`` minus the sum of ``spec.clusters[].replicas``) are pending demand.
* ``Work`` objects: ``status.manifestStatuses[].unschedulable.pods`` are pending demand too
  (pods the member's scheduler could not place; they may run anywhere else). A pod the agent
  reported without an owner is put under the workload propagated to its cluster whose pods are
  named like it (``infer-56fd5b7d5-9rdjm`` under Deployment ``infer``), so a report by workload
  shows hub workloads, not raw pods.

Adapter rules, exactly:

* A device is one DCGM series: a whole GPU (share 1), a MIG instance (share = compute
  slices / 7, so ``3g.40gb`` is 3/7), or, when several pods' series share one GPU (time
  slicing), one share per pod of 1/N of the GPU, where N is the node's ``sharedReplicas`` when
  the report carries it, else the number of pods seen; the shares nobody holds are added free.
* A MIG-enabled GPU whose instances use fewer than 7 compute slices gets one extra device,
  profile :data:`UNPARTITIONED`, holding the rest: no resource advertises it, so it can never
  be allocated (it is stranded capacity), and every GPU's shares still add up to 1.
* A device is allocated to the pod named by its series' ``pod``/``namespace`` labels. When the
  exporter has no Kubernetes mapping, the node's ``pods`` list (per-pod GPU requests) assigns
  pods to the node's unlabelled free devices of the requested resource, in device order.
* A node's product, readiness, cordon, labels and time-slicing replicas come from the optional
  ``product``/``ready``/``schedulable``/``labels``/``sharedReplicas`` fields of its
  utilization entry. Without ``product`` it is inferred from ``gpuSummary``: the cluster's only
  GPU product, else the only product offering the node's MIG profiles, else ``unknown``.
* GPUs in ``gpuSummary`` that no utilization entry covers (no exporter on the node, or the node
  is not Ready) are added on synthetic nodes named ``(unreported…)`` so the fleet's totals
  still reconcile with its GPU count: capacity minus allocatable is unavailable, allocated
  (minus what DCGM showed) is held by an unknown pod (utilization unknown), the rest is free
  and laid out on nodes per the remaining ``nodeShapes`` (one device per node when no shape
  is left, so a multi-GPU replica is never assumed to fit across nodes).
* A cluster is ready when its Ready condition is ``True`` (and, with ``stale_after``, its
  ``lastReportTime`` is recent enough).
* A binding whose ``Scheduled`` condition has reason ``NeverFits`` (no node of the fleet could
  hold one of its pods, even empty) is pending demand with reason
  :attr:`PendingReason.NEVER_FITS` and the condition's message: the classifier leaves it out of
  free-needed and free-fragmented, and the report lists it apart.
* Pending demand carries only GPU placement facts: the per-replica requests, the allowed GPU
  products (``nodeSelector``/required node affinity on ``nvidia.com/gpu.product``) and the
  allowed clusters (the placement's cluster affinity and cluster tolerations, evaluated with
  :mod:`policies.affinity`). A member's unschedulable pods exclude that member.

No I/O happens here.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from controlplane.apis import constants as c
from controlplane.apis.meta import Taint, parse_time
from controlplane.apis.quantity import QuantityError
from controlplane.apis.utilization import expand_utilization
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.requirements import ReplicaRequirements, SelectorOperator, is_gpu_resource
from policies.affinity import ClusterView, cluster_matches_affinity, tolerates_cluster_taints
from policies.models import Placement

logger = logging.getLogger(__name__)

MIG_COMPUTE_SLICES = 7
#: Profile of the compute slices of a MIG-enabled GPU that no instance uses.
UNPARTITIONED = "unpartitioned"
UNKNOWN_PRODUCT = "unknown"
UNREPORTED_NODE = "(unreported)"
UNREPORTED_UNAVAILABLE_NODE = "(unreported, not ready)"
_AUTO = "auto"
_MIG_PROFILE = re.compile(r"^(\d+)g\.")
_SINGLE_STRATEGY_MARKER = "-MIG-"
_ONPREM = "onprem"


class PendingReason(StrEnum):
    """Why a pending demand waits."""

    UNPLACED = "Unplaced"
    """The hub's scheduler has not placed these replicas in any cluster."""
    MEMBER_UNSCHEDULABLE = "MemberUnschedulable"
    """A member's scheduler could not place these pods."""
    NEVER_FITS = "NeverFits"
    """No node of the fleet could hold one of these pods even empty (the hub's scheduler says so
    in the binding's Scheduled condition): not demand any free GPU could serve."""


def mig_compute_slices(profile: str) -> int | None:
    """Compute slices of a MIG profile (``3g.40gb`` -> 3), None when not a MIG profile."""
    match = _MIG_PROFILE.match(profile)
    if match is None:
        return None
    slices = int(match.group(1))
    return slices if 0 < slices <= MIG_COMPUTE_SLICES else None


def mig_share(profile: str) -> float:
    """A MIG instance's share of its GPU: compute slices / 7 (1/7 when the profile is unreadable)."""
    return (mig_compute_slices(profile) or 1) / MIG_COMPUTE_SLICES


def mig_resource(profile: str) -> str:
    """The mixed-strategy resource name of a MIG profile: ``nvidia.com/mig-<profile>``."""
    return f"{c.RESOURCE_MIG_PREFIX}{profile}"


def profile_of_resource(resource: str) -> str | None:
    """``nvidia.com/mig-3g.40gb`` -> ``3g.40gb``; None for other resources."""
    return (
        resource.removeprefix(c.RESOURCE_MIG_PREFIX) if resource.startswith(c.RESOURCE_MIG_PREFIX) else None
    )


def _default_resource(profile: str | None) -> str | None:
    if profile is None:
        return c.RESOURCE_GPU
    if profile == UNPARTITIONED:
        return None
    return mig_resource(profile)


@dataclass(frozen=True, slots=True)
class PodRef:
    """The pod holding a device, and the workload that owns it (when known)."""

    namespace: str
    pod: str
    kind: str | None = None
    name: str | None = None

    @property
    def workload(self) -> str:
        """``Kind/name`` of the owning workload; ``Pod/<pod>`` for a bare pod, ``""`` when unknown."""
        if self.kind and self.name:
            return f"{self.kind}/{self.name}"
        return f"Pod/{self.pod}" if self.pod else ""


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One allocatable GPU device: a whole GPU, a MIG instance or a time-sliced share.

    ``share`` is the fraction of a physical GPU the device accounts for (1.0 whole GPU,
    compute slices / 7 for MIG, 1/N for a time-sliced share). ``resource`` is the extended
    resource the device plugin advertises it as; by default derived from ``profile``
    (``nvidia.com/gpu`` for a whole GPU, ``nvidia.com/mig-<profile>`` for MIG, None for the
    :data:`UNPARTITIONED` remainder, which no pod can request). ``utilization`` is 0..1 or None
    when unknown.
    """

    gpu: str
    uuid: str
    profile: str | None = None
    share: float = 1.0
    allocated_to: PodRef | None = None
    utilization: float | None = None
    resource: str | None = _AUTO

    def __post_init__(self) -> None:
        if self.resource == _AUTO:
            object.__setattr__(self, "resource", _default_resource(self.profile))
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"device {self.uuid or self.gpu}: share must be in (0, 1], got {self.share}")


@dataclass(frozen=True, slots=True)
class NodeSample:
    """A node's GPU devices. ``schedulable`` False means cordoned (takes no new pods)."""

    name: str
    product: str
    devices: tuple[DeviceSample, ...] = ()
    ready: bool = True
    schedulable: bool = True
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class ClusterSample:
    """A member cluster: its nodes, readiness, cordon, provider, overflow tier and GPU prices."""

    name: str
    nodes: tuple[NodeSample, ...] = ()
    ready: bool = True
    schedulable: bool = True
    pricing: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    provider: str = _ONPREM
    tier: int = 0

    def price(self, product: str) -> float:
        """Dollars per GPU-hour of ``product``; a MIG-single product label
        (``A100-SXM4-40GB-MIG-1g.5gb``) falls back to its GPU's price; unlisted products cost 0."""
        if product in self.pricing:
            return float(self.pricing[product])
        base = product.split(_SINGLE_STRATEGY_MARKER, 1)[0]
        return float(self.pricing.get(base, 0.0))


def _allows(
    value: str,
    allowed: frozenset[str] | None,
    excluded: frozenset[str],
) -> bool:
    return value not in excluded and (allowed is None or value in allowed)


@dataclass(frozen=True, slots=True)
class PendingDemand:
    """Replicas of one workload waiting for GPUs.

    ``requests`` is per replica in base units (only GPU-like resources matter here).
    ``products``/``clusters`` are allow-lists (None = any); ``excluded_*`` are deny-lists.
    """

    namespace: str
    workload: str
    replicas: int
    requests: Mapping[str, int]
    products: frozenset[str] | None = None
    clusters: frozenset[str] | None = None
    reason: str = PendingReason.UNPLACED
    excluded_products: frozenset[str] = frozenset()
    excluded_clusters: frozenset[str] = frozenset()
    message: str = ""
    """Why it waits, when known (the scheduler's message for :attr:`PendingReason.NEVER_FITS`)."""

    @property
    def gpu_requests(self) -> dict[str, int]:
        """The GPU-like part of the per-replica request (``nvidia.com/gpu``, MIG slices, shares)."""
        return {
            name: amount
            for name, amount in sorted(self.requests.items())
            if is_gpu_resource(name) and amount > 0
        }

    def allows(self, cluster: str, product: str) -> bool:
        """Whether a replica may run on a ``product`` GPU in ``cluster``."""
        return _allows(cluster, self.clusters, self.excluded_clusters) and _allows(
            product, self.products, self.excluded_products
        )


@dataclass(frozen=True, slots=True)
class WorkloadConstraints:
    """Where a placed workload's replicas may run (for "move" recommendations)."""

    namespace: str
    workload: str
    products: frozenset[str] | None = None
    clusters: frozenset[str] | None = None
    excluded_products: frozenset[str] = frozenset()
    excluded_clusters: frozenset[str] = frozenset()

    def allows(self, cluster: str, product: str) -> bool:
        return _allows(cluster, self.clusters, self.excluded_clusters) and _allows(
            product, self.products, self.excluded_products
        )


@dataclass(frozen=True, slots=True)
class FleetSample:
    """The whole fleet at ``time`` (an aware datetime)."""

    time: datetime
    clusters: tuple[ClusterSample, ...] = ()
    pending: tuple[PendingDemand, ...] = ()
    workloads: Mapping[tuple[str, str], WorkloadConstraints] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """Known placement constraints of running workloads, keyed ``(namespace, workload)``."""

    def __post_init__(self) -> None:
        if self.time.tzinfo is None:
            raise ValueError("FleetSample.time must be timezone-aware")


# ---------------------------------------------------------------------------------------------
# Adapter from hub objects
# ---------------------------------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _utilization(entry: Mapping[str, Any]) -> float | None:
    value = entry.get("utilization")
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return min(max(float(value), 0.0), 1.0)


def _cluster_ready(status: Mapping[str, Any], *, now: datetime, stale_after: timedelta | None) -> bool:
    ready = any(
        _mapping(cond).get("type") == "Ready" and _mapping(cond).get("status") == "True"
        for cond in _list(status.get("conditions"))
    )
    if ready and stale_after is not None:
        reported = status.get("lastReportTime")
        try:
            return isinstance(reported, str) and now - parse_time(reported) <= stale_after
        except ValueError:
            return False
    return ready


def _cluster_view(raw: Mapping[str, Any]) -> ClusterView:
    metadata, spec = _mapping(raw.get("metadata")), _mapping(raw.get("spec"))
    provider = str(spec.get("provider") or "")
    tier = spec.get("tier")
    taints: list[Taint] = []
    for taint in _list(spec.get("taints")):
        try:
            taints.append(Taint.model_validate(taint))
        except ValidationError:
            logger.warning("cluster %s: ignoring malformed taint %r", metadata.get("name"), taint)
    pricing: dict[str, float] = {}
    for product, price in _mapping(spec.get("pricing")).items():
        if isinstance(price, int | float) and not isinstance(price, bool):
            pricing[str(product)] = float(price)
    return ClusterView(
        name=str(metadata.get("name") or ""),
        labels={str(k): str(v) for k, v in _mapping(metadata.get("labels")).items()},
        provider=provider or None,
        region=spec.get("region"),
        zone=spec.get("zone"),
        tier=_int(tier) if tier is not None else (0 if provider == _ONPREM else 1),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable", False)),
        pricing=pricing,
    )


@dataclass(slots=True)
class _SummaryEntry:
    resource: str
    product: str
    replicas: int
    capacity: int
    allocatable: int
    allocated: int

    @property
    def unit(self) -> float:
        """GPU share of one unit of this entry's resource."""
        profile = profile_of_resource(self.resource)
        if profile is not None:
            return mig_share(profile)
        return 1.0 / max(self.replicas, 1)


def _summary(status: Mapping[str, Any]) -> list[_SummaryEntry]:
    out = []
    for raw in _list(status.get("gpuSummary")):
        entry = _mapping(raw)
        resource = str(entry.get("resource") or "")
        if not is_gpu_resource(resource):
            continue
        out.append(
            _SummaryEntry(
                resource=resource,
                product=str(entry.get("product") or UNKNOWN_PRODUCT),
                replicas=max(_int(entry.get("sharedReplicas"), 1), 1),
                capacity=max(_int(entry.get("capacity")), 0),
                allocatable=max(_int(entry.get("allocatable")), 0),
                allocated=max(_int(entry.get("allocated")), 0),
            )
        )
    # Unshared capacity first, so DCGM-reported whole GPUs cover it before shared entries.
    out.sort(key=lambda e: (e.product, e.resource, e.replicas))
    return out


def _infer_product(devices: Sequence[Mapping[str, Any]], summary: Sequence[_SummaryEntry]) -> str:
    products = sorted({e.product for e in summary if e.product != UNKNOWN_PRODUCT})
    if len(products) == 1:
        return products[0]
    profiles = {str(d["profile"]) for d in devices if d.get("profile")}
    if profiles:
        candidates = sorted(
            {
                e.product
                for e in summary
                if e.product != UNKNOWN_PRODUCT and profile_of_resource(e.resource) in profiles
            }
        )
        if len(candidates) == 1:
            return candidates[0]
    return UNKNOWN_PRODUCT


def _pod_ref(namespace: str, pod: str, pods: Mapping[tuple[str, str], Mapping[str, Any]]) -> PodRef:
    owner = _mapping(_mapping(pods.get((namespace, pod))).get("owner"))
    kind, name = owner.get("kind"), owner.get("name")
    return PodRef(namespace, pod, str(kind) if kind else None, str(name) if name else None)


def _node_devices(
    entries: Sequence[Mapping[str, Any]],
    *,
    product: str,
    shared_replicas: int,
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
) -> list[DeviceSample]:
    whole: dict[str, list[Mapping[str, Any]]] = {}
    mig: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        gpu = str(entry.get("gpu", ""))
        target = mig if entry.get("profile") or entry.get("instance") is not None else whole
        target.setdefault(gpu, []).append(entry)
    single_strategy = _SINGLE_STRATEGY_MARKER in product
    shares_renamed = any(c.RESOURCE_GPU_SHARED in _mapping(p.get("resources")) for p in pods.values())

    def holder(entry: Mapping[str, Any]) -> PodRef | None:
        pod, namespace = entry.get("pod"), entry.get("namespace")
        return _pod_ref(str(namespace or ""), str(pod), pods) if pod else None

    devices: list[DeviceSample] = []
    for gpu in sorted(set(whole) | set(mig), key=_gpu_order):
        if gpu in mig:
            used = 0.0
            instances = sorted(mig[gpu], key=lambda e: _gpu_order(str(e.get("instance", ""))))
            for entry in instances:
                profile = str(entry.get("profile") or "")
                share = mig_share(profile) if profile else 1 / MIG_COMPUTE_SLICES
                used += share
                devices.append(
                    DeviceSample(
                        gpu=gpu,
                        uuid=str(entry.get("uuid", "")),
                        profile=profile or None,
                        share=share,
                        allocated_to=holder(entry),
                        utilization=_utilization(entry),
                        resource=c.RESOURCE_GPU if single_strategy else mig_resource(profile),
                    )
                )
            residual = 1.0 - used
            if residual > 1e-9:
                devices.append(
                    DeviceSample(
                        gpu, str(instances[0].get("uuid", "")), UNPARTITIONED, residual, resource=None
                    )
                )
            continue
        series = whole[gpu]
        users = [e for e in series if e.get("pod")]
        uuid = str(series[0].get("uuid", ""))
        if len(users) <= 1 and shared_replicas <= 1:
            entry = users[0] if users else series[0]
            devices.append(DeviceSample(gpu, uuid, None, 1.0, holder(entry), _utilization(entry)))
            continue
        count = max(shared_replicas, len(users))
        resource = c.RESOURCE_GPU_SHARED if shares_renamed else c.RESOURCE_GPU
        # Each pod's series carries the whole GPU's utilization; every share reports it.
        devices.extend(
            DeviceSample(gpu, uuid, None, 1.0 / count, holder(e), _utilization(e), resource) for e in users
        )
        devices.extend(
            DeviceSample(gpu, uuid, None, 1.0 / count, resource=resource) for _ in range(count - len(users))
        )
    return _assign_unlabelled(devices, pods)


def _gpu_order(value: str) -> tuple[int, str]:
    try:
        return (int(value), "")
    except ValueError:
        return (1 << 30, value)


def _assign_unlabelled(
    devices: list[DeviceSample], pods: Mapping[tuple[str, str], Mapping[str, Any]]
) -> list[DeviceSample]:
    """Give pods whose devices carry no pod label (exporter without Kubernetes mapping) free
    devices of the resource they request."""
    for (namespace, pod), entry in sorted(pods.items()):
        for resource, amount in sorted(_mapping(entry.get("resources")).items()):
            if not is_gpu_resource(str(resource)):
                continue
            held = sum(
                1
                for d in devices
                if d.resource == resource
                and d.allocated_to
                and (d.allocated_to.namespace, d.allocated_to.pod) == (namespace, pod)
            )
            missing = _int(amount) - held
            for index, device in enumerate(devices):
                if missing <= 0:
                    break
                if device.resource == resource and device.allocated_to is None:
                    devices[index] = replace(device, allocated_to=_pod_ref(namespace, pod, pods))
                    missing -= 1
    return devices


def _node_sample(raw: Mapping[str, Any], summary: Sequence[_SummaryEntry]) -> NodeSample:
    name = str(raw.get("name") or "")
    entries = [_mapping(d) for d in _list(raw.get("devices"))]
    product = str(raw.get("product") or _infer_product(entries, summary))
    pods: dict[tuple[str, str], Mapping[str, Any]] = {}
    for pod in _list(raw.get("pods")):
        pod = _mapping(pod)
        pods[(str(pod.get("namespace") or ""), str(pod.get("pod") or ""))] = pod
    devices = _node_devices(
        entries, product=product, shared_replicas=max(_int(raw.get("sharedReplicas"), 1), 1), pods=pods
    )
    return NodeSample(
        name=name,
        product=product,
        devices=tuple(devices),
        ready=bool(raw.get("ready", True)),
        schedulable=bool(raw.get("schedulable", True)),
        labels=MappingProxyType({str(k): str(v) for k, v in _mapping(raw.get("labels")).items()}),
    )


def _free_vector(node: NodeSample) -> dict[str, int]:
    free: Counter[str] = Counter(
        d.resource for d in node.devices if d.allocated_to is None and d.resource is not None
    )
    return dict(free)


def _unreported_nodes(
    summary: Sequence[_SummaryEntry],
    reported: Sequence[NodeSample],
    shapes: Sequence[Mapping[str, Any]],
) -> list[NodeSample]:
    """Synthetic nodes for the GPUs ``gpuSummary`` counts but no utilization entry showed."""
    pool_total: defaultdict[tuple[str, str], float] = defaultdict(float)
    pool_allocated: defaultdict[tuple[str, str], float] = defaultdict(float)
    pool_unavailable: defaultdict[tuple[str, str], float] = defaultdict(float)
    for node in reported:
        for device in node.devices:
            if device.resource is None:
                continue
            key = (node.product, device.resource)
            pool_total[key] += device.share
            if device.allocated_to is not None:
                pool_allocated[key] += device.share
            if not node.ready:
                pool_unavailable[key] += device.share

    unavailable: dict[str, list[DeviceSample]] = {}
    allocated: dict[str, list[DeviceSample]] = {}
    free: dict[tuple[str, str], list[DeviceSample]] = {}
    unknown_holder = PodRef(namespace="", pod="")
    for entry in summary:
        key, unit = (entry.product, entry.resource), entry.unit

        def take(
            pool: defaultdict[tuple[str, str], float],
            units: int,
            key: tuple[str, str] = key,
            unit: float = unit,
        ) -> int:
            covered = min(units, round(pool[key] / unit))
            pool[key] -= covered * unit
            return covered

        missing = entry.capacity - take(pool_total, entry.capacity)
        if missing <= 0:
            continue
        not_ready = max(entry.capacity - entry.allocatable, 0)
        missing_unavailable = min(not_ready - take(pool_unavailable, not_ready), missing)
        missing_allocated = min(
            entry.allocated - take(pool_allocated, entry.allocated), missing - missing_unavailable
        )
        missing_free = missing - missing_unavailable - missing_allocated
        profile = profile_of_resource(entry.resource)

        def devices(
            count: int, holder: PodRef | None, entry: _SummaryEntry = entry, profile: str | None = profile
        ) -> list[DeviceSample]:
            return [
                DeviceSample(
                    gpu=f"{entry.resource}#{index}",
                    uuid="",
                    profile=profile,
                    share=entry.unit,
                    allocated_to=holder,
                    resource=entry.resource,
                )
                for index in range(count)
            ]

        unavailable.setdefault(entry.product, []).extend(devices(missing_unavailable, None))
        allocated.setdefault(entry.product, []).extend(devices(missing_allocated, unknown_holder))
        free.setdefault(key, []).extend(devices(missing_free, None))

    nodes: list[NodeSample] = []
    for by_product, ready, name in (
        (unavailable, False, UNREPORTED_UNAVAILABLE_NODE),
        (allocated, True, UNREPORTED_NODE),
    ):
        for product, group in sorted(by_product.items()):
            if group:
                nodes.append(
                    NodeSample(name=f"{name} {product}", product=product, devices=tuple(group), ready=ready)
                )
    nodes.extend(_lay_out_free(free, reported, shapes))
    return nodes


def _lay_out_free(
    free: dict[tuple[str, str], list[DeviceSample]],
    reported: Sequence[NodeSample],
    shapes: Sequence[Mapping[str, Any]],
) -> list[NodeSample]:
    """Put unreported free devices on nodes as the cluster's remaining free shapes describe."""
    if not any(free.values()):
        return []
    remaining: list[tuple[str, dict[str, int], int]] = []
    for raw in shapes:
        shape = _mapping(raw)
        product = str(
            _mapping(shape.get("gpu")).get("product")
            or _mapping(shape.get("labels")).get(c.LABEL_GPU_PRODUCT)
            or UNKNOWN_PRODUCT
        )
        vector = {
            str(k): _int(v)
            for k, v in _mapping(shape.get("free")).items()
            if is_gpu_resource(str(k)) and _int(v) > 0
        }
        remaining.append((product, vector, _int(shape.get("count"))))
    for node in reported:
        if not (node.ready and node.schedulable):
            continue
        vector = _free_vector(node)
        for index, (product, shape_free, count) in enumerate(remaining):
            if count > 0 and product == node.product and shape_free == vector:
                remaining[index] = (product, shape_free, count - 1)
                break
    nodes: list[NodeSample] = []
    for shape_index, (product, shape_free, count) in enumerate(remaining):
        for node_index in range(count):
            devices: list[DeviceSample] = []
            for resource, amount in sorted(shape_free.items()):
                pool = free.get((product, resource), [])
                devices.extend(pool[:amount])
                del pool[:amount]
            if devices:
                name = f"{UNREPORTED_NODE} {product} shape {shape_index}-{node_index}"
                nodes.append(NodeSample(name=name, product=product, devices=tuple(devices)))
    leftovers = [(key, d) for key, pool in sorted(free.items()) for d in pool]
    for index, ((product, _), device) in enumerate(leftovers):
        nodes.append(
            NodeSample(name=f"{UNREPORTED_NODE} {product} free {index}", product=product, devices=(device,))
        )
    return nodes


def _cluster_sample(
    raw: Mapping[str, Any], view: ClusterView, *, now: datetime, stale_after: timedelta | None
) -> ClusterSample:
    status = _mapping(raw.get("status"))
    summary = _summary(status)
    reported = [_node_sample(node, summary) for node in expand_utilization(status.get("utilization"))]
    reported = [n for n in reported if n.devices]
    shapes = [_mapping(s) for s in _list(status.get("nodeShapes"))]
    nodes = reported + _unreported_nodes(summary, reported, shapes)
    return ClusterSample(
        name=view.name,
        nodes=tuple(nodes),
        ready=_cluster_ready(status, now=now, stale_after=stale_after),
        schedulable=not view.unschedulable,
        pricing=view.pricing,
        provider=view.provider or "",
        tier=view.tier,
    )


def product_constraint(requirements: ReplicaRequirements) -> tuple[frozenset[str] | None, frozenset[str]]:
    """(allowed products or None for any, excluded products) from the nodeSelector and the
    required node affinity on ``nvidia.com/gpu.product``.

    Terms are ORed: a term without an ``In`` on the product allows any product. A ``NotIn``
    excludes its products only when every term has it.
    """
    allowed: frozenset[str] | None = None
    selected = requirements.node_selector_map.get(c.LABEL_GPU_PRODUCT)
    if selected is not None:
        allowed = frozenset({selected})
    excluded: frozenset[str] = frozenset()
    if requirements.node_affinity:
        term_allowed: set[str] = set()
        any_product = False
        term_excluded: list[set[str]] = []
        for term in requirements.node_affinity:
            ins = [
                e
                for e in term.expressions
                if e.key == c.LABEL_GPU_PRODUCT and e.operator == SelectorOperator.IN
            ]
            notins = [
                e
                for e in term.expressions
                if e.key == c.LABEL_GPU_PRODUCT and e.operator == SelectorOperator.NOT_IN
            ]
            if ins:
                values = set(ins[0].values)
                for extra in ins[1:]:
                    values &= set(extra.values)
                term_allowed |= values
            else:
                any_product = True
            term_excluded.append({v for e in notins for v in e.values})
        if not any_product:
            allowed = frozenset(term_allowed) if allowed is None else allowed & term_allowed
        excluded = frozenset(set.intersection(*term_excluded)) if term_excluded else frozenset()
    return allowed, excluded


def _allowed_clusters(placement_raw: Any, views: Sequence[ClusterView]) -> frozenset[str] | None:
    if not placement_raw:
        return None
    try:
        placement = Placement.model_validate(placement_raw)
    except ValidationError:
        logger.warning("ignoring a binding placement that does not validate")
        return None
    terms = placement.affinity_terms()
    return frozenset(
        view.name
        for view in views
        if any(cluster_matches_affinity(view, term).fits for term in terms)
        and tolerates_cluster_taints(view, placement.cluster_tolerations).fits
    )


def _workload_name(kind: Any, name: Any) -> str:
    return f"{kind}/{name}"


def _binding_demand(
    raw: Mapping[str, Any], views: Sequence[ClusterView]
) -> tuple[WorkloadConstraints, list[PendingDemand]] | None:
    spec = _mapping(raw.get("spec"))
    resource = _mapping(spec.get("resource"))
    namespace = str(resource.get("namespace") or _mapping(raw.get("metadata")).get("namespace") or "")
    workload = _workload_name(resource.get("kind"), resource.get("name"))
    try:
        main = ReplicaRequirements.from_spec(_mapping(spec.get("replicaRequirements")))
        components = [
            (
                max(_int(_mapping(comp).get("replicas")), 0),
                ReplicaRequirements.from_spec(_mapping(_mapping(comp).get("replicaRequirements"))),
            )
            for comp in _list(spec.get("components"))
        ]
    except (QuantityError, ValueError, KeyError) as exc:
        logger.warning(
            "binding %s/%s: unreadable requirements, not counted as demand: %s", namespace, workload, exc
        )
        return None
    clusters = _allowed_clusters(spec.get("placement"), views)
    products, excluded_products = product_constraint(main)
    constraints = WorkloadConstraints(namespace, workload, products, clusters, excluded_products)
    placed = sum(max(_int(_mapping(t).get("replicas")), 0) for t in _list(spec.get("clusters")))
    unplaced = max(_int(spec.get("replicas")), 0) - placed
    if unplaced <= 0:
        return constraints, []
    # A multi-role job that has nothing placed waits with all its roles; partial placement
    # only happens to divisible (single-template) workloads, so the rest use the main template.
    groups = components if components and placed == 0 else [(unplaced, main)]
    reason, message = PendingReason.UNPLACED, ""
    for cond in _list(_mapping(raw.get("status")).get("conditions")):
        cond = _mapping(cond)
        if cond.get("type") == "Scheduled" and cond.get("reason") == PendingReason.NEVER_FITS:
            reason, message = PendingReason.NEVER_FITS, str(cond.get("message") or "")
    demands = []
    for replicas, requirements in groups:
        allowed, excluded = product_constraint(requirements)
        demands.append(
            PendingDemand(
                namespace=namespace,
                workload=workload,
                replicas=replicas,
                requests=MappingProxyType(requirements.resource_map),
                products=allowed,
                clusters=clusters,
                reason=reason,
                excluded_products=excluded,
                message=message,
            )
        )
    return constraints, demands


def _manifest_for(
    identifier: Mapping[str, Any], manifests: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    def matches(manifest: Mapping[str, Any]) -> bool:
        metadata = _mapping(manifest.get("metadata"))
        return manifest.get("kind") == identifier.get("kind") and metadata.get("name") == identifier.get(
            "name"
        )

    ordinal = _int(identifier.get("ordinal"), -1)
    if 0 <= ordinal < len(manifests) and matches(manifests[ordinal]):
        return manifests[ordinal]
    return next((m for m in manifests if matches(m)), None)


def _work_demand(
    raw: Mapping[str, Any], constraints: Mapping[tuple[str, str], WorkloadConstraints]
) -> list[PendingDemand]:
    metadata = _mapping(raw.get("metadata"))
    member = str(metadata.get("namespace") or "").removeprefix(c.EXECUTION_NAMESPACE_PREFIX)
    manifests = [
        _mapping(m) for m in _list(_mapping(_mapping(raw.get("spec")).get("workload")).get("manifests"))
    ]
    demands = []
    for status in _list(_mapping(raw.get("status")).get("manifestStatuses")):
        status = _mapping(status)
        pods = _int(_mapping(status.get("unschedulable")).get("pods"))
        if pods <= 0:
            continue
        identifier = _mapping(status.get("identifier"))
        manifest = _manifest_for(identifier, manifests)
        if manifest is None:
            continue
        interpreter = interpreter_for(str(manifest.get("apiVersion") or ""), str(manifest.get("kind") or ""))
        if interpreter is None:
            continue
        try:
            requirements = interpreter.replica_requirements(dict(manifest))
        except (QuantityError, ValueError, KeyError, TypeError) as exc:
            logger.warning(
                "work %s: unreadable requirements of %s: %s",
                metadata.get("name"),
                identifier.get("name"),
                exc,
            )
            continue
        namespace = str(
            identifier.get("namespace") or _mapping(manifest.get("metadata")).get("namespace") or ""
        )
        workload = _workload_name(identifier.get("kind"), identifier.get("name"))
        known = constraints.get((namespace, workload))
        allowed, excluded = product_constraint(requirements)
        demands.append(
            PendingDemand(
                namespace=namespace,
                workload=workload,
                replicas=pods,
                requests=MappingProxyType(requirements.resource_map),
                products=allowed,
                clusters=known.clusters if known else None,
                reason=PendingReason.MEMBER_UNSCHEDULABLE,
                excluded_products=excluded,
                excluded_clusters=frozenset({member}),
            )
        )
    return demands


#: How each kind's controller names its pods after ``<workload>-`` (kube's generateName rules:
#: a Deployment's ReplicaSet adds its pod-template-hash, a Job's pods a random suffix...).
_POD_NAME_AFTER_WORKLOAD: Mapping[str, re.Pattern[str]] = {
    "Deployment": re.compile(r"[a-z0-9]+-[a-z0-9]{5}"),
    "StatefulSet": re.compile(r"\d+"),
    "Job": re.compile(r"(\d+-)?[a-z0-9]{5}"),
    "PyTorchJob": re.compile(r"(master|worker)-\d+"),
    "MPIJob": re.compile(r"launcher(-[a-z0-9]{5})?|worker-\d+"),
    "RayCluster": re.compile(r"[a-z0-9-]+"),
    "RayJob": re.compile(r"[a-z0-9-]+"),
}


def _propagated(works: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[str, str, str]]]:
    """Per member cluster, the (namespace, kind, name) of the workloads its Works carry."""
    out: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for work in works:
        namespace = str(_mapping(work.get("metadata")).get("namespace") or "")
        if not namespace.startswith(c.EXECUTION_NAMESPACE_PREFIX):
            continue
        member = namespace.removeprefix(c.EXECUTION_NAMESPACE_PREFIX)
        for manifest in _list(_mapping(_mapping(work.get("spec")).get("workload")).get("manifests")):
            kind = str(_mapping(manifest).get("kind") or "")
            metadata = _mapping(_mapping(manifest).get("metadata"))
            if kind in _POD_NAME_AFTER_WORKLOAD and metadata.get("name"):
                out[member].append((str(metadata.get("namespace") or ""), kind, str(metadata["name"])))
    return out


def _owner_by_name(holder: PodRef, workloads: Sequence[tuple[str, str, str]]) -> PodRef:
    """A pod the agent reported without an owner (the exporter named it before the agent saw it,
    or after it was gone) under the propagated workload whose pods are named like it."""
    best: tuple[str, str] | None = None
    for namespace, kind, name in workloads:
        if namespace != holder.namespace or not holder.pod.startswith(f"{name}-"):
            continue
        if _POD_NAME_AFTER_WORKLOAD[kind].fullmatch(holder.pod[len(name) + 1 :]) is None:
            continue
        if best is None or len(name) > len(best[1]):
            best = (kind, name)
    return holder if best is None else replace(holder, kind=best[0], name=best[1])


def _with_owners_by_name(cluster: ClusterSample, workloads: Sequence[tuple[str, str, str]]) -> ClusterSample:
    def resolved(device: DeviceSample) -> DeviceSample:
        holder = device.allocated_to
        if holder is None or holder.kind or not holder.pod:
            return device
        return replace(device, allocated_to=_owner_by_name(holder, workloads))

    if not workloads:
        return cluster
    nodes = tuple(replace(node, devices=tuple(resolved(d) for d in node.devices)) for node in cluster.nodes)
    return replace(cluster, nodes=nodes)


def sample_from_cluster_statuses(
    clusters: Iterable[Mapping[str, Any]],
    bindings: Iterable[Mapping[str, Any]],
    works: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    stale_after: timedelta | None = None,
) -> FleetSample:
    """The fleet at ``now`` from the hub's Cluster, ResourceBinding and Work objects (dicts).

    ``stale_after``: a cluster whose ``lastReportTime`` is older than this counts as not ready
    (None: trust the Ready condition alone, which the cluster controller maintains).
    """
    cluster_list = [_mapping(c_) for c_ in clusters]
    views = [_cluster_view(raw) for raw in cluster_list]
    samples = tuple(
        _cluster_sample(raw, view, now=now, stale_after=stale_after)
        for raw, view in zip(cluster_list, views, strict=True)
    )
    constraints: dict[tuple[str, str], WorkloadConstraints] = {}
    pending: list[PendingDemand] = []
    for binding in bindings:
        parsed = _binding_demand(_mapping(binding), views)
        if parsed is None:
            continue
        known, demands = parsed
        constraints[(known.namespace, known.workload)] = known
        pending.extend(demands)
    work_list = [_mapping(w) for w in works]
    for work in work_list:
        pending.extend(_work_demand(work, constraints))
    propagated = _propagated(work_list)
    samples = tuple(_with_owners_by_name(sample, propagated.get(sample.name, ())) for sample in samples)
    return FleetSample(
        time=now,
        clusters=samples,
        pending=tuple(pending),
        workloads=MappingProxyType(constraints),
    )
