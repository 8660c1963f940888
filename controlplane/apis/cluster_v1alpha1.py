"""``cluster.gpufed.io/v1alpha1`` Cluster: one member cluster, its placement facts and capacity.

The spec is what an operator (or the agent at registration) declares: provider, region,
zone, overflow tier, GPU pricing, taints, cordon. The status is what the member agent
reports: readiness, node and GPU summaries and the per-node free *shapes* that the hub's
estimator walks. Quantities in the status are integers in base units (see
``controlplane/apis/quantity.py``). Spec models reject unknown fields; status models keep
them, so a newer agent can report more than this hub knows about.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field, field_validator

from controlplane.apis.meta import Condition, ObjectMeta, SpecModel, Taint, Timestamp, WireModel

API_VERSION: Final = "cluster.gpufed.io/v1alpha1"
KIND: Final = "Cluster"
PLURAL: Final = "clusters"

PROVIDER_ONPREM = "onprem"
DEFAULT_ONPREM_TIER = 0
DEFAULT_CLOUD_TIER = 1


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
    """

    provider: str = Field(min_length=1)
    region: str | None = None
    zone: str | None = None
    tier: int | None = Field(default=None, ge=0)
    """Overflow order, lower first. When absent: 0 for ``provider: onprem``, else 1."""
    pricing: dict[str, float] | None = None
    """Dollars per GPU-hour, keyed by the ``nvidia.com/gpu.product`` label value."""
    taints: list[Taint] | None = None
    unschedulable: bool | None = None

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
    ready: int = Field(ge=0)


class GpuSummary(WireModel):
    """One ``(resource, product)`` line of ``status.gpuSummary``."""

    resource: str
    product: str | None = None
    capacity: int = Field(ge=0)
    allocatable: int = Field(ge=0)
    allocated: int = Field(default=0, ge=0)


class ResourceSummary(WireModel):
    allocatable: dict[str, int] | None = None
    allocated: dict[str, int] | None = None


class NodeGpu(WireModel):
    """GPU facts of a node shape (from GPU Feature Discovery labels)."""

    product: str | None = None
    memory_mib: int | None = Field(default=None, alias="memoryMiB", ge=0)
    count: int | None = Field(default=None, ge=0)
    mig_strategy: Literal["none", "single", "mixed"] | None = None
    shared_replicas: int | None = Field(default=None, ge=0)


class ShapeTaint(WireModel):
    """A node taint as reported in a shape (value and effect as on the node)."""

    key: str
    value: str | None = None
    effect: str


class NodeShape(WireModel):
    """``count`` Ready, schedulable nodes that have identical labels, taints and free resources."""

    count: int = Field(ge=1)
    labels: dict[str, str] | None = None
    taints: list[ShapeTaint] | None = None
    free: dict[str, int] = Field(default_factory=dict)
    allocatable: dict[str, int] | None = None
    gpu: NodeGpu | None = None


class ClusterStatus(WireModel):
    """``status`` of a Cluster, written by the member agent and the cluster controller."""

    conditions: list[Condition] | None = None
    kubernetes_version: str | None = None
    last_report_time: Timestamp | None = None
    node_summary: NodeSummary | None = None
    gpu_summary: list[GpuSummary] | None = None
    resource_summary: ResourceSummary | None = None
    node_shapes: list[NodeShape] | None = None


class Cluster(SpecModel):
    """A member cluster (cluster-scoped, plural ``clusters``). Unknown top-level fields are errors."""

    api_version: Literal["cluster.gpufed.io/v1alpha1"] = API_VERSION
    kind: Literal["Cluster"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterSpec
    status: ClusterStatus | None = None
