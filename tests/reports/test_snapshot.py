"""The adapter from hub objects, fed with the Cluster status the member agent really produces.

The per-device adapter's rules (device shares, MIG remainders, unlabelled devices) are checked
on the per-device report older agents write (the current agent runs the same rules before it
aggregates; tests/member_agent/test_report_size.py compares the two forms' figures)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from unittest import mock

import pytest

from controlplane.apis.utilization import encode_utilization
from controlplane.reports.classify import WasteState, classify
from controlplane.reports.fleet import UNPARTITIONED, PendingReason, PodRef
from controlplane.reports.snapshot import sample_from_cluster_statuses
from controlplane.reports.unreported import UNREPORTED_NODE
from member_agent import capacity

from .builders import A100, H100, T0

NOW = "2024-05-01T00:00:00Z"


def k8s_node(
    name: str, *, product: str, resources: dict[str, int], ready: bool = True, **labels: str
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product, **labels}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", **{k: str(v) for k, v in resources.items()}},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def k8s_pod(name: str, node: str, resources: dict[str, int], *, deployment: str = "infer") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"pod-template-hash": "abc12"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": f"{deployment}-abc12", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "resources": {"limits": {k: str(v) for k, v in resources.items()}}}
            ],
        },
        "status": {"phase": "Running"},
    }


def cluster_object(
    name: str,
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    utilization: dict[str, list[dict[str, Any]]],
    *,
    pricing: dict[str, float],
    provider: str = "onprem",
) -> dict[str, Any]:
    with mock.patch.object(capacity, "utilization_report", encode_utilization):  # an older agent's report
        status = capacity.summarize(nodes, pods, now=NOW, utilization=utilization, utilization_time=NOW)
    return {
        "apiVersion": "cluster.gpufed.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"provider": provider, "pricing": pricing},
        "status": status,
    }


def shares_by_gpu(devices: Any) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for device in devices:
        out[device.gpu] += device.share
    return dict(out)


def test_whole_gpus_with_pod_labels_and_owner() -> None:
    nodes = [k8s_node("n1", product=A100, resources={"nvidia.com/gpu": 2})]
    pods = [k8s_pod("infer-abc12-x", "n1", {"nvidia.com/gpu": 1})]
    util = {
        "n1": [
            {"gpu": 0, "uuid": "GPU-0", "pod": "infer-abc12-x", "namespace": "ml", "utilization": 0.42},
            {"gpu": 1, "uuid": "GPU-1", "utilization": 0.0},
        ]
    }
    fleet = sample_from_cluster_statuses(
        [cluster_object("dc1", nodes, pods, util, pricing={A100: 1.2})], [], [], now=T0
    )
    [cluster] = fleet.clusters
    assert (cluster.ready, cluster.tier, cluster.price(A100)) == (True, 0, 1.2)
    [node] = cluster.nodes
    assert node.product == A100
    held, free = node.devices
    assert held.allocated_to == PodRef("ml", "infer-abc12-x", "Deployment", "infer")
    assert (held.utilization, held.share, held.resource) == (0.42, 1.0, "nvidia.com/gpu")
    assert free.allocated_to is None


def test_mig_instances_are_weighted_and_the_unpartitioned_rest_is_kept() -> None:
    nodes = [
        k8s_node("m1", product=H100, resources={"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1})
    ]
    pods = [k8s_pod("train-abc12-y", "m1", {"nvidia.com/mig-2g.20gb": 1}, deployment="train")]
    util = {
        "m1": [
            {"gpu": 0, "uuid": "GPU-A", "profile": "1g.10gb", "instance": 1, "utilization": 0.0},
            {"gpu": 0, "uuid": "GPU-A", "profile": "1g.10gb", "instance": 2, "utilization": 0.0},
            {
                "gpu": 0,
                "uuid": "GPU-A",
                "profile": "2g.20gb",
                "instance": 3,
                "pod": "train-abc12-y",
                "namespace": "ml",
                "utilization": 0.7,
            },
        ]
    }
    fleet = sample_from_cluster_statuses(
        [cluster_object("dc1", nodes, pods, util, pricing={})], [], [], now=T0
    )
    devices = fleet.clusters[0].nodes[0].devices
    assert [(d.profile, round(d.share * 7), d.resource) for d in devices] == [
        ("1g.10gb", 1, "nvidia.com/mig-1g.10gb"),
        ("1g.10gb", 1, "nvidia.com/mig-1g.10gb"),
        ("2g.20gb", 2, "nvidia.com/mig-2g.20gb"),
        (UNPARTITIONED, 3, None),
    ]
    assert shares_by_gpu(devices) == {"0": pytest.approx(1.0)}
    assert devices[2].allocated_to is not None and devices[2].allocated_to.workload == "Deployment/train"


def test_pods_list_assigns_devices_when_the_exporter_has_no_pod_labels() -> None:
    nodes = [k8s_node("n1", product=A100, resources={"nvidia.com/gpu": 2})]
    pods = [k8s_pod("infer-abc12-x", "n1", {"nvidia.com/gpu": 1})]
    util = {
        "n1": [
            {"gpu": 0, "uuid": "GPU-0", "utilization": 0.5},
            {"gpu": 1, "uuid": "GPU-1", "utilization": 0.0},
        ]
    }
    fleet = sample_from_cluster_statuses(
        [cluster_object("dc1", nodes, pods, util, pricing={})], [], [], now=T0
    )
    held = [d for d in fleet.clusters[0].nodes[0].devices if d.allocated_to]
    assert [(d.gpu, d.allocated_to.pod if d.allocated_to else None) for d in held] == [("0", "infer-abc12-x")]


def test_gpus_without_dcgm_series_are_filled_in_from_the_summary() -> None:
    """n1 reports DCGM; n2 (4 GPUs, 1 allocated) and n3 (not Ready, 2 GPUs) do not."""
    nodes = [
        k8s_node("n1", product=A100, resources={"nvidia.com/gpu": 2}),
        k8s_node("n2", product=A100, resources={"nvidia.com/gpu": 4}),
        k8s_node("n3", product=A100, resources={"nvidia.com/gpu": 2}, ready=False),
    ]
    pods = [k8s_pod("infer-abc12-a", "n2", {"nvidia.com/gpu": 1})]
    util = {
        "n1": [{"gpu": 0, "uuid": "G0", "utilization": 0.0}, {"gpu": 1, "uuid": "G1", "utilization": 0.0}]
    }
    fleet = sample_from_cluster_statuses(
        [cluster_object("dc1", nodes, pods, util, pricing={})], [], [], now=T0
    )
    nodes_by_name = {n.name: n for n in fleet.clusters[0].nodes}
    total = sum(d.share for n in nodes_by_name.values() for d in n.devices)
    assert total == pytest.approx(8.0)  # the fleet's GPU count
    unavailable = [n for n in nodes_by_name.values() if not n.ready]
    assert [len(n.devices) for n in unavailable] == [2]
    held = [d for n in nodes_by_name.values() for d in n.devices if d.allocated_to is not None]
    assert len(held) == 1
    # the 3 free GPUs of n2 stay together on one node, as its free shape says
    free_nodes = [
        n for n in nodes_by_name.values() if n.name.startswith(UNREPORTED_NODE) and "shape" in n.name
    ]
    assert [len(n.devices) for n in free_nodes] == [3]
    states = [s.state for s in classify(fleet)]
    assert states.count(WasteState.UNAVAILABLE) == 2
    assert states.count(WasteState.UNMEASURED) == 1  # held, utilization unknown: neither busy nor idle


def test_cluster_readiness_and_staleness() -> None:
    from datetime import timedelta

    nodes = [k8s_node("n1", product=A100, resources={"nvidia.com/gpu": 1})]
    obj = cluster_object("dc1", nodes, [], {}, pricing={})
    assert sample_from_cluster_statuses([obj], [], [], now=T0).clusters[0].ready
    later = T0 + timedelta(minutes=10)
    stale = sample_from_cluster_statuses([obj], [], [], now=later, stale_after=timedelta(minutes=5))
    assert not stale.clusters[0].ready
    obj["status"]["conditions"][0]["status"] = "Unknown"
    assert not sample_from_cluster_statuses([obj], [], [], now=T0).clusters[0].ready


def binding(
    replicas: int, placed: dict[str, int], *, placement: dict[str, Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml", "name": "infer"},
        "replicas": replicas,
        "replicaRequirements": {
            "resourceRequest": {"nvidia.com/gpu": "2", "cpu": "4"},
            "nodeSelector": {"nvidia.com/gpu.product": H100},
        },
        "clusters": [{"name": n, "replicas": r} for n, r in placed.items()],
    }
    if placement is not None:
        spec["placement"] = placement
    return {"metadata": {"namespace": "ml", "name": "infer-deployment"}, "spec": spec}


@pytest.mark.parametrize(
    ("replicas", "placed", "pending"),
    [(5, {"dc1": 3}, 2), (5, {}, 5), (5, {"dc1": 3, "cloud": 2}, 0), (2, {"dc1": 3}, 0)],
)
def test_unplaced_binding_replicas_are_pending(replicas: int, placed: dict[str, int], pending: int) -> None:
    clusters = [
        cluster_object("dc1", [], [], {}, pricing={}),
        cluster_object("cloud", [], [], {}, pricing={}, provider="aws"),
    ]
    placement = {"clusterAffinity": {"clusterNames": ["dc1"]}}
    fleet = sample_from_cluster_statuses(
        clusters, [binding(replicas, placed, placement=placement)], [], now=T0
    )
    assert [(d.replicas, d.reason) for d in fleet.pending] == (
        [(pending, PendingReason.UNPLACED)] if pending else []
    )
    for demand in fleet.pending:
        assert demand.gpu_requests == {"nvidia.com/gpu": 2}
        assert demand.products == frozenset({H100})
        assert demand.clusters == frozenset({"dc1"})
    assert fleet.workloads[("ml", "Deployment/infer")].products == frozenset({H100})


def test_a_binding_that_can_never_fit_is_pending_with_its_reason_and_message() -> None:
    message = "can never fit: needs 64 nvidia.com/gpu in one pod; the largest node in the fleet has 8"
    raw = binding(2, {})
    raw["status"] = {"conditions": [{"type": "Scheduled", "status": "False", "reason": "NeverFits", "message": message}]}
    fleet = sample_from_cluster_statuses([cluster_object("dc1", [], [], {}, pricing={})], [raw], [], now=T0)
    assert [(d.replicas, d.reason, d.message) for d in fleet.pending] == [(2, PendingReason.NEVER_FITS, message)]


def test_member_unschedulable_pods_are_pending_elsewhere() -> None:
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer", "namespace": "ml"},
        "spec": {
            "replicas": 4,
            "template": {
                "spec": {
                    "containers": [{"name": "m", "resources": {"limits": {"nvidia.com/mig-3g.40gb": "1"}}}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "nvidia.com/gpu.product",
                                                "operator": "In",
                                                "values": [A100, H100],
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                }
            },
        },
    }
    work = {
        "metadata": {"namespace": "gpufed-es-cloud", "name": "infer-deployment"},
        "spec": {"workload": {"manifests": [manifest]}},
        "status": {
            "manifestStatuses": [
                {
                    "identifier": {
                        "group": "apps",
                        "version": "v1",
                        "kind": "Deployment",
                        "namespace": "ml",
                        "name": "infer",
                        "ordinal": 0,
                    },
                    "unschedulable": {"pods": 3, "message": "0/4 nodes are available"},
                }
            ]
        },
    }
    fleet = sample_from_cluster_statuses([], [], [work], now=T0)
    [demand] = fleet.pending
    assert (demand.namespace, demand.workload, demand.replicas) == ("ml", "Deployment/infer", 3)
    assert demand.reason == PendingReason.MEMBER_UNSCHEDULABLE
    assert demand.gpu_requests == {"nvidia.com/mig-3g.40gb": 1}
    assert demand.products == frozenset({A100, H100})
    assert demand.excluded_clusters == frozenset({"cloud"})
    assert not demand.allows("cloud", A100) and demand.allows("dc1", H100)
