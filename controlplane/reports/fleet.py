"""One snapshot of the fleet's GPUs, as the waste accounting consumes it: the domain types.

The accounting (:mod:`controlplane.reports.classify`, :mod:`controlplane.reports.accounting`,
:mod:`controlplane.reports.recommend`) works on these frozen dataclasses, independent of the
wire format: a :class:`FleetSample` is every cluster's nodes and their GPU devices (whole GPUs,
MIG instances, time-sliced shares) at one instant, who holds each device and how busy it is,
plus the fleet's pending GPU demand (:class:`PendingDemand`) and the placement constraints of
running workloads (:class:`WorkloadConstraints`). Besides the types, the MIG arithmetic they
need: a profile's compute slices, its share of a GPU, its resource name.

In: plain values. Out: immutable snapshots; :mod:`controlplane.reports.snapshot` builds them
from the hub's objects, the tests build them by hand. No I/O happens here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from controlplane.apis import constants as c
from controlplane.apis.cluster_v1alpha1 import PROVIDER_ONPREM
from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.spot import RecordedReclaim
from controlplane.reports.moves import MoveRecord

MIG_COMPUTE_SLICES = 7
#: Profile of the compute slices of a MIG-enabled GPU that no instance uses.
UNPARTITIONED = "unpartitioned"
#: What marks a MIG-single product label (``A100-SXM4-40GB-MIG-1g.5gb``): its instances are
#: advertised as ``nvidia.com/gpu``.
SINGLE_STRATEGY_MARKER = "-MIG-"
_AUTO = "auto"
_MIG_PROFILE = re.compile(r"^(\d+)g\.")


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
    provider: str = PROVIDER_ONPREM
    tier: int = 0

    def price(self, product: str) -> float:
        """Dollars per GPU-hour of ``product``; a MIG-single product label
        (``A100-SXM4-40GB-MIG-1g.5gb``) falls back to its GPU's price; unlisted products cost 0."""
        if product in self.pricing:
            return float(self.pricing[product])
        base = product.split(SINGLE_STRATEGY_MARKER, 1)[0]
        return float(self.pricing.get(base, 0.0))


def _allows(
    value: str,
    allowed: frozenset[str] | None,
    excluded: frozenset[str],
) -> bool:
    return value not in excluded and (allowed is None or value in allowed)


class _PlacementLimits:
    """Where replicas may run: GPU products and clusters allowed (None: any) and excluded."""

    __slots__ = ()
    products: frozenset[str] | None
    clusters: frozenset[str] | None
    excluded_products: frozenset[str]
    excluded_clusters: frozenset[str]

    def allows(self, cluster: str, product: str) -> bool:
        """Whether a replica may run on a ``product`` GPU in ``cluster``."""
        return _allows(cluster, self.clusters, self.excluded_clusters) and _allows(
            product, self.products, self.excluded_products
        )


@dataclass(frozen=True, slots=True)
class PendingDemand(_PlacementLimits):
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



@dataclass(frozen=True, slots=True)
class WorkloadConstraints(_PlacementLimits):
    """Where a placed workload's replicas may run (for "move" recommendations)."""

    namespace: str
    workload: str
    products: frozenset[str] | None = None
    clusters: frozenset[str] | None = None
    excluded_products: frozenset[str] = frozenset()
    excluded_clusters: frozenset[str] = frozenset()



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
    spot_reclaims: tuple[RecordedReclaim, ...] = ()
    """The spot reclaims the bindings record (replicas the hub replaced elsewhere)."""
    moves: tuple[MoveRecord, ...] = ()
    """The finished moves back to cheaper tiers the bindings record (:mod:`~controlplane.reports.moves`)."""

    def __post_init__(self) -> None:
        if self.time.tzinfo is None:
            raise ValueError("FleetSample.time must be timezone-aware")
