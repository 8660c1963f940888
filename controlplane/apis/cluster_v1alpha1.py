"""``cluster.gpufed.io/v1alpha1`` Cluster: one member cluster, its placement facts and capacity.

The spec is what an operator (or the agent at registration) declares: provider, region,
zone, overflow tier, GPU pricing, taints, cordon, whether it runs Kueue. The status is what the member agent
reports: readiness, node and GPU summaries and the per-node free *shapes* that the hub's
estimator walks. Quantities in the status are integers in base units (see
``controlplane/apis/quantity.py``). Spec models reject unknown fields; status models keep
them, so a newer agent can report more than this hub knows about.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal

from pydantic import Field, field_validator

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import dns_label_errors
from controlplane.apis.meta import Condition, ObjectMeta, SpecModel, Taint, Timestamp, WireModel

API_VERSION: Final = "cluster.gpufed.io/v1alpha1"
KIND: Final = "Cluster"
PLURAL: Final = "clusters"
#: Names a ``nodeShapes`` entry lists at most (``NodeShape.hostnames``): as many as a packing hint
#: names (controlplane/scheduler/core/packhints.py), so one shape can fill a hint alone.
MAX_SHAPE_HOSTNAMES: Final = 32

PROVIDER_ONPREM = "onprem"
DEFAULT_ONPREM_TIER = 0
DEFAULT_CLOUD_TIER = 1


class ClusterConditionType(StrEnum):
    """Condition types on a Cluster's status."""

    READY = "Ready"
    COMPLETE_API_ENABLEMENTS = "CompleteAPIEnablements"
    """Whether ``status.apiEnablements`` lists every API the member serves (Karmada's)."""


class ClusterReadyReason(StrEnum):
    """Reasons of a Cluster's ``Ready`` condition: the member agent's, from what it sees of its
    member, and the hub's health monitor's, when the agent falls silent."""

    MEMBER_HEALTHY = "MemberHealthy"
    NO_READY_NODES = "NoReadyNodes"
    INVALID_GPU_CONFIG = "InvalidGPUConfiguration"
    MEMBER_API_UNREACHABLE = "MemberAPIUnreachable"
    """The member's API server has not answered the agent's probes for the failure threshold."""
    MEMBER_API_NOT_READY = "MemberAPINotReady"
    """The member's API server answers, but its ``/readyz`` or ``/livez`` fails."""
    STATUS_UNKNOWN = "ClusterStatusUnknown"
    """The monitor's: heartbeats stopped for longer than the grace period."""
    NEVER_UPDATED = "ClusterStatusNeverUpdated"
    """The monitor's: the cluster never sent a heartbeat within the start-up grace."""


class NodeScoring(StrEnum):
    """``status.nodeScoring``: how the member's scheduler ranks the nodes a pod fits on.

    The first three are kube-scheduler's NodeResourcesFit ``scoringStrategy.type`` values
    (LeastAllocated is kube's default); FragmentationAware is a scorer that ranks nodes by the GPU
    fragmentation a pod leaves (the FGD paper's, as gpufed's simulator runs it); Unknown says the
    agent was not told. A policy's ``packingHintsScope: SpreadingMembers`` packs only the members that
    spread (:data:`SPREADING_SCORINGS`).
    """

    LEAST_ALLOCATED = "LeastAllocated"
    MOST_ALLOCATED = "MostAllocated"
    REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
    FRAGMENTATION_AWARE = "FragmentationAware"
    UNKNOWN = "Unknown"


#: Member scorings that spread pods over the emptiest nodes: ``packingHintsScope: SpreadingMembers``
#: gives packing hints to these members only (the others already pack).
SPREADING_SCORINGS: Final = frozenset({NodeScoring.LEAST_ALLOCATED.value})


class KueueIntegration(SpecModel):
    """``spec.kueue`` of a Cluster: whether the member runs its own Kueue.

    Example::

        spec:
          kueue: {enabled: true}
    """

    enabled: bool = False
    """Enabled says the member runs Kueue with the same namespaces and LocalQueues as the hub (as a
    MultiKueue worker cluster does). A queued workload the hub admitted then reaches the member with
    its kueue.x-k8s.io/queue-name label and a batch/v1 Job still suspended, so the member's Kueue admits
    it again against the member's own quota (two-level admission). Otherwise the hub strips the label
    and the Job arrives unsuspended."""


def runs_kueue(cluster: Mapping[str, Any] | None) -> bool:
    """Whether a Cluster (wire dict) declares ``spec.kueue.enabled: true``."""
    kueue = ((cluster or {}).get("spec") or {}).get("kueue")
    return isinstance(kueue, Mapping) and kueue.get("enabled") is True


class ClusterSpec(SpecModel):
    """``spec`` of a Cluster.

    Example::

        spec:
          provider: aws
          region: us-east-1
          zone: us-east-1a
          tier: 1
          pricing: {NVIDIA-A100-SXM4-80GB: 4.1, NVIDIA-H100-80GB-HBM3: 9.8}
          taints: [{key: gpufed.io/spot, value: "true", effect: PreferNoSchedule}]
          kueue: {enabled: true}
    """

    provider: str = Field(min_length=1)
    """Provider is where the cluster runs: onprem, aws, gcp, azure or any other name. On-prem clusters are in
    overflow tier 0 unless tier says otherwise; all others in tier 1."""
    region: str | None = None
    """Region of the cluster (for example us-east-1). Policies can select or spread by it."""
    zone: str | None = None
    """Zone of the cluster within its region (for example us-east-1a). Policies can select or spread by it."""
    tier: int | None = Field(default=None, ge=0)
    """Tier orders clusters for TieredOverflow placement: lower tiers are filled first. Defaults to 0 when
    provider is onprem, 1 otherwise."""
    pricing: dict[str, float] | None = None
    """Pricing maps each GPU product (the value of the node label nvidia.com/gpu.product) to its price in US
    dollars per GPU-hour. Used to fill the cheapest clusters of a tier first and to cost GPU waste."""
    taints: list[Taint] | None = None
    """Taints of the cluster: a NoSchedule or NoExecute taint keeps out workloads whose policy's
    clusterTolerations do not tolerate it; an untolerated PreferNoSchedule taint makes the cluster
    score lower."""
    unschedulable: bool | None = None
    """Unschedulable cordons the cluster: no new replicas are placed on it; what runs there stays."""
    kueue: KueueIntegration | None = None
    """Kueue says whether the member runs its own Kueue (two-level admission of queued workloads)."""

    @field_validator("pricing")
    @classmethod
    def _prices_not_negative(cls, pricing: dict[str, float] | None) -> dict[str, float] | None:
        for product, price in (pricing or {}).items():
            if price < 0:
                raise ValueError(f"price for {product!r} must be >= 0 dollars per GPU-hour, got {price}")
        return pricing

    @property
    def effective_tier(self) -> int:
        """``tier`` or its default (0 on-prem, 1 elsewhere)."""
        if self.tier is not None:
            return self.tier
        return DEFAULT_ONPREM_TIER if self.provider == PROVIDER_ONPREM else DEFAULT_CLOUD_TIER


class NodeSummary(WireModel):
    total: int = Field(ge=0)
    """The number of nodes in the cluster."""
    ready: int = Field(ge=0)
    """The number of nodes whose Ready condition is True."""
    spot: int | None = Field(default=None, ge=0)
    """The number of spot (preemptible) nodes: labelled cloud.google.com/gke-spot=true, karpenter.sh/capacity-type=spot,
    eks.amazonaws.com/capacityType=SPOT or kubernetes.azure.com/scalesetpriority=spot."""


class GpuSummary(WireModel):
    """One ``(resource, product)`` line of ``status.gpuSummary``."""

    resource: str
    """The extended resource name: nvidia.com/gpu for whole GPUs, nvidia.com/mig-<profile> for MIG slices."""
    product: str | None = None
    """The GPU product (the nvidia.com/gpu.product node label), for example NVIDIA-A100-SXM4-80GB."""
    capacity: int = Field(ge=0)
    """The number of this resource on all nodes."""
    allocatable: int = Field(ge=0)
    """The number of this resource that pods can request on Ready, schedulable nodes."""
    allocated: int = Field(default=0, ge=0)
    """The number of this resource requested by pods that run or are bound to a node."""


class ResourceSummary(WireModel):
    allocatable: dict[str, int] | None = None
    """Allocatable resources summed over the cluster's Ready nodes, as whole numbers (CPU in millicores,
    memory in bytes, extended resources in units)."""
    allocated: dict[str, int] | None = None
    """Resources requested by the cluster's pods, in the same units as allocatable."""


class NodeGpu(WireModel):
    """GPU facts of a node shape (from GPU Feature Discovery labels)."""

    product: str | None = None
    """The GPU product of the nodes (the nvidia.com/gpu.product label)."""
    memory_mib: int | None = Field(default=None, alias="memoryMiB", ge=0)
    """The memory of one GPU, in MiB (the nvidia.com/gpu.memory label)."""
    count: int | None = Field(default=None, ge=0)
    """The number of GPUs per node (the nvidia.com/gpu.count label)."""
    mig_strategy: Literal["none", "single", "mixed"] | None = None
    """How the nodes expose MIG: none, single (every GPU split the same way, advertised as nvidia.com/gpu) or
    mixed (each profile its own nvidia.com/mig-<profile> resource)."""
    shared_replicas: int | None = Field(default=None, ge=0)
    """With GPU time-slicing, how many pods may share one GPU (the nvidia.com/gpu.replicas label)."""


class ShapeTaint(WireModel):
    """A node taint as reported in a shape (value and effect as on the node)."""

    key: str
    """The taint key."""
    value: str | None = None
    """The taint value."""
    effect: str
    """The taint effect: NoSchedule, PreferNoSchedule or NoExecute."""


class NodeShape(WireModel):
    """``count`` Ready, schedulable nodes that have identical labels, taints and free resources."""

    count: int = Field(ge=1)
    """The number of Ready, schedulable nodes of this shape (identical labels, taints and free resources)."""
    labels: dict[str, str] | None = None
    """The labels of these nodes, which nodeSelector and node affinity of replicas are matched against."""
    taints: list[ShapeTaint] | None = None
    """The taints of these nodes."""
    free: dict[str, int] = Field(default_factory=dict)
    """Resources still free on each node of this shape (allocatable minus requested), as whole numbers (CPU in
    millicores, memory in bytes)."""
    allocatable: dict[str, int] | None = None
    """Allocatable resources of each node of this shape, in the units of free."""
    gpu: NodeGpu | None = None
    """The GPUs of these nodes, from the GPU Feature Discovery labels."""
    spot: bool | None = None
    """True when these nodes are spot (preemptible) capacity, which the cloud may reclaim at short notice."""
    hostnames: list[str] | None = None
    """The names of the nodes of this shape whose GPUs are partly in use (some held by pods, some free),
    in name order, at most 32; absent for other shapes. The hub's packing hints (tieredOverflow.packingHints
    of a propagation policy) prefer these nodes for replicas smaller than a node."""


class UnschedulableWorkload(WireModel):
    """A workload with pods the member's scheduler could not place when the report was taken."""

    namespace: str = ""
    """Namespace of the workload in the member cluster."""
    kind: str
    """Kind of the workload that owns the pods (a ReplicaSet's pods count under their Deployment)."""
    name: str
    """Name of the workload."""
    pods: int = Field(ge=0)
    """How many of its pods were unschedulable (PodScheduled False)."""


class APIResource(WireModel):
    """One resource of an ``apiEnablements`` entry (Karmada's ``APIResource``)."""

    name: str
    """Name is the plural name of the resource."""
    kind: str
    """Kind is the kind for the resource (e.g. 'Deployment' is the kind for resource 'deployments')."""


class APIEnablement(WireModel):
    """The resources the member serves in one group and version (Karmada's ``APIEnablement``)."""

    group_version: str
    """GroupVersion is the group and version this APIEnablement is for."""
    resources: list[APIResource] | None = None
    """Resources is a list of APIResource."""


class ClusterStatus(WireModel):
    """``status`` of a Cluster, written by the member agent and the cluster controller."""

    # Sent whole with every report (up to 5,000 resources): validated when it changes, not again
    # at each report that leaves it as stored (controlplane.apiserver.validation.check_model).
    UNCHANGED_NOT_REVALIDATED: ClassVar[frozenset[str]] = frozenset({"apiEnablements"})

    conditions: list[Condition] | None = None
    """Conditions of the cluster. Ready is True while its agent reports in time."""
    kubernetes_version: str | None = None
    """The Kubernetes version of the member cluster."""
    last_report_time: Timestamp | None = None
    """When the cluster's agent last reported."""
    node_summary: NodeSummary | None = None
    """How many nodes the cluster has and how many are Ready."""
    gpu_summary: list[GpuSummary] | None = None
    """GPUs and MIG slices of the cluster, one entry per resource and GPU product: capacity, allocatable and
    allocated."""
    resource_summary: ResourceSummary | None = None
    """Allocatable and allocated resources summed over the cluster."""
    node_shapes: list[NodeShape] | None = None
    """The cluster's schedulable nodes grouped by shape, with what is free on each: the scheduler checks that
    every replica fits on a node."""
    node_scoring: NodeScoring | None = None
    """How the member's scheduler ranks the nodes a pod fits on, as its agent was told
    (LeastAllocated, MostAllocated, RequestedToCapacityRatio, FragmentationAware or Unknown; absent: Unknown).
    A policy's tieredOverflow.packingHintsScope: SpreadingMembers gives packing hints to LeastAllocated members
    only."""
    api_enablements: list[APIEnablement] | None = None
    """The APIs the member serves, one entry per group version, sorted, subresources left out, at most
    5000 resources in all (the condition CompleteAPIEnablements says whether the list is complete). The
    scheduler places a workload only on clusters that serve its kind; a cluster that lists none is not
    judged by it."""
    unschedulable_workloads: list[UnschedulableWorkload] | None = None
    """The workloads with pods the member's scheduler could not place when this report was taken. A report
    that lists them was taken after they became unschedulable: the hub may trust what it says is free to
    move them elsewhere."""


class Cluster(SpecModel):
    """A member cluster (cluster-scoped, plural ``clusters``). Unknown top-level fields are errors."""

    api_version: Literal["cluster.gpufed.io/v1alpha1"] = API_VERSION
    kind: Literal["Cluster"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterSpec
    """Spec is the cluster's placement and cost settings, set by the platform team."""
    status: ClusterStatus | None = None
    """Status is what the cluster holds and has free, reported by its agent."""


#: The longest cluster name Karmada's ``clustervalidation.ValidateClusterName`` accepts.
KARMADA_CLUSTER_NAME_MAX_LENGTH: Final = 48


def karmada_cluster_name_errors(name: Any, path: str) -> list[FieldError]:
    """Karmada's ``clustervalidation.ValidateClusterName`` of a cluster a Karmada object names,
    its messages joined by commas as karmada-webhook joins them."""
    text = name if isinstance(name, str) else ""
    if not text:
        messages = ["must be not empty"]
    elif len(text) > KARMADA_CLUSTER_NAME_MAX_LENGTH:
        messages = [f"must be no more than {KARMADA_CLUSTER_NAME_MAX_LENGTH} characters"]
    else:
        messages = dns_label_errors(text)
    return [field.invalid(path, text, ",".join(messages))] if messages else []
