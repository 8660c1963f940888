"""Node objects and device inventories built from profiles look like a real GPU cluster's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.apis.quantity import to_int
from simulator.nodes import build_inventory, build_nodes
from simulator.profile import ClusterProfile, parse_fleet


def _profile(gpu: dict[str, Any] | None, *, count: int = 1, **extra: Any) -> ClusterProfile:
    group: dict[str, Any] = {"name": "g", "count": count, "cpu": 32, "memoryGiB": 256, **extra}
    if gpu is not None:
        group["gpu"] = gpu
    fleet = parse_fleet(
        {"clusters": [{"name": "c1", "region": "eu-west", "zone": "eu-west-1a", "nodeGroups": [group]}]}
    )
    return fleet.clusters[0]


H100_BALANCED = {
    "product": "NVIDIA-H100-80GB-HBM3",
    "count": 1,
    "mig": {"strategy": "mixed", "layout": ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]},
}


def test_h100_balanced_matches_the_reference_node() -> None:
    """The labels of the real H100 'all-balanced' node in nvidia.md, value for value."""
    node = build_nodes(_profile(H100_BALANCED))[0]
    labels = node["metadata"]["labels"]
    expected = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-balanced",
        "nvidia.com/mig-1g.10gb.count": "2",
        "nvidia.com/mig-1g.10gb.memory": "9984",
        "nvidia.com/mig-1g.10gb.multiprocessors": "16",
        "nvidia.com/mig-1g.10gb.slices.gi": "1",
        "nvidia.com/mig-2g.20gb.count": "1",
        "nvidia.com/mig-2g.20gb.memory": "20096",
        "nvidia.com/mig-2g.20gb.multiprocessors": "32",
        "nvidia.com/mig-2g.20gb.slices.gi": "2",
        "nvidia.com/mig-3g.40gb.count": "1",
        "nvidia.com/mig-3g.40gb.memory": "40320",
        "nvidia.com/mig-3g.40gb.multiprocessors": "60",
        "nvidia.com/mig-3g.40gb.slices.gi": "3",
    }
    assert {k: labels.get(k) for k in expected} == expected
    allocatable = node["status"]["allocatable"]
    assert allocatable["nvidia.com/gpu"] == "0"
    assert allocatable["nvidia.com/mig-1g.10gb"] == "2"
    assert allocatable["nvidia.com/mig-2g.20gb"] == "1"
    assert allocatable["nvidia.com/mig-3g.40gb"] == "1"


@pytest.mark.parametrize(
    ("gpu", "resources", "product", "replicas", "sharing"),
    [
        (
            {"product": "NVIDIA-A100-SXM4-80GB", "count": 8},
            {"nvidia.com/gpu": "8"},
            "NVIDIA-A100-SXM4-80GB",
            "1",
            "none",
        ),
        (
            {
                "product": "NVIDIA-A100-SXM4-80GB",
                "count": 8,
                "mig": {"strategy": "mixed", "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
            },
            {
                "nvidia.com/gpu": "0",
                "nvidia.com/mig-3g.40gb": "8",
                "nvidia.com/mig-2g.20gb": "8",
                "nvidia.com/mig-1g.10gb": "16",
            },
            "NVIDIA-A100-SXM4-80GB",
            "0",
            "none",
        ),
        (
            {
                "product": "NVIDIA-A100-SXM4-40GB",
                "count": 2,
                "mig": {"strategy": "single", "layout": ["1g.5gb"] * 7},
            },
            {"nvidia.com/gpu": "14"},
            "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            "1",
            "none",
        ),
        (
            {
                "product": "NVIDIA-A100-SXM4-40GB",
                "count": 2,
                "mig": {"strategy": "single", "layout": ["3g.20gb", "1g.5gb"]},
            },
            {"nvidia.com/gpu": "0"},
            "NVIDIA-A100-SXM4-40GB-MIG-INVALID",
            "0",
            "none",
        ),
        (
            {"product": "NVIDIA-A100-SXM4-80GB", "count": 8, "sharing": {"replicas": 10}},
            {"nvidia.com/gpu": "80"},
            "NVIDIA-A100-SXM4-80GB",
            "10",
            "time-slicing",
        ),
        (
            {
                "product": "Tesla-T4",
                "count": 4,
                "sharing": {"strategy": "mps", "replicas": 4, "renameByDefault": True},
            },
            {"nvidia.com/gpu.shared": "16"},
            "Tesla-T4",
            "4",
            "mps",
        ),
    ],
)
def test_gpu_resources_and_labels(
    gpu: dict[str, Any], resources: dict[str, str], product: str, replicas: str, sharing: str
) -> None:
    node = build_nodes(_profile(gpu))[0]
    allocatable = node["status"]["allocatable"]
    gpu_resources = {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/")}
    assert gpu_resources == resources
    assert node["status"]["capacity"] == allocatable
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == product
    assert labels["nvidia.com/gpu.replicas"] == replicas
    assert labels["nvidia.com/gpu.sharing-strategy"] == sharing
    # The inventory hands out exactly what the node advertises.
    inventory = build_inventory(_profile(gpu))[node["metadata"]["name"]]
    assert {r: str(len(d)) for r, d in inventory.devices.items()} == {
        k: v for k, v in resources.items() if v != "0"
    }


def test_generic_node_fields() -> None:
    profile = _profile(
        {"product": "Tesla-T4", "count": 2},
        count=3,
        labels={"team": "ml"},
        taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        instanceType="g4dn.12xlarge",
    )
    nodes = build_nodes(profile)
    assert [n["metadata"]["name"] for n in nodes] == ["c1-g-0", "c1-g-1", "c1-g-2"]
    node = nodes[1]
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "c1-g-1"
    assert labels["node.kubernetes.io/instance-type"] == "g4dn.12xlarge"
    assert labels["topology.kubernetes.io/region"] == "eu-west"
    assert labels["topology.kubernetes.io/zone"] == "eu-west-1a"
    assert labels["team"] == "ml"
    assert labels["nvidia.com/mig.capable"] == "false"
    assert node["spec"]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    status = node["status"]
    assert to_int("cpu", status["allocatable"]["cpu"]) == 32000
    assert to_int("memory", status["allocatable"]["memory"]) == 256 * 2**30
    assert status["allocatable"]["pods"] == "110"
    assert status["nodeInfo"]["kubeletVersion"].startswith("v1.30.")
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"


def test_cpu_only_node_has_no_gpu_labels() -> None:
    node = build_nodes(_profile(None))[0]
    assert not any(k.startswith("nvidia.com/") for k in node["metadata"]["labels"])
    assert not any(k.startswith("nvidia.com/") for k in node["status"]["allocatable"])


def test_inventory_is_deterministic_and_unique() -> None:
    profile = _profile(H100_BALANCED, count=2)
    first, second = build_inventory(profile), build_inventory(profile)
    assert first == second
    uuids = [g.uuid for inv in first.values() for g in inv.gpus] + [
        m.uuid for inv in first.values() for m in inv.mig_instances
    ]
    assert len(uuids) == len(set(uuids))
    assert all(u.startswith(("GPU-", "MIG-")) for u in uuids)
    inventory = next(iter(first.values()))
    assert [m.profile for m in inventory.mig_instances] == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert len({m.gi_id for m in inventory.mig_instances}) == 4
    assert inventory.gpus[0].mig_enabled


def test_time_sliced_devices_spread_over_gpus_first() -> None:
    profile = _profile({"product": "Tesla-T4", "count": 2, "sharing": {"replicas": 3}})
    inventory = next(iter(build_inventory(profile).values()))
    devices = inventory.devices["nvidia.com/gpu"]
    assert [d.gpu_index for d in devices] == [0, 1, 0, 1, 0, 1]
    assert all(d.share == pytest.approx(1 / 3) for d in devices)


def test_media_extension_profile_resource_name() -> None:
    profile = _profile(
        {
            "product": "NVIDIA-A100-SXM4-80GB",
            "count": 1,
            "mig": {"strategy": "mixed", "layout": ["1g.10gb+me", "3g.40gb"]},
        }
    )
    allocatable = build_nodes(profile)[0]["status"]["allocatable"]
    assert allocatable["nvidia.com/mig-1g.10gb.me"] == "1"


def test_alibaba_csv_nodes() -> None:
    fleet = parse_fleet(
        {
            "clusters": [
                {
                    "name": "ali",
                    "nodeGroups": [
                        {
                            "name": "openb",
                            "fromCsv": {
                                "path": str(Path(__file__).resolve().parents[2] / "data" / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"),
                                "models": ["V100M32"],
                                "limit": 2,
                            },
                        }
                    ],
                }
            ]
        }
    )
    nodes = build_nodes(fleet.clusters[0])
    assert len(nodes) == 2
    assert all(n["metadata"]["name"].startswith("openb-node-") for n in nodes)
    assert {n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in nodes} == {"Tesla-V100-SXM2-32GB"}
    assert all(int(n["status"]["allocatable"]["nvidia.com/gpu"]) in (4, 8) for n in nodes)
