"""The agent's accounting read against the simulated member's nodes and DCGM page.

The simulator promises nodes and metrics exactly as a real cluster has them (GPU Feature
Discovery labels, device-plugin resources, dcgm-exporter text); these tests hold the agent's
pure capacity and DCGM code to the same facts.
"""

from __future__ import annotations

from typing import Any

from member_agent import capacity, dcgm
from simulator import dcgm as sim_dcgm
from simulator import nodes as nodes_mod
from simulator import profile as profile_mod

FLEET: dict[str, Any] = {
    "clusters": [
        {
            "name": "onprem-a100",
            "nodeGroups": [
                {
                    "name": "a100-mig",
                    "count": 2,
                    "cpu": 96,
                    "memoryGiB": 1024,
                    "gpu": {
                        "product": "NVIDIA-A100-SXM4-80GB",
                        "count": 8,
                        "memoryMiB": 81920,
                        "mig": {"strategy": "mixed", "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
                    },
                },
                {
                    "name": "a100-whole",
                    "count": 3,
                    "cpu": 96,
                    "memoryGiB": 1024,
                    "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 8, "memoryMiB": 81920},
                },
                {
                    "name": "a100-shared",
                    "count": 1,
                    "cpu": 96,
                    "memoryGiB": 1024,
                    "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 8, "sharing": {"replicas": 10}},
                },
            ],
        }
    ]
}


def test_simulated_nodes_summarize_to_their_profile() -> None:
    profile = profile_mod.parse_fleet(FLEET).clusters[0]
    nodes = nodes_mod.build_nodes(profile)
    status = capacity.summarize(nodes, [], now="2025-01-01T00:00:00Z")
    assert status["nodeSummary"] == {"total": 6, "ready": 6}
    gpu = {(e["resource"], e.get("sharedReplicas", 1)): e["allocatable"] for e in status["gpuSummary"]}
    assert gpu[("nvidia.com/gpu", 1)] == 3 * 8
    assert gpu[("nvidia.com/gpu", 10)] == 8 * 10
    assert gpu[("nvidia.com/mig-1g.10gb", 1)] == 2 * 8 * 2
    assert gpu[("nvidia.com/mig-3g.40gb", 1)] == 2 * 8
    # One shape per node group: the per-node labels do not split them.
    assert sorted(s["count"] for s in status["nodeShapes"]) == [1, 2, 3]
    mig_shape = next(s for s in status["nodeShapes"] if s["count"] == 2)
    assert mig_shape["gpu"]["migStrategy"] == "mixed"
    assert mig_shape["gpu"]["product"] == "NVIDIA-A100-SXM4-80GB"


def test_simulated_dcgm_page_parses_per_device() -> None:
    profile = profile_mod.parse_fleet(FLEET).clusters[0]
    inventories = nodes_mod.build_inventory(profile)
    text = sim_dcgm.render_metrics(inventories.values(), [], {})
    by_node = dcgm.utilization_by_node(dcgm.parse_metrics(text))
    assert set(by_node) == {n["metadata"]["name"] for n in nodes_mod.build_nodes(profile)}
    mig_node = next(name for name in by_node if "mig" in name)
    # 8 GPUs x 4 MIG instances, each reported with its profile and instance id.
    assert len(by_node[mig_node]) == 32
    assert all("profile" in d and "instance" in d for d in by_node[mig_node])
    whole_node = next(name for name in by_node if "whole" in name)
    assert [d["gpu"] for d in by_node[whole_node]] == list(range(8))
    assert all(0.0 <= d["utilization"] <= 1.0 for devices in by_node.values() for d in devices)
