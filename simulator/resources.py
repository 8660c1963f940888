"""What a simulated member cluster's API serves.

A member serves what a real cluster serves: the core kinds (nodes, pods, events...), the
workload kinds with their ReplicaSets, the other built-in kinds (DaemonSet, CronJob, Ingress,
quotas...), the SIG kinds GPU platforms install (LeaderWorkerSet, JobSet) and Leases. In:
nothing. Out: :func:`member_registry`, the registry a member's API is built from.
"""

from __future__ import annotations

from controlplane.apiserver.kinds import REPLICASET, builtin_kind_resources, gpu_workload_resources
from controlplane.apiserver.resources import (
    Registry,
    ResourceType,
    coordination_resources,
    core_resources,
    workload_resources,
)

__all__ = ["REPLICASET", "member_registry"]


def member_registry(*, without: frozenset[str] = frozenset()) -> Registry:
    """What a member cluster serves; ``without``: resources (plurals, e.g. ``jobsets``) this
    member does not serve, as a cluster without an operator's CRDs installed."""

    def served(types: list[ResourceType]) -> list[ResourceType]:
        return [rt for rt in types if rt.plural not in without]

    return Registry(
        served(core_resources()),
        served(workload_resources()),
        served(builtin_kind_resources()),
        served(gpu_workload_resources()),
        served(coordination_resources()),
    )
