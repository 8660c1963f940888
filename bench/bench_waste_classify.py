"""What one waste classification costs at Karmada's scale (issue 17): 100 clusters x 5,000 nodes
x 8 GPUs, with pending demand matched against every free GPU.

What runs, in this process: a fleet sample built as the hub's sampler builds a hollow fleet's
(the GPUs no report names: one device sample per kind and cluster, repeated on every node;
nodes named ``(unreported) <product> shape i-j``), 70 % of the nodes all free, 15 % half
allocated, 15 % full; clusters alternate two products, at five prices and two tiers. Pending:
:data:`DEMANDS` Deployments of 1 or 2 replicas of one whole GPU (what ``bench_scale`` applies),
a tenth of them limited to three clusters. :func:`~controlplane.reports.classify.classify_fleet`
classifies the sample with a :class:`~controlplane.reports.classify.ClassificationMemo` already
warm (as a sampler pass does once the clusters' reports are cached), repeatedly; figures are
the median CPU seconds (``time.process_time``) of:

* ``matched``: the pending demand above, all of it matched;
* ``one demand waiting``: the same plus one demand no node can hold (16 GPUs per replica, not
  marked never-fits), so every free GPU the matching did not take turns free-fragmented: the
  part of a pass that grows with the fleet's free GPUs, not with their shapes;
* for each, the longest step of a whole sampler pass (``Accumulator.warm`` per cluster, then
  ``Accumulator.prepare_steps``: classification, cells, opportunities), i.e. the longest the
  hub's event loop waits for a turn: in a first pass (nothing known) and in the next ones.

Run it from a ``git archive`` of another commit, with ``PYTHONPATH`` set to it, to compare
(the module uses only ``classify_fleet`` and ``ClassificationMemo``).

Reproduce: ``.venv/bin/python -m bench.bench_waste_classify [--size tiny|quick|full] [--json FILE]``
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from bench.common import BenchmarkResult, Figure, Size, script_main
from controlplane.reports.accounting import Accumulator
from controlplane.reports.classify import ClassificationMemo, WasteState, classify_fleet
from controlplane.reports.fleet import (
    ClusterSample,
    DeviceSample,
    FleetSample,
    NodeSample,
    PendingDemand,
    PodRef,
)

NAME = "waste-classify"
GPU = "nvidia.com/gpu"
PRODUCTS = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3")
GPUS_PER_NODE = 8
DEMANDS = 2000
SEED = 17


@dataclass(frozen=True, slots=True)
class Plan:
    clusters: int
    nodes: int
    demands: int
    repeats: int


PLANS = {
    Size.TINY: Plan(clusters=4, nodes=50, demands=40, repeats=3),
    Size.QUICK: Plan(clusters=20, nodes=1000, demands=DEMANDS, repeats=3),
    Size.FULL: Plan(clusters=100, nodes=5000, demands=DEMANDS, repeats=3),
}


def _cluster(index: int, nodes: int) -> ClusterSample:
    product = PRODUCTS[index % 2]
    free = DeviceSample(gpu=GPU, uuid="", resource=GPU)
    held = DeviceSample(gpu=GPU, uuid="", allocated_to=PodRef("", ""), resource=GPU)
    full, half = (free,) * GPUS_PER_NODE, (held,) * (GPUS_PER_NODE // 2) + (free,) * (GPUS_PER_NODE // 2)
    out = []
    for node in range(nodes):
        kind = node % 20
        devices = (held,) * GPUS_PER_NODE if kind < 3 else half if kind < 6 else full
        out.append(NodeSample(f"(unreported) {product} shape 0-{node}", product, devices))
    return ClusterSample(
        name=f"member-{index:03d}",
        nodes=tuple(out),
        pricing={product: 1.0 + 0.25 * (index % 5)},
        tier=0 if index < 50 else 1,
    )


def fleet(plan: Plan, *, waiting: bool) -> FleetSample:
    """The benchmark's fleet with its pending demand (``waiting``: plus one demand no node holds)."""
    rng = random.Random(SEED)
    clusters = tuple(_cluster(i, plan.nodes) for i in range(plan.clusters))
    names = [c.name for c in clusters]
    pending = [
        PendingDemand(
            namespace=f"team-{i % 20}",
            workload=f"Deployment/s-{i:05d}",
            replicas=rng.choice((1, 2)),
            requests={GPU: 1},
            clusters=frozenset(rng.sample(names, 3)) if i % 10 == 0 else None,
        )
        for i in range(plan.demands)
    ]
    if waiting:
        pending.append(PendingDemand("team-0", "Deployment/too-big", 1, {GPU: 16}))
    return FleetSample(datetime(2026, 12, 3, tzinfo=UTC), clusters, tuple(pending))


def _cpu_seconds(sample: FleetSample, memo: ClassificationMemo) -> float:
    gc.collect()
    started = time.process_time()
    classify_fleet(sample, memo=memo)
    return time.process_time() - started


def longest_step(accumulator: Accumulator, sample: FleetSample) -> float:
    """CPU seconds of the longest step of :meth:`Accumulator.prepare_steps` (what the sampler
    runs between two turns of the hub's event loop) over one pass."""
    steps = accumulator.prepare_steps(sample)
    longest = 0.0
    while True:
        started = time.process_time()
        try:
            next(steps)
        except StopIteration:
            return max(longest, time.process_time() - started)
        longest = max(longest, time.process_time() - started)


def measure(plan: Plan) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
    """CPU seconds per classification, per variant, and the states each classification gave."""
    seconds: dict[str, list[float]] = {}
    outcome: dict[str, dict[str, float]] = {}
    for variant, waiting in (("matched", False), ("one demand waiting", True)):
        sample = fleet(plan, waiting=waiting)
        memo = ClassificationMemo()
        classify_fleet(sample, memo=memo)  # warm: every cluster's states before matching
        seconds[variant] = [_cpu_seconds(sample, memo) for _ in range(plan.repeats)]
        result = classify_fleet(sample, memo=memo)
        counts = {state.value: 0.0 for state in WasteState}
        for state in result.states:
            counts[state.state.value] += state.share
        outcome[variant] = {**counts, "unmet demands": len(result.unmet)}
        # A whole pass as the sampler runs it: the clusters warmed one by one, then the rest in steps.
        accumulator = Accumulator()
        for cluster in sample.clusters:
            accumulator.warm(cluster)
        seconds[f"{variant}, longest step of a first pass"] = [longest_step(accumulator, sample)]
        seconds[f"{variant}, longest step of a next pass"] = [
            longest_step(accumulator, replace(sample, time=sample.time + timedelta(minutes=i + 1)))
            for i in range(plan.repeats)
        ]
    return seconds, outcome


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    seconds, outcome = measure(plan)
    gpus = plan.clusters * plan.nodes * GPUS_PER_NODE
    figures = [
        Figure(
            f"{variant}: CPU per classification, {gpus:,} GPUs, {plan.demands:,} demands (median)"
            if "step" not in variant
            else f"{variant}: CPU (median)",
            round(sorted(values)[len(values) // 2], 3),
            "s",
        )
        for variant, values in seconds.items()
    ]
    details = {
        "clusters": plan.clusters,
        "nodes_per_cluster": plan.nodes,
        "gpus_per_node": GPUS_PER_NODE,
        "demands": plan.demands,
        "repeats": plan.repeats,
        "cpu_seconds": {variant: [round(v, 4) for v in values] for variant, values in seconds.items()},
        "gpus_by_state": outcome,
    }
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
