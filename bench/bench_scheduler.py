"""Scheduler decision latency and throughput on a large, mixed GPU fleet.

Builds 100 clusters x 100 nodes x 8 GPUs with mixed layouts (whole A100s, H100s split
into MIG "all-balanced" slices, A100s under the MIG single strategy, time-sliced
shares), partly allocated at random and grouped into node shapes the way the member
agent reports them. Then schedules a stream of bindings of mixed shapes and placement
modes (tiered overflow, dynamic weights, duplicated, gangs, alternative GPU shapes),
recording each decision in the reservations as the scheduler controller does, and
settling reservations as if a capacity report came in every ``--report-every``
bindings. Prints p50/p99 decision latency and bindings per second, by wall clock and by
this process's CPU time (the latter is stable on a shared machine); ``--json`` also
writes the numbers. A decision here includes recording its reservations.

Targets (not asserted): p99 <= 1 ms per decision, >= 2,000 bindings/s.

Reproduce::

    .venv/bin/python bench/bench_scheduler.py --bindings 5000 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.framework import BindingRequest, GpuShape
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.scheduling import reserve_decision, schedule
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

GI = 2**30
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
A100_MIG_1G = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"


def node_free(rng: random.Random, kind: str) -> dict[str, int]:
    """Free resources of one node of ``kind`` after random allocations."""
    cpu = rng.choice((16, 32, 64, 96)) * 1000
    memory = rng.choice((128, 256, 512)) * GI
    free: dict[str, int] = {"cpu": cpu, "memory": memory, "pods": rng.randint(60, 110)}
    if kind == "a100":
        free["nvidia.com/gpu"] = rng.choice((0, 0, 1, 2, 4, 8, 8))
    elif kind == "h100-mig":
        # 8 GPUs x all-balanced (2 x 1g.10gb + 1 x 2g.20gb + 1 x 3g.40gb), some in use.
        free["nvidia.com/mig-1g.10gb"] = rng.randint(0, 16)
        free["nvidia.com/mig-2g.20gb"] = rng.randint(0, 8)
        free["nvidia.com/mig-3g.40gb"] = rng.randint(0, 8)
    elif kind == "a100-single":
        free["nvidia.com/gpu"] = rng.choice((0, 14, 28, 56))
    else:  # time-sliced, 10 shares per GPU
        free["nvidia.com/gpu.shared"] = rng.choice((0, 20, 40, 80))
    return free


PRODUCT = {"a100": A100, "h100-mig": H100, "a100-single": A100_MIG_1G, "shared": A100}
STRATEGY = {"a100": "none", "h100-mig": "mixed", "a100-single": "single", "shared": "none"}


def build_cluster(index: int, rng: random.Random, *, nodes: int) -> ClusterSnapshot:
    kinds = ("a100", "h100-mig", "a100-single", "shared")
    weights = (5, 3, 1, 1)
    groups: Counter[tuple[str, tuple[tuple[str, int], ...]]] = Counter()
    for _ in range(nodes):
        kind = rng.choices(kinds, weights)[0]
        groups[(kind, tuple(sorted(node_free(rng, kind).items())))] += 1
    shapes: list[dict[str, Any]] = []
    for (kind, free), count in sorted(groups.items()):
        shapes.append(
            {
                "count": count,
                "labels": {
                    "nvidia.com/gpu.product": PRODUCT[kind],
                    "nvidia.com/mig.strategy": STRATEGY[kind],
                },
                "taints": [],
                "free": dict(free),
                "allocatable": dict(free),
                "gpu": {
                    "product": PRODUCT[kind],
                    "memoryMiB": 81920,
                    "count": 8,
                    "migStrategy": STRATEGY[kind],
                },
            }
        )
    provider = "onprem" if index < 30 else rng.choice(("aws", "gcp", "azure"))
    return ClusterSnapshot.from_cluster(
        {
            "metadata": {"name": f"cluster-{index:03d}", "labels": {"fleet": "bench"}},
            "spec": {
                "provider": provider,
                "region": rng.choice(("eu-west", "us-east", "ap-south")),
                "pricing": {} if provider == "onprem" else {A100: round(rng.uniform(2.5, 4.5), 2), H100: 9.8},
            },
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "lastReportTime": "2024-05-01T10:00:00Z",
                "nodeShapes": shapes,
            },
        }
    )


def binding_mix(rng: random.Random, count: int) -> list[BindingRequest]:
    tiered = Placement.model_validate(
        {
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "TieredOverflow",
            }
        }
    )
    dynamic = Placement.model_validate(
        {
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {"dynamicWeight": "AvailableReplicas"},
            }
        }
    )
    duplicated = Placement.model_validate(
        {"clusterAffinity": {"clusterNames": [f"cluster-{i:03d}" for i in range(3)]}}
    )
    one_gpu = ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 4000, "memory": 32 * GI})
    four_gpu = ReplicaRequirements.build({"nvidia.com/gpu": 4, "cpu": 16000, "memory": 128 * GI})
    mig3g = ReplicaRequirements.build({"nvidia.com/mig-3g.40gb": 1, "cpu": 2000, "memory": 16 * GI})
    shared = ReplicaRequirements.build({"nvidia.com/gpu.shared": 1, "cpu": 500, "memory": 4 * GI})
    h100 = ReplicaRequirements.build(
        {"nvidia.com/mig-1g.10gb": 1, "cpu": 1000}, node_selector={"nvidia.com/gpu.product": H100}
    )
    whole_gpu = (GpuShape(resources=(("nvidia.com/gpu", 1),)),)
    out: list[BindingRequest] = []
    for i in range(count):
        roll = rng.random()
        key = f"bench/b{i}"
        if roll < 0.45:
            out.append(
                BindingRequest(key=key, replicas=rng.randint(1, 16), requirements=one_gpu, placement=tiered)
            )
        elif roll < 0.60:
            out.append(
                BindingRequest(
                    key=key,
                    replicas=rng.randint(1, 8),
                    requirements=mig3g,
                    placement=tiered,
                    gpu_shapes=whole_gpu,
                )
            )
        elif roll < 0.72:
            out.append(
                BindingRequest(key=key, replicas=rng.randint(2, 20), requirements=shared, placement=dynamic)
            )
        elif roll < 0.80:
            out.append(
                BindingRequest(key=key, replicas=rng.randint(1, 4), requirements=h100, placement=tiered)
            )
        elif roll < 0.85:
            out.append(BindingRequest(key=key, replicas=1, requirements=one_gpu, placement=duplicated))
        else:
            workers = rng.randint(1, 4)
            components = (
                Component("Master", 1, ReplicaRequirements.build({"cpu": 2000, "memory": 8 * GI})),
                Component("Worker", workers, four_gpu),
            )
            out.append(
                BindingRequest(
                    key=key,
                    replicas=workers + 1,
                    requirements=four_gpu,
                    placement=tiered,
                    gang=True,
                    components=components,
                )
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--bindings", type=int, default=5000)
    parser.add_argument("--report-every", type=int, default=200, help="settle reservations every N bindings")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    started = time.perf_counter()
    clusters = [build_cluster(i, rng, nodes=args.nodes) for i in range(args.clusters)]
    build_s = time.perf_counter() - started
    shapes = sum(len(c.shapes) for c in clusters)
    requests = binding_mix(rng, args.bindings)

    reservations = Reservations()
    now = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    latencies: list[int] = []
    cpu_latencies: list[int] = []
    outcomes: Counter[str] = Counter()
    loop_start = time.perf_counter()
    cpu_start = time.process_time()
    for i, request in enumerate(requests):
        t0 = time.perf_counter_ns()
        c0 = time.process_time_ns()
        result = schedule(request, clusters, reservations=reservations, now=now)
        reserve_decision(reservations, request, result, now=now)
        cpu_latencies.append(time.process_time_ns() - c0)
        latencies.append(time.perf_counter_ns() - t0)
        outcomes[str(result.condition.reason)] += 1
        if (i + 1) % args.report_every == 0:
            now += timedelta(seconds=30)
            for cluster in clusters:
                reservations.observe_report(cluster.name, reported_at=now)
    total_s = time.perf_counter() - loop_start
    cpu_s = time.process_time() - cpu_start

    def percentile(values: list[int], q: float) -> float:
        return values[min(len(values) - 1, int(len(values) * q))] / 1e6

    latencies.sort()
    cpu_latencies.sort()
    p50 = statistics.median(latencies) / 1e6
    p99 = percentile(latencies, 0.99)
    cpu_p50, cpu_p99 = statistics.median(cpu_latencies) / 1e6, percentile(cpu_latencies, 0.99)
    results = {
        "clusters": args.clusters,
        "nodes_per_cluster": args.nodes,
        "node_shapes": shapes,
        "bindings": args.bindings,
        "p50_ms": round(p50, 4),
        "p99_ms": round(p99, 4),
        "max_ms": round(latencies[-1] / 1e6, 4),
        "bindings_per_s": round(args.bindings / total_s, 1),
        "cpu_p50_ms": round(cpu_p50, 4),
        "cpu_p99_ms": round(cpu_p99, 4),
        "bindings_per_cpu_s": round(args.bindings / cpu_s, 1),
        "fleet_build_s": round(build_s, 3),
        "outcomes": dict(outcomes),
    }
    print(
        f"fleet: {args.clusters} clusters x {args.nodes} nodes x 8 GPUs, {shapes} node shapes (built in {build_s:.2f}s)"
    )
    print(f"{'clock':>6} {'bindings':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'bindings/s':>11}")
    print(
        f"{'wall':>6} {args.bindings:>9} {p50:>8.3f} {p99:>8.3f} {latencies[-1] / 1e6:>8.3f} {args.bindings / total_s:>11.0f}"
    )
    print(
        f"{'cpu':>6} {args.bindings:>9} {cpu_p50:>8.3f} {cpu_p99:>8.3f} {cpu_latencies[-1] / 1e6:>8.3f} "
        f"{args.bindings / cpu_s:>11.0f}"
    )
    print("(cpu: this process's CPU time, insensitive to other load on the machine)")
    print("outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"scheduler": results}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
