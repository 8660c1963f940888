"""A 5,000-node x 8-GPU member, every GPU allocated, reports a Cluster object under 256 KiB.

etcd refuses a request larger than 1.5 MiB (its default ``--max-request-bytes``), so a report
that grows with the cluster past that cannot be stored at all; the agent's report is
aggregated per workload and node class (:mod:`controlplane.reports.aggregated`), so its size
follows the member's workloads, not its nodes. The member here is the
simulator's: half whole A100s, a quarter A100s cut into a mixed MIG layout, whole H100s and
time-sliced A10s, filled to the last GPU, MIG slice and share with Deployment pods placed by
the simulator's device allocator, and its DCGM page rendered and parsed as the agent does.
The report is written through the hub's object store (in memory and in a real etcd) and read
back by the waste accounting's adapter, which must still see every GPU and who holds it.

The same file checks that the hub's figures from the aggregated report equal those from the
per-device report agents wrote until now: the report is built twice from one member's nodes,
pods and DCGM samples (the per-device one with
:func:`controlplane.apis.utilization.encode_utilization`), and the hub's whole pipeline
(adapter, classification with pending demand, recommendations, per-second cell rates) must
give the same figures from both.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from controlplane.apis.timestamps import parse_time
from controlplane.apis.utilization import encode_utilization
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.reports import aggregated
from controlplane.reports.classify import classify_fleet
from controlplane.reports.fleet import PendingDemand
from controlplane.reports.recommend import find_opportunities
from controlplane.reports.rollups import cell_rates, opportunity_rates
from controlplane.reports.snapshot import sample_from_cluster_statuses
from controlplane.storage import Store
from member_agent import capacity, dcgm
from simulator.dcgm import PodDevice, render_metrics
from simulator.devices import NodeInventory
from simulator.nodes import LABEL_NODE_GROUP, build_inventory, build_nodes
from simulator.profile import ClusterProfile, parse_fleet
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.reading import node_state, pod_request

pytestmark = pytest.mark.timeout(600)

NOW = "2024-05-01T00:00:00Z"
#: The stored object's bound: a sixth of etcd's default request limit (1.5 MiB).
MAX_STORED_BYTES = 256 * 1024
NODES = 5000
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
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


def member_profile(size: int = NODES) -> ClusterProfile:
    half, quarter, eighth = size // 2, size // 4, size // 8
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
            "gpu": {"product": H100, "count": 8},
        },
        {
            "name": "a10-shared",
            "count": size - half - quarter - eighth,
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
    nodes: list[dict[str, Any]], inventory: dict[str, NodeInventory], *, seed: int
) -> tuple[list[dict[str, Any]], list[PodDevice], dict[str, float]]:
    """Pods taking every GPU, MIG slice and share of every node (the largest shape that still
    fits, chosen at random among those), with the devices each holds and a utilization each."""
    rng = random.Random(seed)
    state = ClusterState(seed=seed)
    state.add_node_states(node_state(node, inventory[node["metadata"]["name"]]) for node in nodes)
    pods: list[dict[str, Any]] = []
    uses: list[PodDevice] = []
    utilization: dict[str, float] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        held = state.nodes[name]
        while True:
            fitting = [
                (resource, amount)
                for resource, amount in POD_SHAPES[node["metadata"]["labels"][LABEL_NODE_GROUP]]
                if held.free(resource) >= amount
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
    nodes, inventory = build_nodes(profile), build_inventory(profile)
    pods, uses, utilization = fill_every_gpu(nodes, inventory, seed=7)
    page = render_metrics(inventory.values(), uses, utilization)
    by_node = dcgm.utilization_by_node(dcgm.parse_metrics(page))
    status = capacity.summarize(
        [capacity.trim_node(n) for n in nodes],
        [capacity.trim_pod(p) for p in pods],
        now=NOW,
        utilization=by_node,
        utilization_time=NOW,
    )
    return status, len(pods)


async def test_fully_allocated_five_thousand_node_report_is_stored_within_bounds(
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
    assert status["utilization"]["perDevice"] is None, "the per-device part is only kept while small"

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


# ---------------------------------------------------------------------------------------------
# The same figures from the aggregated report as from the per-device one
# ---------------------------------------------------------------------------------------------

A10 = "NVIDIA-A10"
T0 = parse_time(NOW)
L40S = "NVIDIA-L40S"
PRICING = {A100: 2.0, H100: 4.0, A10: 0.5, L40S: 2.0}


def k8s_node(name: str, *, product: str, resources: dict[str, int], ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", **{k: str(v) for k, v in resources.items()}},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def k8s_pod(name: str, node: str, resources: dict[str, int], *, deployment: str = "ml-infer") -> dict[str, Any]:
    """A pod of Deployment ``deployment`` (namespace ``team-ml``) named ``name``, bound to ``node``."""
    [(resource, amount)] = resources.items()
    pod = deployment_pod(deployment, resource=resource, amount=amount, rng=random.Random(name))
    pod["metadata"]["name"] = name
    pod["spec"]["nodeName"] = node
    return pod


def both_reports(
    monkeypatch: pytest.MonkeyPatch, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
    devices: dict[str, list[dict[str, Any]]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    def status() -> dict[str, Any]:
        return capacity.summarize(
            [capacity.trim_node(n) for n in nodes], [capacity.trim_pod(p) for p in pods],
            now=NOW, utilization=devices, utilization_time=NOW,
        )

    new = status()
    with monkeypatch.context() as patch:
        patch.setattr(capacity, "utilization_report", encode_utilization)
        old = status()
    assert aggregated.is_aggregated(new["utilization"]) and not aggregated.is_aggregated(old["utilization"])
    return old, new


def figures(status: dict[str, Any], pending: tuple[PendingDemand, ...]) -> dict[str, Any]:
    cluster = {
        "metadata": {"name": "big"},
        "spec": {"provider": "onprem", "pricing": PRICING},
        "status": {**status, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    sample = replace(sample_from_cluster_statuses([cluster], [], [], now=T0), pending=pending)
    classification = classify_fleet(sample)
    opportunities = find_opportunities(sample, classification)
    return {
        "cells": cell_rates(classification.states),
        "opportunities": opportunity_rates(opportunities),
        "unmet": sorted((u.demand.workload, u.replicas) for u in classification.unmet),
    }


def assert_same(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert new["unmet"] == old["unmet"]
    for table in ("cells", "opportunities"):
        assert set(new[table]) == set(old[table]), table
        for key, values in old[table].items():
            assert new[table][key] == pytest.approx(values, rel=1e-9, abs=1e-12), (table, key)


def demands() -> tuple[PendingDemand, ...]:
    def wait(workload: str, requests: dict[str, int], replicas: int, **kw: Any) -> PendingDemand:
        return PendingDemand("ml", workload, replicas, requests, **kw)

    return (
        wait("Deployment/big", {"nvidia.com/gpu": 8}, 3),
        wait("Deployment/two", {"nvidia.com/gpu": 2}, 40, products=frozenset({A100})),
        wait("Deployment/one", {"nvidia.com/gpu": 1}, 25),
        wait("Deployment/slice", {"nvidia.com/mig-3g.40gb": 1}, 30),
        wait("Deployment/small", {"nvidia.com/mig-1g.10gb": 2}, 10),
        wait("Deployment/share", {"nvidia.com/gpu.shared": 1}, 12),
    )


def simulated_member(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The size test's member at 200 nodes: some pods gone (free devices, so demand matters),
    some nodes not Ready or cordoned, utilization on both sides of the 10 % threshold."""
    rng = random.Random(seed)
    profile = member_profile(200)
    nodes, inventory = build_nodes(profile), build_inventory(profile)
    pods, uses, utilization = fill_every_gpu(nodes, inventory, seed=seed)
    kept = {id(p) for p in pods if rng.random() < 0.7}
    gone = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods if id(p) not in kept}
    pods = [p for p in pods if id(p) in kept]
    uses = [u for u in uses if (u.namespace, u.pod) not in gone]
    for key in utilization:
        utilization[key] = rng.choice((0.0, 0.05, 0.099, 0.1, 0.101, 0.5, 1.0, rng.random()))
    for node in nodes[::17]:
        node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    for node in nodes[5::13]:
        node["spec"]["unschedulable"] = True
    page = render_metrics(inventory.values(), uses, utilization)
    return nodes, pods, dcgm.utilization_by_node(dcgm.parse_metrics(page))


@pytest.mark.parametrize("seed", [3, 11])
def test_simulated_member_gives_the_same_figures(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    old, new = both_reports(monkeypatch, *simulated_member(seed))
    assert_same(figures(old, demands()), figures(new, demands()))
    assert figures(new, ())["cells"], "the fixture has devices"


def test_mig_remainders_shares_and_unlabelled_devices_give_the_same_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's special cases (test_snapshot's fixtures): a MIG GPU's unpartitioned rest,
    devices the exporter names no pod for, a pod the agent has not seen (no owner), a node not
    Ready."""
    nodes = [
        k8s_node("m1", product=H100, resources={"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1}),
        k8s_node("n1", product=A100, resources={"nvidia.com/gpu": 2}),
        k8s_node("n2", product=A100, resources={"nvidia.com/gpu": 2}, ready=False),
    ]
    pods = [
        k8s_pod("ml-train-abc12-y", "m1", {"nvidia.com/mig-2g.20gb": 1}, deployment="ml-train"),
        k8s_pod("ml-infer-abc12-x", "n1", {"nvidia.com/gpu": 1}),
        k8s_pod("ml-infer-abc12-z", "n2", {"nvidia.com/gpu": 1}),
    ]
    devices = {
        "m1": [
            {"gpu": 0, "uuid": "GPU-A", "profile": "1g.10gb", "instance": 1, "utilization": 0.0},
            {"gpu": 0, "uuid": "GPU-A", "profile": "1g.10gb", "instance": 2, "utilization": 0.0},
            {"gpu": 0, "uuid": "GPU-A", "profile": "2g.20gb", "instance": 3, "pod": "ml-train-abc12-y",
             "namespace": "team-ml", "utilization": 0.7},
        ],
        "n1": [{"gpu": 0, "uuid": "GPU-0", "utilization": 0.5}, {"gpu": 1, "uuid": "GPU-1", "utilization": 0.0}],
        "n2": [{"gpu": 0, "uuid": "GPU-2", "pod": "ml-infer-abc12-z", "namespace": "team-ml", "utilization": 0.3},
               {"gpu": 1, "uuid": "GPU-3", "pod": "gone-7f9-q", "namespace": "team-ml", "utilization": 0.02}],
    }
    old, new = both_reports(monkeypatch, nodes, pods, devices)
    pending = (PendingDemand("team-ml", "Deployment/wait", 2, {"nvidia.com/mig-2g.20gb": 1}),)
    assert_same(figures(old, pending), figures(new, pending))
    assert aggregated.pods_by_owner(new["utilization"]) == {
        ("team-ml", "Deployment", "ml-train"): 1, ("team-ml", "Deployment", "ml-infer"): 2
    }


def test_ties_the_accounting_breaks_by_node_name_fall_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two nodes alike but for their GPU model, at one price: a waiting replica is matched to the
    node first by name, so which model's GPU is free-needed depends on the nodes' order."""
    nodes = [
        k8s_node("a-node", product=L40S, resources={"nvidia.com/gpu": 2}),
        k8s_node("b-node", product=A100, resources={"nvidia.com/gpu": 2}),
    ]
    devices = {name: [{"gpu": 0, "uuid": f"{name}-0"}, {"gpu": 1, "uuid": f"{name}-1"}] for name in ("a-node", "b-node")}
    old, new = both_reports(monkeypatch, nodes, [], devices)
    pending = (PendingDemand("team-ml", "Deployment/wait", 1, {"nvidia.com/gpu": 2}),)
    expected = figures(old, pending)
    assert any(key[0] == "free-needed" and key[2] == L40S for key in expected["cells"])
    assert_same(expected, figures(new, pending))
