"""Fleet admission decisions per second (issue 16): the pure admission core, in process.

What runs: :func:`controlplane.admission.core.decide` over 50 ClusterQueues (5 cohorts of 10,
two flavors each, GPU and CPU quotas, some queues StrictFIFO) and N pending workloads of 1-8
GPUs with random priorities, quota for about half of them. Figures: workloads decided (admitted or
given their reason) per second for one full cycle, and workloads admitted per second when the
hub admits them as they come (one cycle per admission, the rest waiting). The full cycle runs
again with fair sharing on (``decide(..., fair_sharing=True)``: the tournament by dominant
resource share, and fair-sharing preemption with ``reclaimWithinCohort: Any``, some weights 2
and 0). Kueue's own scale test admits about 43 workloads/s; the target is 1,000 decisions/s.

Reproduce: ``.venv/bin/python -m bench.bench_admission [--size tiny|quick|full] [--json FILE]``
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, replace

from bench.common import BenchmarkResult, Figure, Size, at_least, script_main
from controlplane.admission.core import (
    Admitted,
    ClusterQueue,
    FlavorQuotas,
    Pending,
    PodSetRequest,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    Quota,
    ResourceGroup,
    decide,
)

NAME = "admission"
GPU = "nvidia.com/gpu"
TARGET_DECISIONS_PER_S = 1000.0


@dataclass(frozen=True, slots=True)
class Plan:
    pending: int
    queues: int
    repeats: int
    incremental: int


PLANS = {
    Size.TINY: Plan(pending=200, queues=10, repeats=3, incremental=20),
    Size.QUICK: Plan(pending=1000, queues=50, repeats=5, incremental=50),
    Size.FULL: Plan(pending=1000, queues=50, repeats=9, incremental=200),
}


def fleet(queues: int) -> dict[str, ClusterQueue]:
    out: dict[str, ClusterQueue] = {}
    for i in range(queues):
        flavors = (
            FlavorQuotas("onprem-a100", {"cpu": Quota(256_000), GPU: Quota(16, borrowing_limit=8, lending_limit=8)}),
            FlavorQuotas("cloud-h100", {"cpu": Quota(128_000), GPU: Quota(8)}),
        )
        strategy = QueueingStrategy.STRICT_FIFO if i % 5 == 0 else QueueingStrategy.BEST_EFFORT_FIFO
        out[f"cq-{i}"] = ClusterQueue(f"cq-{i}", (ResourceGroup(("cpu", GPU), flavors),), f"cohort-{i % 5}", strategy)
    return out


def fair_fleet(queues: dict[str, ClusterQueue]) -> dict[str, ClusterQueue]:
    """The same queues for fair sharing: they reclaim by fair share; every 7th weighs 2, every 11th 0."""
    reclaim = Preemption(reclaim_within_cohort=PreemptionPolicy.ANY)
    return {
        name: replace(q, preemption=reclaim, fair_weight=0 if i % 11 == 10 else 2000 if i % 7 == 6 else 1000)
        for i, (name, q) in enumerate(queues.items())
    }


def workloads(plan: Plan, rng: random.Random) -> list[Pending]:
    out = []
    for i in range(plan.pending):
        gpus = rng.choice((1, 1, 2, 4, 8))
        pods = rng.choice((1, 1, 2))
        out.append(Pending(
            f"ns-{i % 50}/wl-{i}", f"cq-{rng.randrange(plan.queues)}",
            (PodSetRequest("main", pods, {"cpu": 4000 * gpus, GPU: gpus, "pods": 1}),),
            rng.choice((0, 0, 100, 1000)), f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
        ))
    return out


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    rng = random.Random(16)
    queues = fleet(plan.queues)
    pending = workloads(plan, rng)
    started = time.perf_counter()
    full: list[float] = []
    admitted = waiting = 0
    for _ in range(plan.repeats):
        t0 = time.perf_counter()
        decisions = decide(queues, pending, [], {})
        full.append(time.perf_counter() - t0)
        admitted, waiting = len(decisions.admitted), len(decisions.waiting)
    if admitted + waiting != plan.pending:
        raise RuntimeError(f"decided {admitted + waiting} of {plan.pending} workloads")
    fair_queues = fair_fleet(queues)
    fair: list[float] = []
    fair_admitted = 0
    for _ in range(plan.repeats):
        t0 = time.perf_counter()
        decisions = decide(fair_queues, pending, [], {}, fair_sharing=True)
        fair.append(time.perf_counter() - t0)
        fair_admitted = len(decisions.admitted)
        if fair_admitted + len(decisions.waiting) != plan.pending:
            raise RuntimeError(f"fair sharing decided {fair_admitted + len(decisions.waiting)} of {plan.pending} workloads")
    # The next cycle: what the first admitted holds its quota, every head that does not fit tries
    # fair-sharing preemption against it.
    fair_held = [Admitted(d.key, d.queue, d.usage(), 0, "", f"{i:05d}") for i, d in enumerate(decisions.admitted)]
    done = {d.key for d in decisions.admitted}
    rest = [p for p in pending if p.key not in done]
    again: list[float] = []
    preempting = 0
    for _ in range(plan.repeats):
        t0 = time.perf_counter()
        second = decide(fair_queues, rest, fair_held, {}, fair_sharing=True)
        again.append(time.perf_counter() - t0)
        preempting = len(second.preempting)
    # As the hub runs: a cycle after each arrival, with what was admitted before held.
    held: list[Admitted] = []
    queue = list(pending)
    incremental: list[float] = []
    arrivals = queue[: plan.incremental]
    waiting_now: list[Pending] = []
    for workload in arrivals:
        waiting_now.append(workload)
        t0 = time.perf_counter()
        decisions = decide(queues, waiting_now, held, {})
        incremental.append(time.perf_counter() - t0)
        done = {d.key for d in decisions.admitted}
        held.extend(Admitted(d.key, d.queue, d.usage()) for d in decisions.admitted)
        waiting_now = [w for w in waiting_now if w.key not in done]
    per_s = plan.pending / statistics.median(full)
    figures = [
        Figure(
            f"workloads decided/s, {plan.pending:,} pending over {plan.queues} ClusterQueues (one cycle, median)",
            round(per_s), "workloads/s", at_least(TARGET_DECISIONS_PER_S),
        ),
        Figure("of which admitted in that cycle", admitted, "workloads"),
        Figure(
            "workloads decided/s with fair sharing on (one cycle, median)",
            round(plan.pending / statistics.median(fair)), "workloads/s", at_least(TARGET_DECISIONS_PER_S),
        ),
        Figure("of which admitted with fair sharing", fair_admitted, "workloads"),
        Figure(
            f"fair sharing, the next cycle: {len(rest)} waiting against {len(fair_held)} held, preemption tried (median)",
            round(len(rest) / statistics.median(again)), "workloads/s", at_least(TARGET_DECISIONS_PER_S),
        ),
        Figure("of which preempting (one per cohort)", preempting, "workloads"),
        Figure(f"one cycle per arrival, {plan.incremental} arrivals (median)", round(statistics.median(incremental) * 1000, 2), "ms"),
    ]
    details = {
        "pending": plan.pending, "queues": plan.queues, "cohorts": 5, "flavors": 2, "repeats": plan.repeats,
        "cycle_seconds": full, "admitted": admitted, "waiting": waiting,
        "fair_sharing_cycle_seconds": fair, "fair_sharing_admitted": fair_admitted,
        "fair_sharing_next_cycle_seconds": again, "fair_sharing_preempting": preempting,
        "kueue_scale_test_admissions_per_s": 43,
    }
    return BenchmarkResult(benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started)


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
