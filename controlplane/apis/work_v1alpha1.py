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

from controlplane.apis.meta import Condition, ObjectMeta, SpecModel, Timestamp, Toleration, WireModel
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


class ScheduledReason(StrEnum):
    """Reasons of the binding's ``Scheduled`` condition."""

    SUCCESS = "Success"
    NO_CLUSTER_FIT = "NoClusterFit"
    UNSCHEDULABLE = "Unschedulable"
    SCHEDULER_ERROR = "SchedulerError"
    NEVER_FITS = "NeverFits"
    """No node of the fleet could hold one pod of the workload even empty (too big a request)."""


class WorkReason(StrEnum):
    """Reasons of a Work's ``Applied`` and ``Available`` conditions, as the agent writes them."""

    APPLIED = "AppliedSuccessful"
    APPLY_FAILED = "AppliedFailed"
    CONFLICT = "ApplyConflict"
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
    kind: str
    namespace: str | None = None
    name: str
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None


class ReplicaRequirements(SpecModel):
    """What one replica needs: requests as quantity strings, node selection, tolerations."""

    resource_request: dict[str, str] | None = None
    node_selector: dict[str, str] | None = None
    node_affinity: dict[str, Any] | None = None
    tolerations: list[Toleration] | None = None
    priority_class_name: str | None = None

    @field_validator("resource_request", mode="before")
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
    replicas: int = Field(ge=0)
    replica_requirements: ReplicaRequirements | None = None


class PolicyReference(SpecModel):
    kind: Literal["PropagationPolicy", "ClusterPropagationPolicy"]
    namespace: str | None = None
    name: str


class TargetCluster(SpecModel):
    """One line of the scheduling result."""

    name: str = Field(min_length=1)
    replicas: int = Field(default=0, ge=0)


class BindingSnapshot(SpecModel):
    """A binding that needs an attached binding's object (``propagateDeps``), with its clusters."""

    namespace: str | None = None
    name: str = Field(min_length=1)
    clusters: list[TargetCluster] | None = None


class GracefulEvictionTask(SpecModel):
    """Replicas being moved off ``fromCluster``; the old copy goes when the new one is healthy."""

    from_cluster: str
    replicas: int | None = Field(default=None, ge=0)
    reason: str | None = None
    message: str | None = None
    creation_timestamp: Timestamp | None = None
    purge_mode: PurgeMode | None = None
    grace_period_seconds: int | None = Field(default=None, ge=0)


class SchedulePriority(SpecModel):
    """The binding's scheduling priority, resolved by the detector from the claiming policy's
    ``schedulePriority`` (a PriorityClass's value); higher is scheduled first. Ordering only:
    nothing placed is ever preempted for it."""

    priority: int = 0


class ResourceBindingSpec(SpecModel):
    resource: ObjectReference
    replicas: int = Field(default=0, ge=0)
    replica_requirements: ReplicaRequirements | None = None
    gang: bool | None = None
    components: list[Component] | None = None
    placement: Placement | None = None
    gpu_shapes: GpuShapes | None = None
    """The claiming policy's ``spec.gpuShapes``: copied here so that editing it changes the
    binding's generation, and the scheduler decides again."""
    policy: PolicyReference | None = None
    clusters: list[TargetCluster] | None = None
    graceful_eviction_tasks: list[GracefulEvictionTask] | None = None
    required_by: list[BindingSnapshot] | None = None
    """On an attached binding (``propagateDeps``): the bindings whose workloads need its object;
    its ``clusters`` are theirs, and it has no policy or placement of its own."""
    preserve_resources_on_deletion: bool | None = None
    """The claiming policy's ``preserveResourcesOnDeletion``: copied into every Work, so deleting
    the workload leaves its member copies running, released from gpufed."""
    propagate_deps: bool | None = None
    """The claiming policy's ``propagateDeps``, copied here (as Karmada does) so that what the
    workload's pods reference keeps following it while the binding lives, even after the policy
    is deleted (the detector keeps such a binding, ``PolicyRemoved``)."""
    schedule_priority: SchedulePriority | None = None
    """Set when the claiming policy has ``schedulePriority``: the scheduler's queue order."""

    @field_validator("clusters")
    @classmethod
    def _unique_clusters(cls, clusters: list[TargetCluster] | None) -> list[TargetCluster] | None:
        seen: set[str] = set()
        for target in clusters or ():
            if target.name in seen:
                raise ValueError(f"cluster {target.name!r} is listed twice")
            seen.add(target.name)
        return clusters

    def assignments(self) -> dict[str, int]:
        """The scheduling result as ``{cluster: replicas}``."""
        return {target.name: target.replicas for target in self.clusters or ()}


class AggregatedStatusItem(WireModel):
    cluster_name: str
    applied: bool | None = None
    applied_message: str | None = None
    health: HealthValue | None = None
    status: dict[str, Any] | None = None


class ClusterExplanation(WireModel):
    """Why one cluster was chosen or not, shown by ``kubectl describe`` and ``gpufed explain``."""

    cluster: str
    chosen: bool
    replicas: int = 0
    reasons: list[str] | None = None
    score: float | None = None
    tier: int | None = None
    price_per_gpu_hour: float | None = None


class ResourceBindingStatus(WireModel):
    conditions: list[Condition] | None = None
    scheduler_observing_affinity_name: str | None = None
    aggregated_status: list[AggregatedStatusItem] | None = None
    explanation: list[ClusterExplanation] | None = None
    observed_generation: int | None = None


class ResourceBinding(SpecModel):
    """One per workload, same namespace, named ``<name>-<kind lower>``."""

    api_version: Literal["work.gpufed.io/v1alpha1"] = API_VERSION
    kind: Literal["ResourceBinding"] = BINDING_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceBindingSpec
    status: ResourceBindingStatus | None = None


# ---------------------------------------------------------------------------------------------
# Work
# ---------------------------------------------------------------------------------------------


class WorkloadTemplate(SpecModel):
    manifests: list[dict[str, Any]] = Field(default_factory=list)

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
    conflict_resolution: Literal["Abort", "Overwrite"] | None = None
    suspend_dispatching: bool | None = None
    preserve_resources_on_deletion: bool | None = None
    """When the Work is deleted, the agent leaves its objects in the member and only removes
    gpufed's ownership labels from them (the binding controller clears it first when a Work goes
    because its cluster left the placement, so only deleting the workload preserves)."""


class ResourceIdentifier(WireModel):
    group: str = ""
    version: str
    kind: str
    namespace: str | None = None
    name: str
    ordinal: int = Field(ge=0)


class UnschedulablePods(WireModel):
    pods: int = Field(ge=0)
    message: str | None = None


class ManifestStatus(WireModel):
    identifier: ResourceIdentifier
    status: dict[str, Any] | None = None
    health: HealthValue | None = None
    unschedulable: UnschedulablePods | None = None


class WorkStatus(WireModel):
    conditions: list[Condition] | None = None
    manifest_statuses: list[ManifestStatus] | None = None


class Work(SpecModel):
    """The manifests one member runs, in namespace ``gpufed-es-<cluster>``."""

    api_version: Literal["work.gpufed.io/v1alpha1"] = API_VERSION
    kind: Literal["Work"] = WORK_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkSpec = Field(default_factory=WorkSpec)
    status: WorkStatus | None = None
