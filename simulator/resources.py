"""What a simulated member cluster's API serves, beyond the hub's built-in kinds.

A real cluster serves ``apps/v1 ReplicaSet``; the hub does not (its users apply
Deployments, and members run them), so the ReplicaSet type lives here. In: nothing.
Out: :data:`REPLICASET` (``kubectl get rs`` prints DESIRED, CURRENT, READY, AGE, and
CONTAINERS, IMAGES, SELECTOR with ``-o wide``, as kube does) and :func:`member_registry`,
the registry a member's API is built from.
"""

from __future__ import annotations

from typing import Final

from controlplane.apiserver import columns as col
from controlplane.apiserver.resources import (
    AGE,
    Registry,
    ResourceType,
    ScaleSubresource,
    TableColumn,
    coordination_resources,
    core_resources,
    path,
    workload_resources,
)

REPLICASET: Final = ResourceType(
    "apps", "v1", "ReplicaSet", "replicasets", "replicaset", namespaced=True,
    short_names=("rs",), categories=("all",), has_status=True, strategic_merge=True,
    scale=ScaleSubresource(),
    columns=(
        TableColumn("Desired", path("spec.replicas", default=1), type="integer",
                    description="Replicas is the number of desired pods."),
        TableColumn("Current", path("status.replicas", default=0), type="integer",
                    description="Replicas is the most recently observed number of replicas."),
        TableColumn("Ready", path("status.readyReplicas", default=0), type="integer",
                    description="The number of pods targeted by this ReplicaSet with a Ready Condition."),
        AGE,
        TableColumn("Containers", col.containers_names, priority=1),
        TableColumn("Images", col.containers_images, priority=1),
        TableColumn("Selector", col.selector_string("spec.selector.matchLabels"), priority=1),
    ),
)


def member_registry() -> Registry:
    """What a member cluster serves: core kinds (nodes, pods, events, ...), workloads with
    their ReplicaSets, and Leases."""
    return Registry(core_resources(), workload_resources(), [REPLICASET], coordination_resources())
