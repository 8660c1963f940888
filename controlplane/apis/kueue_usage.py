"""Kueue's quota usage and flavor status shapes, shared by a ClusterQueue's and a LocalQueue's
status at ``kueue.x-k8s.io`` v1beta1 and v1beta2 (Kueue's ``FlavorUsage``, ``LocalQueueFlavorStatus``
and the deprecated ``ClusterQueuePendingWorkloadsStatus``). Pure values."""

from __future__ import annotations

from pydantic import Field

from controlplane.apis.meta import Taint, Timestamp, WireModel

#: Kueue's bound on the flavors of a queue's usage and on the resources of each.
MAX_USAGE_ITEMS = 64


class ResourceUsage(WireModel):
    name: str
    """The resource."""
    total: str | int | None = None
    """What is used of it in the flavor."""
    borrowed: str | int | None = None
    """The part of total beyond the queue's nominal quota (borrowed from the cohort)."""


class FlavorUsage(WireModel):
    name: str
    """The ResourceFlavor."""
    resources: list[ResourceUsage] = Field(default_factory=list, max_length=MAX_USAGE_ITEMS)
    """Usage per resource."""


class LocalQueueFlavorStatus(WireModel):
    name: str = Field(max_length=253)
    """A ResourceFlavor of the LocalQueue's ClusterQueue."""
    resources: list[str] | None = Field(default=None, max_length=16)
    """The resources the ClusterQueue gives quota for in this flavor."""
    node_labels: dict[str, str] | None = Field(default=None, max_length=8)
    """The flavor's node labels."""
    node_taints: list[Taint] | None = Field(default=None, max_length=8)
    """The flavor's node taints."""


class ClusterQueuePendingWorkload(WireModel):
    name: str
    """The pending Workload's name."""
    namespace: str
    """Its namespace."""


class PendingWorkloadsStatus(WireModel):
    cluster_queue_pending_workload: list[ClusterQueuePendingWorkload] | None = None
    """The first pending workloads."""
    last_change_time: Timestamp
    """When the list last changed."""
