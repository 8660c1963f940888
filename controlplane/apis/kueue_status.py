"""Parts of the status of Kueue's kinds at ``kueue.x-k8s.io`` v1beta1 and v1beta2 (the same in
both): a ClusterQueue's and a LocalQueue's quota usage and flavors (Kueue's ``FlavorUsage``,
``LocalQueueFlavorStatus``, the deprecated ``ClusterQueuePendingWorkloadsStatus``) and a Workload's
admission, its checks' states and the fields Kueue's scheduler and MultiKueue write (``Admission``,
``AdmissionCheckState``, ``TopologyAssignment``, ``SchedulingStats``, ``UnhealthyNode``). Pure values."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from controlplane.apis.kueue_podset import PodSetUpdate
from controlplane.apis.kueue_queue_policy import ClusterQueueReference, ResourceFlavorReference
from controlplane.apis.meta import (
    LISTED_AS_SET,
    LISTED_ATOMIC,
    MAPPED_ATOMIC,
    Taint,
    Timestamp,
    WireModel,
    listed_by,
    served_default,
)

#: Kueue's bound on the flavors of a ClusterQueue's usage and on the resources of each.
MAX_USAGE_ITEMS = 64
#: Kueue's bound on the flavors of a LocalQueue's usage (and status flavors) and on the resources of each.
MAX_LOCAL_QUEUE_USAGE_ITEMS = 16
#: The most domains a topology assignment holds (Kueue's v1beta2 bound of a slice's, taken for all
#: of an assignment's at both versions: the hub stores v1beta1's list of them).
MAX_TOPOLOGY_DOMAINS = 100000


class ResourceUsage(WireModel):
    name: str
    """The resource."""
    total: str | int | None = None
    """What is used of it in the flavor."""
    borrowed: str | int | None = None
    """The part of total beyond the queue's nominal quota (borrowed from the cohort)."""


class FlavorUsage(WireModel):
    """A ClusterQueue's usage of one flavor."""

    name: ResourceFlavorReference
    """The ResourceFlavor."""
    resources: list[ResourceUsage] = Field(max_length=MAX_USAGE_ITEMS, json_schema_extra=listed_by("name"))
    """Usage per resource."""


class LocalQueueFlavorUsage(FlavorUsage):
    """A LocalQueue's usage of one flavor."""

    resources: list[ResourceUsage] = Field(max_length=MAX_LOCAL_QUEUE_USAGE_ITEMS, json_schema_extra=listed_by("name"))
    """Usage per resource."""


class LocalQueueFlavorStatus(WireModel):
    name: ResourceFlavorReference
    """A ResourceFlavor of the LocalQueue's ClusterQueue."""
    resources: list[str] | None = Field(default=None, max_length=MAX_LOCAL_QUEUE_USAGE_ITEMS, json_schema_extra=LISTED_AS_SET)
    """The resources the ClusterQueue gives quota for in this flavor."""
    node_labels: dict[str, str] | None = Field(default=None, max_length=8, json_schema_extra=MAPPED_ATOMIC)
    """The flavor's node labels."""
    node_taints: list[Taint] | None = Field(default=None, max_length=8, json_schema_extra=LISTED_ATOMIC)
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


class TopologyDomainAssignment(WireModel):
    values: list[str] = Field(min_length=1, max_length=16, json_schema_extra=LISTED_ATOMIC)
    """The domain's node label values, from the highest level to the lowest."""
    count: int = Field(ge=1)
    """The pods to run in it."""


class TopologyAssignment(WireModel):
    levels: list[str] = Field(min_length=1, max_length=16, json_schema_extra=LISTED_ATOMIC)
    """The node label keys of the topology's levels, from the highest to the lowest."""
    domains: list[TopologyDomainAssignment] = Field(
        max_length=MAX_TOPOLOGY_DOMAINS, json_schema_extra=LISTED_ATOMIC
    )
    """The pods per domain."""


#: A pod set's name in a Workload's status: a DNS label, of any case.
POD_SET_REFERENCE = r"^(?i)[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: The ``name`` of a pod set's entry in a Workload's status: required, ``main`` when left out (the
#: kind's defaulting stores it).
POD_SET_REFERENCE_FIELD = Field(max_length=63, pattern=POD_SET_REFERENCE, json_schema_extra=served_default("main"))


class PodSetAssignment(WireModel):
    name: str = POD_SET_REFERENCE_FIELD
    """The pod set."""
    flavors: dict[str, ResourceFlavorReference] | None = None
    """The flavor given to each resource."""
    resource_usage: dict[str, str | int] | None = None
    """What the pod set uses of each resource."""
    count: int | None = Field(default=None, ge=0)
    """How many pods were admitted."""
    topology_assignment: TopologyAssignment | None = None
    """Topology-aware scheduling: the domains the pods go to (kept as written; the hub does not write it)."""
    delayed_topology_request: Literal["Pending", "Ready"] | None = None
    """Whether a topology assignment waits for a provisioning check (kept as written)."""


class Admission(WireModel):
    cluster_queue: ClusterQueueReference
    """The ClusterQueue whose quota the workload holds."""
    pod_set_assignments: list[PodSetAssignment] = Field(max_length=8, json_schema_extra=listed_by("name"))
    """The flavors of each pod set."""


class ReclaimablePod(WireModel):
    name: str
    """The pod set."""
    count: int = Field(ge=0)
    """How many of its pods no longer need their quota."""


class RequeueState(WireModel):
    count: int | None = Field(default=None, ge=0)
    """How often the workload was requeued after a PodsReady timeout."""
    requeue_at: str | None = None
    """When it may be admitted again."""


class PodSetRequest(WireModel):
    name: str = POD_SET_REFERENCE_FIELD
    """The pod set."""
    resources: dict[str, str | int] | None = None
    """What its pods request in all, per resource."""


CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]


class AdmissionCheckState(WireModel):
    name: str = Field(max_length=316)
    """The AdmissionCheck."""
    state: CheckState
    """Pending (not decided yet), Ready (passed), Retry (evict and try again), Rejected (deactivate)."""
    last_transition_time: str
    """When the state last changed."""
    message: str = Field(max_length=32768)
    """Why, in words (may be empty)."""
    pod_set_updates: list[PodSetUpdate] | None = Field(default=None, max_length=8, json_schema_extra=LISTED_ATOMIC)
    """Changes the check asks of the pod sets: applied to a batch/v1 Job's pod template as it starts."""
    requeue_after_seconds: int | None = Field(default=None, ge=0, le=2**31 - 1)
    """With state Retry: how long the evicted workload waits before it is queued again (Kueue's
    delayed admission check retries, kubernetes-sigs/kueue#7620)."""
    retry_count: int | None = Field(default=None, ge=0, le=2**31 - 1)
    """How often the check went to Retry (Kueue counts it; the hub keeps it as written)."""


class SchedulingStatsEviction(WireModel):
    reason: str = Field(max_length=316)
    """The eviction's reason (Preempted, PodsReadyTimeout ...)."""
    underlying_cause: str = Field(max_length=316)
    """A finer cause (may be empty)."""
    count: int = Field(ge=0)
    """How many evictions for this reason and cause."""


class SchedulingStats(WireModel):
    evictions: list[SchedulingStatsEviction] | None = Field(
        default=None, max_length=256, json_schema_extra=listed_by("reason", "underlyingCause")
    )
    """Evictions per reason and cause."""


class UnhealthyNode(WireModel):
    name: str = Field(max_length=63)
    """A failed node running a pod of the workload."""
