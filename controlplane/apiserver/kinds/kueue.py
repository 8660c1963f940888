"""Kueue's ``kueue.x-k8s.io/v1beta1`` quota kinds and its ``v1alpha1`` Cohort, served by the hub
with Kueue's printer columns.

Validated by their models (:mod:`controlplane.apis.kueue_v1beta1`,
:mod:`controlplane.apis.kueue_v1alpha1`); the admission controller is
:mod:`controlplane.controllers.admission`.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis import kueue_v1alpha1
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn

_PENDING = TableColumn(
    "Pending Workloads", cells.int_at("status", "pendingWorkloads"), type="integer",
    description="Number of pending workloads",
)
_ADMITTED = TableColumn(
    "Admitted Workloads", cells.int_at("status", "admittedWorkloads"), type="integer",
    description="Number of admitted workloads that haven't finished yet",
)


def _cluster_queue_defaults(obj: dict[str, Any]) -> None:
    """Kueue's defaults of a ClusterQueue's ``flavorFungibility`` (its CRD defaults the field to
    {} and then each policy): borrow in a flavor that fits by borrowing, but try the next flavor
    before preempting."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    fungibility = spec.setdefault("flavorFungibility", {})
    if isinstance(fungibility, dict):
        fungibility.setdefault("whenCanBorrow", "Borrow")
        fungibility.setdefault("whenCanPreempt", "TryNextFlavor")


RESOURCE_FLAVOR = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "ResourceFlavor", "resourceflavors", "resourceflavor", namespaced=False, short_names=("flavor", "flavors", "rf"),
    model=kueue.ResourceFlavor,
)
CLUSTER_QUEUE = ResourceType(
    kueue.API_GROUP, kueue.VERSION, "ClusterQueue", "clusterqueues", "clusterqueue", namespaced=False, short_names=("cq",), has_status=True, model=kueue.ClusterQueue,
    defaults=_cluster_queue_defaults,
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
    columns=(
        TableColumn("ClusterQueue", cells.text_at("spec", "clusterQueue"), description="Backing ClusterQueue"),
        _PENDING,
        _ADMITTED,
        AGE,
    ),
)
COHORT = ResourceType(
    kueue.API_GROUP, kueue_v1alpha1.VERSION, "Cohort", "cohorts", "cohort", namespaced=False, has_status=True,
    model=kueue_v1alpha1.Cohort,
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
    columns=(
        TableColumn("Queue", cells.text_at("spec", "queueName"), description="Name of the queue this workload was submitted to"),
        TableColumn("Reserved in", cells.text_at("status", "admission", "clusterQueue"),
                    description="Name of the ClusterQueue where the workload is reserving quota"),
        TableColumn("Admitted", cells.condition_at(kueue.COND_ADMITTED), description="Admission status"),
        TableColumn("Finished", cells.condition_at(kueue.COND_FINISHED), description="Workload finished"),
        AGE,
    ),
)


def kueue_resources() -> list[ResourceType]:
    """The kinds of ``kueue.x-k8s.io`` the hub serves."""
    return [RESOURCE_FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE, WORKLOAD_PRIORITY_CLASS, WORKLOAD, COHORT]
