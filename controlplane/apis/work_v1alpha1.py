"""``work.gpufed.io/v1alpha1``: ResourceBinding (workload + decision) and Work (one member's manifests).

A ResourceBinding is written by the detector (``spec.resource``, replicas, per-replica
requirements, gang, the policy's placement and GPU shapes), completed by the scheduler (``spec.clusters`` and the
``Scheduled`` condition with a per-cluster ``explanation``) and by the status controller
(``aggregatedStatus``). A Work, in namespace ``gpufed-es-<cluster>``, carries the manifests one
member must run; the agent reports ``Applied``/``Available`` and per-manifest status.

Spec models reject unknown fields (``extra_forbidden``); status models keep them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import Field, field_validator

from controlplane.apis.conflictresolution import ConflictResolution
from controlplane.apis.meta import (
    Condition,
    ObjectMeta,
    SpecModel,
    Timestamp,
    Toleration,
    WireModel,
    repeated,
)
from controlplane.apis.quantity import QuantityError, parse_quantity
from policies.models import GpuShapes, Placement, PurgeMode

API_VERSION: Final = "work.gpufed.io/v1alpha1"
BINDING_KIND: Final = "ResourceBinding"
BINDING_PLURAL: Final = "resourcebindings"
WORK_KIND: Final = "Work"
WORK_PLURAL: Final = "works"


class ConditionType(StrEnum):
    """Condition types on bindings and Works."""

    SCHEDULED = "Scheduled"
    FULLY_APPLIED = "FullyApplied"
    APPLIED = "Applied"
    AVAILABLE = "Available"
    SCHEDULE_PRIORITY_RESOLVED = "SchedulePriorityResolved"
    """The binding's ``schedulePriority``, as the detector resolved it from its policy."""
    DEPENDENCIES_PROPAGATED = "DependenciesPropagated"
    """Whether the objects a workload's pods reference follow it to its clusters."""


class ScheduledReason(StrEnum):
    """Reasons of the binding's ``Scheduled`` condition."""

    SUCCESS = "Success"
    NO_CLUSTER_FIT = "NoClusterFit"
    UNSCHEDULABLE = "Unschedulable"
    SCHEDULER_ERROR = "SchedulerError"
    NEVER_FITS = "NeverFits"
    """No node of the fleet could hold one pod of the workload even empty (too big a request)."""


class PriorityReason(StrEnum):
    """Reasons of the binding's ``SchedulePriorityResolved`` condition."""

    RESOLVED = "PriorityClassResolved"
    DEFAULT = "DefaultPriority"
    NOT_FOUND = "PriorityClassNotFound"
    UNSUPPORTED_SOURCE = "PriorityClassSourceUnsupported"


class DependenciesReason(StrEnum):
    """Reasons of the binding's ``DependenciesPropagated`` condition."""

    PROPAGATED = "DependenciesPropagated"
    """Every referenced object exists and follows the workload (or has a policy of its own)."""
    MISSING = "DependencyMissing"
    """Some referenced object is not on the hub; the workload propagates without it."""


class FullyAppliedReason(StrEnum):
    """Reasons of the binding's ``FullyApplied`` condition."""

    SUCCESS = "FullyAppliedSuccess"
    NOT_FULLY_APPLIED = "NotFullyApplied"


class EvictionReason(StrEnum):
    """``gracefulEvictionTasks[].reason``: why replicas left a cluster (Karmada's values)."""

    TAINT_UNTOLERATED = "TaintUntolerated"
    APPLICATION_FAILURE = "ApplicationFailure"


class HoldReason(StrEnum):
    """The ``reason`` of the graceful eviction task that holds an attached binding's Work."""

    PRESERVED_WORKLOAD_DELETED = "PreservedWorkloadDeleted"
    """The cluster's copy stays with a deleted, preserved workload: its Work is deleted here,
    flag and all, while the task keeps the binding controller from clearing the flag first."""


class WorkReason(StrEnum):
    """Reasons of a Work's ``Applied`` and ``Available`` conditions, as the agent writes them."""

    APPLIED = "AppliedSuccessful"
    APPLY_FAILED = "AppliedFailed"
    CONFLICT = "ApplyConflict"
    KIND_NOT_SERVED = "KindNotServed"
    """A manifest's kind is not served by the member cluster's API (its CRD is not installed)."""
    AVAILABLE = "ResourcesAvailable"
    UNHEALTHY = "ResourcesUnhealthy"
    HEALTH_UNKNOWN = "ResourcesHealthUnknown"


class Health(StrEnum):
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    UNKNOWN = "Unknown"


HealthValue = Literal["Healthy", "Unhealthy", "Unknown"]

#: A binding's ``(namespace, name)``: the key controllers queue bindings by.
BindingKey = tuple[str, str]


def binding_name(workload_name: str, kind: str) -> str:
    """The binding's name for a workload: ``<name>-<kind lower>`` (in the workload's namespace)."""
    return f"{workload_name}-{kind.lower()}"


# ---------------------------------------------------------------------------------------------
# ResourceBinding
# ---------------------------------------------------------------------------------------------


class ObjectReference(SpecModel):
    """The workload a binding is for."""

    api_version: str
    """API version of the workload."""
    kind: str
    """Kind of the workload."""
    namespace: str | None = None
    """Namespace of the workload; empty for cluster-scoped objects."""
    name: str
    """Name of the workload."""
    uid: str | None = None
    """UID of the workload."""
    resource_version: str | None = None
    """The resourceVersion of the workload the binding was last made from."""
    generation: int | None = None
    """The generation of the workload the binding was last made from."""


class ReplicaRequirements(SpecModel):
    """What one replica needs: requests as quantity strings, node selection, tolerations."""

    resource_request: dict[str, str] | None = None
    """What one replica requests (the sum over its containers, as the scheduler counts it), as quantities."""
    node_selector: dict[str, str] | None = None
    """The node labels a replica's pod requires."""
    node_affinity: dict[str, Any] | None = None
    """The required node affinity of a replica's pod."""
    tolerations: list[Toleration] | None = None
    """The tolerations of a replica's pod."""
    priority_class_name: str | None = None
    """The PriorityClass of a replica's pod."""
    shared_resource_request: dict[str, str] | None = None
    """What the replicas in one cluster hold together, once, on one node (the devices of the DRA
    ResourceClaims their pods name directly), as quantities; not part of resourceRequest."""

    @field_validator("resource_request", "shared_resource_request", mode="before")
    @classmethod
    def _quantities(cls, request: Any) -> Any:
        if not isinstance(request, dict):
            return request
        normalised: dict[str, str] = {}
        for name, quantity in request.items():
            if isinstance(quantity, bool) or not isinstance(quantity, str | int | float):
                raise ValueError(f"{name}: {quantity!r} is not a quantity (e.g. 500m, 2, 1Gi)")
            try:
                parse_quantity(quantity)
            except QuantityError as exc:
                raise ValueError(f"{name}: {exc}") from exc
            normalised[name] = str(quantity)
        return normalised


class Component(SpecModel):
    """One role of a multi-role job (e.g. PyTorchJob Master/Worker)."""

    name: str = Field(min_length=1)
    """The role's name (Master, Worker, Launcher, head, a worker group name)."""
    replicas: int = Field(ge=0)
    """The number of pods of this role."""
    replica_requirements: ReplicaRequirements | None = None
    """What one pod of this role needs."""


class PolicyReference(SpecModel):
    kind: Literal["PropagationPolicy", "ClusterPropagationPolicy"]
    """PropagationPolicy or ClusterPropagationPolicy."""
    namespace: str | None = None
    """Namespace of the PropagationPolicy; empty for a ClusterPropagationPolicy."""
    name: str
    """Name of the policy."""


class TargetCluster(SpecModel):
    """One line of the scheduling result."""

    name: str = Field(min_length=1)
    """Name of the member cluster."""
    replicas: int = Field(default=0, ge=0)
    """The number of replicas placed on this cluster."""


class BindingSnapshot(SpecModel):
    """A binding that needs an attached binding's object (``propagateDeps``), with its clusters."""

    namespace: str | None = None
    """Namespace of the binding that needs this object."""
    name: str = Field(min_length=1)
    """Name of the binding that needs this object."""
    clusters: list[TargetCluster] | None = None
    """The clusters that binding's workload runs on."""


class GracefulEvictionTask(SpecModel):
    """Replicas being moved off ``fromCluster``; the old copy goes when the new one is healthy."""

    from_cluster: str
    """The cluster the replicas are being moved off."""
    replicas: int | None = Field(default=None, ge=0)
    """The number of replicas that ran on that cluster."""
    reason: str | None = None
    """Why they are moved (ApplicationFailure, ClusterFailure, ...)."""
    message: str | None = None
    """A human-readable explanation."""
    creation_timestamp: Timestamp | None = None
    """When the eviction started."""
    purge_mode: PurgeMode | None = None
    """How the old copy goes: Immediately/Directly (at once), Graciously/Gracefully (once the replacement is
    healthy or the grace period ends) or Never (kept until removed by hand)."""
    grace_period_seconds: int | None = Field(default=None, ge=0)
    """How long a gracious eviction may wait for the replacement to become healthy."""


class SchedulePriority(SpecModel):
    """The binding's scheduling priority, resolved by the detector from the claiming policy's
    ``schedulePriority`` (a PriorityClass's value); higher is scheduled first. Ordering only:
    nothing placed is ever preempted for it."""

    priority: int = 0
    """The priority value: bindings with higher values are scheduled first. Nothing already placed is
    preempted for it."""


class ResourceBindingSpec(SpecModel):
    resource: ObjectReference
    """The workload (resource template) this binding is for."""
    replicas: int = Field(default=0, ge=0)
    """The number of replicas of the workload."""
    replica_requirements: ReplicaRequirements | None = None
    """What one replica needs, read from the workload's pod template."""
    gang: bool | None = None
    """Gang is true when all replicas must land in one cluster together or not at all (PyTorchJob, MPIJob,
    RayJob and RayCluster, or a policy's gang: true)."""
    components: list[Component] | None = None
    """The roles of a multi-role workload (PyTorchJob Master and Worker, RayCluster head and worker groups),
    each with its replicas and requirements."""
    placement: Placement | None = None
    """The placement of the claiming policy."""
    gpu_shapes: GpuShapes | None = None
    """The GPU requests the workload accepts per replica, from the claiming policy's gpuShapes; the scheduler
    picks one per cluster."""
    policy: PolicyReference | None = None
    """The policy that claims the workload."""
    clusters: list[TargetCluster] | None = None
    """The scheduling result: the clusters chosen and the replicas on each."""
    graceful_eviction_tasks: list[GracefulEvictionTask] | None = None
    """Replicas being moved off a cluster; the old copy is removed once the new one is healthy."""
    required_by: list[BindingSnapshot] | None = None
    """For an object that workloads depend on (a ConfigMap, Secret, ServiceAccount, ... propagated with
    propagateDeps): the bindings that need it. It follows their clusters and has no placement of its own."""
    preserve_resources_on_deletion: bool | None = None
    """When true, deleting the workload leaves its copies running in the member clusters, no longer managed by
    gpufed (from the claiming policy)."""
    propagate_deps: bool | None = None
    """When true, the objects the workload's pods reference (ConfigMaps, Secrets, ServiceAccounts, PVCs)
    follow it to its clusters, even after the policy is deleted (from the claiming policy)."""
    schedule_priority: SchedulePriority | None = None
    """The scheduling priority of the binding, from the claiming policy's schedulePriority."""
    reschedule_triggered_at: str | None = None
    """When a fresh placement was asked for (a WorkloadRebalancer): the scheduler places the binding again,
    ignoring where it runs, when this is later than status.lastScheduledTime."""

    @field_validator("clusters")
    @classmethod
    def _unique_clusters(cls, clusters: list[TargetCluster] | None) -> list[TargetCluster] | None:
        twice = repeated(target.name for target in clusters or ())
        if twice is not None:
            raise ValueError(f"cluster {twice!r} is listed twice")
        return clusters

    def assignments(self) -> dict[str, int]:
        """The scheduling result as ``{cluster: replicas}``."""
        return {target.name: target.replicas for target in self.clusters or ()}


class AggregatedStatusItem(WireModel):
    cluster_name: str
    """The member cluster."""
    applied: bool | None = None
    """Whether the workload was applied in that cluster."""
    applied_message: str | None = None
    """Why applying failed, when it did."""
    health: HealthValue | None = None
    """Health of the workload in that cluster: Healthy, Unhealthy or Unknown."""
    status: dict[str, Any] | None = None
    """The workload's status in that cluster, as the member reports it."""


class ClusterExplanation(WireModel):
    """Why one cluster was chosen or not, shown by ``kubectl describe`` and ``gpufed explain``."""

    cluster: str
    """The member cluster."""
    chosen: bool
    """Whether replicas were placed on it."""
    replicas: int = 0
    """The number of replicas placed on it."""
    reasons: list[str] | None = None
    """Why it was chosen or not, in words (filters it failed, what it can hold)."""
    score: float | None = None
    """Its score among the feasible clusters."""
    tier: int | None = None
    """Its overflow tier (TieredOverflow)."""
    price_per_gpu_hour: float | None = None
    """Its price per GPU-hour for the workload's GPUs, in US dollars."""
    alike: list[str] | None = None
    """Further clusters with exactly this verdict (not chosen, the same reasons, score, tier and
    price), by name. Set only in an explanation of more than 16 clusters, so that it stays small
    at any fleet size; gpufed explain lists each of them."""


class ResourceBindingStatus(WireModel):
    conditions: list[Condition] | None = None
    """Conditions of the binding: Scheduled (replicas placed) and FullyApplied (every Work applied)."""
    scheduler_observing_affinity_name: str | None = None
    """The clusterAffinities term the current placement was made with."""
    aggregated_status: list[AggregatedStatusItem] | None = None
    """The workload's status in each member cluster."""
    explanation: list[ClusterExplanation] | None = None
    """Why each cluster was chosen or not, as kubectl describe and gpufed explain show it; past 16
    clusters, those not chosen for the same reasons share one entry (alike)."""
    observed_generation: int | None = None
    """The generation of the binding the scheduler last acted on."""
    last_scheduled_time: str | None = None
    """When the scheduler last wrote a decision for the binding."""


class ResourceBinding(SpecModel):
    """One per workload, same namespace, named ``<name>-<kind lower>``."""

    api_version: Literal["work.gpufed.io/v1alpha1"] = API_VERSION
    kind: Literal["ResourceBinding"] = BINDING_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceBindingSpec
    """Spec is the workload, its requirements, its placement and the scheduling result."""
    status: ResourceBindingStatus | None = None
    """Status is the scheduling and applying state and the workload's status in each cluster."""


# ---------------------------------------------------------------------------------------------
# Work
# ---------------------------------------------------------------------------------------------


class WorkloadTemplate(SpecModel):
    manifests: list[dict[str, Any]] = Field(default_factory=list)
    """The objects to apply in the member cluster, as complete manifests."""

    @field_validator("manifests")
    @classmethod
    def _manifests_are_objects(cls, manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, manifest in enumerate(manifests):
            missing = [key for key in ("apiVersion", "kind", "metadata") if key not in manifest]
            if missing:
                raise ValueError(f"manifest [{index}] is missing {', '.join(missing)}")
        return manifests


class WorkSpec(SpecModel):
    workload: WorkloadTemplate = Field(default_factory=WorkloadTemplate)
    """The objects the member cluster's agent applies."""
    conflict_resolution: ConflictResolution | None = None
    """What the agent does when an object of the same name exists in the member and was not created by gpufed:
    Abort (default: report a conflict) or Overwrite (take it over)."""
    suspend_dispatching: bool | None = None
    """When true, changes are not delivered to the member cluster until it is false again."""
    preserve_resources_on_deletion: bool | None = None
    """When true, deleting the Work leaves its objects running in the member cluster; only gpufed's labels are
    removed from them."""


class ResourceIdentifier(WireModel):
    group: str = ""
    """API group of the object."""
    version: str
    """API version of the object."""
    kind: str
    """Kind of the object."""
    namespace: str | None = None
    """Namespace of the object."""
    name: str
    """Name of the object."""
    ordinal: int = Field(ge=0)
    """The index of the manifest in spec.workload.manifests."""


class UnschedulablePods(WireModel):
    pods: int = Field(ge=0)
    """The number of the workload's pods the member cluster cannot schedule."""
    message: str | None = None
    """The member's scheduling message for them."""


class UnboundClaim(WireModel):
    name: str
    """The PersistentVolumeClaim the pods wait for."""
    storage_class_name: str | None = None
    """The StorageClass it names."""
    message: str | None = None
    """Why it is not bound, as the member's PV controller says it (e.g. 'storageclass.storage.k8s.io "fast" not found')."""


class NotStartingPods(WireModel):
    pods: int = Field(ge=0)
    """The number of the workload's pods placed in the member cluster that cannot start (or, for
    FailedCreate, that the member's API refuses to create; for Unschedulable, that its scheduler
    leaves unplaced for storage it lacks)."""
    reason: str | None = None
    """Why, as the member's kubelet says it (CreateContainerConfigError, ImagePullBackOff...),
    or FailedCreate from the workload's ReplicaFailure condition."""
    message: str | None = None
    """The kubelet's message (e.g. 'configmap "app-config" not found'), or the condition's."""
    claim: UnboundClaim | None = None
    """For pods whose claim is not bound, that claim and why, when the member lacks what it needs."""


class ReclaimedPods(WireModel):
    pods: int = Field(ge=0)
    """The number of the workload's pods lost with spot nodes the cloud reclaimed (within the agent's window)."""
    nodes: list[str] | None = None
    """The reclaimed nodes."""
    time: Timestamp | None = None
    """When the latest of them was reclaimed."""


class ManifestStatus(WireModel):
    identifier: ResourceIdentifier
    """Which manifest this is."""
    status: dict[str, Any] | None = None
    """The object's status in the member cluster."""
    generation: int | None = None
    """The object's metadata.generation in the member cluster: its status is about that generation
    once its status.observedGeneration reaches it."""
    health: HealthValue | None = None
    """Health of the object: Healthy, Unhealthy or Unknown."""
    unschedulable: UnschedulablePods | None = None
    """Pods of the object that the member cluster cannot schedule, if any."""
    not_starting: NotStartingPods | None = None
    """Pods of the object placed in the member cluster that cannot start, if any."""
    reclaimed: ReclaimedPods | None = None
    """Pods of the object lost when spot nodes were reclaimed, if any."""
    endpoint_slices: list[dict[str, Any]] | None = None
    """For a MultiClusterService's Service in a provider cluster: the Service's EndpointSlices
    there (name, addressType, endpoints, ports), which the hub dispatches to the consumer clusters."""
    interpreted_by: dict[str, str] | None = None
    """The ResourceInterpreterCustomization of each hook (statusReflection, healthInterpretation)
    that made status and health from the member object at the agent."""
    conditions: list[Condition] | None = None
    """Interpreted=False when a customization's script failed at the agent on this object."""


class WorkStatus(WireModel):
    conditions: list[Condition] | None = None
    """Conditions of the Work: Applied (the agent applied every manifest) and Available (they are healthy)."""
    manifest_statuses: list[ManifestStatus] | None = None
    """The status of each manifest in the member cluster."""


class Work(SpecModel):
    """The manifests one member runs, in namespace ``gpufed-es-<cluster>``."""

    api_version: Literal["work.gpufed.io/v1alpha1"] = API_VERSION
    kind: Literal["Work"] = WORK_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkSpec = Field(default_factory=WorkSpec)
    """Spec holds the manifests to apply in the member cluster."""
    status: WorkStatus | None = None
    """Status is what the cluster's agent reports about them."""
