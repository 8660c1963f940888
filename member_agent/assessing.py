"""Health of one member object, by its kind's status conventions (the Work status' ``health``).

In: a member object as read (or as a watch cache keeps it). Out: Healthy, Unhealthy or Unknown.
Kinds with a status convention are judged by it (a Deployment's available replicas, a DaemonSet's
updated and available daemon pods, a LoadBalancer Service's ingress points, a Job's Failed
condition...); a kind with none is healthy once applied, as Karmada's default interpreter says.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import as_int
from controlplane.apis.work_v1alpha1 import Health

#: Kinds whose health does not depend on their status (watched all the same: the watch is
#: what spares a status pass from fetching them).
ALWAYS_HEALTHY_KINDS = frozenset(
    {
        "Namespace",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
        "CustomResourceDefinition",
        "NetworkPolicy",
        "PersistentVolumeClaim",
        "CronJob",
        "IngressClass",
        "LimitRange",
        "ResourceQuota",
        "StorageClass",
        "HorizontalPodAutoscaler",
    }
)
#: Kinds whose health comes from status conditions that appear some time after the apply
#: (training operators): without conditions yet, their health is not known.
_CONDITION_HEALTH_KINDS = frozenset({"PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob"})

def _conditions(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(cond.get("type")): str(cond.get("status"))
        for cond in (obj.get("status") or {}).get("conditions") or []
        if isinstance(cond, Mapping)
    }


def assess_health(obj: Mapping[str, Any] | None) -> Health:
    """Health of a member object by its kind's status conventions."""
    if obj is None:
        return Health.UNKNOWN
    kind = str(obj.get("kind") or "")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    metadata = obj.get("metadata") or {}
    conditions = _conditions(obj)
    if kind in ALWAYS_HEALTHY_KINDS:
        return Health.HEALTHY
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        replicas = as_int(spec.get("replicas"), 1)
        generation = as_int(metadata.get("generation"), 0)
        if "observedGeneration" in status and as_int(status.get("observedGeneration")) < generation:
            return Health.UNKNOWN
        if replicas == 0:
            return Health.HEALTHY
        ready_field = "availableReplicas" if kind == "Deployment" else "readyReplicas"
        if (
            as_int(status.get(ready_field)) >= replicas
            and as_int(status.get("updatedReplicas"), replicas) >= replicas
        ):
            return Health.HEALTHY
        return Health.UNHEALTHY
    if kind == "DaemonSet":
        if not status or as_int(status.get("observedGeneration"), 0) < as_int(metadata.get("generation"), 0):
            return Health.UNKNOWN
        desired = as_int(status.get("desiredNumberScheduled"))
        updated = as_int(status.get("updatedNumberScheduled"))
        healthy = updated == desired and as_int(status.get("numberAvailable")) >= updated
        return Health.HEALTHY if healthy else Health.UNHEALTHY
    if kind in ("Service", "Ingress"):
        # Karmada's rule: a load balancer is healthy once it has an ingress point.
        if kind == "Service" and spec.get("type") != "LoadBalancer":
            return Health.HEALTHY
        return Health.HEALTHY if (status.get("loadBalancer") or {}).get("ingress") else Health.UNHEALTHY
    if kind == "PodDisruptionBudget":
        if not status:
            return Health.UNKNOWN
        healthy = as_int(status.get("currentHealthy")) >= as_int(status.get("desiredHealthy"))
        return Health.HEALTHY if healthy else Health.UNHEALTHY
    if kind == "LeaderWorkerSet":
        if not status:
            return Health.UNKNOWN
        available = conditions.get("Available")
        if available in ("True", "False"):
            return Health.HEALTHY if available == "True" else Health.UNHEALTHY
        ready = as_int(status.get("readyReplicas")) >= as_int(spec.get("replicas"), 1)
        return Health.HEALTHY if ready else Health.UNHEALTHY
    if kind == "Job":
        if conditions.get("Failed") == "True":
            return Health.UNHEALTHY
        return Health.HEALTHY
    if kind == "Pod":
        phase = status.get("phase")
        if phase == "Failed":
            return Health.UNHEALTHY
        if phase == "Succeeded" or (phase == "Running" and conditions.get("Ready") == "True"):
            return Health.HEALTHY
        return Health.UNKNOWN
    if kind == "RayJob":
        job_status = str(status.get("jobStatus") or "").upper()
        if job_status in ("FAILED", "STOPPED"):
            return Health.UNHEALTHY
        if job_status in ("RUNNING", "SUCCEEDED"):
            return Health.HEALTHY
        return Health.UNKNOWN
    if kind == "RayCluster":
        state = str(status.get("state") or "").lower()
        return {"ready": Health.HEALTHY, "failed": Health.UNHEALTHY}.get(state, Health.UNKNOWN)
    # Training operators (PyTorchJob, MPIJob, ...) and generic kinds: by conditions.
    if conditions.get("Failed") == "True":
        return Health.UNHEALTHY
    for positive in ("Succeeded", "Running", "Ready", "Available", "Complete"):
        if conditions.get(positive) == "True":
            return Health.HEALTHY
    if conditions.get("Ready") == "False" or conditions.get("Available") == "False":
        return Health.UNHEALTHY
    if not conditions and kind not in _CONDITION_HEALTH_KINDS:
        # Karmada's default interpretation: a kind with no health convention is healthy once applied.
        return Health.HEALTHY
    return Health.UNKNOWN
