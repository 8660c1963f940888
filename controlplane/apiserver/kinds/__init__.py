"""Built-in kinds served beside the core (``core``, ``coordination``), workload (``workloads``) and gpufed
(``gpufed``) ones, one module per API family.

In: nothing. Out: :func:`builtin_kind_resources` (apps ReplicaSet/DaemonSet/ControllerRevision, batch CronJob,
networking and EndpointSlice, policy, autoscaling (v2 and v1), quota, storage and RuntimeClass kinds,
resource.k8s.io's DRA kinds (DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice),
events.k8s.io's Event, the admission webhook configurations, certificates.k8s.io's
CertificateSigningRequest, flowcontrol.apiserver.k8s.io's FlowSchema and PriorityLevelConfiguration) and :func:`gpu_workload_resources`
(LeaderWorkerSet, JobSet, TrainJob, TrainingRuntime, ClusterTrainingRuntime), each with kube's defaulting and validation attached where kube has
them (``with_kube_rules``). The hub and the simulated members serve both lists; the hub alone serves
:func:`aggregator_resources` (APIService).
"""

from __future__ import annotations

from controlplane.apiserver.kinds.admin import (
    HORIZONTAL_POD_AUTOSCALER,
    HORIZONTAL_POD_AUTOSCALER_V1,
    LIMIT_RANGE,
    POD_DISRUPTION_BUDGET,
    RESOURCE_QUOTA,
    RUNTIME_CLASS,
    STORAGE_CLASS,
)
from controlplane.apiserver.kinds.admissionregistration import (
    MUTATING_WEBHOOK_CONFIGURATION,
    VALIDATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_POLICY_BINDING,
    VALIDATING_WEBHOOK_CONFIGURATION,
)
from controlplane.apiserver.kinds.apiregistration import API_SERVICE
from controlplane.apiserver.kinds.apps import (
    CONTROLLER_REVISION,
    DAEMONSET,
    REPLICASET,
    REPLICATION_CONTROLLER,
)
from controlplane.apiserver.kinds.batch import CRONJOB
from controlplane.apiserver.kinds.certificates import CERTIFICATE_SIGNING_REQUEST
from controlplane.apiserver.kinds.dra import (
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from controlplane.apiserver.kinds.events import EVENT
from controlplane.apiserver.kinds.flowcontrol import FLOW_SCHEMA, PRIORITY_LEVEL_CONFIGURATION
from controlplane.apiserver.kinds.networking import ENDPOINT_SLICE, INGRESS, INGRESS_CLASS, NETWORK_POLICY
from controlplane.apiserver.kinds.sigs import JOBSET, LEADER_WORKER_SET
from controlplane.apiserver.kinds.trainer import CLUSTER_TRAINING_RUNTIME, TRAIN_JOB, TRAINING_RUNTIME
from controlplane.apiserver.resources import ResourceType, with_kube_rules


def builtin_kind_resources() -> list[ResourceType]:
    """Kubernetes' own kinds beyond ``core_resources()`` and ``workload_resources()``."""
    return with_kube_rules([
        REPLICASET,
        REPLICATION_CONTROLLER,
        DAEMONSET,
        CONTROLLER_REVISION,
        CRONJOB,
        INGRESS,
        INGRESS_CLASS,
        NETWORK_POLICY,
        ENDPOINT_SLICE,
        POD_DISRUPTION_BUDGET,
        HORIZONTAL_POD_AUTOSCALER,
        HORIZONTAL_POD_AUTOSCALER_V1,  # after v2: the group's first version is its preferred one
        LIMIT_RANGE,
        RESOURCE_QUOTA,
        STORAGE_CLASS,
        RUNTIME_CLASS,
        DEVICE_CLASS,
        RESOURCE_CLAIM,
        RESOURCE_CLAIM_TEMPLATE,
        RESOURCE_SLICE,
        EVENT,
        VALIDATING_WEBHOOK_CONFIGURATION,
        MUTATING_WEBHOOK_CONFIGURATION,
        VALIDATING_ADMISSION_POLICY,
        VALIDATING_ADMISSION_POLICY_BINDING,
        CERTIFICATE_SIGNING_REQUEST,
        FLOW_SCHEMA,
        PRIORITY_LEVEL_CONFIGURATION,
    ])


def aggregator_resources() -> list[ResourceType]:
    """apiregistration.k8s.io's APIService: served by the hub, which aggregates extension API servers."""
    return with_kube_rules([API_SERVICE])


def gpu_workload_resources() -> list[ResourceType]:
    """LeaderWorkerSet and JobSet, the SIG kinds GPU serving and training run on, and Kubeflow
    Trainer's TrainJob with its runtimes (TrainingRuntime, ClusterTrainingRuntime)."""
    return with_kube_rules([LEADER_WORKER_SET, JOBSET, TRAIN_JOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME])


__all__ = ["REPLICASET", "aggregator_resources", "builtin_kind_resources", "gpu_workload_resources"]
