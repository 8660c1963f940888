"""A 1,000-node x 8-GPU member, every GPU allocated, reports a Cluster object the hub can store.

etcd refuses a request larger than 1.5 MiB (its default ``--max-request-bytes``), so a report
that grows with the cluster past that cannot be stored at all. The member here is the
simulator's: half whole A100s, a quarter A100s cut into a mixed MIG layout, whole H100s and
time-sliced A10s, filled to the last GPU, MIG slice and share with Deployment pods placed by
the simulator's device allocator, and its DCGM page rendered and parsed as the agent does.
The report is written through the hub's object store (in memory and in a real etcd) and read
back by the waste accounting's adapter, which must still see every GPU and who holds it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from controlplane.apis.meta import parse_time
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.reports.snapshot import sample_from_cluster_statuses
from controlplane.storage import Store
from member_agent import capacity, dcgm
from simulator.dcgm import PodDevice, render_metrics
from simulator.nodes import LABEL_NODE_GROUP, build_inventory, build_nodes
from simulator.profile import ClusterProfile, parse_fleet
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.reading import pod_request

pytestmark = pytest.mark.timeout(120)

NOW = "2024-05-01T00:00:00Z"
#: The stored object's bound: a third of etcd's default request limit (1.5 MiB).
MAX_STORED_BYTES = 512 * 1024
NODES = 1000
A100 = "NVIDIA-A100-SXM4-80GB"
#: What pods on each node group ask for: (resource, amount per pod), largest first.
POD_SHAPES: dict[str, list[tuple[str, int]]] = {
    "a100": [("nvidia.com/gpu", 8), ("nvidia.com/gpu", 4), ("nvidia.com/gpu", 2), ("nvidia.com/gpu", 1)],
    "a100-mig": [
        ("nvidia.com/mig-3g.40gb", 1),
        ("nvidia.com/mig-2g.20gb", 1),
        ("nvidia.com/mig-1g.10gb", 1),
    ],
    "h100": [("nvidia.com/gpu", 8), ("nvidia.com/gpu", 4), ("nvidia.com/gpu", 1)],
    "a10-shared": [("nvidia.com/gpu.shared", 2), ("nvidia.com/gpu.shared", 1)],
}
#: Characters of the random part of a ReplicaSet's pod names, as Kubernetes draws them.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def member_profile() -> ClusterProfile:
    half, quarter, eighth = NODES // 2, NODES // 4, NODES // 8
    groups: list[dict[str, Any]] = [
        {"name": "a100", "count": half, "cpu": 96, "memoryGiB": 1024, "gpu": {"product": A100, "count": 8}},
        {
            "name": "a100-mig",
            "count": quarter,
            "cpu": 96,
            "memoryGiB": 1024,
            "gpu": {
                "product": A100,
                "count": 8,
                "mig": {"strategy": "mixed", "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
            },
        },
        {
            "name": "h100",
            "count": eighth,
            "cpu": 192,
            "memoryGiB": 2048,
            "gpu": {"product": "NVIDIA-H100-80GB-HBM3", "count": 8},
        },
        {
            "name": "a10-shared",
            "count": NODES - half - quarter - eighth,
            "cpu": 64,
            "memoryGiB": 512,
            "gpu": {"product": "NVIDIA-A10", "count": 8, "sharing": {"replicas": 4, "renameByDefault": True}},
        },
    ]
    return parse_fleet({"clusters": [{"name": "big", "nodeGroups": groups}]}).clusters[0]


def deployment_pod(workload: str, *, resource: str, amount: int, rng: random.Random) -> dict[str, Any]:
    """A pod of Deployment ``workload``; one in ten Deployments is mid-rollout (two ReplicaSets)."""
    hashes = ("7d4b9c8f5", "5f6d8b7c9") if hash(workload) % 10 == 0 else ("7d4b9c8f5",)
    replica_set = f"{workload}-{rng.choice(hashes)}"
    return {
        "metadata": {
            "name": f"{replica_set}-{''.join(rng.choices(NAME_ALPHABET, k=5))}",
            "namespace": "team-" + workload.split("-")[0],
            "labels": {"app": workload, "pod-template-hash": replica_set.rsplit("-", 1)[1]},
            "ownerReferences": [{"kind": "ReplicaSet", "name": replica_set, "controller": True}],
        },
        "spec": {
            "containers": [
                {"name": "main", "resources": {"limits": {resource: amount}, "requests": {"cpu": "1"}}}
            ]
        },
        "status": {"phase": "Running"},
    }


def fill_every_gpu(
    profile: ClusterProfile, nodes: list[dict[str, Any]], *, seed: int
) -> tuple[list[dict[str, Any]], list[PodDevice], dict[str, float]]:
    """Pods taking every GPU, MIG slice and share of every node (the largest shape that still
    fits, chosen at random among those), with the devices each holds and a utilization each."""
    rng = random.Random(seed)
    inventory = build_inventory(profile)
    state = ClusterState(seed=seed)
    for node in nodes:
        state.add_node(node, inventory[node["metadata"]["name"]])
    pods: list[dict[str, Any]] = []
    uses: list[PodDevice] = []
    utilization: dict[str, float] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        node_state = state.nodes[name]
        while True:
            fitting = [
                (resource, amount)
                for resource, amount in POD_SHAPES[node["metadata"]["labels"][LABEL_NODE_GROUP]]
                if node_state.free(resource) >= amount
            ]
            if not fitting:
                break
            resource, amount = rng.choice(fitting)
            # A Deployment's pods all ask for the same shape; 50 Deployments per shape.
            workload = f"{rng.choice(('nlp', 'vision', 'rec', 'speech'))}-{resource.rsplit('/')[1]}-{amount}-{rng.randrange(50)}"
            pod = deployment_pod(workload, resource=resource, amount=amount, rng=rng)
            allocation = state.assume(pod_request(pod), name)
            pod["spec"]["nodeName"] = name
            pods.append(pod)
            meta = pod["metadata"]
            utilization[f"{meta['namespace']}/{meta['name']}"] = rng.random()
            uses.extend(
                PodDevice(name, device.id, meta["namespace"], meta["name"], "main")
                for device in allocation.devices
            )
    return pods, uses, utilization


@pytest.fixture(scope="module")
def full_report() -> tuple[dict[str, Any], int]:
    """The status the agent writes for the fully allocated member, and its pod count."""
    profile = member_profile()
    nodes = build_nodes(profile)
    pods, uses, utilization = fill_every_gpu(profile, nodes, seed=7)
    page = render_metrics(build_inventory(profile).values(), uses, utilization)
    by_node = dcgm.utilization_by_node(dcgm.parse_metrics(page))
    status = capacity.summarize(
        [capacity.trim_node(n) for n in nodes],
        [capacity.trim_pod(p) for p in pods],
        now=NOW,
        utilization=by_node,
        utilization_time=NOW,
    )
    return status, len(pods)


async def test_fully_allocated_thousand_node_report_is_stored_within_bounds(
    store: Store, full_report: tuple[dict[str, Any], int]
) -> None:
    status, pod_count = full_report
    assert status["nodeSummary"] == {"total": NODES, "ready": NODES}
    gpu = {(e["resource"], e["product"]): e for e in status["gpuSummary"]}
    assert all(e["allocated"] == e["allocatable"] > 0 for e in gpu.values()), "not every GPU is taken"

    objects = ObjectStore(store, hub_registry())
    await objects.bootstrap()
    rt = objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    created = await objects.create(
        rt,
        {
            "apiVersion": "cluster.gpufed.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": "big"},
            "spec": {"provider": "onprem", "pricing": {A100: 2.0}},
        },
    )
    await objects.update_status(rt, {**created, "status": status})
    stored = await objects.get_encoded(rt, name="big")
    assert len(stored) < MAX_STORED_BYTES, f"stored Cluster is {len(stored) / 1024:.0f} KiB"

    # The hub's accounting reads every physical GPU back, each one fully held by a pod.
    cluster = await objects.get(rt, name="big")
    fleet = sample_from_cluster_statuses([cluster], [], [], now=parse_time(NOW))
    [sample] = fleet.clusters
    devices = [d for node in sample.nodes for d in node.devices]
    assert sum(d.share for d in devices) == pytest.approx(NODES * 8)
    stranded = [d for d in devices if d.allocated_to is None and d.resource is not None]
    assert stranded == []
    holders = {(d.allocated_to.namespace, d.allocated_to.pod) for d in devices if d.allocated_to}
    assert len(holders) == pod_count
    assert all(d.utilization is not None for d in devices if d.resource is not None)
