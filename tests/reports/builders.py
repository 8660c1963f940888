"""Small builders for fleet samples in waste-accounting tests."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from controlplane.reports.fleet import (
    ClusterSample,
    DeviceSample,
    FleetSample,
    NodeSample,
    PendingDemand,
    PodRef,
    WorkloadConstraints,
    mig_share,
)

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
T0 = datetime(2024, 5, 1, tzinfo=UTC)
GPU = "nvidia.com/gpu"


def at(minutes: float = 0.0) -> datetime:
    return T0 + timedelta(minutes=minutes)


def pod(name: str, *, namespace: str = "ml", workload: str | None = None, kind: str = "Deployment") -> PodRef:
    return PodRef(namespace, name, kind, workload or name)


def gpu(index: int, holder: PodRef | None = None, utilization: float | None = None) -> DeviceSample:
    return DeviceSample(str(index), f"GPU-{index}", None, 1.0, holder, utilization)


def gpus(count: int) -> tuple[DeviceSample, ...]:
    return tuple(gpu(i) for i in range(count))


def mig(
    gpu_index: int,
    profile: str,
    *,
    instance: int = 0,
    holder: PodRef | None = None,
    utilization: float | None = None,
) -> DeviceSample:
    return DeviceSample(
        str(gpu_index), f"MIG-{gpu_index}-{instance}", profile, mig_share(profile), holder, utilization
    )


def node(
    name: str,
    devices: Iterable[DeviceSample],
    *,
    product: str = A100,
    ready: bool = True,
    schedulable: bool = True,
) -> NodeSample:
    return NodeSample(name, product, tuple(devices), ready, schedulable)


def cluster(
    name: str,
    nodes: Iterable[NodeSample],
    *,
    ready: bool = True,
    schedulable: bool = True,
    pricing: dict[str, float] | None = None,
    provider: str = "onprem",
    tier: int = 0,
) -> ClusterSample:
    return ClusterSample(name, tuple(nodes), ready, schedulable, pricing or {}, provider, tier)


def demand(
    requests: dict[str, int],
    *,
    replicas: int = 1,
    workload: str = "Deployment/wait",
    products: Iterable[str] | None = None,
    clusters: Iterable[str] | None = None,
    excluded_clusters: Iterable[str] = (),
) -> PendingDemand:
    return PendingDemand(
        namespace="ml",
        workload=workload,
        replicas=replicas,
        requests=requests,
        products=None if products is None else frozenset(products),
        clusters=None if clusters is None else frozenset(clusters),
        excluded_clusters=frozenset(excluded_clusters),
    )


def fleet(
    *clusters: ClusterSample,
    pending: Iterable[PendingDemand] = (),
    time: datetime = T0,
    workloads: Iterable[WorkloadConstraints] = (),
) -> FleetSample:
    return FleetSample(
        time, tuple(clusters), tuple(pending), {(w.namespace, w.workload): w for w in workloads}
    )
