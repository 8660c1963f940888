"""The workload kinds users apply to the hub and members run: apps/v1 Deployment and StatefulSet,
batch/v1 Job, Kubeflow's training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob),
Ray's RayJob and RayCluster.
"""

from __future__ import annotations

from controlplane.apis.kube.fieldlabels import JOB_FIELDS
from controlplane.apis.kubeflow import GROUP as KUBEFLOW_GROUP
from controlplane.apis.kubeflow import TRAINING_KINDS, TrainingKind
from controlplane.apis.kubeflow_validation import (
    training_job_denial,
    training_job_update_denial,
    training_job_warnings,
)
from controlplane.apiserver import columns as col
from controlplane.apiserver.kinds import cells
from controlplane.apiserver.openapi.structural import schema_of
from controlplane.apiserver.resources import (
    AGE,
    ResourceType,
    ScaleSubresource,
    TableColumn,
    path,
    with_kube_rules,
)


def _worker_scale(training: TrainingKind) -> ScaleSubresource:
    """The scale subresource the operator's CRD declares: the Worker role's replicas, its active
    pods and the selector string the operator reports for them."""
    return ScaleSubresource(
        spec_replicas=f"spec.{training.specs_field}.{training.worker}.replicas",
        status_replicas=f"status.replicaStatuses.{training.worker}.active",
        label_selector=f"status.replicaStatuses.{training.worker}.selector",
    )


def workload_resources() -> list[ResourceType]:
    """The workload kinds users apply to the hub (and members run)."""
    cats = ("all",)
    deployment_columns = (
        TableColumn("Ready", col.ready_of("status.readyReplicas", "spec.replicas", default_total=1)),
        TableColumn("Up-to-date", path("status.updatedReplicas", default=0), type="integer"),
        TableColumn("Available", path("status.availableReplicas", default=0), type="integer"),
        AGE,
        TableColumn("Containers", col.containers_names, priority=1),
        TableColumn("Images", col.containers_images, priority=1),
        TableColumn("Selector", cells.label_selector_at("spec", "selector"), priority=1),
    )
    job_like = (TableColumn("State", col.job_state), AGE)
    return with_kube_rules([
        ResourceType(
            "apps", "v1", "Deployment", "deployments", "deployment", namespaced=True,
            short_names=("deploy",), categories=cats, has_status=True, strategic_merge=True,
            columns=deployment_columns, scale=ScaleSubresource(),
        ),
        ResourceType(
            "apps", "v1", "StatefulSet", "statefulsets", "statefulset", namespaced=True,
            short_names=("sts",), categories=cats, has_status=True, strategic_merge=True,
            scale=ScaleSubresource(),
            columns=(
                TableColumn("Ready", col.ready_of("status.readyReplicas", "spec.replicas", default_total=1)),
                AGE,
                TableColumn("Containers", col.containers_names, priority=1),
                TableColumn("Images", col.containers_images, priority=1),
            ),
        ),
        ResourceType(
            "batch", "v1", "Job", "jobs", "job", namespaced=True,
            categories=cats, has_status=True, strategic_merge=True,
            extra_field_selectors=JOB_FIELDS,
            columns=(
                TableColumn("Status", col.job_status),
                TableColumn("Completions", col.job_completions),
                TableColumn("Duration", col.job_duration),
                AGE,
                TableColumn("Containers", col.containers_names, priority=1),
                TableColumn("Images", col.containers_images, priority=1),
                TableColumn("Selector", cells.label_selector_at("spec", "selector"), priority=1),
            ),
        ),
        *(ResourceType(
            KUBEFLOW_GROUP, "v1", training.kind, training.plural, training.kind.lower(), namespaced=True,
            categories=("kubeflow-org",), has_status=True, columns=job_like,
            webhook_denial=training_job_denial(training.kind),
            webhook_update_denial=training_job_update_denial(training.kind),
            warn=training_job_warnings if training.kind == "PyTorchJob" else None,
            scale=_worker_scale(training) if training.scalable else None,
            crd_schema=schema_of(KUBEFLOW_GROUP, "v1", training.kind),
        ) for training in TRAINING_KINDS.values()),
        ResourceType(
            "ray.io", "v1", "RayJob", "rayjobs", "rayjob", namespaced=True,
            categories=cats, has_status=True,
            crd_schema=schema_of("ray.io", "v1", "RayJob"),
            columns=(
                TableColumn("Job Status", path("status.jobStatus")),
                TableColumn("Deployment Status", path("status.jobDeploymentStatus")),
                AGE,
            ),
        ),
        ResourceType(
            "ray.io", "v1", "RayCluster", "rayclusters", "raycluster", namespaced=True,
            categories=cats, has_status=True,
            crd_schema=schema_of("ray.io", "v1", "RayCluster"),
            columns=(
                TableColumn("Desired Workers", path("status.desiredWorkerReplicas", default=0), type="integer"),
                TableColumn("Available Workers", path("status.availableWorkerReplicas", default=0), type="integer"),
                TableColumn("Status", path("status.state")),
                AGE,
            ),
        ),
    ])
