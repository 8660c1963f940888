"""The capacity report kept up to date node change by node change equals the full walk.

The reference below is the report as every report used to compute it: one pass over every node
(no groups, no memos), summing what each node has, counting its shape with what its pods
hold. :class:`member_agent.nodetotals.NodeTotals` keeps the node part between reports and a report
adds only the nodes that hold pods; over randomized clusters and randomized sequences of node
and pod changes, its report must be the reference's, field for field and in the same order.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from controlplane.apis import constants as c
from controlplane.apis import spot
from controlplane.apis.cluster_v1alpha1 import ClusterReadyReason
from controlplane.apis.gpus import MIG_INVALID_SUFFIX, is_nvidia_resource
from controlplane.apis.utilization import NodeUtilization
from controlplane.reports.agentreport import utilization_report
from member_agent import capacity, nodes
from member_agent.podstates import unschedulable_for_room

NOW = "2025-01-01T00:00:00Z"
CPU_ROUNDING, MEMORY_ROUNDING = 1000, 2**30


def reference(
    node_list: Sequence[Mapping[str, Any]],
    pod_list: Sequence[Mapping[str, Any]],
    *,
    utilization: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The report by a full walk of every node, each on its own."""
    names = {str(n["metadata"]["name"]) for n in node_list}
    allocated_by_node: dict[str, dict[str, int]] = {}
    pods_by_node: dict[str, list[tuple[Mapping[str, Any], dict[str, int]]]] = {}
    finished: dict[tuple[str, str], Mapping[str, Any]] = {}
    unschedulable = []
    for pod in pod_list:
        if not capacity.pod_is_active(pod):
            if unschedulable_for_room(pod) is not None:
                unschedulable.append(pod)
            finished[(str(pod["metadata"].get("namespace") or ""), str(pod["metadata"]["name"]))] = pod
            continue
        if (name := str(pod["spec"]["nodeName"])) in names:
            requests = capacity.pod_requests(pod)
            into = allocated_by_node.setdefault(name, {})
            for resource, amount in requests.items():
                into[resource] = into.get(resource, 0) + amount
            pods_by_node.setdefault(name, []).append((pod, requests))

    ready_count = spot_count = 0
    invalid: list[str] = []
    gpu: dict[tuple[str, str, int], dict[str, Any]] = {}
    allocatable_total: dict[str, int] = {}
    allocated_total: dict[str, int] = {}
    shapes: Counter[str] = Counter()
    util_nodes = []
    for node in node_list:
        name, labels = str(node["metadata"]["name"]), node["metadata"].get("labels") or {}
        allocated = allocated_by_node.get(name, {})
        allocatable, node_capacity = nodes.node_allocatable(node), nodes.node_capacity(node)
        unusable, ready, schedulable = nodes.gpu_is_unusable(node), nodes.node_is_ready(node), nodes.node_is_schedulable(node)
        invalid += [name] if unusable else []
        ready_count += ready
        spot_count += spot.is_spot(labels)
        counted = allocatable if ready else {}
        for resource, amount in counted.items():
            allocatable_total[resource] = allocatable_total.get(resource, 0) + amount
        for resource, amount in allocated.items():
            allocated_total[resource] = allocated_total.get(resource, 0) + amount
        product = str(labels.get(c.LABEL_GPU_PRODUCT, nodes.UNKNOWN_PRODUCT))
        for resource in set(node_capacity) | set(allocatable) | set(allocated):
            if is_nvidia_resource(resource):
                key = (resource, product, nodes.shared_replicas(labels, resource))
                entry = gpu.setdefault(key, {"unusable": False, "capacity": 0, "allocatable": 0, "allocated": 0})
                entry["unusable"] = entry["unusable"] or unusable
                entry["capacity"] += node_capacity.get(resource, 0)
                entry["allocatable"] += counted.get(resource, 0)
                entry["allocated"] += allocated.get(resource, 0)
        if schedulable:
            free = {r: max(a - allocated.get(r, 0), 0) for r, a in allocatable.items()}
            for resource, rounding in (("cpu", CPU_ROUNDING), ("memory", MEMORY_ROUNDING)):
                if resource in free:
                    free[resource] -= free[resource] % rounding
            shape = {"labels": nodes.selection_labels(node), "taints": nodes.node_taints(node), "free": dict(sorted(free.items())),
                     "allocatable": dict(sorted(allocatable.items())), "gpu": nodes.gpu_info(node)}
            if spot.is_spot(labels):
                shape["spot"] = True
            shapes[json.dumps(shape, sort_keys=True, separators=(",", ":"))] += 1
        if (utilization or {}).get(name):
            devices = (utilization or {})[name]
            util_nodes.append(NodeUtilization(
                name=name, product=product, ready=ready, schedulable=schedulable,
                shared_replicas=nodes.shared_replicas(labels, c.RESOURCE_GPU), labels=nodes.utilization_labels(node),
                devices=devices,
                pods=capacity._with_finished_holders(capacity._allocations(pods_by_node.get(name, ())), devices, finished),
            ))
    gpu_summary = []
    for (resource, product, replicas), entry in sorted(gpu.items()):
        out: dict[str, Any] = {"resource": resource, "product": product, "capacity": entry["capacity"],
                               "allocatable": entry["allocatable"], "allocated": entry["allocated"]}
        if replicas > 1:
            out["sharedReplicas"] = replicas
            out["gpuEquivalent"] = {k: round(entry[k] / replicas, 3) for k in ("capacity", "allocatable", "allocated")}
        if entry["unusable"]:
            out["unusable"] = True
        gpu_summary.append(out)

    invalid.sort()
    messages = [f"{ready_count}/{len(node_list)} nodes ready"]
    if invalid:
        shown = ", ".join(invalid[:5]) + (f" and {len(invalid) - 5} more" if len(invalid) > 5 else "")
        messages.append(f"{len(invalid)} node(s) have an invalid MIG configuration (product label ends in"
                        f" {MIG_INVALID_SUFFIX}); their GPUs are unusable: {shown}")
    status, reason = (
        ("False", ClusterReadyReason.NO_READY_NODES) if ready_count == 0
        else ("True", ClusterReadyReason.INVALID_GPU_CONFIG) if invalid
        else ("True", ClusterReadyReason.MEMBER_HEALTHY)
    )
    report: dict[str, Any] = {
        "conditions": [{"type": "Ready", "status": status, "reason": str(reason), "message": "; ".join(messages),
                        "lastTransitionTime": NOW}],
        "kubernetesVersion": None,
        "lastReportTime": NOW,
        "nodeSummary": {"total": len(node_list), "ready": ready_count, **({"spot": spot_count} if spot_count else {})},
        "gpuSummary": gpu_summary,
        "resourceSummary": {"allocatable": dict(sorted(allocatable_total.items())),
                            "allocated": dict(sorted(allocated_total.items()))},
        "nodeShapes": [{"count": n, **json.loads(key)} for key, n in sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0]))],
        "utilization": utilization_report(sorted(util_nodes, key=lambda u: u.name), sample_time=NOW),
    }
    if unschedulable:
        report["unschedulableWorkloads"] = capacity.unschedulable_workloads(unschedulable)
    return report


# --- randomized clusters ---------------------------------------------------------------------

PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB" + MIG_INVALID_SUFFIX, None]
GPU_RESOURCES = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "nvidia.com/gpu.shared"]
TAINTS = [
    {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "train", "effect": "NoExecute"},
    {"key": spot.SIMULATED_NOTICE_TAINT, "effect": "NoSchedule"},
]


def random_node(rng: random.Random, name: str) -> dict[str, Any]:
    if rng.random() < 0.6:
        rng = random.Random(rng.randrange(3))  # one of three pools: alike but for their names
    labels = {"kubernetes.io/hostname": name, "pool": rng.choice(["a", "b", "c"])}
    if (product := rng.choice(PRODUCTS)) is not None:
        labels[c.LABEL_GPU_PRODUCT] = product
        labels[c.LABEL_GPU_COUNT] = rng.choice(["4", "8"])
        labels[c.LABEL_MIG_STRATEGY] = rng.choice(["none", "mixed", "single", "bogus"])
    if rng.random() < 0.2:
        labels[c.LABEL_GPU_REPLICAS] = rng.choice(["1", "4", "10"])
    if rng.random() < 0.2:
        labels[spot.DEFAULT_SPOT_LABEL[0]] = spot.DEFAULT_SPOT_LABEL[1]
    if rng.random() < 0.1:
        labels["example.com/node-id"] = name  # a label naming the node: its shape is its own
    resources = {"cpu": rng.choice(["8", "15500m", "96"]), "memory": rng.choice(["64Gi", "1000Mi", "1024Gi"]), "pods": "110"}
    for resource in rng.sample(GPU_RESOURCES, rng.randint(0, 2)):
        resources[resource] = str(rng.choice([0, 1, 4, 8]))
    status: dict[str, Any] = {"capacity": dict(resources), "nodeInfo": {"kubeletVersion": "v1.30.2"}}
    if rng.random() < 0.8:
        allocatable = dict(resources)
        if rng.random() < 0.3:
            allocatable["cpu"] = "7500m"
        status["allocatable"] = allocatable
    ready = rng.choice(["True", "True", "True", "False", None])
    status["conditions"] = [{"type": "Ready", "status": ready}] if ready else []
    spec = {"unschedulable": rng.random() < 0.15, "taints": rng.sample(TAINTS, rng.randint(0, 2))}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec, "status": status}


def changed_node(rng: random.Random, node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with one thing changed, as a node update brings it."""
    changed = json.loads(json.dumps(node))
    labels, spec, status = changed["metadata"]["labels"], changed["spec"], changed["status"]
    match rng.choice(["allocatable", "labels", "taints", "mig", "unschedulable", "ready", "whole"]):
        case "allocatable":
            status.setdefault("allocatable", dict(status["capacity"]))[rng.choice([*GPU_RESOURCES, "cpu"])] = str(rng.randint(0, 8))
        case "labels":
            labels["pool"] = rng.choice(["a", "b", "c", "d"])
        case "taints":
            spec["taints"] = rng.sample(TAINTS, rng.randint(0, 3))
        case "mig":
            labels[c.LABEL_GPU_PRODUCT] = rng.choice(PRODUCTS[:3])
            labels[c.LABEL_MIG_STRATEGY] = rng.choice(["mixed", "single"])
            status["capacity"]["nvidia.com/mig-1g.10gb"] = status.setdefault("allocatable", {})["nvidia.com/mig-1g.10gb"] = "7"
        case "unschedulable":
            spec["unschedulable"] = not spec["unschedulable"]
        case "ready":
            status["conditions"] = [{"type": "Ready", "status": rng.choice(["True", "False", "Unknown"])}]
        case _:
            return random_node(rng, node["metadata"]["name"])
    return changed


def random_pod(rng: random.Random, name: str, node_names: Sequence[str]) -> dict[str, Any]:
    requests = {"cpu": rng.choice(["500m", "2", "0"]), "memory": rng.choice(["1Gi", "300Mi"])}
    limits = {rng.choice(GPU_RESOURCES): str(rng.choice([0, 1, 1, 2]))} if rng.random() < 0.8 else {}
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": requests, "limits": limits}}]}
    status: dict[str, Any] = {"phase": rng.choice(["Running", "Running", "Pending", "Succeeded", "Failed"])}
    if rng.random() < 0.85:
        spec["nodeName"] = rng.choice([*node_names, "gone"]) if node_names else "gone"
    elif rng.random() < 0.7:
        status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                     "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]}
    workload = rng.choice(["train", "serve", "eval"])
    metadata = {"name": name, "namespace": rng.choice(["ml", "default"]), "labels": {"pod-template-hash": "5d8f"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": f"{workload}-5d8f", "controller": True}]}
    return {"metadata": metadata, "spec": spec, "status": status}


def random_utilization(rng: random.Random, node_names: Sequence[str], pod_list: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name in [*rng.sample(list(node_names), min(len(node_names), 4)), "gone"]:
        devices = []
        for gpu in range(rng.randint(0, 2)):
            device: dict[str, Any] = {"gpu": gpu, "uuid": f"GPU-{name}-{gpu}", "utilization": round(rng.random(), 2)}
            if pod_list and rng.random() < 0.6:
                holder = rng.choice(pod_list)["metadata"]
                device |= {"pod": holder["name"], "namespace": holder["namespace"]}
            devices.append(device)
        out[name] = devices
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_full_walk_reference_is_the_report(seed: int) -> None:
    """The reference is what :func:`capacity.summarize` reports (so the comparisons below
    compare against the report, not against a reading of it)."""
    rng = random.Random(seed)
    node_list = [random_node(rng, f"n{i}") for i in range(rng.randint(0, 25))]
    names = [n["metadata"]["name"] for n in node_list]
    pod_list = [random_pod(rng, f"p{i}", names) for i in range(rng.randint(0, 60))]
    utilization = random_utilization(rng, names, pod_list)
    trimmer = capacity.NodeTrimmer()
    for given in (node_list, [trimmer(n) for n in node_list]):
        got = capacity.summarize(given, pod_list, now=NOW, utilization=utilization, utilization_time=NOW)
        assert got == reference(given, pod_list, utilization=utilization)
        assert json.dumps(got) == json.dumps(reference(given, pod_list, utilization=utilization))
