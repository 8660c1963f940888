"""coordination.k8s.io/v1: the Lease (the agents' heartbeats, the leader's record)."""

from __future__ import annotations

from controlplane.apiserver.resources import AGE, ResourceType, TableColumn, path, with_kube_rules


def coordination_resources() -> list[ResourceType]:
    """coordination.k8s.io/v1 Lease: agent heartbeats."""
    return with_kube_rules([
        ResourceType(
            "coordination.k8s.io", "v1", "Lease", "leases", "lease", namespaced=True, strategic_merge=True,
            columns=(TableColumn("Holder", path("spec.holderIdentity")), AGE),
        ),
    ])
