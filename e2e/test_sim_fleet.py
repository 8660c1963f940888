"""A hollow fleet (`gpufed sim-fleet`: 3 clusters x 50 nodes, their agents in one process) joins a
real hub with bootstrap tokens, reports its capacity, runs a propagated workload, and provides a
MultiClusterService's EndpointSlices."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from e2e.harness import Kubectl, ProcessGroup, wait_for

pytestmark = pytest.mark.e2e

CLUSTERS = ("hollow-0", "hollow-1", "hollow-2")
NODES = 50
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"

POLICY = {
    "apiVersion": "policy.gpufed.io/v1alpha1",
    "kind": "PropagationPolicy",
    "metadata": {"name": "all", "namespace": "ml"},
    "spec": {
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
        "placement": {
            "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}
        },
    },
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {
        "replicas": 6,
        "selector": {"matchLabels": {"app": "train"}},
        "template": {
            "metadata": {"labels": {"app": "train"}},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example.com/train:1",
                        "resources": {"limits": {"nvidia.com/gpu": 8}},
                    }
                ]
            },
        },
    },
}

SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"selector": {"app": "train"}, "ports": [{"port": 80}]},
}
MCS = {
    "apiVersion": "networking.karmada.io/v1alpha1",
    "kind": "MultiClusterService",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"types": ["CrossCluster"]},
}


def _ready_with_report(cluster: dict[str, Any]) -> bool:
    status = cluster.get("status") or {}
    return bool(status.get("nodeShapes")) and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def _gpus(cluster: dict[str, Any]) -> int:
    return sum(
        int(entry.get("capacity", 0))
        for entry in cluster["status"].get("gpuSummary") or []
        if entry.get("resource") == "nvidia.com/gpu"
    )


def test_hollow_fleet_joins_reports_and_runs_a_workload(processes: ProcessGroup) -> None:
    _, hub = processes.start_hub()
    fleet = processes.start(
        "fleet",
        "sim-fleet",
        "--clusters",
        str(len(CLUSTERS)),
        "--nodes",
        str(NODES),
        "--models",
        f"{A100},{H100}",
        "--hub-kubeconfig",
        str(hub.kubeconfig),
        "--state-dir",
        str(processes.root / "fleet"),
        "--heartbeat-interval",
        "2",
        "--report-interval",
        "3",
    )

    def joined() -> list[dict[str, Any]] | None:
        assert fleet.alive(), fleet.log()[-4000:]
        items = hub.json("get", "clusters")["items"]
        return items if len(items) == len(CLUSTERS) and all(_ready_with_report(c) for c in items) else None

    clusters = {
        c["metadata"]["name"]: c
        for c in wait_for(joined, timeout=90, what="hollow clusters Ready with reports")
    }
    assert sorted(clusters) == sorted(CLUSTERS)
    assert {name: _gpus(c) for name, c in clusters.items()} == dict.fromkeys(CLUSTERS, NODES * 8)
    products = {name: {e.get("product") for e in c["status"]["gpuSummary"]} for name, c in clusters.items()}
    assert products["hollow-1"] == {H100} and products["hollow-0"] == {A100}
    stats_file = processes.root / "fleet" / "fleet.json"
    wait_for(stats_file.exists, timeout=30, what="the fleet to write its figures")
    stats = json.loads(stats_file.read_text())
    assert stats["clusters"] == len(CLUSTERS) and stats["rssBytes"] > 0
    leases = hub.json("get", "leases", "-n", "gpufed-cluster-lease")["items"]
    assert {lease["metadata"]["name"] for lease in leases} >= set(CLUSTERS)

    hub.run("create", "namespace", "ml")
    hub.run("apply", "-f", "-", input_text=yaml.safe_dump_all([POLICY, DEPLOYMENT]))

    def running() -> dict[str, Any] | None:
        obj = hub.json("get", "deployment", "train", "-n", "ml")
        return obj if (obj.get("status") or {}).get("readyReplicas") == 6 else None

    wait_for(running, timeout=90, what="the hub's Deployment to report 6 ready replicas")
    works = hub.json("get", "works", "-A")["items"]
    assert {w["metadata"]["namespace"] for w in works} <= {f"gpufed-es-{name}" for name in CLUSTERS}
    applied = [
        w
        for w in works
        if any(
            c["type"] == "Applied" and c["status"] == "True"
            for c in (w.get("status") or {}).get("conditions") or []
        )
    ]
    assert applied, works

    def pods_reported() -> bool:
        # The agents' reports count the running workload's GPUs as allocated.
        items = hub.json("get", "clusters")["items"]
        return (
            sum(int(e.get("allocated", 0)) for c in items for e in c["status"].get("gpuSummary") or []) == 48
        )

    wait_for(pods_reported, timeout=60, what="the reports to count the 48 GPUs in use")

    # The hollow members make the Service's EndpointSlices: a MultiClusterService moves them.
    hub.run("apply", "-f", "-", input_text=yaml.safe_dump_all([SERVICE, MCS]))

    def dispatched() -> list[dict[str, Any]] | None:
        works = hub.json("get", "works", "-A")["items"]
        slices = [
            m for w in works for m in w["spec"]["workload"]["manifests"] if m["kind"] == "EndpointSlice"
        ]
        return slices or None

    slices = wait_for(dispatched, timeout=60, what="a hollow provider's EndpointSlices dispatched")
    assert all(s["metadata"]["name"].startswith("hollow-") for s in slices)
    assert {e["targetRef"]["name"].startswith("train-") for s in slices for e in s["endpoints"]} == {True}
    fleet.stop()
    assert "hollow fleet ready: 3 clusters x 50 nodes" in fleet.log()
    assert isinstance(hub, Kubectl)
