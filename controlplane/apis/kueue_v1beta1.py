"""Kueue's ``kueue.x-k8s.io/v1beta1`` quota kinds: ResourceFlavor, ClusterQueue, LocalQueue,
WorkloadPriorityClass, Workload and AdmissionCheck.

Field-compatible with Kueue's ``apis/kueue/v1beta1`` types, so YAML written for a Kueue cluster
applies to the hub unchanged; unknown spec fields are refused (or pruned with
``fieldValidation=Ignore``) as kube does for a structural schema. Quantities are kube quantities
("8", "36Gi"). The pure admission maths lives in :mod:`controlplane.admission.core`.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field

from controlplane.apis.kueue_names import LABEL_POD_GROUP_NAME as LABEL_POD_GROUP_NAME
from controlplane.apis.kueue_names import LABEL_QUEUE_NAME as LABEL_QUEUE_NAME
from controlplane.apis.kueue_podset import CrdToleration
from controlplane.apis.kueue_queue_policy import (
    DNS_SUBDOMAIN,
    AdmissionCheckReference,
    AdmissionChecksStrategy,
    AdmissionScope,
    ClusterQueuePreemption,
    ClusterQueueReference,
    CohortReference,
    FairSharing,
    FairSharingStatus,
    FlavorFungibility,
    LocalQueueName,
    ResourceFlavorReference,
    SignedQuantity,
    TopologyReference,
)
from controlplane.apis.kueue_status import (
    MAX_LOCAL_QUEUE_USAGE_ITEMS,
    MAX_USAGE_ITEMS,
    Admission,
    AdmissionCheckState,
    FlavorUsage,
    LocalQueueFlavorStatus,
    LocalQueueFlavorUsage,
    PendingWorkloadsStatus,
    PodSetRequest,
    ReclaimablePod,
    RequeueState,
    SchedulingStats,
    UnhealthyNode,
)
from controlplane.apis.meta import (
    CONDITIONS_BY_TYPE,
    LISTED_AS_SET,
    LISTED_ATOMIC,
    MAPPED_ATOMIC,
    SERVED_DEFAULT,
    Condition,
    LabelSelector,
    ObjectMeta,
    SpecModel,
    Timestamp,
    WireModel,
    listed_by,
    published_as,
    served_default,
)

API_GROUP: Final = "kueue.x-k8s.io"
VERSION: Final = "v1beta1"
API_VERSION: Final = "kueue.x-k8s.io/v1beta1"

#: The label naming a job's WorkloadPriorityClass.
LABEL_PRIORITY_CLASS: Final = "kueue.x-k8s.io/priority-class"
#: The label Kueue puts on a Workload: the UID of the job it was made for (``JobUIDLabel``).
LABEL_JOB_UID: Final = "kueue.x-k8s.io/job-uid"
#: Kueue's mark of a Pod it manages (its only value ``"true"``), also its finalizer's name.
LABEL_MANAGED: Final = "kueue.x-k8s.io/managed"
MANAGED_FINALIZER: Final = LABEL_MANAGED
#: A batch/v1 Job's annotation allowing partial admission: the fewest pods it runs with (its pod
#: set's ``minCount``); the admitted count becomes its ``parallelism``.
ANNOTATION_JOB_MIN_PARALLELISM: Final = "kueue.x-k8s.io/job-min-parallelism"
#: "true": a partially admitted Job's ``completions`` follows its admitted ``parallelism``.
ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM: Final = "kueue.x-k8s.io/job-completions-equal-parallelism"

#: Kueue's pod groups: Pods with the same group name label (and the total count annotation, the
#: Pods the group has) share one Workload, named for the group; each Pod's role is the hash of its
#: shape (Kueue's webhook writes it in the role hash annotation), one pod set per role; the group's
#: Workload carries the group annotation. (The group name label, LABEL_POD_GROUP_NAME, is in
#: :mod:`.kueue_names`, with the queue name label.)
ANNOTATION_POD_GROUP_TOTAL_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
ANNOTATION_ROLE_HASH: Final = "kueue.x-k8s.io/role-hash"
ANNOTATION_IS_GROUP_WORKLOAD: Final = "kueue.x-k8s.io/is-group-workload"
ANNOTATION_POD_GROUP_SERVING: Final = "kueue.x-k8s.io/pod-group-serving"
ANNOTATION_POD_GROUP_FAST_ADMISSION: Final = "kueue.x-k8s.io/pod-group-fast-admission"
ANNOTATION_RETRIABLE_IN_GROUP: Final = "kueue.x-k8s.io/retriable-in-group"

#: The finalizer Kueue keeps on a ClusterQueue while Workloads hold quota in it, and on a
#: ResourceFlavor or AdmissionCheck while a ClusterQueue names it.
RESOURCE_IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"

# Workload condition types and reasons (Kueue's names).
COND_QUOTA_RESERVED: Final = "QuotaReserved"
COND_ADMITTED: Final = "Admitted"
COND_FINISHED: Final = "Finished"
COND_EVICTED: Final = "Evicted"
COND_WAITING_FOR_REPLACEMENT_PODS: Final = "WaitingForReplacementPods"
COND_PREEMPTED: Final = "Preempted"
REASON_PENDING: Final = "Pending"
REASON_QUOTA_RESERVED: Final = "QuotaReserved"
REASON_ADMITTED: Final = "Admitted"
REASON_INADMISSIBLE: Final = "Inadmissible"
REASON_PREEMPTED: Final = "Preempted"
REASON_NO_RESERVATION: Final = "NoReservation"
COND_REQUEUED: Final = "Requeued"
COND_PODS_READY: Final = "PodsReady"
REASON_PODS_READY: Final = "PodsReady"
REASON_WAIT_FOR_START: Final = "WaitForStart"
#: ``PodsReady`` True: the pods got ready for the first time since admission (``Started``), or
#: again after losing readiness (``Recovered``); False after they were ready: ``WaitForRecovery``.
REASON_STARTED: Final = "Started"
REASON_RECOVERED: Final = "Recovered"
REASON_WAIT_FOR_RECOVERY: Final = "WaitForRecovery"
REASON_PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
REASON_BACKOFF_FINISHED: Final = "BackoffFinished"
#: A Workload's ``spec.active`` set to false (Kueue's ``WorkloadDeactivated``); its eviction's
#: reason is ``Deactivated`` or ``DeactivatedDueTo<cause>``.
REASON_DEACTIVATED: Final = "Deactivated"
#: The transient condition Kueue (0.10 and later) sets on a Workload to deactivate, with the cause
#: as its reason; removed once the Workload is deactivated and evicted.
COND_DEACTIVATION_TARGET: Final = "DeactivationTarget"
#: The cause of a deactivation after ``backoffLimitCount`` PodsReady timeouts.
REASON_REQUEUING_LIMIT: Final = "RequeuingLimitExceeded"
REASON_REQUEUING_LIMIT_EXCEEDED: Final = "DeactivatedDueToRequeuingLimitExceeded"
#: Kueue's name for it before 0.10, still read in Workloads written then.
REASON_REQUEUING_LIMIT_EXCEEDED_LEGACY: Final = "InactiveWorkloadRequeuingLimitExceeded"
REASON_CLUSTER_QUEUE_STOPPED: Final = "ClusterQueueStopped"
REASON_LOCAL_QUEUE_STOPPED: Final = "LocalQueueStopped"
REASON_CLUSTER_QUEUE_RESTARTED: Final = "ClusterQueueRestarted"
REASON_LOCAL_QUEUE_RESTARTED: Final = "LocalQueueRestarted"
# ClusterQueue, LocalQueue and AdmissionCheck condition type (Kueue's name).
COND_ACTIVE: Final = "Active"

MAX_ITEMS: Final = 16
#: Kueue's bound on a resource group's covered resources, on its flavors and on a flavor's resources.
MAX_GROUP_ITEMS: Final = 64


# ---------------------------------------------------------------------------------------------
# ResourceFlavor
# ---------------------------------------------------------------------------------------------


class FlavorTaint(SpecModel):
    """A flavor's node taint: kube's Taint, its effect checked by the CRD's rule (:mod:`.kueue_rules`)."""

    key: str
    value: str | None = None
    effect: str
    time_added: Timestamp | None = None


#: A flavor's toleration: kube's Toleration, checked by the CRD's rules (:mod:`.kueue_rules`).
FlavorToleration = CrdToleration


class ResourceFlavorSpec(SpecModel):
    node_labels: dict[str, str] | None = Field(default=None, max_length=8, json_schema_extra=MAPPED_ATOMIC)
    """Labels of the capacity this flavor stands for. At the hub they select fleet GPU classes:
    a GPU product (nvidia.com/gpu.product), a MIG profile, or cluster labels such as
    cluster.gpufed.io/tier; an admitted workload is placed only where they all match."""
    node_taints: list[FlavorTaint] | None = Field(default=None, max_length=8, json_schema_extra=LISTED_ATOMIC)
    """Taints of that capacity; a workload must tolerate them to be admitted in the flavor."""
    tolerations: list[FlavorToleration] | None = Field(
        default=None, max_length=8, json_schema_extra=LISTED_ATOMIC
    )
    """Tolerations added to the pods of a workload admitted in this flavor."""
    topology_name: TopologyReference | None = None
    """The Topology of the flavor (topology-aware scheduling; kept, not used by the hub)."""


class ResourceFlavor(SpecModel):
    """A class of capacity (Kueue's ResourceFlavor); ClusterQueues give quota per flavor."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = API_VERSION
    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)
    """The labels, taints and tolerations of the flavor."""


# ---------------------------------------------------------------------------------------------
# ClusterQueue
# ---------------------------------------------------------------------------------------------


class ResourceQuota(SpecModel):
    name: str
    """The resource, e.g. nvidia.com/gpu, cpu, memory."""
    nominal_quota: SignedQuantity
    """What the queue may use of this flavor and resource."""
    borrowing_limit: SignedQuantity | None = None
    """How much more it may borrow from its cohort's unused quota (absent: no limit). Only in a cohort."""
    lending_limit: SignedQuantity | None = None
    """How much of its unused nominal quota the cohort may borrow (absent: all of it). Only in a cohort."""


class FlavorQuotas(SpecModel):
    name: ResourceFlavorReference
    """A ResourceFlavor's name."""
    resources: list[ResourceQuota] = Field(
        min_length=1, max_length=MAX_GROUP_ITEMS, json_schema_extra=listed_by("name")
    )
    """The quota of each covered resource in this flavor."""


class ResourceGroup(SpecModel):
    covered_resources: list[str] = Field(
        min_length=1, max_length=MAX_GROUP_ITEMS, json_schema_extra=LISTED_ATOMIC
    )
    """The resources the group's flavors give quota for; a workload gets one flavor for all of them."""
    flavors: list[FlavorQuotas] = Field(
        min_length=1, max_length=MAX_GROUP_ITEMS, json_schema_extra=listed_by("name")
    )
    """The flavors in the order admission tries them."""

    # A resource or flavor listed twice, and quotas out of the covered resources' order, are
    # Kueue's webhook's refusals (:mod:`controlplane.apis.kueue_queue_webhooks`).


StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
"""A ClusterQueue's or LocalQueue's ``stopPolicy``."""
ResourcePrefix = Annotated[str, Field(min_length=1, max_length=256)]
"""An entry of a ClusterQueue's ``excludeResourcePrefixes``."""


class ClusterQueueSpec(SpecModel):
    resource_groups: list[ResourceGroup] | None = Field(
        default=None, max_length=MAX_ITEMS, json_schema_extra=LISTED_ATOMIC
    )
    """Quota per flavor and resource, in groups of resources that share a flavor."""
    cohort: CohortReference | None = None
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
    admission_checks: list[AdmissionCheckReference] | None = None
    """The AdmissionChecks a workload must pass, besides quota, to be admitted (every flavor)."""
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    """The AdmissionChecks a workload must pass, besides quota, per flavor it is given."""
    stop_policy: StopPolicy | None = Field(default=None, json_schema_extra=served_default("None"))
    """Hold: admit nothing new; HoldAndDrain: also evict the admitted workloads."""
    fair_sharing: FairSharing | None = None
    """Fair-sharing weight among the cohort's queues and cohorts."""
    admission_scope: AdmissionScope | None = None
    """Admission fair sharing: whether the queue orders its workloads by their LocalQueue's usage."""
    exclude_resource_prefixes: list[ResourcePrefix] | None = Field(
        default=None, max_length=MAX_GROUP_ITEMS, json_schema_extra=LISTED_AS_SET
    )
    """Resources (a name, or a prefix before a slash) Kueue leaves out of this queue's quota (kept; the hub does not act on it)."""


class ClusterQueueStatus(WireModel):
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_BY_TYPE)
    """The queue's conditions."""
    flavors_reservation: list[FlavorUsage] | None = Field(
        default=None, max_length=MAX_USAGE_ITEMS, json_schema_extra=listed_by("name")
    )
    """Quota reserved per flavor and resource, and how much of it is borrowed."""
    flavors_usage: list[FlavorUsage] | None = Field(
        default=None, max_length=MAX_USAGE_ITEMS, json_schema_extra=listed_by("name")
    )
    """Quota used by admitted workloads per flavor and resource."""
    pending_workloads: int | None = None
    """Workloads waiting for quota."""
    reserving_workloads: int | None = None
    """Workloads holding quota."""
    admitted_workloads: int | None = None
    """Admitted workloads that have not finished."""
    fair_sharing: FairSharingStatus | None = None
    """The queue's weighted share (with --kueue-fair-sharing)."""
    pending_workloads_status: PendingWorkloadsStatus | None = None
    """Deprecated by Kueue (not written since its 0.14; kept as written)."""


class ClusterQueue(SpecModel):
    """A pool of quota (Kueue's ClusterQueue); LocalQueues of namespaces point at it."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = API_VERSION
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    """Quotas, cohort and policies."""
    status: ClusterQueueStatus | None = None
    """Usage and workload counts."""


# ---------------------------------------------------------------------------------------------
# LocalQueue
# ---------------------------------------------------------------------------------------------


class LocalQueueSpec(SpecModel):
    cluster_queue: ClusterQueueReference | None = None
    """The ClusterQueue whose quota the namespace's workloads in this queue use (immutable)."""
    stop_policy: StopPolicy | None = Field(default=None, json_schema_extra=served_default("None"))
    """Hold: admit nothing new from this queue; HoldAndDrain: also evict its admitted workloads."""
    fair_sharing: FairSharing | None = None
    """The LocalQueue's weight in admission fair sharing: its usage is divided by it (default 1)."""


class LocalQueueStatusFields(WireModel):
    """A LocalQueue's status, less the fields whose names or presence differ between v1beta1 and v1beta2."""

    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_BY_TYPE)
    """The queue's conditions."""
    pending_workloads: int | None = None
    """Workloads of the queue waiting for quota."""
    reserving_workloads: int | None = None
    """Workloads of the queue holding quota."""
    admitted_workloads: int | None = None
    """Admitted workloads of the queue that have not finished."""
    flavors_reservation: list[LocalQueueFlavorUsage] | None = Field(
        default=None, max_length=MAX_LOCAL_QUEUE_USAGE_ITEMS, json_schema_extra=listed_by("name")
    )
    """Quota reserved by the queue's workloads per flavor: every flavor and resource of its ClusterQueue."""


class LocalQueueStatus(LocalQueueStatusFields):
    flavor_usage: list[LocalQueueFlavorUsage] | None = Field(
        default=None, max_length=MAX_LOCAL_QUEUE_USAGE_ITEMS, json_schema_extra=listed_by("name")
    )
    """Quota used by the queue's admitted workloads per flavor: every flavor and resource of its ClusterQueue."""
    flavors: list[LocalQueueFlavorStatus] | None = Field(
        default=None, max_length=MAX_LOCAL_QUEUE_USAGE_ITEMS, json_schema_extra=listed_by("name")
    )
    """The flavors of the queue's ClusterQueue (not written by the hub yet)."""
    fair_sharing: FairSharingStatus | None = None
    """The queue's admission fair sharing state: its consumed resources and when they were sampled."""


class LocalQueue(SpecModel):
    """A namespace's queue (Kueue's LocalQueue); jobs name it in the label kueue.x-k8s.io/queue-name."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = API_VERSION
    kind: Literal["LocalQueue"] = "LocalQueue"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)
    """The ClusterQueue behind the queue."""
    status: LocalQueueStatus | None = None
    """Workload counts and usage."""


# ---------------------------------------------------------------------------------------------
# WorkloadPriorityClass
# ---------------------------------------------------------------------------------------------


class WorkloadPriorityClass(SpecModel):
    """A priority for queued workloads (Kueue's WorkloadPriorityClass), named by the label
    kueue.x-k8s.io/priority-class; higher values are admitted first."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = API_VERSION
    kind: Literal["WorkloadPriorityClass"] = "WorkloadPriorityClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: int = Field(ge=-(2**31), le=2**31 - 1)
    """The priority."""
    description: str | None = None
    """What the priority is for."""


# ---------------------------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------------------------


#: A pod set's name in a Workload's spec: a DNS label.
POD_SET_NAME: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class PodSet(SpecModel):
    name: str = Field(default="main", max_length=63, pattern=POD_SET_NAME, json_schema_extra=SERVED_DEFAULT)
    """The pod set's name (a role of the job, e.g. main, worker)."""
    template: dict[str, Any] = Field(json_schema_extra=published_as("PodTemplateSpec"))
    """The pod template: its containers' requests are what the pod set asks of the quota."""
    count: int = Field(ge=0, json_schema_extra=served_default(1))
    """How many pods (the kind's defaulting stores 1)."""
    min_count: int | None = Field(default=None, ge=1)
    """Partial admission: the fewest pods the job can run with when its whole count does not fit."""
    topology_request: dict[str, Any] | None = None
    """Topology-aware scheduling request (served; not used)."""


class WorkloadSpec(SpecModel):
    pod_sets: list[PodSet] = Field(min_length=1, max_length=8, json_schema_extra=listed_by("name"))
    """The pods the workload needs, per role."""
    queue_name: LocalQueueName | None = None
    """The LocalQueue (in the workload's namespace) the workload waits in."""
    priority_class_name: LocalQueueName | None = None
    """The WorkloadPriorityClass (or PriorityClass) giving the priority."""
    priority: int | None = None
    """The priority: higher first."""
    priority_class_source: (
        Literal["kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""] | None
    ) = Field(default=None, json_schema_extra=served_default(""))
    """Where priorityClassName comes from."""
    active: bool | None = Field(default=None, json_schema_extra=served_default(True))
    """False: the workload is deactivated (evicted and not admitted again)."""
    maximum_execution_time_seconds: int | None = Field(default=None, ge=1)
    """Served; not enforced by the hub."""

    # More than one pod set with a minCount is Kueue's webhook's refusal
    # (:mod:`controlplane.apis.kueue_workload_webhook`); a repeated name is the list-type check's.


class WorkloadStatusFields(WireModel):
    """A Workload's status, less the field whose name differs between v1beta1 and v1beta2."""

    admission: Admission | None = None
    """Where the workload holds quota, and in which flavors."""
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_BY_TYPE)
    """QuotaReserved, Admitted, Finished, Evicted ... as Kueue sets them."""
    requeue_state: RequeueState | None = None
    """How often the workload was requeued after a PodsReady timeout (count) and when it may be
    admitted again (requeueAt)."""
    reclaimable_pods: list[ReclaimablePod] | None = Field(
        default=None, max_length=8, json_schema_extra=listed_by("name")
    )
    """Pods whose quota may be released early (not used by the hub)."""
    admission_checks: list[AdmissionCheckState] | None = Field(
        default=None, max_length=8, json_schema_extra=listed_by("name")
    )
    """The state of each admission check of its ClusterQueue, set by the check's controller;
    the Workload is Admitted once all are Ready."""
    resource_requests: list[PodSetRequest] | None = Field(
        default=None, max_length=8, json_schema_extra=listed_by("name")
    )
    """Total requests per pod set (not written by the hub)."""
    scheduling_stats: SchedulingStats | None = None
    """Kueue's eviction counts per reason (kept as written; the hub does not write it)."""
    nominated_cluster_names: list[str] | None = Field(
        default=None, max_length=10, json_schema_extra=LISTED_ATOMIC
    )
    """MultiKueue: the worker clusters nominated (kept as written; the hub does not write it)."""
    cluster_name: str | None = Field(default=None, max_length=256)
    """MultiKueue: the worker cluster the workload runs in (kept as written; the hub does not write it)."""
    unhealthy_nodes: list[UnhealthyNode] | None = Field(
        default=None, max_length=8, json_schema_extra=listed_by("name")
    )
    """Failed nodes of topology-aware scheduling (kept as written; the hub does not write it)."""


class WorkloadStatus(WorkloadStatusFields):
    accumulated_past_exexcution_time_seconds: int | None = None
    """Seconds admitted in earlier admissions (Kueue's v1beta1 name, so spelt; kept as written)."""


class Workload(SpecModel):
    """One job's claim on quota (Kueue's Workload); the hub creates one per queued workload."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = API_VERSION
    kind: Literal["Workload"] = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec
    """The pods needed, the queue and the priority."""
    status: WorkloadStatus | None = None
    """Admission and conditions."""


# ---------------------------------------------------------------------------------------------
# AdmissionCheck
# ---------------------------------------------------------------------------------------------


class AdmissionCheckParametersReference(SpecModel):
    api_group: str = Field(max_length=253, pattern=DNS_SUBDOMAIN)
    """The group of the object holding the check's parameters."""
    kind: str = Field(max_length=63, pattern=r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$")
    """Its kind."""
    name: str = Field(max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Its name."""


class AdmissionCheckSpecFields(SpecModel):
    """An AdmissionCheck's spec at v1beta2 (v1beta1's less ``retryDelayMinutes``)."""

    controller_name: str
    """The controller that decides the check (immutable)."""
    parameters: AdmissionCheckParametersReference | None = None
    """An object with the check's parameters, read by its controller."""


class AdmissionCheckSpec(AdmissionCheckSpecFields):
    retry_delay_minutes: int | None = Field(default=None, json_schema_extra=served_default(15))
    """Deprecated by Kueue (default 15; not used; gone from v1beta2)."""


class AdmissionCheckStatus(WireModel):
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_BY_TYPE)
    """Active: set by the check's controller when it is ready to decide workloads' checks."""


class AdmissionCheck(SpecModel):
    """A check a workload must pass, besides quota, to be admitted (Kueue's AdmissionCheck); a
    ClusterQueue names its checks, and the check's controller sets each Workload's state of it."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = API_VERSION
    kind: Literal["AdmissionCheck"] = "AdmissionCheck"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: AdmissionCheckSpec
    """The controller and its parameters."""
    status: AdmissionCheckStatus | None = None
    """The check's conditions."""
