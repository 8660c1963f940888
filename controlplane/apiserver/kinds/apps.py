"""apps/v1 kinds beyond Deployment and StatefulSet: ReplicaSet, DaemonSet and ControllerRevision
(the history ``kubectl rollout history|undo`` reads for a StatefulSet or DaemonSet: none on the
hub, which runs no pods, as on a control plane without controllers); and core/v1's
ReplicationController, their predecessor (served so that ``kubectl apply --prune``, whose
default list names it, works).

Names, short names, categories, subresources and ``kubectl get`` columns as kube serves them
(printers.go ``replicaSetColumnDefinitions``, ``daemonSetColumnDefinitions``,
``replicationControllerColumnDefinitions``, ``controllerRevisionColumnDefinition``).
"""

from __future__ import annotations

from controlplane.apis.kube.fieldlabels import REPLICATION_CONTROLLER_FIELDS
from controlplane.apiserver import columns as col
from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import (
    AGE,
    CellGetter,
    ResourceType,
    ScaleSubresource,
    TableColumn,
    path,
)

_CONTAINERS = cells.containers_at("spec", "template", "spec", field="name")
_IMAGES = cells.containers_at("spec", "template", "spec", field="image")

def _replica_columns(*, desired: str, ready: str, selector: CellGetter) -> tuple[TableColumn, ...]:
    """The columns kube prints for a ReplicaSet and a ReplicationController (their descriptions
    and selector differ)."""
    return (
        TableColumn("Desired", path("spec.replicas", default=1), type="integer", description=desired),
        TableColumn("Current", path("status.replicas", default=0), type="integer",
                    description="Replicas is the most recently observed number of replicas."),
        TableColumn("Ready", path("status.readyReplicas", default=0), type="integer", description=ready),
        AGE,
        TableColumn("Containers", col.containers_names, priority=1),
        TableColumn("Images", col.containers_images, priority=1),
        TableColumn("Selector", selector, priority=1),
    )


REPLICASET = ResourceType(
    "apps", "v1", "ReplicaSet", "replicasets", "replicaset", namespaced=True,
    short_names=("rs",), categories=("all",), has_status=True, strategic_merge=True,
    scale=ScaleSubresource(),
    columns=_replica_columns(
        desired="Replicas is the number of desired pods.",
        ready="The number of pods targeted by this ReplicaSet with a Ready Condition.",
        selector=cells.label_selector_at("spec", "selector"),
    ),
)

REPLICATION_CONTROLLER = ResourceType(
    "", "v1", "ReplicationController", "replicationcontrollers", "replicationcontroller", namespaced=True,
    short_names=("rc",), categories=("all",), has_status=True, strategic_merge=True,
    scale=ScaleSubresource(label_set=True),
    extra_field_selectors=REPLICATION_CONTROLLER_FIELDS,
    columns=_replica_columns(
        desired="Replicas is the number of desired replicas.",
        ready="The number of ready replicas for this replication controller.",
        selector=col.selector_string("spec.selector"),
    ),
)

DAEMONSET = ResourceType(
    "apps", "v1", "DaemonSet", "daemonsets", "daemonset", namespaced=True,
    short_names=("ds",), categories=("all",), has_status=True, strategic_merge=True,
    columns=(
        TableColumn("Desired", cells.int_at("status", "desiredNumberScheduled"), type="integer",
                    description="The total number of nodes that should be running the daemon pod."),
        TableColumn("Current", cells.int_at("status", "currentNumberScheduled"), type="integer",
                    description="The number of nodes that are running at least 1 daemon pod."),
        TableColumn("Ready", cells.int_at("status", "numberReady"), type="integer",
                    description="The number of nodes that should be running the daemon pod and have a ready pod."),
        TableColumn("Up-to-date", cells.int_at("status", "updatedNumberScheduled"), type="integer",
                    description="The total number of nodes that are running updated daemon pod."),
        TableColumn("Available", cells.int_at("status", "numberAvailable"), type="integer",
                    description="The number of nodes that should be running the daemon pod and have an available pod."),
        TableColumn("Node Selector", cells.labels_at("spec", "template", "spec", "nodeSelector"),
                    description="NodeSelector is a selector which must be true for the pod to fit on a node."),
        AGE,
        TableColumn("Containers", _CONTAINERS, priority=1),
        TableColumn("Images", _IMAGES, priority=1),
        TableColumn("Selector", cells.label_selector_at("spec", "selector"), priority=1),
    ),
)

CONTROLLER_REVISION = ResourceType(
    "apps", "v1", "ControllerRevision", "controllerrevisions", "controllerrevision", namespaced=True, strategic_merge=True,
    columns=(
        TableColumn("Controller", cells.controller_of),
        TableColumn("Revision", path("revision")),
        AGE,
    ),
)
