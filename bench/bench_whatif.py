"""What-if replay time per strategy on the Alibaba openb default trace.

Splits the trace's 1,213 nodes into one on-prem and three cloud clusters
(``gpufed whatif split --by onprem-cloud --clusters 4 --seed 42``) and replays the 8,152-task
default trace once per strategy (gpufed, static, karmada-like, pooled): the fill pass (the
FGD paper's inflation to 130 % of capacity, about 10,800 placements) and the timed replay.
Prints, per strategy, the seconds of this process's CPU time (stable on a shared machine)
and of wall clock, and the allocation at 100 % arrived demand.

Target (not asserted): each strategy replays in under 60 s of CPU time on one core.
Sizes: ``full`` the whole trace; ``quick`` its first 2,000 tasks; ``tiny`` 200 tasks on a
quarter of the nodes. Data: Alibaba clusterdata cluster-trace-gpu-v2023 (CC BY 4.0),
Weng et al., USENIX ATC '23.

Reproduce::

    .venv/bin/python -m bench.bench_whatif --size full
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.common import BenchmarkResult, Figure, Size, Status, at_most, script_main
from simulator.profile import parse_fleet, read_alibaba_nodes
from simulator.whatif.engine import Settings, compare, fleet_nodes
from simulator.whatif.fleetsplit import SplitBy, split_nodes
from simulator.whatif.strategies import DEFAULT_STRATEGIES
from simulator.whatif.trace import read_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "alibaba-gpu-v2023"
NODES = DATA / "openb_node_list_gpu_node.csv"
TRACE = DATA / "openb_pod_list_default.csv"
TARGET_SECONDS = 60.0
SEED = 42


def run(size: Size) -> BenchmarkResult:
    if not NODES.exists() or not TRACE.exists():
        return BenchmarkResult(
            benchmark="whatif", size=size, status=Status.SKIPPED, reason=f"trace files not found under {DATA}"
        )
    nodes = read_alibaba_nodes(NODES)
    _, jobs = read_trace(TRACE)
    if size is Size.QUICK:
        jobs = jobs[:2000]
    elif size is Size.TINY:
        nodes, jobs = nodes[: len(nodes) // 4], jobs[:200]
    fleet = parse_fleet(
        split_nodes(nodes, clusters=4, by=SplitBy.ONPREM_CLOUD, seed=SEED, csv_path=str(NODES))
    )
    built = fleet_nodes(fleet)
    figures: list[Figure] = []
    details: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for strategy in DEFAULT_STRATEGIES:
        cpu, wall = time.process_time(), time.perf_counter()
        comparison = compare(fleet, jobs, strategies=[strategy], settings=Settings(seed=SEED), nodes=built)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        result = comparison.results[str(strategy)]
        details[str(strategy)] = {
            "cpu_seconds": round(cpu, 2),
            "wall_seconds": round(wall, 2),
            **{f"{phase}_wall_seconds": round(s, 2) for phase, s in result.seconds.items()},
            "allocation_pct_at_100": round(result.fill.allocation_at(100), 2),
            "fill_jobs": result.fill.jobs_submitted,
        }
        figures.append(Figure(f"{strategy} replay (cpu)", round(cpu, 2), "s", at_most(TARGET_SECONDS)))
        figures.append(Figure(f"{strategy} replay (wall)", round(wall, 2), "s"))
        figures.append(
            Figure(f"{strategy} allocation at 100 %", round(result.fill.allocation_at(100), 2), "%")
        )
    return BenchmarkResult(
        benchmark="whatif",
        size=size,
        figures=figures,
        details={"tasks": len(jobs), "nodes": len(nodes), "strategies": details},
        seconds=time.perf_counter() - started,
    )


if __name__ == "__main__":
    script_main(run, __doc__, name="what-if replay benchmark")
