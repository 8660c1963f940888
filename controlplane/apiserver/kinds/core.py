"""core/v1: the plain Kubernetes objects the hub stores and the simulated members serve
(Namespace, ConfigMap, Secret, Service, Pod, Node, Event, ServiceAccount…, and scheduling.k8s.io's
PriorityClass), with kube's ``kubectl get`` columns and field selectors; :data:`EVENT_COLUMNS` is
the Event table events.k8s.io's Event prints too.
"""

from __future__ import annotations

from controlplane.apis.kube import configdata, namespaces, services, validate_groups
from controlplane.apis.kube.fieldlabels import (
    NAMESPACE_FIELDS,
    NODE_FIELDS,
    POD_FIELDS,
    SECRET_FIELDS,
    SERVICE_FIELDS,
    field_path,
)
from controlplane.apiserver import columns as col
from controlplane.apiserver import podcolumns
from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import (
    AGE,
    ALL_VERBS,
    NameRule,
    ResourceType,
    TableColumn,
    path,
    with_kube_rules,
)

_NODE_INFO = ("status", "nodeInfo")

#: kube's table of an Event (printed from core v1's fields, whichever version is asked for).
EVENT_COLUMNS: tuple[TableColumn, ...] = (
    TableColumn("Last Seen", col.event_last_seen),
    TableColumn("Type", path("type")),
    TableColumn("Reason", path("reason")),
    TableColumn("Object", col.event_object),
    TableColumn("Subobject", path("involvedObject.fieldPath"), priority=1),
    TableColumn("Source", col.event_source, priority=1),
    TableColumn("Message", col.event_message),
    TableColumn("First Seen", col.event_first_seen, priority=1),
    TableColumn("Count", col.event_count, priority=1),
)


def core_resources() -> list[ResourceType]:
    """core/v1: the plain Kubernetes objects the hub stores and the simulator serves."""
    return with_kube_rules([
        ResourceType(
            "", "v1", "Namespace", "namespaces", "namespace", namespaced=False,
            short_names=("ns",), has_status=True, strategic_merge=True, name_rule=NameRule.LABEL,
            columns=(TableColumn("Status", path("status.phase"), description="The phase of the namespace."), AGE),
            extra_field_selectors=NAMESPACE_FIELDS, prepare_create=namespaces.prepare_create,
            prepare_update=namespaces.keep_spec_finalizers,
            finalize=namespaces.validate_finalize,
            # kube's namespace storage (pkg/registry/core/namespace/storage) has no DeleteCollection.
            verbs=tuple(verb for verb in ALL_VERBS if verb != "deletecollection"),
        ),
        ResourceType(
            "", "v1", "ConfigMap", "configmaps", "configmap", namespaced=True,
            short_names=("cm",), strategic_merge=True,
            columns=(TableColumn("Data", col.data_count), AGE),
            prepare=configdata.prepare_config_map,
        ),
        ResourceType(
            "", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", namespaced=True,
            short_names=("pvc",), has_status=True, strategic_merge=True, returns_deleted_object=True,
            columns=(
                TableColumn("Status", col.storage_phase),
                TableColumn("Volume", path("spec.volumeName")),
                TableColumn("Capacity", col.claim_capacity),
                TableColumn("Access Modes", col.claim_access_modes),
                TableColumn("StorageClass", col.persistent_volume_class),
                TableColumn("VolumeAttributesClass", path("spec.volumeAttributesClassName", default="<unset>")),
                AGE,
                TableColumn("VolumeMode", path("spec.volumeMode", default="<unset>"), priority=1),
            ),
        ),
        # kubectl's default prune list (`kubectl apply --prune`) names Endpoints, PersistentVolume
        # and ReplicationController: it cannot prune on a server that does not serve them.
        ResourceType(
            "", "v1", "Endpoints", "endpoints", "endpoints", namespaced=True,
            short_names=("ep",), strategic_merge=True,
            columns=(TableColumn("Endpoints", col.endpoints_addresses, description="Endpoints of the service."), AGE),
        ),
        ResourceType(
            "", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", namespaced=False,
            short_names=("pv",), has_status=True, strategic_merge=True, returns_deleted_object=True,
            columns=(
                TableColumn("Capacity", path("spec.capacity.storage")),
                TableColumn("Access Modes", col.volume_access_modes),
                TableColumn("Reclaim Policy", path("spec.persistentVolumeReclaimPolicy")),
                TableColumn("Status", col.storage_phase),
                TableColumn("Claim", col.persistent_volume_claim),
                TableColumn("StorageClass", col.persistent_volume_class),
                TableColumn("VolumeAttributesClass", path("spec.volumeAttributesClassName", default="<unset>")),
                TableColumn("Reason", path("status.reason")),
                AGE,
                TableColumn("VolumeMode", path("spec.volumeMode", default="Filesystem"), priority=1),
            ),
        ),
        ResourceType(
            "", "v1", "Secret", "secrets", "secret", namespaced=True, strategic_merge=True,
            columns=(TableColumn("Type", path("type")), TableColumn("Data", col.data_count), AGE),
            extra_field_selectors=SECRET_FIELDS,
            prepare=configdata.prepare_secret,
        ),
        ResourceType(
            "", "v1", "Service", "services", "service", namespaced=True,
            short_names=("svc",), categories=("all",), has_status=True, strategic_merge=True, returns_deleted_object=True,
            name_rule=NameRule.LABEL_1035,
            prepare=services.normalize_cluster_ips, prepare_update=services.prepare_update,
            extra_field_selectors=SERVICE_FIELDS,
            columns=(
                TableColumn("Type", path("spec.type")),
                TableColumn("Cluster-IP", col.service_cluster_ip),
                TableColumn("External-IP", col.service_external_ips),
                TableColumn("Port(s)", col.service_ports),
                AGE,
                TableColumn("Selector", col.selector_string("spec.selector"), priority=1),
            ),
        ),
        ResourceType(
            "", "v1", "Event", "events", "event", namespaced=True,
            short_names=("ev",), strategic_merge=True, name_first=False,
            # kube's Event table: NAME is a wide column at the end.
            columns=EVENT_COLUMNS,
            extra_field_selectors={
                name: field_path(name)
                for name in (
                    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
                )
            },
        ),
        ResourceType(
            "", "v1", "Node", "nodes", "node", namespaced=False,
            short_names=("no",), has_status=True, strategic_merge=True,
            columns=(
                TableColumn("Status", col.node_status),
                TableColumn("Roles", col.node_roles),
                AGE,
                TableColumn("Version", path("status.nodeInfo.kubeletVersion")),
                TableColumn("Internal-IP", col.node_address("InternalIP"), priority=1),
                TableColumn("External-IP", col.node_address("ExternalIP"), priority=1),
                TableColumn("OS-Image", cells.text_at(*_NODE_INFO, "osImage", none="<unknown>"), priority=1),
                TableColumn("Kernel-Version", cells.text_at(*_NODE_INFO, "kernelVersion", none="<unknown>"), priority=1),
                TableColumn(
                    "Container-Runtime", cells.text_at(*_NODE_INFO, "containerRuntimeVersion", none="<unknown>"),
                    priority=1,
                ),
                # The hub's own, after kube's: what a GPU node offers.
                TableColumn("GPU", col.node_gpus, priority=1, description="Allocatable GPUs and MIG slices."),
            ),
            extra_field_selectors=NODE_FIELDS,
        ),
        ResourceType(
            "", "v1", "Pod", "pods", "pod", namespaced=True,
            short_names=("po",), categories=("all",), has_status=True, strategic_merge=True, returns_deleted_object=True,
            columns=(
                TableColumn("Ready", podcolumns.pod_ready),
                TableColumn("Status", podcolumns.pod_status),
                TableColumn("Restarts", podcolumns.pod_restarts, type="string"),
                AGE,
                TableColumn("IP", path("status.podIP", default="<none>"), priority=1),
                TableColumn("Node", path("spec.nodeName", default="<none>"), priority=1),
                TableColumn("Nominated Node", path("status.nominatedNodeName", default="<none>"), priority=1),
                TableColumn("Readiness Gates", podcolumns.pod_readiness_gates, priority=1),
            ),
            extra_field_selectors=POD_FIELDS,
        ),
        ResourceType(
            "", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", namespaced=True,
            short_names=("sa",), strategic_merge=True, returns_deleted_object=True,
            columns=(TableColumn("Secrets", col.secrets_count), AGE),
        ),
        # Not core/v1, but as plain: the hub reads it for schedulePriority (detector).
        ResourceType(
            "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", namespaced=False,
            short_names=("pc",), strategic_merge=True, admit_against_stored=validate_groups.second_default_priority_class,
            columns=(
                TableColumn("Value", path("value"), type="integer"),
                TableColumn("Global-Default", path("globalDefault", default=False), type="boolean"),
                AGE,
                TableColumn("PreemptionPolicy", path("preemptionPolicy", default="PreemptLowerPriority")),
            ),
        ),
    ])
