"""The what-if fairness table: the default trace with synthetic tenants under Kueue quotas,
without and with fair sharing.

Splits the trace's 1,213 nodes into one on-prem and three cloud clusters
(``gpufed whatif split --by onprem-cloud --clusters 4 --seed 42``), gives the jobs 4
synthetic tenants (``--synthetic-tenants 4 --seed 42``: team-1 .. team-4, Zipf-weighted) and
replays them through ``examples/whatif/quotas-4-teams.yaml`` (a ClusterQueue of 10 GPUs and
4,000 GPU-thousandths per team in one cohort) with gpufed's placement, once with plain
admission and once with fair sharing. Prints, per mode, Jain's fairness index over the
tenants that waited for quota and each tenant's mean wait; the details hold the whole
per-tenant table (the one ``gpufed whatif run --quotas ... --fair-sharing both`` prints).
No target: the figures describe the policy, not the code's speed (CPU seconds are reported).

Sizes: ``full`` the whole trace (8,152 tasks); ``quick`` its first 3,000; ``tiny`` 500.

Reproduce::

    .venv/bin/python -m bench.bench_whatif_tenants --size quick
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.common import BenchmarkResult, Figure, Size, Status, script_main
from simulator.profile import parse_fleet, read_alibaba_nodes
from simulator.whatif.engine import Settings, fleet_nodes, run_replay
from simulator.whatif.fleetsplit import SplitBy, split_nodes
from simulator.whatif.quotas import read_quotas, resolve
from simulator.whatif.strategies import StrategyName, build_strategy
from simulator.whatif.tenants import assign_synthetic_tenants
from simulator.whatif.trace import read_trace

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "alibaba-gpu-v2023"
NODES = DATA / "openb_node_list_gpu_node.csv"
TRACE = DATA / "openb_pod_list_default.csv"
QUOTAS = ROOT / "examples" / "whatif" / "quotas-4-teams.yaml"
TENANTS = 4
SEED = 42
JOBS = {Size.TINY: 500, Size.QUICK: 3000, Size.FULL: None}


def run(size: Size) -> BenchmarkResult:
    if not NODES.exists() or not TRACE.exists():
        return BenchmarkResult(
            benchmark="tenants", size=size, status=Status.SKIPPED, reason=f"trace files not found under {DATA}"
        )
    _, jobs = read_trace(TRACE)
    jobs = assign_synthetic_tenants(jobs[: JOBS[size]], count=TENANTS, seed=SEED)
    fleet = parse_fleet(split_nodes(read_alibaba_nodes(NODES), clusters=4, by=SplitBy.ONPREM_CLOUD, seed=SEED, csv_path=str(NODES)))
    nodes = fleet_nodes(fleet)
    quotas = read_quotas(QUOTAS)
    settings = Settings(seed=SEED, quotas=quotas)
    tenancy = resolve(quotas, jobs)
    figures: list[Figure] = []
    details: dict[str, Any] = {"tasks": len(jobs), "quotas": str(QUOTAS.relative_to(ROOT))}
    started = time.perf_counter()
    for fair_sharing in (False, True):
        mode = "fair sharing" if fair_sharing else "plain"
        cpu = time.process_time()
        strategy = build_strategy(StrategyName.GPUFED, nodes, seed=SEED)
        result = run_replay(strategy, jobs, nodes, settings=settings, tenancy=tenancy, fair_sharing=fair_sharing)
        cpu = time.process_time() - cpu
        assert result.tenants is not None
        tally = result.tenants.to_json()
        details["with_fair_sharing" if fair_sharing else "without_fair_sharing"] = tally
        jain = tally["jain_index"]
        figures.append(Figure(f"Jain's index ({mode})", jain, ""))
        figures.append(Figure(f"wait mean, all ({mode})", round(result.wait_mean_s, 1), "s"))
        for tenant, values in tally["tenants"].items():
            figures.append(Figure(f"{tenant} wait mean ({mode})", values["wait_mean_s"], "s"))
        figures.append(Figure(f"replay ({mode}, cpu)", round(cpu, 2), "s"))
    return BenchmarkResult(
        benchmark="tenants", size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name="what-if fairness table")
