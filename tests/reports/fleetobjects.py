"""Hub objects for the sampler and reports API tests: Clusters whose status is what a member
agent writes (built with :func:`member_agent.capacity.summarize` from Kubernetes nodes, pods and
DCGM samples), and ResourceBindings, stored through a real ObjectStore."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controlplane.apis.timestamps import format_time
from controlplane.apiserver.objects import ObjectStore
from member_agent import capacity

A100 = "NVIDIA-A100-SXM4-80GB"
T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def k8s_node(
    name: str, gpus: int, *, product: str = A100, ready: bool = True, unschedulable: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus), **(labels or {})},
        },
        "spec": {"unschedulable": unschedulable},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def k8s_pod(name: str, node: str, gpus: int, *, deployment: str, namespace: str = "ml") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"pod-template-hash": "abc"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": f"{deployment}-abc", "controller": True}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
        "status": {"phase": "Running"},
    }


def device(index: int, *, pod: str | None = None, utilization: float = 0.0, namespace: str = "ml") -> dict[str, Any]:
    entry: dict[str, Any] = {"gpu": index, "uuid": f"GPU-{index}", "utilization": utilization}
    if pod is not None:
        entry.update(pod=pod, namespace=namespace)
    return entry


def cluster_status(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    devices: dict[str, list[dict[str, Any]]],
    *,
    now: datetime = T0,
) -> dict[str, Any]:
    return capacity.summarize(
        nodes, pods, now=format_time(now), utilization=devices, utilization_time=format_time(now)
    )


async def put_cluster(
    objects: ObjectStore, name: str, status: dict[str, Any], *, pricing: dict[str, float], provider: str = "onprem"
) -> dict[str, Any]:
    rt = objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    created = await objects.create(
        rt,
        {
            "apiVersion": "cluster.gpufed.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"provider": provider, "pricing": pricing},
        },
    )
    return await objects.update_status(rt, {**created, "status": status})


async def put_binding(
    objects: ObjectStore, name: str, *, replicas: int, placed: dict[str, int], gpus: int = 1,
    scheduled: str = "True", reason: str = "Success",
) -> dict[str, Any]:
    rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")
    created = await objects.create(
        rt,
        {
            "apiVersion": "work.gpufed.io/v1alpha1",
            "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-deployment", "namespace": "ml"},
            "spec": {
                "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml", "name": name},
                "replicas": replicas,
                "replicaRequirements": {"resourceRequest": {"nvidia.com/gpu": str(gpus)}},
                "clusters": [{"name": n, "replicas": r} for n, r in placed.items()],
            },
        },
        namespace="ml",
    )
    condition = {
        "type": "Scheduled", "status": scheduled, "reason": reason, "message": "", "lastTransitionTime": format_time(T0),
    }
    return await objects.update_status(rt, {**created, "status": {"conditions": [condition]}})
