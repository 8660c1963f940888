"""RayCluster (ray.io/v1): one head pod plus worker groups; placed whole (a gang).

Pods per worker group are ``replicas`` (default ``minReplicas``, 0 when suspended) times
``numOfHosts`` (multi-host groups, default 1). A Ray cluster whose workers sit in another
Kubernetes cluster than its head cannot form, so RayCluster is treated as a gang like
RayJob (the hub never splits it). ``with_replicas`` for another total keeps the head and
spreads the difference over the worker groups in proportion to their current size.

The helpers here are shared with :mod:`controlplane.interpreter.rayjob`, whose
``spec.rayClusterSpec`` has the same shape as a RayCluster's ``spec``.

:func:`suspension_status` is what KubeRay says of a RayCluster's ``spec.suspend`` (its
``status.state`` and suspension conditions); the hub sets it on a RayCluster it holds.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import Obj, as_int
from controlplane.interpreter.base import (
    Component,
    GangOfRoles,
    Health,
    MemberStatuses,
    PodSetSlot,
    TemplateSlot,
    condition_true,
    nonzero_sums,
    reported,
    scale_counts,
)
from controlplane.interpreter.health import status_of
from controlplane.interpreter.requirements import ReplicaRequirements, requirements

HEAD = "head"
COUNT_FIELDS = (
    "availableWorkerReplicas",
    "desiredWorkerReplicas",
    "readyWorkerReplicas",
    "minWorkerReplicas",
    "maxWorkerReplicas",
)
#: KubeRay's ``status.state`` of a suspended cluster whose pods are gone.
SUSPENDED_STATE = "suspended"
# Worst first: the merged state is the worst any member reports.
STATE_ORDER = ("failed", SUSPENDED_STATE, "", "ready")
SUSPENDED, SUSPENDING = "RayClusterSuspended", "RayClusterSuspending"


def suspension_status(cluster: Mapping[str, Any]) -> tuple[str | None, list[dict[str, str]]]:
    """KubeRay's ``status.state`` and conditions for a RayCluster's ``spec.suspend`` while none of
    its pods runs (``calculateStatus`` with the ``RayClusterStatusConditions`` gate, on by
    default): suspended, state ``suspended``, ``RayClusterSuspended`` True and
    ``RayClusterSuspending`` False (each condition's reason its type, its message empty, as Go
    writes a Condition's); resumed
    (``spec.suspend: false``) from it, ``RayClusterSuspended`` False, the state kept until the
    pods are ready, as KubeRay keeps it; otherwise nothing to say."""
    if (cluster.get("spec") or {}).get("suspend") is True:
        return SUSPENDED_STATE, [
            {"type": SUSPENDED, "status": "True", "reason": SUSPENDED, "message": ""},
            {"type": SUSPENDING, "status": "False", "reason": SUSPENDING, "message": ""},
        ]
    if (cluster.get("spec") or {}).get("suspend") is False and condition_true(cluster.get("status"), SUSPENDED):
        return None, [{"type": SUSPENDED, "status": "False", "reason": SUSPENDED, "message": ""}]
    return None, []


def worker_pods(group: Mapping[str, Any]) -> int:
    if group.get("suspend"):
        return 0
    replicas = group.get("replicas")
    count = as_int(replicas) if replicas is not None else as_int(group.get("minReplicas"))
    return count * max(1, as_int(group.get("numOfHosts"), 1))


def cluster_template_slots(cluster_spec: dict[str, Any] | None) -> list[TemplateSlot]:
    return [slot for _, slot in cluster_pod_set_slots(cluster_spec)]


def cluster_pod_set_slots(cluster_spec: dict[str, Any] | None) -> list[PodSetSlot]:
    """The head's and each worker group's pod template, by the names of :func:`cluster_components`."""
    if not isinstance(cluster_spec, dict):
        return []
    slots: list[PodSetSlot] = []
    head = cluster_spec.get("headGroupSpec")
    if isinstance(head, dict) and "template" in head:
        slots.append((HEAD, (head, "template")))
    for i, group in enumerate(cluster_spec.get("workerGroupSpecs") or ()):
        if isinstance(group, dict) and "template" in group:
            slots.append((str(group.get("groupName") or f"workers-{i}"), (group, "template")))
    return slots


def cluster_components(cluster_spec: Mapping[str, Any] | None) -> list[Component]:
    if not cluster_spec:
        return []
    out: list[Component] = []
    head = cluster_spec.get("headGroupSpec")
    if isinstance(head, Mapping):
        out.append(Component(name=HEAD, replicas=1, requirements=requirements(head.get("template"))))
    for i, group in enumerate(cluster_spec.get("workerGroupSpecs") or ()):
        out.append(
            Component(
                name=str(group.get("groupName") or f"workers-{i}"),
                replicas=worker_pods(group),
                requirements=requirements(group.get("template")),
            )
        )
    return out


def main_worker_requirements(cluster_spec: Mapping[str, Any] | None) -> ReplicaRequirements:
    """The largest worker group's requirements (the head's when there is no worker group)."""
    components = cluster_components(cluster_spec)
    workers = [c for c in components if c.name != HEAD] or components
    if not workers:
        return ReplicaRequirements()
    return max(workers, key=lambda c: c.replicas).requirements


def scale_cluster_spec(cluster_spec: dict[str, Any], replicas: int) -> None:
    """Set the worker groups of ``cluster_spec`` (in place) so the cluster runs ``replicas`` pods.

    Worker pods are split in proportion to the groups' current pods; a multi-host group
    rounds its share down to whole replicas of ``numOfHosts`` pods.
    """
    groups = [g for g in cluster_spec.get("workerGroupSpecs") or () if isinstance(g, dict)]
    head = 1 if isinstance(cluster_spec.get("headGroupSpec"), dict) else 0
    shares = scale_counts([worker_pods(g) for g in groups], max(0, replicas - head))
    for group, share in zip(groups, shares, strict=True):
        units = share // max(1, as_int(group.get("numOfHosts"), 1))
        group["replicas"] = units
        if as_int(group.get("minReplicas")) > units:
            group["minReplicas"] = units
        if group.get("maxReplicas") is not None and as_int(group.get("maxReplicas")) < units:
            group["maxReplicas"] = units


def cluster_health(state: Any) -> Health:
    """By a RayCluster's ``status.state`` (any case): Healthy when ready, Unhealthy when failed,
    Unknown otherwise (not ready yet, suspended)."""
    return {"ready": Health.HEALTHY, "failed": Health.UNHEALTHY}.get(str(state or "").lower(), Health.UNKNOWN)


class RayClusterInterpreter(GangOfRoles):
    group = "ray.io"
    kind = "RayCluster"

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        return cluster_template_slots(obj.get("spec"))

    def pod_set_slots(self, obj: Obj) -> list[PodSetSlot]:
        return cluster_pod_set_slots(obj.get("spec"))

    def components(self, obj: Obj) -> list[Component]:
        return cluster_components(obj.get("spec"))

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        return main_worker_requirements(obj.get("spec"))

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        out = copy.deepcopy(obj)
        if replicas != self.replicas(obj) and isinstance(out.get("spec"), dict):
            scale_cluster_spec(out["spec"], replicas)
        return out

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}
        out: Obj = nonzero_sums(present, COUNT_FIELDS)
        states = [str(s.get("state") or "") for s in present]
        worst = min(states, key=lambda s: STATE_ORDER.index(s) if s in STATE_ORDER else 2)
        if worst:
            out["state"] = worst
        head = present[0].get("head")
        if head:
            out["head"] = head
        return out

    def health_of(self, observed: Obj) -> Health:
        return cluster_health(status_of(observed).get("state"))
