"""Kueue's quota kinds, AdmissionChecks, ProvisioningRequestConfigs, Topologies and MultiKueue's configs and clusters, served by the hub with Kueue's printer columns: at ``kueue.x-k8s.io/v1beta1``
(stored) and ``v1beta2`` (converted on every read and write, :mod:`controlplane.apis.kueue_conversion`),
and the Cohort at ``v1beta1`` (stored), ``v1beta2`` and ``v1alpha1`` (whose ``spec.parent`` is
the others' ``spec.parentName``).

Validated by their models (:mod:`controlplane.apis.kueue_v1beta1`, :mod:`controlplane.apis.kueue_v1beta2`,
:mod:`controlplane.apis.kueue_v1alpha1`); the admission controller is
:mod:`controlplane.controllers.admission`. v1beta2 is listed first, so discovery prefers it, as
kube orders a CRD's versions (Kueue's CRDs serve v1beta2 and v1beta1 since Kueue 0.15).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from controlplane.apis import kueue_conversion as convert
from controlplane.apis import kueue_defaulting as defaulting
from controlplane.apis import (
    kueue_multikueue,
    kueue_provisioning,
    kueue_topology,
    kueue_v1alpha1,
    kueue_v1beta2,
)
from controlplane.apis import kueue_queue_webhooks as queue_webhooks
from controlplane.apis import kueue_rules as rules
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis import kueue_workload_webhook as workload_webhook
from controlplane.apis.kube.field import CauseType, FieldError
from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn, VersionConversion

Converter = Callable[[dict[str, Any]], dict[str, Any]]

_PENDING = TableColumn(
    "Pending Workloads", cells.int_at("status", "pendingWorkloads"), type="integer",
    description="Number of pending workloads",
)
_ADMITTED = TableColumn(
    "Admitted Workloads", cells.int_at("status", "admittedWorkloads"), type="integer",
    description="Number of admitted workloads that haven't finished yet",
)


def _v1beta2(
    rt: ResourceType, model: type[BaseModel], to_storage: Converter, from_storage: Converter, **changes: Any
) -> ResourceType:
    """``rt`` (stored) served at v1beta2 too, converted by ``to_storage`` and ``from_storage``."""
    conversion = VersionConversion(storage_version=rt.version, to_storage=to_storage, from_storage=from_storage)
    return replace(
        rt, version=kueue_v1beta2.VERSION, model=model, conversion=conversion, ratchets=True, **changes
    )


def _concurrent_admission_policy(obj: dict[str, Any]) -> Any:
    """A ClusterQueue's ``concurrentAdmissionPolicy``: in the spec of its v1beta2 form, in the
    annotation of v1beta2 fields of its v1beta1 (stored) form."""
    spec = obj.get("spec")
    if isinstance(spec, dict) and spec.get("concurrentAdmissionPolicy") is not None:
        return spec["concurrentAdmissionPolicy"]
    return convert.v1beta2_fields(obj).get("concurrentAdmissionPolicy")


def _cluster_queue_errors(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """Kueue's webhook keeps ``concurrentAdmissionPolicy`` as it was created (``spec.excludeResourcePrefixes``,
    a set in Kueue's CRD, is checked as every list type of the served schema is)."""
    errors: list[FieldError] = []
    if old is not None and _concurrent_admission_policy(obj) != _concurrent_admission_policy(old):
        errors.append(FieldError(CauseType.FIELD_VALUE_INVALID, "spec.concurrentAdmissionPolicy", 'Invalid value: "object": field is immutable'))
    return errors


RESOURCE_FLAVOR = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "ResourceFlavor", "resourceflavors", "resourceflavor", namespaced=False, short_names=("flavor", "flavors", "rf"),
    model=kueue.ResourceFlavor,
    validate=rules.resource_flavor,
    validate_once_valid=queue_webhooks.resource_flavor,
    once_valid_webhook="vresourceflavor.kb.io",
)
CLUSTER_QUEUE = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "ClusterQueue", "clusterqueues", "clusterqueue", namespaced=False, short_names=("cq",), has_status=True, model=kueue.ClusterQueue,
    defaults=defaulting.cluster_queue("Borrow"),
    defaults_on_read=defaulting.cluster_queue("Borrow"),
    validate=rules.both(rules.cluster_queue("cohort"), _cluster_queue_errors),
    validate_once_valid=queue_webhooks.cluster_queue,
    once_valid_webhook="vclusterqueue.kb.io",
    columns=(
        TableColumn("Cohort", cells.text_at("spec", "cohort"), description="Cohort that this ClusterQueue belongs to"),
        TableColumn("Strategy", cells.text_at("spec", "queueingStrategy"), priority=1,
                    description="The queueing strategy used to prioritize workloads"),
        TableColumn("Weighted Share", cells.int_at("status", "fairSharing", "weightedShare"), type="integer", priority=1,
                    description="Dominant resource share divided by the fair-sharing weight (with fair sharing)"),
        _PENDING,
        _ADMITTED,
        AGE,
    ),
)
LOCAL_QUEUE = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "LocalQueue", "localqueues", "localqueue", namespaced=True, short_names=("queue", "queues", "lq"), has_status=True,
    model=kueue.LocalQueue,
    defaults=defaulting.local_queue,
    defaults_on_read=defaulting.local_queue,
    validate=rules.kept("clusterQueue"),
    columns=(
        TableColumn("ClusterQueue", cells.text_at("spec", "clusterQueue"), description="Backing ClusterQueue"),
        _PENDING,
        _ADMITTED,
        AGE,
    ),
)
COHORT = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "Cohort", "cohorts", "cohort", namespaced=False, has_status=True,
    model=kueue_v1beta2.CohortV1beta1,
    defaults=defaulting.cohort,
    defaults_on_read=defaulting.cohort,
    validate=rules.cohort,
    validate_once_valid=queue_webhooks.cohort,
    once_valid_webhook="vcohort.kb.io",
    columns=(
        TableColumn("Parent", cells.text_at("spec", "parentName"), description="The parent Cohort"),
        TableColumn("Weight", cells.text_at("spec", "fairSharing", "weight"), priority=1, description="Fair-sharing weight"),
        TableColumn("Weighted Share", cells.int_at("status", "fairSharing", "weightedShare"), type="integer", priority=1,
                    description="Dominant resource share divided by the weight (with fair sharing)"),
        AGE,
    ),
)
WORKLOAD_PRIORITY_CLASS = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "WorkloadPriorityClass", "workloadpriorityclasses", "workloadpriorityclass", namespaced=False, model=kueue.WorkloadPriorityClass,
    columns=(TableColumn("Value", cells.int_at("value"), type="integer", description="The priority"), AGE),
)
WORKLOAD = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "Workload", "workloads", "workload", namespaced=True, short_names=("wl",), has_status=True, model=kueue.Workload,
    defaults=defaulting.workload(v1beta1=True),
    defaults_on_read=defaulting.workload(v1beta1=True),
    validate=rules.workload,
    validate_status=rules.workload,
    validate_once_valid=workload_webhook.workload,
    once_valid_webhook="vworkload.kb.io",
    once_valid_on_status=True,
    columns=(
        TableColumn("Queue", cells.text_at("spec", "queueName"), description="Name of the queue this workload was submitted to"),
        TableColumn("Reserved in", cells.text_at("status", "admission", "clusterQueue"),
                    description="Name of the ClusterQueue where the workload is reserving quota"),
        TableColumn("Admitted", cells.condition_at(kueue.COND_ADMITTED), description="Admission status"),
        TableColumn("Finished", cells.condition_at(kueue.COND_FINISHED), description="Workload finished"),
        AGE,
    ),
)


ADMISSION_CHECK = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "AdmissionCheck", "admissionchecks", "admissioncheck", namespaced=False, has_status=True,
    model=kueue.AdmissionCheck,
    defaults=defaulting.admission_check,
    defaults_on_read=defaulting.admission_check,
    validate=rules.kept("controllerName"),
)

PROVISIONING_REQUEST_CONFIG = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "ProvisioningRequestConfig", "provisioningrequestconfigs", "provisioningrequestconfig",
    namespaced=False, model=kueue_provisioning.ProvisioningRequestConfig,
    defaults=kueue_provisioning.defaults,
    defaults_on_read=kueue_provisioning.defaults,
)

TOPOLOGY = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "Topology", "topologies", "topology", namespaced=False,
    model=kueue_topology.Topology,
    validate=kueue_topology.levels_errors,
)

MULTIKUEUE_CONFIG = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "MultiKueueConfig", "multikueueconfigs", "multikueueconfig", namespaced=False,
    model=kueue_multikueue.MultiKueueConfig,
)
MULTIKUEUE_CLUSTER = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "MultiKueueCluster", "multikueueclusters", "multikueuecluster", namespaced=False,
    has_status=True, model=kueue_multikueue.MultiKueueCluster,
    defaults=kueue_multikueue.cluster_defaults,
    defaults_on_read=kueue_multikueue.cluster_defaults,
    columns=(
        TableColumn("Connected", cells.condition_at(kueue_multikueue.COND_ACTIVE), description="MultiKueueCluster is connected"),
        AGE,
    ),
)


_TO_V1BETA2 = convert.to_version(kueue_v1beta2.API_VERSION)

RESOURCE_FLAVOR_V1BETA2 = _v1beta2(
    RESOURCE_FLAVOR, kueue_v1beta2.ResourceFlavor, convert.to_version(kueue.API_VERSION), _TO_V1BETA2
)
CLUSTER_QUEUE_V1BETA2 = _v1beta2(
    CLUSTER_QUEUE, kueue_v1beta2.ClusterQueue, convert.cluster_queue_to_v1beta1, convert.cluster_queue_to_v1beta2,
    defaults=defaulting.cluster_queue("MayStopSearch"),
    validate=rules.both(rules.cluster_queue("cohortName"), _cluster_queue_errors),
    columns=tuple(
        replace(column, getter=cells.text_at("spec", "cohortName")) if column.name == "Cohort" else column
        for column in CLUSTER_QUEUE.columns
    ),
)
LOCAL_QUEUE_V1BETA2 = _v1beta2(
    LOCAL_QUEUE, kueue_v1beta2.LocalQueue, convert.local_queue_to_v1beta1, convert.local_queue_to_v1beta2
)
WORKLOAD_PRIORITY_CLASS_V1BETA2 = _v1beta2(
    WORKLOAD_PRIORITY_CLASS, kueue_v1beta2.WorkloadPriorityClass, convert.to_version(kueue.API_VERSION), _TO_V1BETA2
)
WORKLOAD_V1BETA2 = _v1beta2(
    WORKLOAD, kueue_v1beta2.Workload, convert.workload_to_v1beta1, convert.workload_to_v1beta2,
    defaults=defaulting.workload(v1beta1=False),
    validate=rules.workload_v1beta2,
    validate_status=rules.workload_v1beta2,
)
ADMISSION_CHECK_V1BETA2 = _v1beta2(
    ADMISSION_CHECK, kueue_v1beta2.AdmissionCheck, convert.to_version(kueue.API_VERSION), convert.admission_check_to_v1beta2,
    defaults=None,  # v1beta2 has no retryDelayMinutes to default
)
PROVISIONING_REQUEST_CONFIG_V1BETA2 = _v1beta2(
    PROVISIONING_REQUEST_CONFIG, kueue_provisioning.ProvisioningRequestConfigV1beta2,
    convert.to_version(kueue.API_VERSION), _TO_V1BETA2,
)
TOPOLOGY_V1BETA2 = _v1beta2(
    TOPOLOGY, kueue_topology.TopologyV1beta2, convert.to_version(kueue.API_VERSION), _TO_V1BETA2,
)
TOPOLOGY_V1ALPHA1 = replace(
    _v1beta2(TOPOLOGY, kueue_topology.TopologyV1alpha1, convert.to_version(kueue.API_VERSION),
             convert.to_version(kueue_v1alpha1.API_VERSION)),
    version=kueue_v1alpha1.VERSION,
)
MULTIKUEUE_CONFIG_V1BETA2 = _v1beta2(
    MULTIKUEUE_CONFIG, kueue_multikueue.MultiKueueConfigV1beta2, convert.to_version(kueue.API_VERSION), _TO_V1BETA2,
)
MULTIKUEUE_CLUSTER_V1BETA2 = _v1beta2(
    MULTIKUEUE_CLUSTER, kueue_multikueue.MultiKueueClusterV1beta2,
    kueue_multikueue.cluster_to_v1beta1, kueue_multikueue.cluster_to_v1beta2,
    validate=kueue_multikueue.cluster_source_errors,
)
COHORT_V1BETA2 = _v1beta2(COHORT, kueue_v1beta2.Cohort, convert.to_version(kueue.API_VERSION), _TO_V1BETA2)
COHORT_V1ALPHA1 = replace(
    _v1beta2(COHORT, kueue_v1alpha1.Cohort, convert.cohort_v1alpha1_to_v1beta1, convert.cohort_to_v1alpha1),
    version=kueue_v1alpha1.VERSION,
)


def kueue_resources() -> list[ResourceType]:
    """The kinds of ``kueue.x-k8s.io`` the hub serves: v1beta2 first (the group's preferred
    version), then v1beta1, then v1alpha1."""
    return [
        RESOURCE_FLAVOR_V1BETA2, CLUSTER_QUEUE_V1BETA2, LOCAL_QUEUE_V1BETA2, WORKLOAD_PRIORITY_CLASS_V1BETA2,
        WORKLOAD_V1BETA2, COHORT_V1BETA2, ADMISSION_CHECK_V1BETA2, PROVISIONING_REQUEST_CONFIG_V1BETA2, TOPOLOGY_V1BETA2,
        MULTIKUEUE_CONFIG_V1BETA2, MULTIKUEUE_CLUSTER_V1BETA2,
        RESOURCE_FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE, WORKLOAD_PRIORITY_CLASS, WORKLOAD, COHORT, ADMISSION_CHECK,
        PROVISIONING_REQUEST_CONFIG, TOPOLOGY, MULTIKUEUE_CONFIG, MULTIKUEUE_CLUSTER, COHORT_V1ALPHA1, TOPOLOGY_V1ALPHA1,
    ]
