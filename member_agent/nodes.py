"""What the agent's capacity report reads from one Node: readiness, quantities, GPUs, labels, taints.

In: a Node as the Kubernetes API returns it (or the trimmed form of
:func:`member_agent.capacity.trim_node`). Out: plain values -- whether it is Ready and schedulable,
its allocatable and capacity in gpufed's integer base units (tracked resources only: ``cpu``,
``memory`` and ``nvidia.com/*``), its GPU description from GPU Feature Discovery labels, the
labels that select it, and its taints. :func:`member_agent.capacity.summarize` folds these into
the Cluster status. No I/O happens here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.gpus import is_mig_invalid_product, is_nvidia_resource
from controlplane.apis.quantity import QuantityError, to_int

#: Labels that identify one node and so must not split shapes.
PER_NODE_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "beta.kubernetes.io/hostname",
        "nvidia.com/gfd.timestamp",
        "node.kubernetes.io/instance-id",
    }
)
#: Label prefixes left out of the node labels in ``status.utilization`` (see :func:`utilization_labels`).
UTILIZATION_LABEL_SKIPPED_PREFIXES = (
    "nvidia.com/",
    "feature.node.kubernetes.io/",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/",
)
UNKNOWN_PRODUCT = "unknown"
MIG_STRATEGIES = frozenset({"none", "single", "mixed"})


def is_tracked_resource(name: str) -> bool:
    return name in ("cpu", "memory") or is_nvidia_resource(name)


def tracked_quantities(raw: Mapping[str, Any] | None) -> dict[str, int]:
    """A resource list's tracked quantities in base units; unparseable ones are left out."""
    out: dict[str, int] = {}
    for name, qty in (raw or {}).items():
        if not is_tracked_resource(name):
            continue
        try:
            out[name] = to_int(name, qty)
        except QuantityError:
            continue
    return out


def node_is_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def node_is_schedulable(node: Mapping[str, Any]) -> bool:
    return node_is_ready(node) and not (node.get("spec") or {}).get("unschedulable", False)


def _int_label(labels: Mapping[str, str], key: str, default: int = 0) -> int:
    try:
        return int(labels.get(key, default))
    except (TypeError, ValueError):
        return default


def shared_replicas(labels: Mapping[str, str], resource: str) -> int:
    """How many shares one physical device of ``resource`` is split into (1 = not shared)."""
    base = resource.removesuffix(".shared")
    replicas = _int_label(labels, f"{base}.replicas", 1)
    if resource == c.RESOURCE_GPU_SHARED:
        replicas = max(replicas, _int_label(labels, c.LABEL_GPU_REPLICAS, 1))
    return max(replicas, 1)


def gpu_info(node: Mapping[str, Any], allocatable: Mapping[str, int] | None = None) -> dict[str, Any] | None:
    """The node's GPU description from GPU Feature Discovery labels, None without GPUs
    (``allocatable``: its :func:`node_allocatable`, when already read)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if allocatable is None:
        allocatable = node_allocatable(node)
    has_gpu_resource = any(is_nvidia_resource(name) and amount > 0 for name, amount in allocatable.items())
    product = labels.get(c.LABEL_GPU_PRODUCT)
    if product is None and not has_gpu_resource:
        return None
    return {
        "product": product or UNKNOWN_PRODUCT,
        "memoryMiB": _int_label(labels, c.LABEL_GPU_MEMORY),
        "count": _int_label(labels, c.LABEL_GPU_COUNT),
        "migStrategy": mig if (mig := labels.get(c.LABEL_MIG_STRATEGY, "none")) in MIG_STRATEGIES else "none",
        "sharedReplicas": shared_replicas(labels, c.RESOURCE_GPU),
    }


def gpu_is_unusable(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return is_mig_invalid_product(str(labels.get(c.LABEL_GPU_PRODUCT, "")))


def node_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    status = node.get("status") or {}
    allocatable = tracked_quantities(status.get("allocatable") or status.get("capacity"))
    if gpu_is_unusable(node):
        allocatable = {name: (0 if is_nvidia_resource(name) else amount) for name, amount in allocatable.items()}
    return allocatable


def node_capacity(node: Mapping[str, Any]) -> dict[str, int]:
    status = node.get("status") or {}
    return tracked_quantities(status.get("capacity") or status.get("allocatable"))


def selection_labels(node: Mapping[str, Any]) -> dict[str, str]:
    metadata = node.get("metadata") or {}
    name = metadata.get("name")
    return {
        key: value
        for key, value in sorted((metadata.get("labels") or {}).items())
        if key not in PER_NODE_LABELS and value != name
    }


def utilization_labels(node: Mapping[str, Any]) -> dict[str, str]:
    """The node labels the waste report carries per node: its selection labels except GPU
    Feature Discovery's inventory (``nvidia.com/...``, already summed up by ``product`` and
    ``sharedReplicas``) and the well-known OS/arch labels, so node pools, zones and instance
    types stay visible while a large cluster's report stays small."""
    return {
        key: value
        for key, value in selection_labels(node).items()
        if not key.startswith(UTILIZATION_LABEL_SKIPPED_PREFIXES)
    }


def node_taints(node: Mapping[str, Any]) -> list[dict[str, str]]:
    taints = []
    for taint in (node.get("spec") or {}).get("taints") or []:
        entry = {"key": str(taint.get("key", "")), "effect": str(taint.get("effect", ""))}
        if taint.get("value") is not None:
            entry["value"] = str(taint["value"])
        taints.append(entry)
    return sorted(taints, key=lambda t: (t["key"], t.get("value", ""), t["effect"]))
