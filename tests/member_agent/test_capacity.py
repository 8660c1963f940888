"""The capacity report: allocation accounting, GPU summaries, shapes, and a compact 1,000-node report."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from controlplane.apis.cluster_v1alpha1 import ClusterReadyReason
from controlplane.apis.podview import GpuDevice, devices_by_pod
from controlplane.reports import aggregated
from member_agent import capacity

NOW = "2025-01-01T00:00:00Z"
GIB = 2**30


def node(
    name: str,
    *,
    cpu: str = "96",
    memory: str = "1024Gi",
    resources: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
    capacity_only: bool = False,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110", **(resources or {})}
    status: dict[str, Any] = {
        "capacity": alloc,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "nodeInfo": {"kubeletVersion": "v1.30.2"},
    }
    if not capacity_only:
        status["allocatable"] = alloc
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": status,
    }


def pod(
    name: str,
    node_name: str | None,
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    phase: str = "Running",
    namespace: str = "default",
    init: list[dict[str, str]] | None = None,
    owner: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": resources}]}
    if node_name:
        spec["nodeName"] = node_name
    if init:
        spec["initContainers"] = [
            {"name": f"init{i}", "resources": {"requests": r}} for i, r in enumerate(init)
        ]
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


A100 = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.memory": "81920",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/mig.strategy": "none",
}
H100_MIXED = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.count": "1",
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/gpu.replicas": "0",
}
A100_TS = {**A100, "nvidia.com/gpu.replicas": "10", "nvidia.com/gpu.sharing-strategy": "time-slicing"}


@pytest.mark.parametrize(
    ("pod_spec", "expected"),
    [
        pytest.param(
            pod("p", "n", requests={"cpu": "500m", "memory": "1Gi"}),
            {"cpu": 500, "memory": GIB},
            id="requests",
        ),
        pytest.param(
            pod("p", "n", limits={"nvidia.com/gpu": "2"}), {"nvidia.com/gpu": 2}, id="limits-fill-requests"
        ),
        pytest.param(
            pod("p", "n", requests={"cpu": "1"}, limits={"cpu": "4", "nvidia.com/mig-1g.10gb": "1"}),
            {"cpu": 1000, "nvidia.com/mig-1g.10gb": 1},
            id="request-wins-over-limit",
        ),
        pytest.param(
            pod("p", "n", requests={"cpu": "1"}, init=[{"cpu": "3"}, {"cpu": "2", "memory": "1Gi"}]),
            {"cpu": 3000, "memory": GIB},
            id="init-containers-max",
        ),
        pytest.param(
            pod("p", "n", requests={"ephemeral-storage": "1Gi"}), {}, id="untracked-resource-ignored"
        ),
    ],
)
def test_pod_requests(pod_spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert capacity.pod_requests(pod_spec) == expected


@pytest.mark.parametrize(
    ("phase", "node_name", "counted"),
    [
        ("Running", "n1", True),
        ("Pending", "n1", True),
        ("Succeeded", "n1", False),
        ("Failed", "n1", False),
        ("Pending", None, False),
    ],
)
def test_only_bound_non_terminal_pods_are_allocated(phase: str, node_name: str | None, counted: bool) -> None:
    status = capacity.summarize(
        [node("n1", resources={"nvidia.com/gpu": "8"}, labels=A100)],
        [pod("p", node_name, limits={"nvidia.com/gpu": "3"}, phase=phase)],
        now=NOW,
    )
    allocated = status["resourceSummary"]["allocated"].get("nvidia.com/gpu", 0)
    assert allocated == (3 if counted else 0)
    free = status["nodeShapes"][0]["free"]["nvidia.com/gpu"]
    assert free == (5 if counted else 8)


def test_gpu_summary_per_resource_and_product() -> None:
    nodes = [
        node("a1", resources={"nvidia.com/gpu": "8"}, labels=A100),
        node("a2", resources={"nvidia.com/gpu": "8"}, labels=A100),
        node(
            "h1",
            resources={"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-3g.40gb": "1"},
            labels=H100_MIXED,
        ),
    ]
    pods = [
        pod("p1", "a1", limits={"nvidia.com/gpu": "4"}),
        pod("p2", "a2", limits={"nvidia.com/gpu": "1"}),
        pod("p3", "h1", limits={"nvidia.com/mig-1g.10gb": "1"}),
    ]
    status = capacity.summarize(nodes, pods, now=NOW)
    summary = {(e["resource"], e["product"]): e for e in status["gpuSummary"]}
    assert summary[("nvidia.com/gpu", "NVIDIA-A100-SXM4-80GB")] == {
        "resource": "nvidia.com/gpu",
        "product": "NVIDIA-A100-SXM4-80GB",
        "capacity": 16,
        "allocatable": 16,
        "allocated": 5,
    }
    assert summary[("nvidia.com/mig-1g.10gb", "NVIDIA-H100-80GB-HBM3")]["allocated"] == 1
    assert summary[("nvidia.com/mig-3g.40gb", "NVIDIA-H100-80GB-HBM3")]["allocatable"] == 1
    assert status["resourceSummary"]["allocatable"]["nvidia.com/gpu"] == 16
    assert status["nodeSummary"] == {"total": 3, "ready": 3}
    h100_shape = next(s for s in status["nodeShapes"] if s["gpu"]["product"] == "NVIDIA-H100-80GB-HBM3")
    assert h100_shape["gpu"]["migStrategy"] == "mixed"
    assert h100_shape["free"]["nvidia.com/mig-1g.10gb"] == 1
    assert h100_shape["gpu"]["sharedReplicas"] == 1


@pytest.mark.parametrize(
    ("resource", "labels"),
    [
        ("nvidia.com/gpu", A100_TS),
        ("nvidia.com/gpu.shared", {**A100, "nvidia.com/gpu.replicas": "10"}),
    ],
)
def test_time_sliced_shares_count_as_a_tenth_of_a_gpu(resource: str, labels: dict[str, str]) -> None:
    nodes = [
        node("ts1", resources={resource: "80"}, labels=labels),
        node("w1", resources={"nvidia.com/gpu": "8"}, labels=A100),
    ]
    pods = [pod("p1", "ts1", limits={resource: "3"})]
    status = capacity.summarize(nodes, pods, now=NOW)
    shared = [e for e in status["gpuSummary"] if e.get("sharedReplicas")]
    assert len(shared) == 1
    entry = shared[0]
    assert entry["resource"] == resource
    assert (entry["capacity"], entry["allocated"], entry["sharedReplicas"]) == (80, 3, 10)
    assert entry["gpuEquivalent"] == {"capacity": 8.0, "allocatable": 8.0, "allocated": 0.3}
    # Shares are never added to the whole GPUs of the same product.
    whole = [e for e in status["gpuSummary"] if not e.get("sharedReplicas")]
    assert [(e["resource"], e["capacity"]) for e in whole] == [("nvidia.com/gpu", 8)]
    ts_shape = next(s for s in status["nodeShapes"] if s["labels"].get("nvidia.com/gpu.replicas") == "10")
    assert ts_shape["gpu"]["sharedReplicas"] == 10


def test_mig_invalid_is_unusable_and_named_in_ready_message() -> None:
    invalid = {
        **A100,
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID",
        "nvidia.com/mig.strategy": "single",
    }
    nodes = [
        node("bad-1", resources={"nvidia.com/gpu": "8"}, labels=invalid),
        node("ok-1", resources={"nvidia.com/gpu": "8"}, labels=A100),
    ]
    status = capacity.summarize(nodes, [], now=NOW)
    bad = next(e for e in status["gpuSummary"] if e["product"].endswith("-MIG-INVALID"))
    assert bad["unusable"] is True
    assert bad["allocatable"] == 0
    assert bad["capacity"] == 8
    ready = status["conditions"][0]
    assert ready["type"] == "Ready"
    assert ready["reason"] == ClusterReadyReason.INVALID_GPU_CONFIG
    assert "bad-1" in ready["message"] and "MIG" in ready["message"]
    bad_shape = next(s for s in status["nodeShapes"] if s["gpu"]["product"].endswith("-MIG-INVALID"))
    assert bad_shape["free"]["nvidia.com/gpu"] == 0


@pytest.mark.parametrize(
    ("ready", "unschedulable", "in_shapes", "ready_count"),
    [(True, False, True, 1), (False, False, False, 0), (True, True, False, 1)],
)
def test_not_ready_or_cordoned_nodes_are_counted_but_not_shaped(
    ready: bool, unschedulable: bool, in_shapes: bool, ready_count: int
) -> None:
    status = capacity.summarize(
        [
            node(
                "n1", resources={"nvidia.com/gpu": "8"}, labels=A100, ready=ready, unschedulable=unschedulable
            )
        ],
        [],
        now=NOW,
    )
    assert status["nodeSummary"] == {"total": 1, "ready": ready_count}
    assert bool(status["nodeShapes"]) is in_shapes
    assert status["conditions"][0]["status"] == ("True" if ready else "False")


def test_shape_labels_drop_per_node_identities_and_keep_taints() -> None:
    taint = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}
    nodes = [
        node(
            f"n{i}",
            resources={"nvidia.com/gpu": "8"},
            labels={**A100, "node-id": f"n{i}", "pool": "p1"},
            taints=[taint],
        )
        for i in range(3)
    ]
    status = capacity.summarize(nodes, [], now=NOW)
    assert len(status["nodeShapes"]) == 1
    shape = status["nodeShapes"][0]
    assert shape["count"] == 3
    assert "kubernetes.io/hostname" not in shape["labels"] and "node-id" not in shape["labels"]
    assert shape["labels"]["pool"] == "p1"
    assert shape["taints"] == [taint]
    assert shape["allocatable"]["nvidia.com/gpu"] == 8


def test_free_cpu_and_memory_round_down() -> None:
    status = capacity.summarize(
        [node("n1", cpu="8", memory="16Gi")],
        [pod("p", "n1", requests={"cpu": "1500m", "memory": "100Mi"})],
        now=NOW,
    )
    free = status["nodeShapes"][0]["free"]
    assert free["cpu"] == 6000  # 6.5 cores free, reported as 6
    assert free["memory"] == 15 * GIB  # 15.9 GiB free, reported as 15 GiB
    assert status["nodeShapes"][0]["gpu"] is None


def test_capacity_is_used_when_allocatable_is_missing() -> None:
    status = capacity.summarize(
        [node("n1", resources={"nvidia.com/gpu": "4"}, labels=A100, capacity_only=True)], [], now=NOW
    )
    assert status["nodeShapes"][0]["allocatable"]["nvidia.com/gpu"] == 4


def test_ready_transition_time_moves_only_on_status_change() -> None:
    nodes = [node("n1")]
    first = capacity.summarize(nodes, [], now=NOW)
    later = capacity.summarize(nodes, [], now="2025-01-01T01:00:00Z", previous_conditions=first["conditions"])
    assert later["conditions"][0]["lastTransitionTime"] == NOW
    down = capacity.summarize(
        [node("n1", ready=False)], [], now="2025-01-01T02:00:00Z", previous_conditions=later["conditions"]
    )
    assert down["conditions"][0]["lastTransitionTime"] == "2025-01-01T02:00:00Z"


@pytest.mark.parametrize(
    ("owner", "labels", "expected"),
    [
        (
            {"kind": "ReplicaSet", "name": "web-5d9c7", "controller": True},
            {"pod-template-hash": "5d9c7"},
            {"kind": "Deployment", "name": "web"},
        ),
        ({"kind": "Job", "name": "train", "controller": True}, {}, {"kind": "Job", "name": "train"}),
        (
            {"kind": "PyTorchJob", "name": "bert", "controller": True},
            {},
            {"kind": "PyTorchJob", "name": "bert"},
        ),
        (None, {}, None),
        # An MPIJob's launcher is a Job (mpi-operator v2); the operator's labels name the MPIJob.
        (
            {"kind": "Job", "name": "allreduce-launcher", "controller": True},
            {"training.kubeflow.org/job-name": "allreduce", "training.kubeflow.org/operator-name": "mpi-operator"},
            {"kind": "MPIJob", "name": "allreduce"},
        ),
        (
            {"kind": "PyTorchJob", "name": "bert", "controller": True},
            {"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/operator-name": "pytorchjob-controller"},
            {"kind": "PyTorchJob", "name": "bert"},
        ),
        # A RayJob's pods belong to a RayCluster with a generated name; KubeRay's labels name the RayJob.
        (
            {"kind": "RayCluster", "name": "tune-raycluster-x7k2p", "controller": True},
            {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "tune"},
            {"kind": "RayJob", "name": "tune"},
        ),
        # An operator name it does not know: the controller owner, as before.
        (
            {"kind": "Job", "name": "x-launcher", "controller": True},
            {"training.kubeflow.org/job-name": "x", "training.kubeflow.org/operator-name": "other"},
            {"kind": "Job", "name": "x-launcher"},
        ),
    ],
)
def test_owner_workload(
    owner: dict[str, Any] | None, labels: dict[str, str], expected: dict[str, str] | None
) -> None:
    assert capacity.owner_workload(pod("p", "n", owner=owner, labels=labels)) == expected


def test_utilization_and_gpu_pod_allocations_per_node() -> None:
    nodes = [
        node("n1", resources={"nvidia.com/gpu": "8"}, labels=A100),
        node("n2", resources={"nvidia.com/gpu": "8"}, labels=A100),
    ]
    owner = {"kind": "ReplicaSet", "name": "web-abc", "controller": True}
    pods = [
        pod(
            "gpu-pod",
            "n1",
            requests={"cpu": "1"},
            limits={"nvidia.com/gpu": "1"},
            owner=owner,
            labels={"pod-template-hash": "abc"},
        ),
        pod("cpu-pod", "n1", requests={"cpu": "1"}),
    ]
    devices = {
        "n1": [{"gpu": 0, "uuid": "GPU-0", "pod": "gpu-pod", "namespace": "default", "utilization": 0.5}]
    }
    status = capacity.summarize(nodes, pods, now=NOW, utilization=devices, utilization_time=NOW)
    util = status["utilization"]
    assert util["sampleTime"] == NOW
    # Only n1 has DCGM devices, one GPU held; the CPU pod is not listed; the ReplicaSet's pod is its
    # Deployment's, measured 50 % busy.
    assert util["version"] == 3
    assert util["nodes"] == {"class": [0], "count": [1]}
    assert util["nodeClasses"] == [{"product": 0, "ready": 1, "schedulable": 1, "free": []}]
    assert util["kinds"] == [[None, 1.0, "nvidia.com/gpu"]]
    assert (util["namespaces"], util["ownerKinds"]) == (["default"], ["Deployment"])
    assert util["workloads"] == {"namespace": [0], "kind": [0], "name": ["web"], "pods": [1]}
    busy = aggregated.BUSY
    assert util["held"] == {
        "workload": [0], "product": [0], "ready": [1], "kind": [0], "state": [busy], "count": [1], "percent": [50]
    }
    assert util["shapes"] == [[[0, 1]]]
    assert util["pods"] == {"workload": [0], "product": [0], "ready": [1], "shape": [0], "count": [1]}
    # A small member's report keeps the per-device encoding for the pod views.
    assert devices_by_pod(util) == {("default", "gpu-pod"): [GpuDevice("0", None, 0.5)]}


def test_trimmed_objects_give_the_same_report() -> None:
    nodes = [
        node(
            f"n{i}",
            resources={"nvidia.com/gpu": "8"},
            labels=A100,
            taints=[{"key": "k", "effect": "NoSchedule"}],
        )
        for i in range(4)
    ]
    pods = [
        pod(
            f"p{i}",
            f"n{i % 4}",
            requests={"cpu": "2", "memory": "4Gi"},
            limits={"nvidia.com/gpu": "1"},
            init=[{"cpu": "5"}],
        )
        for i in range(7)
    ]
    full = capacity.summarize(nodes, pods, now=NOW)
    trimmed = capacity.summarize(
        [capacity.trim_node(n) for n in nodes], [capacity.trim_pod(p) for p in pods], now=NOW
    )
    assert full == trimmed


def _thousand_nodes() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """1,000 nodes x 8 GPUs in 4 node groups, and pods filling their GPUs unevenly."""
    groups = [
        ("whole", {**A100, "pool": "whole"}, {"nvidia.com/gpu": "8"}),
        (
            "mig",
            {**H100_MIXED, "nvidia.com/gpu.count": "8", "pool": "mig"},
            {"nvidia.com/mig-1g.10gb": "16", "nvidia.com/mig-3g.40gb": "8"},
        ),
        ("ts", {**A100_TS, "pool": "ts"}, {"nvidia.com/gpu": "80"}),
        ("spot", {**A100, "pool": "spot"}, {"nvidia.com/gpu": "8"}),
    ]
    nodes = []
    pods = []
    for i in range(1000):
        group, labels, resources = groups[i % 4]
        name = f"{group}-{i:04d}"
        taints = [{"key": "spot", "value": "true", "effect": "NoSchedule"}] if group == "spot" else []
        nodes.append(node(name, resources=resources, labels={**labels, "node-id": name}, taints=taints))
        # Each node carries 0-3 identical pods: at most 4 allocation states per group.
        for j in range(i % 4 if group != "mig" else (i // 4) % 4):
            gpu_resource = "nvidia.com/mig-1g.10gb" if group == "mig" else "nvidia.com/gpu"
            pods.append(
                pod(f"{name}-p{j}", name, requests={"cpu": "4", "memory": "32Gi"}, limits={gpu_resource: "1"})
            )
    return nodes, pods


def test_thousand_node_cluster_report_is_compact() -> None:
    """1,000 nodes x 8 GPUs in 4 node groups with pods filling GPUs unevenly: shapes group them."""
    nodes, pods = _thousand_nodes()
    status = capacity.summarize(nodes, pods, now=NOW)
    assert status["nodeSummary"] == {"total": 1000, "ready": 1000}
    assert sum(s["count"] for s in status["nodeShapes"]) == 1000
    # whole: i%4==0 -> 0 pods; mig: (i//4)%4 -> 4 states; ts: 2 pods; spot: 3 pods.
    assert len(status["nodeShapes"]) == 7
    capacity_part = {k: v for k, v in status.items() if k != "utilization"}
    size = len(json.dumps(capacity_part, separators=(",", ":")))
    assert size < 16_000, f"capacity report is {size} bytes"
    # The utilization grows with GPU pods only, by a small constant each (here: one workload per pod).
    per_pod = len(json.dumps(status["utilization"], separators=(",", ":"))) / len(pods)
    assert per_pod < 200, f"{per_pod:.0f} bytes per GPU pod"
    gpu = {(e["resource"], e.get("sharedReplicas", 1)): e for e in status["gpuSummary"]}
    assert gpu[("nvidia.com/gpu", 1)]["capacity"] == 500 * 8
    assert gpu[("nvidia.com/gpu", 1)]["allocated"] == 250 * 3
    assert gpu[("nvidia.com/gpu", 10)]["allocated"] == 250 * 2
    assert gpu[("nvidia.com/mig-1g.10gb", 1)]["allocated"] == sum((i // 4) % 4 for i in range(1, 1000, 4))


def test_a_node_cache_that_shares_equal_parts_gives_the_same_report() -> None:
    nodes, pods = _thousand_nodes()
    nodes[5]["spec"]["unschedulable"] = True
    nodes[6]["status"]["conditions"][0]["status"] = "False"
    trimmer = capacity.NodeTrimmer()
    shared = [trimmer(n) for n in nodes]
    trimmed_pods = [capacity.trim_pod(p) for p in pods]
    assert capacity.summarize(shared, trimmed_pods, now=NOW) == capacity.summarize(
        [capacity.trim_node(n) for n in nodes], trimmed_pods, now=NOW
    )
    # Four pools, one cordoned node and one not Ready: a handful of distinct parts for 1,000 nodes.
    assert trimmer.parts <= 16
    assert shared[8]["status"] is shared[12]["status"] and shared[8]["metadata"]["labels"] is shared[12]["metadata"]["labels"]
    assert shared[8]["metadata"]["name"] == "whole-0008"
    assert "kubernetes.io/hostname" not in shared[8]["metadata"]["labels"]
    assert "node-id" not in shared[8]["metadata"]["labels"]  # its value is the node's name


def test_the_shared_parts_are_bounded() -> None:
    trimmer = capacity.NodeTrimmer(max_parts=3)
    for index in range(50):
        trimmed = trimmer(node(f"n{index}", labels={"rack": str(index)}))
        assert trimmed["metadata"]["labels"] == {"rack": str(index)}
        assert trimmer.parts <= 3


def test_owner_labels_survive_trimming() -> None:
    labels = {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "tune", "app": "x"}
    owner = {"kind": "RayCluster", "name": "tune-raycluster-x7k2p", "controller": True}
    trimmed = capacity.trim_pod(pod("p", "n1", owner=owner, labels=labels))
    assert capacity.owner_workload(trimmed) == {"kind": "RayJob", "name": "tune"}


def test_a_finished_pod_dcgm_still_names_is_reported_under_its_deployment() -> None:
    """The exporter still names a pod that just finished (or is gone from the node's active pods):
    its GPU time belongs to its Deployment, not to a nameless ``Pod/infer-weighted-56fd5b7d5-9rdjm``."""
    nodes = [node("n1", resources={"nvidia.com/gpu": "8"}, labels=A100)]
    owner = {"kind": "ReplicaSet", "name": "infer-weighted-56fd5b7d5", "controller": True}
    finished = pod(
        "infer-weighted-56fd5b7d5-9rdjm", "n1", limits={"nvidia.com/gpu": "1"}, namespace="gpu",
        owner=owner, labels={"pod-template-hash": "56fd5b7d5"}, phase="Succeeded",
    )
    devices = {"n1": [{"gpu": 0, "uuid": "GPU-0", "pod": finished["metadata"]["name"], "namespace": "gpu",
                       "utilization": 0.4}]}
    for pods in ([finished], [capacity.trim_pod(finished)]):
        status = capacity.summarize(nodes, pods, now=NOW, utilization=devices, utilization_time=NOW)
        [sample] = aggregated.expand(status["utilization"])
        assert [d.allocated_to.workload for d in sample.devices if d.allocated_to] == ["Deployment/infer-weighted"]



def test_nodes_sharing_their_labels_and_status_are_shaped_each_as_on_its_own() -> None:
    labels = {**A100, "rack": "n1"}  # n1's own name: left out of n1's shape alone
    status = node("n0", resources={"nvidia.com/gpu": "8"})["status"]
    nodes = [{"metadata": {"name": f"n{i}", "labels": labels}, "spec": {}, "status": status} for i in range(3)]
    pods = [pod("p0", "n2", limits={"nvidia.com/gpu": "1"})]
    shared = capacity.summarize(nodes, pods, now=NOW)
    alone = capacity.summarize([copy.deepcopy(n) for n in nodes], pods, now=NOW)
    assert shared == alone
    shapes = sorted((s["count"], "rack" in s["labels"], s["free"]["nvidia.com/gpu"]) for s in shared["nodeShapes"])
    assert shapes == [(1, False, 8), (1, True, 7), (1, True, 8)]


def test_a_report_reads_again_only_the_pods_that_changed_since_the_last() -> None:
    """The reporter's PodRequests: the same pod object keeps its parsed requests, a replaced
    object (the informer's copy of a changed pod) is parsed again, and the figures are those
    of a report that parses every pod."""
    nodes = [node("a1", resources={"nvidia.com/gpu": "8"}, labels=A100)]
    first, second = pod("p1", "a1", limits={"nvidia.com/gpu": "4"}), pod("p2", "a1", limits={"nvidia.com/gpu": "1"})
    memo = capacity.PodRequests()
    capacity.summarize(nodes, [first, second], now=NOW, requests_of=memo)
    kept = memo.of(first)
    memo.report_done()  # what of() just read is now the last report's
    resized = pod("p2", "a1", limits={"nvidia.com/gpu": "3"})  # p2 changed: a new object
    status = capacity.summarize(nodes, [first, resized], now=NOW, requests_of=memo)
    assert status == capacity.summarize(nodes, [first, resized], now=NOW)
    [gpus] = status["gpuSummary"]
    assert gpus["allocated"] == 7
    assert memo.of(first) is kept, "an unchanged pod object is not parsed again"
    assert memo.of(resized)["nvidia.com/gpu"] == 3
    memo.report_done()
    memo.report_done()  # a report that read no pod: nothing is kept
    assert memo.of(first) is not kept


def _unschedulable(pod_obj: dict[str, Any], message: str = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.") -> dict[str, Any]:
    pod_obj["status"]["phase"] = "Pending"
    pod_obj["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    return pod_obj


def test_the_report_lists_the_workloads_whose_pods_the_member_cannot_place() -> None:
    """The hub trusts a report that lists a workload's unschedulable pods to have been taken
    after they became so (it may reach the hub before the Work status naming them)."""
    rs = {"kind": "ReplicaSet", "name": "train-5d8f", "controller": True}
    pods = [
        _unschedulable(pod("train-5d8f-a", None, requests={"nvidia.com/gpu": "2"}, owner=rs, labels={"pod-template-hash": "5d8f"})),
        _unschedulable(pod("train-5d8f-b", None, requests={"nvidia.com/gpu": "2"}, owner=rs, labels={"pod-template-hash": "5d8f"})),
        _unschedulable(pod("solo", None, requests={"nvidia.com/gpu": "1"}, namespace="team-a")),
        pod("waiting", None, requests={"nvidia.com/gpu": "1"}, phase="Pending"),  # not yet tried: not listed
        pod("bound", "n1", requests={"nvidia.com/gpu": "1"}),
    ]
    status = capacity.summarize([node("n1", resources={"nvidia.com/gpu": "1"})], pods, now=NOW)
    assert status["unschedulableWorkloads"] == [
        {"namespace": "default", "kind": "Deployment", "name": "train", "pods": 2},
        {"namespace": "team-a", "kind": "Pod", "name": "solo", "pods": 1},
    ]
    trimmed = capacity.summarize([node("n1", resources={"nvidia.com/gpu": "1"})], [capacity.trim_pod(p) for p in pods], now=NOW)
    assert trimmed["unschedulableWorkloads"] == status["unschedulableWorkloads"]
    placed = capacity.summarize([node("n1")], [pod("bound", "n1")], now=NOW)
    assert "unschedulableWorkloads" not in placed


def test_the_unschedulable_list_is_bounded() -> None:
    many = [_unschedulable(pod(f"p{i:04d}", None)) for i in range(capacity.MAX_UNSCHEDULABLE_WORKLOADS + 50)]
    many.append(_unschedulable(pod("p0000-twin", None, owner={"kind": "Job", "name": "big", "controller": True})))
    many.append(_unschedulable(pod("p0000-twin2", None, owner={"kind": "Job", "name": "big", "controller": True})))
    listed = capacity.summarize([node("n1")], many, now=NOW)["unschedulableWorkloads"]
    assert len(listed) == capacity.MAX_UNSCHEDULABLE_WORKLOADS
    assert listed[0] == {"namespace": "default", "kind": "Job", "name": "big", "pods": 2}  # most pods first


def test_nodes_counted_as_one_group_report_what_each_node_reports() -> None:
    """A pool's nodes that share their cached parts and allocation are worked out once and counted
    by the group: the report equals the one of the same nodes with parts of their own (one group
    each), with invalid nodes named in name order and DCGM devices kept per node."""
    invalid = {**A100, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID", "pool": "bad"}
    nodes = [node(f"ok-{i:02d}", resources={"nvidia.com/gpu": "8"}, labels={**A100, "pool": "ok"}) for i in range(30)]
    nodes += [node(f"bad-{i:02d}", resources={"nvidia.com/gpu": "8"}, labels=invalid) for i in (7, 3, 5)]
    nodes.reverse()  # the report reads nodes in any order
    pods = [pod(f"p{i}", f"ok-{i:02d}", requests={"cpu": "1"}, limits={"nvidia.com/gpu": str(1 + i % 2)}) for i in range(6)]
    devices = {
        "ok-01": [{"gpu": 0, "uuid": "GPU-1", "pod": "p1", "namespace": "default", "utilization": 0.5}],
        "ok-20": [{"gpu": 0, "uuid": "GPU-20", "utilization": 0.0}],
    }
    trimmer = capacity.NodeTrimmer()
    shared = [trimmer(n) for n in nodes]
    assert shared[0]["status"] is shared[1]["status"]  # the pool's parts are one object
    own = [capacity.trim_node(n) for n in nodes]
    trimmed_pods = [capacity.trim_pod(p) for p in pods]
    grouped = capacity.summarize(shared, trimmed_pods, now=NOW, utilization=devices, utilization_time=NOW)
    assert grouped == capacity.summarize(own, trimmed_pods, now=NOW, utilization=devices, utilization_time=NOW)
    assert "bad-03, bad-05, bad-07" in grouped["conditions"][0]["message"]
    whole = next(e for e in grouped["gpuSummary"] if not e["product"].endswith("-MIG-INVALID"))
    assert (whole["capacity"], whole["allocated"]) == (30 * 8, 1 + 2 + 1 + 2 + 1 + 2)
    assert sum(s["count"] for s in grouped["nodeShapes"]) == 33
    free = sorted((s["free"]["nvidia.com/gpu"], s["count"]) for s in grouped["nodeShapes"] if s["labels"]["pool"] == "ok")
    assert free == [(6, 3), (7, 3), (8, 24)]
    assert sum(grouped["utilization"]["nodes"]["count"]) == 2  # the two nodes DCGM named
