"""RayJob (ray.io/v1): a RayCluster (``spec.rayClusterSpec``) created for one job; a gang.

A RayJob that targets an existing cluster (``spec.clusterSelector``) brings no pods of
its own beyond the submitter and counts 0 replicas here. Its dependencies include those of
the submitter's pod template (``spec.submitterPodTemplate``) as well as the cluster's. The status is the member's own
(a gang runs in one cluster); with several members the worst deployment status wins.
:func:`suspension_deployment_status` is KubeRay's ``jobDeploymentStatus`` for ``spec.suspend``,
which the hub sets on a RayJob it holds.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import Obj
from controlplane.interpreter.base import (
    Component,
    Dependency,
    FinishedPhase,
    GangOfRoles,
    Health,
    MemberStatuses,
    PodSetSlot,
    TemplateSlot,
    reported,
)
from controlplane.interpreter.dependencies import pod_template_dependencies, sorted_dependencies
from controlplane.interpreter.health import status_of
from controlplane.interpreter.raycluster import (
    cluster_components,
    cluster_pod_set_slots,
    cluster_template_slots,
    main_worker_requirements,
    scale_cluster_spec,
)
from controlplane.interpreter.requirements import ReplicaRequirements

FAILED_DEPLOYMENT = frozenset({"Failed", "ValidationFailed"})
#: KubeRay's terminal ``jobStatus`` values (the Ray job itself), for a status without a deployment one.
SUCCEEDED_JOB = "SUCCEEDED"
FAILED_JOB = frozenset({"FAILED", "STOPPED"})


def suspension_deployment_status(job: Mapping[str, Any]) -> str | None:
    """KubeRay's ``jobDeploymentStatus`` for a RayJob's ``spec.suspend`` while no cluster of it runs:
    ``Suspended`` while suspended (a RayJob created suspended goes there at once), ``New`` once
    resumed from it; None when there is nothing to say (finished, or neither)."""
    current = (job.get("status") or {}).get("jobDeploymentStatus")
    if current in ("Complete", *FAILED_DEPLOYMENT):
        return None
    if (job.get("spec") or {}).get("suspend") is True:
        return "Suspended"
    return "New" if current == "Suspended" else None
HEALTHY_JOB = frozenset({"RUNNING", SUCCEEDED_JOB})
# Worst first.
DEPLOYMENT_ORDER = (
    "Failed",
    "ValidationFailed",
    "Retrying",
    "Suspending",
    "Suspended",
    "Initializing",
    "",
    "Running",
    "Complete",
)


class RayJobInterpreter(GangOfRoles):
    group = "ray.io"
    kind = "RayJob"

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        return cluster_template_slots((obj.get("spec") or {}).get("rayClusterSpec"))

    def pod_set_slots(self, obj: Obj) -> list[PodSetSlot]:
        return cluster_pod_set_slots((obj.get("spec") or {}).get("rayClusterSpec"))

    def components(self, obj: Obj) -> list[Component]:
        return cluster_components((obj.get("spec") or {}).get("rayClusterSpec"))

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        return main_worker_requirements((obj.get("spec") or {}).get("rayClusterSpec"))

    def dependencies(self, obj: Obj) -> list[Dependency]:
        submitter = pod_template_dependencies((obj.get("spec") or {}).get("submitterPodTemplate"))
        return sorted_dependencies([*super().dependencies(obj), *submitter])

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        out = copy.deepcopy(obj)
        cluster_spec = (out.get("spec") or {}).get("rayClusterSpec")
        if isinstance(cluster_spec, dict) and replicas != self.replicas(obj):
            scale_cluster_spec(cluster_spec, replicas)
        return out

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}

        def rank(status: Mapping[str, Any]) -> int:
            value = str(status.get("jobDeploymentStatus") or "")
            return DEPLOYMENT_ORDER.index(value) if value in DEPLOYMENT_ORDER else DEPLOYMENT_ORDER.index("")

        worst: Mapping[str, Any] = min(present, key=rank)
        return copy.deepcopy(dict(worst))

    def health_of(self, observed: Obj) -> Health:
        """By the Ray job's ``status.jobStatus`` (any case): Unhealthy when it failed or was
        stopped, Healthy while it runs and once it succeeded, Unknown otherwise (not submitted yet);
        Unhealthy too when the RayJob itself failed (``jobDeploymentStatus`` ``Failed`` or
        ``ValidationFailed``: a submitter that failed, a deadline passed), whatever the Ray job's
        status says, as :meth:`finished` counts it failed."""
        status = status_of(observed)
        job = str(status.get("jobStatus") or "").upper()
        if job in FAILED_JOB or str(status.get("jobDeploymentStatus") or "") in FAILED_DEPLOYMENT:
            return Health.UNHEALTHY
        if job in HEALTHY_JOB:
            return Health.HEALTHY
        return Health.UNKNOWN

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        if not status:
            return None
        deployment = str(status.get("jobDeploymentStatus") or "")
        job = str(status.get("jobStatus") or "")
        if deployment in FAILED_DEPLOYMENT:
            return FinishedPhase.FAILED
        if deployment == "Complete":
            return FinishedPhase.FAILED if job in FAILED_JOB else FinishedPhase.SUCCEEDED
        if not deployment and job == SUCCEEDED_JOB:
            return FinishedPhase.SUCCEEDED
        if not deployment and job in FAILED_JOB:
            return FinishedPhase.FAILED
        return None
