"""Small builders for cluster snapshots in scheduler and estimator tests (wire dicts, as agents report)."""

from __future__ import annotations

from typing import Any

from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

GI = 2**30
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"


def shape(
    count: int,
    *,
    gpus: int = 0,
    product: str | None = A100,
    cpu: int = 64_000,
    memory: int = 512 * GI,
    extra: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    mig_strategy: str = "none",
    allocatable: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``count`` identical nodes with ``gpus`` free whole GPUs (plus ``extra`` free resources).

    Their allocatable resources are the free ones, updated by ``allocatable`` (for nodes
    whose capacity is partly in use).
    """
    free: dict[str, int] = {"cpu": cpu, "memory": memory, "pods": 110}
    if gpus:
        free["nvidia.com/gpu"] = gpus
    free.update(extra or {})
    node_labels = {"nvidia.com/gpu.product": product} if product else {}
    node_labels.update(labels or {})
    return {
        "count": count,
        "labels": node_labels,
        "taints": taints or [],
        "free": free,
        "allocatable": {**free, **(allocatable or {})},
        "gpu": {
            "product": product or "",
            "memoryMiB": 81920,
            "count": 8,
            "migStrategy": mig_strategy,
            "sharedReplicas": 0,
        },
    }


def cluster(
    name: str,
    *shapes: dict[str, Any],
    provider: str = "onprem",
    tier: int | None = None,
    pricing: dict[str, float] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    region: str | None = None,
    report_time: str = "2024-05-01T10:00:00Z",
    node_scoring: str | None = None,
    apis: list[dict[str, Any]] | None = None,
    apis_complete: bool = True,
) -> ClusterSnapshot:
    """A reported Cluster's snapshot; ``apis``: its ``status.apiEnablements`` (None: it lists none),
    ``apis_complete``: its ``CompleteAPIEnablements`` condition."""
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if apis is not None:
        conditions.append({"type": "CompleteAPIEnablements", "status": "True" if apis_complete else "False"})
    spec: dict[str, Any] = {"provider": provider, "unschedulable": unschedulable}
    if tier is not None:
        spec["tier"] = tier
    if pricing:
        spec["pricing"] = pricing
    if taints:
        spec["taints"] = taints
    if region:
        spec["region"] = region
    return ClusterSnapshot.from_cluster(
        {
            "apiVersion": "cluster.gpufed.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": spec,
            "status": {
                "conditions": conditions,
                "lastReportTime": report_time,
                "nodeShapes": list(shapes),
                **({"nodeScoring": node_scoring} if node_scoring else {}),
                **({"apiEnablements": apis} if apis is not None else {}),
            },
        }
    )


def tiered_placement(**rebalance: object) -> Placement:
    """Divided + TieredOverflow with ``tieredOverflow.rebalance`` set to ``rebalance``."""
    return Placement.model_validate(
        {
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "TieredOverflow",
                "tieredOverflow": {"rebalance": rebalance},
            }
        }
    )
