"""Pod-bind throughput of the simulated member scheduler at 1,000+ nodes.

Builds a cluster of ``--nodes`` GPU nodes (half whole A100s, a quarter MIG-mixed
A100s, a quarter time-sliced T4s), then binds ``--pods`` pending pods (whole GPUs, MIG
slices, shares, CPU-only) in batches through :class:`simulator.scheduling.ClusterState`,
for each scoring strategy. Prints a table and writes the results as JSON.

Run: ``.venv/bin/python bench/bench_sim_bind.py --nodes 1000 --pods 5000 --out bench/results/sim_bind.json``
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from simulator.nodes import build_inventory, build_nodes
from simulator.profile import parse_fleet
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.model import PodRequest, Scoring
from simulator.scheduling.reading import pod_request


def _profile(nodes: int) -> Any:
    half, quarter = nodes // 2, nodes // 4
    groups = [
        {
            "name": "whole",
            "count": half,
            "cpu": 96,
            "memoryGiB": 1024,
            "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 8},
        },
        {
            "name": "mig",
            "count": quarter,
            "cpu": 96,
            "memoryGiB": 1024,
            "gpu": {
                "product": "NVIDIA-A100-SXM4-80GB",
                "count": 8,
                "mig": {"strategy": "mixed", "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
            },
        },
        {
            "name": "t4",
            "count": nodes - half - quarter,
            "cpu": 32,
            "memoryGiB": 256,
            "gpu": {"product": "Tesla-T4", "count": 4, "sharing": {"replicas": 4, "renameByDefault": True}},
        },
    ]
    return parse_fleet({"clusters": [{"name": "bench", "nodeGroups": groups}]}).clusters[0]


def _pods(count: int, rng: random.Random) -> list[PodRequest]:
    shapes: list[dict[str, Any]] = [
        {"nvidia.com/gpu": 1, "cpu": "4", "memory": "32Gi"},
        {"nvidia.com/gpu": 8, "cpu": "32", "memory": "256Gi"},
        {"nvidia.com/mig-1g.10gb": 1, "cpu": "2"},
        {"nvidia.com/mig-3g.40gb": 1, "cpu": "4"},
        {"nvidia.com/gpu.shared": 1, "cpu": "1"},
        {"cpu": "1", "memory": "1Gi"},
    ]
    out = []
    for index in range(count):
        limits = rng.choice(shapes)
        out.append(
            pod_request(
                {
                    "metadata": {"name": f"p{index}", "namespace": "bench"},
                    "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
                }
            )
        )
    return out


def run(nodes: int, pods: int, batch: int, seed: int) -> list[dict[str, Any]]:
    profile = _profile(nodes)
    manifests = build_nodes(profile)
    inventory = build_inventory(profile)
    requests = _pods(pods, random.Random(seed))
    results = []
    for scoring in Scoring:
        state = ClusterState(scoring=scoring, seed=seed)
        for node in manifests:
            state.add_node(node, inventory[node["metadata"]["name"]])
        bound = unschedulable = 0
        started = time.perf_counter()
        for start in range(0, len(requests), batch):
            result = state.schedule(requests[start : start + batch])
            bound += len(result.bindings)
            unschedulable += len(result.unschedulable)
        elapsed = time.perf_counter() - started
        results.append(
            {
                "scoring": scoring.value,
                "nodes": len(manifests),
                "pods": pods,
                "bound": bound,
                "unschedulable": unschedulable,
                "seconds": round(elapsed, 3),
                "pods_per_second": round(pods / elapsed, 1) if elapsed else None,
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=500, help="pending pods per scheduling cycle")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write the results here as JSON")
    args = parser.parse_args()
    results = run(args.nodes, args.pods, args.batch, args.seed)
    print(
        f"{'scoring':<16} {'nodes':>6} {'pods':>6} {'bound':>6} {'unsched':>8} {'seconds':>8} {'pods/s':>9}"
    )
    for row in results:
        print(
            f"{row['scoring']:<16} {row['nodes']:>6} {row['pods']:>6} {row['bound']:>6} "
            f"{row['unschedulable']:>8} {row['seconds']:>8} {row['pods_per_second']:>9}"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
