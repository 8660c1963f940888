"""Kinds that shape what a namespace or cluster may run: PodDisruptionBudget (policy/v1),
HorizontalPodAutoscaler (autoscaling/v2, and autoscaling/v1 converted from it), LimitRange and
ResourceQuota (core/v1), StorageClass (storage.k8s.io/v1) and RuntimeClass (node.k8s.io/v1: GPU
charts ship ``nvidia``), as kube serves them (printers.go column definitions)."""

from __future__ import annotations

from dataclasses import replace

from controlplane.apis.kube import convert_autoscaling, defaults_groups
from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import AGE, CREATED_AT, ResourceType, TableColumn, VersionConversion

POD_DISRUPTION_BUDGET = ResourceType(
    "policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget", namespaced=True,
    short_names=("pdb",), has_status=True, strategic_merge=True,
    columns=(
        TableColumn("Min Available", cells.int_or_na("spec", "minAvailable"),
                    description="The minimum number of pods that must be available."),
        TableColumn("Max Unavailable", cells.int_or_na("spec", "maxUnavailable"),
                    description="The maximum number of pods that may be unavailable."),
        TableColumn("Allowed Disruptions", cells.int_at("status", "disruptionsAllowed"), type="integer",
                    description="Calculated number of pods that may be disrupted at this time."),
        AGE,
    ),
)

HORIZONTAL_POD_AUTOSCALER = ResourceType(
    "autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "horizontalpodautoscaler",
    namespaced=True, short_names=("hpa",), categories=("all",), has_status=True, strategic_merge=True,
    columns=(
        TableColumn("Reference", cells.hpa_reference, description="Reference to the scaled resource."),
        TableColumn("Targets", cells.hpa_targets, description="Current and target metric values."),
        TableColumn("MinPods", cells.int_or_unset("spec", "minReplicas"),
                    description="Lower limit for the number of pods."),
        TableColumn("MaxPods", cells.int_at("spec", "maxReplicas"), type="integer",
                    description="Upper limit for the number of pods."),
        TableColumn("Replicas", cells.int_at("status", "currentReplicas"), type="integer",
                    description="Current number of replicas of pods managed by this autoscaler."),
        AGE,
    ),
)

#: autoscaling/v1, served from the stored autoscaling/v2 objects as kube serves it: its
#: ``targetCPUUtilizationPercentage`` is v2's CPU utilization metric, the rest of v2 travels in
#: annotations (:mod:`controlplane.apis.kube.convert_autoscaling`). Its table is v2's, printed
#: from the v2 form (kube prints its internal type, whichever version is asked for).
HORIZONTAL_POD_AUTOSCALER_V1 = replace(
    HORIZONTAL_POD_AUTOSCALER,
    version="v1",
    defaults=defaults_groups.horizontal_pod_autoscaler_v1,
    conversion=VersionConversion(
        storage_version="v2",
        to_storage=convert_autoscaling.v1_to_v2,
        from_storage=convert_autoscaling.v2_to_v1,
        status_annotations=convert_autoscaling.STATUS_ANNOTATIONS,
    ),
    columns=tuple(
        replace(column, getter=cells.of_converted(convert_autoscaling.v1_to_v2, column.getter))
        if column.name == "Targets" else column
        for column in HORIZONTAL_POD_AUTOSCALER.columns
    ),
)

LIMIT_RANGE = ResourceType(
    "", "v1", "LimitRange", "limitranges", "limitrange", namespaced=True,
    short_names=("limits",), strategic_merge=True,
    columns=(CREATED_AT,),
)

RESOURCE_QUOTA = ResourceType(
    "", "v1", "ResourceQuota", "resourcequotas", "resourcequota", namespaced=True,
    short_names=("quota",), has_status=True, strategic_merge=True, returns_deleted_object=True,
    columns=(
        AGE,
        TableColumn("Request", cells.quota_usage(limits=False), description="Request represents a minimum amount."),
        TableColumn("Limit", cells.quota_usage(limits=True), description="Limits control the maximum amount."),
    ),
)

STORAGE_CLASS = ResourceType(
    "storage.k8s.io", "v1", "StorageClass", "storageclasses", "storageclass", namespaced=False,
    short_names=("sc",), strategic_merge=True, returns_deleted_object=True, name_cell=cells.storage_class_name,
    columns=(
        TableColumn("Provisioner", cells.text_at("provisioner", none=""),
                    description="Indicates the type of the provisioner."),
        TableColumn("ReclaimPolicy", cells.text_at("reclaimPolicy", none="Delete"),
                    description="Dynamically provisioned volumes' reclaim policy."),
        TableColumn("VolumeBindingMode", cells.text_at("volumeBindingMode", none="Immediate"),
                    description="How PersistentVolumeClaims should be provisioned and bound."),
        TableColumn("AllowVolumeExpansion", cells.text_at("allowVolumeExpansion", none="false"),
                    description="Whether the storage class allows volume expand."),
        AGE,
    ),
)

RUNTIME_CLASS = ResourceType(
    "node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", "runtimeclass", namespaced=False,
    strategic_merge=True,
    columns=(
        TableColumn("Handler", cells.text_at("handler", none=""),
                    description="Handler specifies the underlying runtime the CRI calls to handle pod and/or container creation."),
        AGE,
    ),
)
