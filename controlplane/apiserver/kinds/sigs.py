"""GPU serving and training kinds from Kubernetes SIGs: LeaderWorkerSet
(``leaderworkerset.x-k8s.io/v1``) and JobSet (``jobset.x-k8s.io/v1alpha2``), with the
names, subresources and printer columns their CustomResourceDefinitions declare."""

from __future__ import annotations

from controlplane.apiserver.kinds import cells
from controlplane.apiserver.openapi.structural import schema_of
from controlplane.apiserver.resources import AGE, ResourceType, ScaleSubresource, TableColumn

LEADER_WORKER_SET = ResourceType(
    "leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", "leaderworkerset",
    namespaced=True, short_names=("lws",), has_status=True,
    scale=ScaleSubresource(label_selector="status.hpaPodSelector"),
    columns=(AGE,), crd_schema=schema_of("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),
)

JOBSET = ResourceType(
    "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", "jobset", namespaced=True, has_status=True,
    crd_schema=schema_of("jobset.x-k8s.io", "v1alpha2", "JobSet"),
    columns=(
        TableColumn("TerminalState", cells.text_at("status", "terminalState", none=""),
                    description="Final state of JobSet"),
        TableColumn("Restarts", cells.int_at("status", "restarts"), type="integer",
                    description="Number of restarts"),
        TableColumn("Completed", cells.condition_at("Completed"), description="JobSet completed"),
        TableColumn("Suspended", cells.text_at("spec", "suspend", none=""), description="JobSet suspended"),
        AGE,
    ),
)
