"""Kueue's ``kueue.x-k8s.io/v1beta2`` quota kinds: what differs from v1beta1.

Kueue 0.15 added v1beta2 and later made it its storage version; its docs' examples are written in
it. The hub stores these kinds in v1beta1 (the form its admission controller, reports and
commands read) and serves v1beta2 by converting every read and write
(:mod:`controlplane.apis.kueue_conversion`). The differences, per Kueue's types:

* ClusterQueue: ``spec.cohort`` is ``spec.cohortName``; ``spec.admissionChecks`` is gone (its
  checks are ``admissionChecksStrategy`` rules); ``flavorFungibility`` says ``MayStopSearch``
  where v1beta1 said ``Borrow``/``Preempt`` and adds ``preference``; ``concurrentAdmissionPolicy``
  is new.
* LocalQueue: ``status.flavorUsage`` is ``status.flavorsUsage``; v1beta1's ``status.flavors`` is gone.
* Workload: ``spec.priorityClassName`` and ``spec.priorityClassSource`` are one
  ``spec.priorityClassRef`` (group, kind, name).
* Workload: ``status.accumulatedPastExexcutionTimeSeconds`` is spelt
  ``accumulatedPastExecutionTimeSeconds``; a pod set's ``topologyRequest`` and the names in its
  status take v1beta2's bounds, and its CEL rules are v1beta2's
  (:func:`controlplane.apis.kueue_rules.workload_v1beta2`); a pod set's topology assignment is
  ``levels`` and ``slices`` where v1beta1 has ``levels`` and ``domains``
  (:mod:`controlplane.apis.kueue_topology_assignment`).
* AdmissionCheck: ``spec.retryDelayMinutes`` (deprecated) is gone.
* Cohort (v1beta1 and v1beta2), ResourceFlavor and WorkloadPriorityClass: the same fields.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from controlplane.apis import kueue_podset, kueue_status, kueue_v1alpha1
from controlplane.apis import kueue_v1beta1 as v1beta1
from controlplane.apis.kueue_queue_policy import (
    DNS_SUBDOMAIN,
    AdmissionChecksStrategy,
    AdmissionScope,
    ClusterQueuePreemption,
    CohortReference,
    FairSharing,
    FairSharingStatus,
    LocalQueueName,
    ResourceFlavorReference,
)
from controlplane.apis.kueue_status import MAX_LOCAL_QUEUE_USAGE_ITEMS, LocalQueueFlavorUsage
from controlplane.apis.kueue_topology_assignment import TopologyAssignment
from controlplane.apis.meta import (
    CONDITIONS_BY_TYPE,
    LISTED_AS_SET,
    LISTED_ATOMIC,
    SERVED_DEFAULT,
    Condition,
    LabelSelector,
    ObjectMeta,
    SpecModel,
    listed_by,
    served_default,
)

VERSION: Final = "v1beta2"
API_VERSION: Final = "kueue.x-k8s.io/v1beta2"


class ResourceFlavor(v1beta1.ResourceFlavor):
    """A class of capacity (Kueue's ResourceFlavor); ClusterQueues give quota per flavor."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = API_VERSION  # type: ignore[assignment]


class WorkloadPriorityClass(v1beta1.WorkloadPriorityClass):
    """A priority for queued workloads (Kueue's WorkloadPriorityClass), named by the label
    kueue.x-k8s.io/priority-class; higher values are admitted first."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = API_VERSION  # type: ignore[assignment]


class AdmissionCheck(SpecModel):
    """A check a workload must pass, besides quota, to be admitted (Kueue's AdmissionCheck); a
    ClusterQueue names its checks, and the check's controller sets each Workload's state of it."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = API_VERSION
    kind: Literal["AdmissionCheck"] = "AdmissionCheck"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: v1beta1.AdmissionCheckSpecFields
    """The controller and its parameters."""
    status: v1beta1.AdmissionCheckStatus | None = None
    """The check's conditions."""


class CohortV1beta1(SpecModel):
    """A cohort of ClusterQueues and cohorts (Kueue's Cohort, v1beta1 since Kueue 0.13, where
    v1alpha1's ``spec.parent`` became ``spec.parentName``); the form the hub stores."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = v1beta1.API_VERSION
    kind: Literal["Cohort"] = "Cohort"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: kueue_v1alpha1.CohortSpec = Field(default_factory=kueue_v1alpha1.CohortSpec)
    """Parent, quota and weight."""
    status: kueue_v1alpha1.CohortStatus | None = None
    """The weighted share."""


class Cohort(CohortV1beta1):
    """A cohort of ClusterQueues and cohorts (Kueue's Cohort): quota they share, a parent, a weight."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = API_VERSION  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------
# ClusterQueue
# ---------------------------------------------------------------------------------------------

FungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]


class FlavorFungibility(SpecModel):
    when_can_borrow: FungibilityPolicy | None = Field(default=None, json_schema_extra=served_default("MayStopSearch"))
    """MayStopSearch (default): take a flavor that fits by borrowing; TryNextFlavor: try the next
    flavors first, and take the one that borrows least (from the closest cohort)."""
    when_can_preempt: FungibilityPolicy | None = Field(default=None, json_schema_extra=served_default("TryNextFlavor"))
    """TryNextFlavor (default): try the next flavors before preempting; MayStopSearch: preempt in
    the first flavor where preemption makes room."""
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = None
    """Which of borrowing and preemption to prefer when every flavor needs one:
    BorrowingOverPreemption (default when absent): how the flavor takes the request first (fits,
    reclaims, preempts), then from how close it borrows; PreemptionOverBorrowing: from how close
    it borrows first. Only with both whenCanBorrow and whenCanPreempt TryNextFlavor."""

    @model_validator(mode="after")
    def _preference_needs_try_next(self) -> FlavorFungibility:
        if self.preference is not None and not (
            self.when_can_borrow == "TryNextFlavor" and self.when_can_preempt == "TryNextFlavor"
        ):
            raise ValueError("preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor")
        return self


class ConcurrentAdmissionConstraints(SpecModel):
    last_acceptable_flavor_name: ResourceFlavorReference | None = None
    """The last flavor (in the ClusterQueue's order) a workload may migrate to."""


class ConcurrentAdmissionMigration(SpecModel):
    mode: Literal["TryPreferredFlavors", "RetainFirstAdmission"]
    """TryPreferredFlavors: an admitted workload keeps trying its more preferred flavors;
    RetainFirstAdmission: it stays in the flavor it was admitted in."""
    constraints: ConcurrentAdmissionConstraints | None = None
    """Limits of the migration."""


class ConcurrentAdmissionPolicy(SpecModel):
    migration: ConcurrentAdmissionMigration
    """How a workload admitted in one flavor moves to a more preferred one (served and kept as
    created; the hub admits each workload in one flavor, as Kueue does with its ConcurrentAdmission
    feature gate off)."""


class ClusterQueueSpec(SpecModel):
    resource_groups: list[v1beta1.ResourceGroup] | None = Field(default=None, max_length=v1beta1.MAX_ITEMS, json_schema_extra=LISTED_ATOMIC)
    """Quota per flavor and resource, in groups of resources that share a flavor."""
    cohort_name: CohortReference | None = None
    """The cohort whose queues lend each other unused quota."""
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO"] | None = Field(
        default=None, json_schema_extra=served_default("BestEffortFIFO")
    )
    """StrictFIFO: a workload that does not fit blocks those after it; BestEffortFIFO (default): they may go first."""
    namespace_selector: LabelSelector | None = None
    """The namespaces whose LocalQueues may point at this queue (absent: none; {}: all)."""
    flavor_fungibility: FlavorFungibility | None = Field(default=None, json_schema_extra=served_default({}))
    """When admission tries the next flavor instead of borrowing or preempting."""
    preemption: ClusterQueuePreemption | None = Field(default=None, json_schema_extra=served_default({}))
    """Preemption policies (withinClusterQueue, reclaimWithinCohort, borrowWithinCohort)."""
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    """The AdmissionChecks a workload must pass, besides quota, per flavor it is given."""
    stop_policy: v1beta1.StopPolicy | None = Field(default=None, json_schema_extra=served_default("None"))
    """Hold: admit nothing new; HoldAndDrain: also evict the admitted workloads."""
    fair_sharing: FairSharing | None = None
    """Fair-sharing weight among the cohort's queues and cohorts."""
    admission_scope: AdmissionScope | None = None
    """Admission fair sharing: whether the queue orders its workloads by their LocalQueue's usage."""
    concurrent_admission_policy: ConcurrentAdmissionPolicy | None = None
    """Admission in several flavors at once (Kueue's alpha ConcurrentAdmission; served, immutable,
    not acted on)."""
    exclude_resource_prefixes: list[v1beta1.ResourcePrefix] | None = Field(
        default=None, max_length=v1beta1.MAX_GROUP_ITEMS, json_schema_extra=LISTED_AS_SET
    )
    """Resources (a name, or a prefix before a slash) Kueue leaves out of this queue's quota (kept; the hub does not act on it)."""


class ClusterQueue(SpecModel):
    """A pool of quota (Kueue's ClusterQueue); LocalQueues of namespaces point at it."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = API_VERSION
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    """Quotas, cohort and policies."""
    status: v1beta1.ClusterQueueStatus | None = None
    """Usage and workload counts."""


# ---------------------------------------------------------------------------------------------
# LocalQueue
# ---------------------------------------------------------------------------------------------


class LocalQueueStatus(v1beta1.LocalQueueStatusFields):
    flavors_usage: list[LocalQueueFlavorUsage] | None = Field(
        default=None, max_length=MAX_LOCAL_QUEUE_USAGE_ITEMS, json_schema_extra=listed_by("name")
    )
    """Quota used by the queue's admitted workloads per flavor: every flavor and resource of its ClusterQueue."""
    fair_sharing: FairSharingStatus | None = None
    """The queue's admission fair sharing state: its consumed resources and when they were sampled."""


class LocalQueue(v1beta1.LocalQueue):
    """A namespace's queue (Kueue's LocalQueue); jobs name it in the label kueue.x-k8s.io/queue-name."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = API_VERSION  # type: ignore[assignment]
    status: LocalQueueStatus | None = None  # type: ignore[assignment]
    """Workload counts and usage."""


# ---------------------------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------------------------


class PriorityClassRef(SpecModel):
    """The class a Workload's priority comes from; which kind a group names is the CRD's rules'
    (:func:`controlplane.apis.kueue_rules.workload_v1beta2`)."""

    group: Literal["kueue.x-k8s.io", "scheduling.k8s.io"]
    """kueue.x-k8s.io for a WorkloadPriorityClass, scheduling.k8s.io for a pod PriorityClass."""
    kind: Literal["WorkloadPriorityClass", "PriorityClass"]
    """The kind of the class."""
    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    """The class's name."""


class TopologyRequest(SpecModel):
    """A pod set's topology-aware scheduling request, as Kueue's job integrations write it from the
    pod template's annotations (served; the hub does not place pods by topology)."""

    required: str | None = Field(default=None, max_length=63)
    """The topology level all the pods must share."""
    preferred: str | None = Field(default=None, max_length=63)
    """The topology level the pods should share."""
    unconstrained: bool | None = None
    """Any placement within the whole capacity."""
    pod_index_label: str | None = Field(default=None, max_length=317)
    """The label indexing the pods (kubernetes.io/job-completion-index for a Job)."""
    sub_group_index_label: str | None = Field(default=None, max_length=317)
    """The label indexing the replicated jobs within the pod set."""
    sub_group_count: int | None = None
    """How many replicated jobs the pod set has."""
    pod_set_group_name: str | None = Field(default=None, max_length=256)
    """Pod sets of one group get the same flavor."""
    pod_set_slice_required_topology: str | None = Field(default=None, max_length=63)
    """The topology level each slice of the pod set must share."""
    pod_set_slice_size: int | None = None
    """The pods of a slice."""


class PodSet(v1beta1.PodSet):
    count: int | None = Field(default=None, ge=0, json_schema_extra=served_default(1))  # type: ignore[assignment]
    """How many pods (unset: 1, the CRD's default)."""
    topology_request: TopologyRequest | None = None  # type: ignore[assignment]
    """Topology-aware scheduling request (served; not used)."""


class WorkloadSpec(SpecModel):
    pod_sets: list[PodSet] = Field(min_length=1, max_length=8, json_schema_extra=listed_by("name"))
    """The pods the workload needs, per role."""
    queue_name: LocalQueueName | None = None
    """The LocalQueue (in the workload's namespace) the workload waits in."""
    priority_class_ref: PriorityClassRef | None = None
    """The WorkloadPriorityClass or PriorityClass giving the priority."""
    priority: int | None = None
    """The priority: higher first."""
    active: bool | None = Field(default=None, json_schema_extra=served_default(True))
    """False: the workload is deactivated (evicted and not admitted again)."""
    maximum_execution_time_seconds: int | None = Field(default=None, ge=1)
    """Served; not enforced by the hub."""


#: A name of v1beta2's status lists of names (MultiKueue's clusters).
ClusterName = Annotated[str, Field(max_length=256)]
#: A pod set's name where v1beta2's status names one: a DNS label, as in the spec.
PodSetName = Annotated[str, Field(max_length=63, pattern=v1beta1.POD_SET_NAME)]


class PodSetAssignment(kueue_status.PodSetAssignment):
    name: str = Field(
        default="main", max_length=63, pattern=v1beta1.POD_SET_NAME, json_schema_extra=SERVED_DEFAULT
    )
    """The pod set."""
    topology_assignment: TopologyAssignment | None = None  # type: ignore[assignment]
    """Topology-aware scheduling: the domains the pods go to, in slices (kept as written; the hub
    does not write it)."""
    delayed_topology_request: Literal["Pending", "Ready"] | None = Field(
        default=None, json_schema_extra={"maxLength": 7}
    )
    """Whether a topology assignment waits for a provisioning check (kept as written)."""


class Admission(kueue_status.Admission):
    pod_set_assignments: list[PodSetAssignment] = Field(  # type: ignore[assignment]
        max_length=8, json_schema_extra=listed_by("name")
    )
    """The flavors of each pod set."""


class PodSetUpdate(kueue_podset.PodSetUpdate):
    name: PodSetName
    """The pod set."""


class AdmissionCheckState(kueue_status.AdmissionCheckState):
    name: str = Field(min_length=1, max_length=316)
    """The AdmissionCheck."""
    pod_set_updates: list[PodSetUpdate] | None = Field(  # type: ignore[assignment]
        default=None, max_length=8, json_schema_extra=LISTED_ATOMIC
    )
    """Changes the check asks of the pod sets: applied to a batch/v1 Job's pod template as it starts."""


class ReclaimablePod(kueue_status.ReclaimablePod):
    name: PodSetName
    """The pod set."""


class PodSetRequest(kueue_status.PodSetRequest):
    name: PodSetName
    """The pod set (v1beta2 defaults no name here)."""


class WorkloadStatus(v1beta1.WorkloadStatusFields):
    """v1beta2's status: v1beta1's, with v1beta2's bounds on names and lists."""

    admission: Admission | None = None
    """Where the workload holds quota, and in which flavors."""
    admission_checks: list[AdmissionCheckState] | None = Field(  # type: ignore[assignment]
        default=None, max_length=8, json_schema_extra=listed_by("name")
    )
    """The state of each admission check of its ClusterQueue, set by the check's controller."""
    reclaimable_pods: list[ReclaimablePod] | None = Field(  # type: ignore[assignment]
        default=None, max_length=8, json_schema_extra=listed_by("name")
    )
    """Pods whose quota may be released early (not used by the hub)."""
    resource_requests: list[PodSetRequest] | None = Field(  # type: ignore[assignment]
        default=None, max_length=8, json_schema_extra=listed_by("name")
    )
    """Total requests per pod set (not written by the hub)."""
    conditions: list[Condition] | None = Field(
        default=None, max_length=16, json_schema_extra=CONDITIONS_BY_TYPE
    )
    """QuotaReserved, Admitted, Finished, Evicted ... as Kueue sets them (at most 16)."""
    nominated_cluster_names: list[ClusterName] | None = Field(
        default=None, max_length=10, json_schema_extra=LISTED_ATOMIC
    )
    """MultiKueue: the worker clusters nominated (kept as written; the hub does not write it)."""
    accumulated_past_execution_time_seconds: int | None = None
    """Seconds admitted in earlier admissions (v1beta1's accumulatedPastExexcutionTimeSeconds; kept as written)."""


class Workload(SpecModel):
    """One job's claim on quota (Kueue's Workload); the hub creates one per queued workload."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = API_VERSION
    kind: Literal["Workload"] = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec
    """The pods needed, the queue and the priority."""
    status: WorkloadStatus | None = None
    """Admission and conditions."""
