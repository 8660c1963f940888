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
from member_agent.nodetotals import NodeTotals
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
    named: dict[str, list[str]] = {}  # shape key -> its nodes whose GPUs are partly held
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
            shape: dict[str, Any] = {"labels": nodes.selection_labels(node), "taints": nodes.node_taints(node), "free": dict(sorted(free.items())),
                     "allocatable": dict(sorted(allocatable.items())), "gpu": nodes.gpu_info(node)}
            if spot.is_spot(labels):
                shape["spot"] = True
            key = json.dumps(shape, sort_keys=True, separators=(",", ":"))
            shapes[key] += 1
            gpu_free = [r for r, a in allocatable.items() if is_nvidia_resource(r) and a > 0]
            if any(allocated.get(r, 0) > 0 for r in gpu_free) and any(allocated.get(r, 0) < allocatable[r] for r in gpu_free):
                named.setdefault(key, []).append(name)
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
        "nodeShapes": [
            {"count": n, **json.loads(key), **({"hostnames": sorted(named[key])[:32]} if key in named else {})}
            for key, n in sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
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
    changed: dict[str, Any] = json.loads(json.dumps(node))
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


def _same_report(got: dict[str, Any], expected: dict[str, Any]) -> None:
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)  # the same order too, as the body is sent


@pytest.mark.parametrize("seed", range(30))
def test_totals_kept_over_node_and_pod_changes_report_what_the_full_walk_reports(seed: int) -> None:
    """As the agent keeps them: the node informer's changes (nodes added, updated in
    allocatable, labels, taints, MIG profile, readiness or cordon, deleted, deleted and added
    again) noted one by one and applied before each report, pods bound, finished and removed
    between reports, the pods' requests remembered from report to report."""
    rng = random.Random(1000 + seed)
    trim = capacity.NodeTrimmer() if seed % 2 else capacity.trim_node  # the informer's transform
    cached: dict[str, dict[str, Any]] = {}  # the node informer's objects
    pod_cache: dict[str, dict[str, Any]] = {}
    totals = NodeTotals()
    requests_of = capacity.PodRequests()
    serial = 0

    def put_node(node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        cached[name] = trim(node)
        totals.changed(name, cached[name])

    def delete_node(name: str) -> None:
        del cached[name]
        totals.changed(name, None)

    for i in range(rng.randint(0, 20)):
        put_node(random_node(rng, f"n{i}"))
    for step in range(40):
        for _ in range(rng.randint(1, 5)):
            serial += 1
            names = sorted(cached)
            match rng.choice(["add", "update", "update", "delete", "again", "bind", "bind", "finish", "remove"]):
                case "add":
                    put_node(random_node(rng, f"n{serial}"))
                case "update" if names:
                    put_node(changed_node(rng, json.loads(json.dumps(cached[rng.choice(names)]))))
                case "delete" if names:
                    delete_node(rng.choice(names))
                case "again" if names:  # deleted and back (or replaced) before the next report
                    name = rng.choice(names)
                    delete_node(name)
                    put_node(random_node(rng, name))
                case "bind":
                    pod_cache[f"p{serial}"] = capacity.trim_pod(random_pod(rng, f"p{serial}", names))
                case "finish" if pod_cache:
                    key = rng.choice(sorted(pod_cache))
                    pod_cache[key] = {**pod_cache[key], "status": {"phase": rng.choice(["Succeeded", "Failed"])}}
                case "remove" if pod_cache:
                    del pod_cache[rng.choice(sorted(pod_cache))]
        if step % 7 == 3:  # a relist: every node a new (equal) object, all noted again
            for node in list(cached.values()):
                put_node(node)
        totals.update()
        pod_list = list(pod_cache.values())
        utilization = random_utilization(rng, sorted(cached), pod_list)
        got = capacity.summarize(
            totals, pod_list, now=NOW, utilization=utilization, utilization_time=NOW, requests_of=requests_of
        )
        _same_report(got, reference(list(cached.values()), pod_list, utilization=utilization))
        assert len(totals) == len(cached)


def test_changes_noted_after_an_update_wait_for_the_next() -> None:
    """A node change noted while a report is being built is not lost: the next update applies it."""
    totals = NodeTotals()
    totals.changed("n1", random_node(random.Random(1), "n1"))
    totals.update()
    totals.changed("n2", random_node(random.Random(2), "n2"))
    assert len(totals) == 1  # noted, not applied yet
    totals.update()
    assert len(totals) == 2 and "n2" in totals
    totals.changed("n1", None)
    totals.update()
    assert "n1" not in totals and len(totals) == 1


def test_a_pool_is_one_kind_and_kinds_go_with_their_last_node() -> None:
    """A pool's nodes, as the agent's node cache shares their parts, cost one kind between them;
    a kind no node is of any more is not kept."""
    trimmer = capacity.NodeTrimmer()
    template = random_node(random.Random(7), "template")
    totals = NodeTotals()
    for i in range(50):
        node = json.loads(json.dumps(template).replace('"template"', f'"n{i}"'))
        totals.changed(f"n{i}", trimmer(node))
    totals.update()
    assert (len(totals), totals.kinds) == (50, 1)
    cordoned = trimmer({**template, "metadata": {"name": "n0", "labels": template["metadata"]["labels"]},
                        "spec": {"unschedulable": True}})
    totals.changed("n0", cordoned)
    totals.update()
    assert totals.kinds == 2
    for i in range(50):
        totals.changed(f"n{i}", None)
    totals.update()
    assert (len(totals), totals.kinds) == (0, 0)
    assert capacity.summarize(totals, [], now=NOW, utilization_time=NOW) == reference([], [])


@pytest.mark.parametrize("seed", range(60))
def test_one_nodes_shape_key_is_the_shape_summarize_reports_for_it_alone(seed: int) -> None:
    """:func:`capacity.node_shape_key`, the what-if member's way to read one node, is the one
    ``nodeShapes`` entry ``summarize([node], pods)`` reports (but for its count and the node's
    name, which the what-if member lists itself), byte for byte as JSON with sorted keys; None when
    that report has no shape. Pods of other nodes, finished and unbound pods are among the pods
    given, as the report is given them."""
    rng = random.Random(seed)
    trimmer = capacity.NodeTrimmer()
    for i in range(20):
        node = random_node(rng, f"n{i}")
        pod_list = [random_pod(rng, f"p{j}", [f"n{i}", f"n{i}", "other"]) for j in range(rng.randint(0, 8))]
        for given in (node, trimmer(node)):
            shapes = capacity.summarize([given], pod_list, now=NOW)["nodeShapes"]
            assert len(shapes) <= 1
            got = capacity.node_shape_key(given, pod_list)
            if not shapes:
                assert got is None
                continue
            assert shapes[0]["count"] == 1
            expected = {k: v for k, v in shapes[0].items() if k not in ("count", "hostnames")}
            assert got == json.dumps(expected, sort_keys=True, separators=(",", ":"))
            assert json.loads(got) == expected
