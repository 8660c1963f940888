"""Scheduler decision latency and throughput on a large, mixed GPU fleet (issue 4).

Fleet: 100 clusters x 100 nodes x 8 GPUs with mixed layouts (whole A100s, H100s split
into MIG "all-balanced" slices, A100s under the MIG single strategy, time-sliced shares),
partly allocated at random and grouped into node shapes the way the member agent
reports them; 30 on-prem clusters (tier 0, no price), 70 cloud ones with prices.

Stream: bindings of mixed shapes and placement modes, as the scheduler controller sees
them: tiered-overflow Deployments of 1-16 whole-GPU replicas (a fifth of them pinned to
a GPU product by nodeSelector), MIG-3g Deployments with a whole-GPU alternative shape,
time-sliced GPU shares under dynamic weights, H100 MIG-1g Deployments pinned by product,
Duplicated Deployments over three named clusters, region-restricted Deployments
(clusterAffinity fieldSelector), and PyTorchJob-like gangs (a CPU master and 1-4 workers
of 4 GPUs). Each binding names its kind (Deployments, the gangs KubeRay's RayJob) and every
cluster lists some 300 APIs in ``status.apiEnablements``, these among them, so the
APIEnablement filter judges every cluster of every decision (and keeps none out). ``--updates`` of the decisions rescale an earlier binding instead (new
replica count, its current placement as ``previous``), as scale-ups and scale-downs do.

A decision is what the controller does for one binding between reading it and writing
its spec: ``schedule(...)`` (filters, scores, division) plus ``reserve_decision(...)``
(reservation accounting). Each is timed by wall clock and by this process's CPU time
(the latter is steadier on a shared machine). Writing the binding's status also renders
the per-cluster explanation to its wire form; that is timed apart ("explanation") and
not counted in the decision. A decision works out only the verdicts it needs (tiered
overflow and gangs stop where the replicas run out); the explanation works out the rest,
so its figure includes them, and the run also prints decision and explanation together.

Capacity reports: every cluster reports every ``--report-every`` bindings, staggered
across clusters; a report is a new ``ClusterSnapshot`` (fresh caches, as the controller
builds one on every Cluster update) and ``observe_report`` settles the reservations it
covers (timed with the decision work for throughput). A report shows the fleet's initial
free capacity again, with 5% of its nodes' free resources drawn anew (pods started and
ended meanwhile): a steady state where workloads end as fast as new ones start.

Python's cyclic garbage collector runs as it would in the hub; its pauses land in the
decisions they interrupt, and their count and total are reported.

Targets (reported, not asserted): p99 <= 1 ms per decision, >= 2,000 bindings/s.

Reproduce::

    .venv/bin/python bench/bench_scheduler.py --bindings 5000 --seed 1
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import reserve_decision, schedule
from controlplane.scheduler.core.framework import BindingRequest, GpuShape
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

GI = 2**30
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
A100_MIG_1G = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
REGIONS = ("eu-west", "us-east", "ap-south")
#: A member's ``status.apiEnablements``: 60 group versions of 5 resources, with the kinds bound.
API_ENABLEMENTS = [
    {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
    {"groupVersion": "ray.io/v1", "resources": [{"name": "rayjobs", "kind": "RayJob"}]},
    *(
        {
            "groupVersion": f"g{g:02d}.example.com/v1",
            "resources": [{"name": f"kind{r}s", "kind": f"Kind{r}"} for r in range(5)],
        }
        for g in range(58)
    ),
]
KIND_OF = {"gang": ("ray.io/v1", "RayJob")}
"""The kind of the bindings of a mix (by key prefix); Deployments otherwise."""
DECISION_STEP = timedelta(milliseconds=1)
"""Simulated time between two decisions (reservations are stamped with it)."""


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


Node = tuple[str, tuple[tuple[str, int], ...]]
"""One node: its kind and its free resources."""


def fleet_nodes(rng: random.Random, *, nodes: int) -> list[Node]:
    kinds = ("a100", "h100-mig", "a100-single", "shared")
    weights = (5, 3, 1, 1)
    out: list[Node] = []
    for _ in range(nodes):
        kind = rng.choices(kinds, weights)[0]
        out.append((kind, tuple(sorted(node_free(rng, kind).items()))))
    return out


def churn(rng: random.Random, nodes: list[Node], *, share: float = 0.05) -> None:
    """Pods started and ended since the last report: ``share`` of the nodes get new free resources."""
    for index in rng.sample(range(len(nodes)), max(1, round(len(nodes) * share))):
        kind = nodes[index][0]
        nodes[index] = (kind, tuple(sorted(node_free(rng, kind).items())))


def cluster_object(index: int, rng: random.Random, *, nodes: int | list[Node]) -> dict[str, Any]:
    """One member's Cluster object (wire form) as its agent reports it, nodes grouped into shapes."""
    groups: Counter[Node] = Counter(fleet_nodes(rng, nodes=nodes) if isinstance(nodes, int) else nodes)
    seeded = random.Random(index)  # the cluster's own facts do not change from report to report
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
    provider = "onprem" if index < 30 else seeded.choice(("aws", "gcp", "azure"))
    return {
        "metadata": {"name": f"cluster-{index:03d}", "labels": {"fleet": "bench"}},
        "spec": {
            "provider": provider,
            "region": seeded.choice(REGIONS),
            "pricing": {} if provider == "onprem" else {A100: round(seeded.uniform(2.5, 4.5), 2), H100: 9.8},
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "CompleteAPIEnablements", "status": "True"},
            ],
            "apiEnablements": API_ENABLEMENTS,
            "lastReportTime": "2024-05-01T10:00:00Z",
            "nodeShapes": shapes,
            "nodeScoring": "LeastAllocated",  # the agent's default: packing hints are worked out
        },
    }


def build_cluster(index: int, rng: random.Random, *, nodes: int) -> ClusterSnapshot:
    return ClusterSnapshot.from_cluster(cluster_object(index, rng, nodes=nodes))


def _placement(raw: Mapping[str, Any]) -> Placement:
    return Placement.model_validate(raw)


TIERED = {
    "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}
}


def binding_mix(rng: random.Random, count: int, *, clusters: int = 100) -> list[BindingRequest]:
    """``count`` new bindings of the mix described in the module docstring (kind in the key)."""
    tiered = _placement(TIERED)
    regional = _placement(
        {
            "clusterAffinity": {
                "fieldSelector": {
                    "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu-west"]}]
                }
            },
            **TIERED,
        }
    )
    dynamic = _placement(
        {
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {"dynamicWeight": "AvailableReplicas"},
            }
        }
    )
    duplicated = _placement(
        {"clusterAffinity": {"clusterNames": [f"cluster-{i:03d}" for i in range(min(3, clusters))]}}
    )
    one_gpu = ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 4000, "memory": 32 * GI})
    one_a100 = ReplicaRequirements.build(
        {"nvidia.com/gpu": 1, "cpu": 4000, "memory": 32 * GI}, node_selector={"nvidia.com/gpu.product": A100}
    )
    four_gpu = ReplicaRequirements.build({"nvidia.com/gpu": 4, "cpu": 16000, "memory": 128 * GI})
    mig3g = ReplicaRequirements.build({"nvidia.com/mig-3g.40gb": 1, "cpu": 2000, "memory": 16 * GI})
    shared = ReplicaRequirements.build({"nvidia.com/gpu.shared": 1, "cpu": 500, "memory": 4 * GI})
    h100 = ReplicaRequirements.build(
        {"nvidia.com/mig-1g.10gb": 1, "cpu": 1000}, node_selector={"nvidia.com/gpu.product": H100}
    )
    master = ReplicaRequirements.build({"cpu": 2000, "memory": 8 * GI})
    whole_gpu = (GpuShape(resources=(("nvidia.com/gpu", 1),)),)
    out: list[BindingRequest] = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.32:
            out.append(BindingRequest(f"tiered/b{i}", rng.randint(1, 16), one_gpu, placement=tiered))
        elif roll < 0.40:
            out.append(BindingRequest(f"pinned/b{i}", rng.randint(1, 16), one_a100, placement=tiered))
        elif roll < 0.45:
            out.append(BindingRequest(f"regional/b{i}", rng.randint(1, 8), one_gpu, placement=regional))
        elif roll < 0.58:
            out.append(
                BindingRequest(
                    f"alternative/b{i}", rng.randint(1, 8), mig3g, placement=tiered, gpu_shapes=whole_gpu
                )
            )
        elif roll < 0.70:
            out.append(BindingRequest(f"dynamic/b{i}", rng.randint(2, 20), shared, placement=dynamic))
        elif roll < 0.78:
            out.append(BindingRequest(f"h100/b{i}", rng.randint(1, 4), h100, placement=tiered))
        elif roll < 0.83:
            out.append(BindingRequest(f"duplicated/b{i}", 1, one_gpu, placement=duplicated))
        else:
            workers = rng.randint(1, 4)
            components = (Component("Master", 1, master), Component("Worker", workers, four_gpu))
            out.append(
                BindingRequest(
                    f"gang/b{i}",
                    workers + 1,
                    four_gpu,
                    placement=tiered,
                    gang=True,
                    components=components,
                )
            )
    return [_with_kind(request) for request in out]


def _with_kind(request: BindingRequest) -> BindingRequest:
    api_version, kind = KIND_OF.get(_kind(request), ("apps/v1", "Deployment"))
    return dataclasses.replace(request, api_version=api_version, kind=kind)


def _kind(request: BindingRequest) -> str:
    return request.key.split("/", 1)[0]


def _rescaled(rng: random.Random, request: BindingRequest, placed: Mapping[str, int]) -> BindingRequest:
    """``request`` scaled to a new replica count, running where it was placed."""
    top = 20 if _kind(request) == "dynamic" else 16
    return dataclasses.replace(request, replicas=rng.randint(1, top), previous=dict(placed))


def _ms(values: Sequence[int], q: float) -> float:
    """The ``q`` quantile (nearest rank) of nanosecond ``values`` (sorted), in milliseconds."""
    return values[min(len(values) - 1, int(len(values) * q))] / 1e6


class _GcClock:
    """Counts the cyclic collector's runs and their wall time while installed."""

    def __init__(self) -> None:
        self.collections: Counter[int] = Counter()
        self.by_generation: defaultdict[int, float] = defaultdict(float)
        self.deciding = False
        """Set while a decision is timed: collections then count as ``in_decisions``."""
        self.in_decisions = 0.0
        self._started = 0.0

    def reset(self) -> None:
        self.collections.clear()
        self.by_generation.clear()
        self.in_decisions = 0.0

    @property
    def seconds(self) -> float:
        return sum(self.by_generation.values())

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            spent = time.process_time() - self._started
            self.collections[info["generation"]] += 1
            self.by_generation[info["generation"]] += spent
            if self.deciding:
                self.in_decisions += spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--bindings", type=int, default=5000)
    parser.add_argument(
        "--report-every", type=int, default=500, help="each cluster reports every N bindings (staggered)"
    )
    parser.add_argument(
        "--updates", type=float, default=0.15, help="share of decisions that rescale a binding"
    )
    parser.add_argument(
        "--warmup", type=int, default=500, help="decisions made first and not measured (caches fill)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    started = time.perf_counter()
    nodes = [fleet_nodes(rng, nodes=args.nodes) for _ in range(args.clusters)]
    objects = [cluster_object(i, rng, nodes=nodes[i]) for i in range(args.clusters)]
    cache = SchedulerCache()
    snapshots = {str(o["metadata"]["name"]): ClusterSnapshot.from_cluster(o, cache=cache) for o in objects}
    build_s = time.perf_counter() - started
    shapes = sum(len(c.shapes) for c in snapshots.values())
    requests = binding_mix(rng, args.warmup + args.bindings, clusters=args.clusters)
    names = list(snapshots)
    # Cluster i reports when (binding index - offset_i) is a multiple of --report-every.
    period = max(1, args.report_every)
    reporting: dict[int, list[str]] = defaultdict(list)
    for i, name in enumerate(names):
        reporting[i * period // len(names)].append(name)

    reservations = Reservations()
    now = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    placed: dict[str, tuple[BindingRequest, dict[str, int]]] = {}
    keys: list[str] = []
    """Bindings placed so far: an update rescales one of them, recent or old."""
    latencies: list[int] = []
    cpu_latencies: list[int] = []
    explain_cpu: list[int] = []
    by_kind: dict[str, list[int]] = defaultdict(list)
    accounting_ns = 0
    first_decision_ms = 0.0
    updates = reports = 0
    outcomes: Counter[str] = Counter()
    gc_clock = _GcClock()
    gc.collect()
    gc.callbacks.append(gc_clock)
    try:
        for i, request in enumerate(requests):
            if placed and rng.random() < args.updates:
                key = rng.choice(keys)
                earlier, where = placed[key]
                if not earlier.gang:
                    request = _rescaled(rng, earlier, where)
                    updates += 1
            clusters = list(snapshots.values())
            gc_clock.deciding = True
            t0 = time.perf_counter_ns()
            c0 = time.process_time_ns()
            result = schedule(request, clusters, reservations=reservations, now=now, cache=cache)
            reserve_decision(reservations, request, result, now=now)
            cpu = time.process_time_ns() - c0
            wall = time.perf_counter_ns() - t0
            gc_clock.deciding = False
            c0 = time.process_time_ns()
            wire = [entry.to_wire() for entry in result.explanation]
            explaining = time.process_time_ns() - c0
            assert len(wire) == len(clusters)
            if i == 0:
                first_decision_ms = wall / 1e6
            if i == args.warmup:
                gc_clock.reset()
                accounting_ns = 0
            if i >= args.warmup:
                latencies.append(wall)
                cpu_latencies.append(cpu)
                explain_cpu.append(explaining)
                by_kind[_kind(request) + (" (update)" if request.previous else "")].append(cpu)
                outcomes[str(result.condition.reason)] += 1
            if result.clusters:
                if request.key not in placed:
                    keys.append(request.key)
                placed[request.key] = (request, dict(result.clusters))
            now += DECISION_STEP
            for name in reporting.get(i % period, ()):
                # A new report: some nodes changed, a new snapshot, and the reservations it covers settle.
                index = names.index(name)
                churn(rng, nodes[index])
                snapshots[name] = ClusterSnapshot.from_cluster(
                    cluster_object(index, rng, nodes=nodes[index]), previous=snapshots[name], cache=cache
                )
                t0 = time.perf_counter_ns()
                reservations.observe_report(name, reported_at=now)
                accounting_ns += time.perf_counter_ns() - t0
                reports += 1
    finally:
        gc.callbacks.remove(gc_clock)

    decision_s = (sum(latencies) + accounting_ns) / 1e9
    cpu_s = (sum(cpu_latencies) + accounting_ns) / 1e9
    with_explanation_s = cpu_s + sum(explain_cpu) / 1e9
    latencies.sort()
    cpu_latencies.sort()
    explain_cpu.sort()
    p50 = statistics.median(latencies) / 1e6
    p99 = _ms(latencies, 0.99)
    cpu_p50, cpu_p99 = statistics.median(cpu_latencies) / 1e6, _ms(cpu_latencies, 0.99)
    kinds = {
        kind: {
            "count": len(values),
            "cpu_p50_ms": round(_ms(sorted(values), 0.5), 4),
            "cpu_p99_ms": round(_ms(sorted(values), 0.99), 4),
        }
        for kind, values in sorted(by_kind.items())
    }
    results = {
        "clusters": args.clusters,
        "nodes_per_cluster": args.nodes,
        "node_shapes": shapes,
        "bindings": args.bindings,
        "warmup": args.warmup,
        "first_decision_ms": round(first_decision_ms, 3),
        "updates": updates,
        "reports": reports,
        "report_every": period,
        "p50_ms": round(p50, 4),
        "p99_ms": round(p99, 4),
        "max_ms": round(latencies[-1] / 1e6, 4),
        "bindings_per_s": round(args.bindings / decision_s, 1),
        "cpu_p50_ms": round(cpu_p50, 4),
        "cpu_p99_ms": round(cpu_p99, 4),
        "bindings_per_cpu_s": round(args.bindings / cpu_s, 1),
        "explanation_cpu_p50_ms": round(_ms(explain_cpu, 0.5), 4),
        "explanation_cpu_p99_ms": round(_ms(explain_cpu, 0.99), 4),
        "explanation_cpu_mean_ms": round(sum(explain_cpu) / len(explain_cpu) / 1e6, 4),
        "bindings_per_cpu_s_with_explanation": round(args.bindings / with_explanation_s, 1),
        "gc_collections": {f"gen{g}": n for g, n in sorted(gc_clock.collections.items())},
        "gc_ms": round(gc_clock.seconds * 1000, 1),
        "gc_ms_in_decisions": round(gc_clock.in_decisions * 1000, 1),
        "gc_ms_by_generation": {
            f"gen{g}": round(t * 1000, 1) for g, t in sorted(gc_clock.by_generation.items())
        },
        "kinds": kinds,
        "fleet_build_s": round(build_s, 3),
        "outcomes": dict(outcomes),
    }
    print(
        f"fleet: {args.clusters} clusters x {args.nodes} nodes x 8 GPUs, {shapes} node shapes (built in {build_s:.2f}s); "
        f"{args.warmup} + {args.bindings} bindings ({updates} rescale earlier ones), {reports} capacity reports; "
        f"first decision (cold caches) {first_decision_ms:.1f} ms; the {args.warmup} warm-up decisions are not measured"
    )
    print(f"{'clock':>6} {'bindings':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'bindings/s':>11}")
    print(
        f"{'wall':>6} {args.bindings:>9} {p50:>8.3f} {p99:>8.3f} {latencies[-1] / 1e6:>8.3f} "
        f"{args.bindings / decision_s:>11.0f}"
    )
    print(
        f"{'cpu':>6} {args.bindings:>9} {cpu_p50:>8.3f} {cpu_p99:>8.3f} {cpu_latencies[-1] / 1e6:>8.3f} "
        f"{args.bindings / cpu_s:>11.0f}"
    )
    print("(cpu: this process's CPU time, insensitive to other load on the machine)")
    print(
        f"explanation to wire form (not in the decision): cpu p50 {_ms(explain_cpu, 0.5):.3f} ms, "
        f"p99 {_ms(explain_cpu, 0.99):.3f} ms; decision and explanation together "
        f"{args.bindings / with_explanation_s:.0f} bindings per cpu-second"
    )
    gcs = ", ".join(
        f"gen{g} x{n} ({gc_clock.by_generation[g] * 1000:.0f} ms)"
        for g, n in sorted(gc_clock.collections.items())
    )
    print(
        f"garbage collector (cpu) during the run: {gcs or 'none'}, {gc_clock.seconds * 1000:.0f} ms in total, "
        f"{gc_clock.in_decisions * 1000:.0f} ms of it inside decisions"
    )
    print(
        "cpu by kind: "
        + "; ".join(
            f"{k} n={v['count']} p50 {v['cpu_p50_ms']:.3f} p99 {v['cpu_p99_ms']:.3f}"
            for k, v in kinds.items()
        )
    )
    print("outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"scheduler": results}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
