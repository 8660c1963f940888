"""What a simulated member cluster's API serves.

A member serves what a real cluster serves: the core kinds (nodes, pods, events...), the
workload kinds with their ReplicaSets, the other built-in kinds (DaemonSet, CronJob, Ingress,
quotas, PriorityClasses, StorageClasses...), RBAC's four kinds (an operator's ClusterRoles and
bindings arrive through the agent), the SIG kinds GPU platforms install (LeaderWorkerSet, JobSet), Leases and
CustomResourceDefinitions: the registry is a :class:`DynamicRegistry`, so the API server runs
the hub's CRD controller over it and a CRD applied to the member (by its agent) is served at
once, with the same schema validation, defaulting and status as at the hub. In: nothing.
Out: :func:`member_registry`, the registry a member's API is built from.
"""

from __future__ import annotations

from controlplane.apiserver.auth.rbac.kinds import rbac_resources
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type
from controlplane.apiserver.kinds import REPLICASET, builtin_kind_resources, gpu_workload_resources
from controlplane.apiserver.kinds.coordination import coordination_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import ResourceType
from simulator.podmetrics import metrics_resource_types

__all__ = ["REPLICASET", "member_registry"]


def member_registry(*, without: frozenset[str] = frozenset()) -> DynamicRegistry:
    """What a member cluster serves; ``without``: resources (plurals, e.g. ``jobsets``) this
    member does not serve, as a cluster without an operator's CRDs installed."""

    def served(types: list[ResourceType]) -> list[ResourceType]:
        return [rt for rt in types if rt.plural not in without]

    return DynamicRegistry(
        served(core_resources()),
        served(workload_resources()),
        served(builtin_kind_resources()),
        served(gpu_workload_resources()),
        served(coordination_resources()),
        served(rbac_resources()),
        served([crd_resource_type()]),
        # Read-only, served by simulator.podmetrics (metrics-server's API, for `kubectl top`).
        metrics_resource_types(),
    )
