"""Placement quality: GPU allocation at 100 % arrived demand, gpufed against the alternatives.

Over the openb default trace and its variants (``simulator.whatif.variants``, the FGD
paper's kinds), each split into a 4-cluster fleet ``--by onprem-cloud``, ``model`` and
``random``, under each member scoring (least-allocated, best-fit, fgd), the what-if fill
(no replay) gives the allocation at 100 % arrived demand of gpufed, static, karmada-like and
pooled (one cluster, the same scoring), and once per trace of pooled-best-fit and pooled-fgd
(which do not depend on the split or the fleet's scoring).

Printed: one row per cell, each followed by what gpufed's and static's allocation lack (the
arrived demand when a task asking for GPUs first found no room, and the GPUs of the tasks
left unplaced by 100 %, by kind; in the JSON for every strategy), and the summary figures
the placement targets are stated in: cells where gpufed allocates at least as much as
static, the median reduction of unallocated GPUs against static, the median gap to
pooled-fgd, cells where gpufed reaches pooled-best-fit, cells where it beats karmada-like.

Sizes: ``full`` the whole node list and eight variants (hours of CPU); ``quick`` a quarter
of the nodes (every fourth) and four variants; ``tiny`` an eighth of the nodes, the default
trace, one split and one scoring. Data: Alibaba clusterdata cluster-trace-gpu-v2023
(CC BY 4.0), Weng et al., USENIX ATC '23.

Node list (``--nodes``): ``gpu`` (default) is ``openb_node_list_gpu_node.csv``, the list the
paper's simulator runs every variant on, CPU variants included (its ``prepare_input.sh``
copies the GPU-node list next to every pod list); ``all`` is ``openb_node_list_all_node.csv``,
the same GPU nodes and 310 CPU-only nodes (quick and tiny sizes take every fourth / eighth
GPU node and every fourth / eighth CPU-only node). ``--seed`` draws variants, splits and the
fill again (default 42); ``--traces cpu250`` runs only the named traces of the size. gpufed's
policy is the default TieredOverflow one (steering and node-shape scarcity on, as shipped);
``--no-scarcity-steering`` gives it ``tieredOverflow.scarcitySteering: false``,
``--no-node-shape-scarcity`` ``tieredOverflow.nodeShapeScarcity: false``,
``--no-node-shapes-by-member-scoring`` ``tieredOverflow.nodeShapesByMemberScoring: false``,
``--no-rare-node-steering`` ``tieredOverflow.rareNodeSteering: false``, ``--no-share-fit-ties``
``tieredOverflow.shareFitTies: false`` and ``--packing-hints``
``tieredOverflow.packingHints: true`` (several: all of them; ``--packing-hints-scope SpreadingMembers``
limits the hints to the members that report node scoring LeastAllocated).

Reproduce::

    .venv/bin/python -m bench.bench_placement_quality --size quick [--nodes all] [--seed 7] [--traces cpu250]
        [--no-scarcity-steering] [--no-node-shape-scarcity] [--no-node-shapes-by-member-scoring] [--no-rare-node-steering]
        [--no-share-fit-ties]
        [--packing-hints [--packing-hints-scope SpreadingMembers]]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.bench_whatif import DATA, NODES, SEED, TRACE
from bench.common import BenchmarkResult, Figure, Size, Status, benchmark_main
from policies.models import Placement
from simulator.profile import ALIBABA_MODELS, CsvNode, parse_fleet, read_alibaba_nodes
from simulator.whatif.engine import Settings, compare, fleet_nodes
from simulator.whatif.fleetsplit import SplitBy, split_nodes
from simulator.whatif.member import MemberScoring
from simulator.whatif.metrics import FillResult
from simulator.whatif.strategies import StrategyName
from simulator.whatif.trace import Job, read_trace
from simulator.whatif.variants import BENCH_VARIANTS, VariantKind, make_variant

SCORINGS = (MemberScoring.LEAST_ALLOCATED, MemberScoring.BEST_FIT, MemberScoring.FGD)
SPLITS = (SplitBy.ONPREM_CLOUD, SplitBy.MODEL, SplitBy.RANDOM)
FLEET_STRATEGIES = (StrategyName.GPUFED, StrategyName.STATIC, StrategyName.KARMADA_LIKE, StrategyName.POOLED)
QUICK_VARIANTS = (
    (VariantKind.GPUSHARE, 100),
    (VariantKind.MULTIGPU, 50),
    (VariantKind.GPUSPEC, 33),
    (VariantKind.CPU, 250),
)
COLUMNS = ("gpufed", "static", "karmada-like", "pooled", "pooled-best-fit", "pooled-fgd")


ALL_NODES = DATA / "openb_node_list_all_node.csv"
NODE_LISTS = {"gpu": NODES, "all": ALL_NODES}


def inputs(size: Size, path: Path = NODES) -> tuple[list[CsvNode], list[Job]] | None:
    """The node list of ``size`` (all of it, every fourth GPU node and every fourth CPU-only
    node for quick, every eighth for tiny) and the default trace's jobs; None when the data
    files are missing."""
    if not path.exists() or not TRACE.exists():
        return None
    nodes = read_alibaba_nodes(path)
    _, jobs = read_trace(TRACE)
    step = {Size.FULL: 1, Size.QUICK: 4, Size.TINY: 8}[size]
    gpu = [n for n in nodes if n.gpuCount]
    cpu_only = [n for n in nodes if not n.gpuCount]
    return gpu[::step] + cpu_only[::step], jobs


def gpus_by_model(nodes: Sequence[CsvNode]) -> Counter[str]:
    """GPUs per GFD product of ``nodes`` (what ``gpuspec`` variants draw models by)."""
    model_gpus: Counter[str] = Counter()
    for node in nodes:
        if node.gpuCount and node.model in ALIBABA_MODELS:
            model_gpus[ALIBABA_MODELS[node.model][0]] += node.gpuCount
    return model_gpus


def _traces(size: Size, jobs: list[Job], nodes: Sequence[CsvNode], seed: int) -> list[tuple[str, list[Job]]]:
    model_gpus = gpus_by_model(nodes)
    out = [("default", jobs)]
    variants = {Size.FULL: BENCH_VARIANTS, Size.QUICK: QUICK_VARIANTS, Size.TINY: ()}[size]
    for kind, percent in variants:
        out.append((f"{kind}{percent}", make_variant(jobs, kind, percent, seed=seed, model_gpus=model_gpus)))
    return out


def _allocation(
    fleet_doc: dict[str, object],
    jobs: Sequence[Job],
    names: Sequence[StrategyName],
    scoring: MemberScoring,
    placement: Placement | None = None,
    *,
    lacking: dict[str, dict[str, object]] | None = None,
    seed: int = SEED,
) -> dict[str, tuple[float, float]]:
    """Per strategy, (allocation %, unallocated GPUs) at 100 % arrived demand; ``lacking``, when
    given, gets per strategy what that allocation lacks (:func:`_lacking`)."""
    fleet = parse_fleet(fleet_doc)
    settings = Settings(seed=seed, scoring=scoring, replay=False, placement=placement)
    result = compare(fleet, jobs, strategies=names, settings=settings, nodes=fleet_nodes(fleet))
    if lacking is not None:
        lacking.update({name: _lacking(r.fill) for name, r in result.results.items()})
    return {
        name: (r.fill.allocation_at(100), r.fill.unallocated_gpus_at(100)) for name, r in result.results.items()
    }


def _lacking(fill: FillResult) -> dict[str, object]:
    """Where the first task asking for GPUs found no room, and the GPUs of the tasks left
    unplaced by 100 % arrived demand, by kind (largest first)."""
    unplaced = sorted(fill.unplaced_gpus.items(), key=lambda kv: (-kv[1], kv[0]))
    first = fill.first_unplaced_at
    return {
        "first_unplaced_at_pct": round(first, 1) if first is not None else None,
        "unplaced_gpus": {kind: round(gpus, 1) for kind, gpus in unplaced},
    }


def tiered_placement(**tiered_overflow: bool | str | float | None) -> Placement | None:
    """The default placement with these ``tieredOverflow`` fields (None ones left out; None when
    every one is)."""
    fields = {name: value for name, value in tiered_overflow.items() if value is not None}
    if not fields:
        return None
    return Placement.model_validate(
        {
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "TieredOverflow",
                "tieredOverflow": fields,
            }
        }
    )


def run(
    size: Size,
    *,
    node_list: str = "gpu",
    seed: int = SEED,
    only: Sequence[str] = (),
    placement: Placement | None = None,
) -> BenchmarkResult:
    started = time.perf_counter()
    path = NODE_LISTS[node_list]
    found = inputs(size, path)
    if found is None:
        return BenchmarkResult(
            benchmark="placement", size=size, status=Status.SKIPPED, reason=f"trace files not found under {DATA}"
        )
    nodes, jobs = found
    splits = SPLITS if size is not Size.TINY else SPLITS[:1]
    scorings = SCORINGS if size is not Size.TINY else (MemberScoring.BEST_FIT,)
    rows: list[dict[str, object]] = []
    for trace_name, trace in _traces(size, jobs, nodes, seed):
        if only and trace_name not in only:
            continue
        one = split_nodes(nodes, clusters=1, by=SplitBy.MODEL, seed=seed, csv_path=str(path))
        pooled = _allocation(
            one, trace, (StrategyName.POOLED_BEST_FIT, StrategyName.POOLED_FGD), MemberScoring.BEST_FIT, seed=seed
        )
        for split in splits:
            fleet = split_nodes(nodes, clusters=4, by=split, seed=seed, csv_path=str(path))
            for scoring in scorings:
                lacking: dict[str, dict[str, object]] = {}
                cell = _allocation(fleet, trace, FLEET_STRATEGIES, scoring, placement, lacking=lacking, seed=seed)
                cell.update(pooled)
                rows.append(
                    {
                        "trace": trace_name,
                        "split": str(split),
                        "scoring": str(scoring),
                        "cells": cell,
                        "lacking": lacking,
                    }
                )
                print(_row(rows[-1]), flush=True)
                print(_lacking_line(lacking), flush=True)
    figures = _summary(rows)
    print(_table(rows))
    return BenchmarkResult(
        benchmark="placement",
        size=size,
        figures=figures,
        details={
            "nodes": len(nodes),
            "node_list": path.name,
            "seed": seed,
            "tiered_overflow": (
                placement.replica_scheduling.tiered_overflow.model_dump(by_alias=True, exclude_none=True)
                if placement is not None and placement.replica_scheduling and placement.replica_scheduling.tiered_overflow
                else {}
            ),
            "rows": rows,
        },
        seconds=time.perf_counter() - started,
    )


def _row(row: dict[str, object]) -> str:
    cells = row["cells"]
    assert isinstance(cells, dict)
    values = " | ".join(f"{cells[c][0]:.1f}" for c in COLUMNS)
    gpufed, static = cells["gpufed"][1], cells["static"][1]
    reduction = f"{100 * (1 - gpufed / static):.0f} %" if static > 0 else "-"
    return f"| {row['trace']} | {row['split']} | {row['scoring']} | {values} | {reduction} |"


def _lacking_line(lacking: dict[str, dict[str, object]]) -> str:
    """What gpufed's and static's allocation at 100 % lack, on one line."""
    parts = []
    for name in (StrategyName.GPUFED, StrategyName.STATIC):
        found = lacking.get(name)
        if found is None:
            continue
        unplaced = found["unplaced_gpus"]
        assert isinstance(unplaced, dict)
        kinds = ", ".join(f"{kind} {gpus:g}" for kind, gpus in unplaced.items()) or "none"
        first = found["first_unplaced_at_pct"]
        when = "never" if first is None else f"{first} %"
        parts.append(f"{name}: first unplaced at {when}, unplaced GPUs {kinds}")
    return "    " + "; ".join(parts)


def _table(rows: Sequence[dict[str, object]]) -> str:
    header = "| trace | split | member scoring | " + " | ".join(COLUMNS) + " | unallocated vs static |"
    rule = "|" + "---|" * (len(COLUMNS) + 4)
    return "\n".join([header, rule, *(_row(r) for r in rows)])


def _summary(rows: Sequence[dict[str, object]]) -> list[Figure]:
    cells = [r["cells"] for r in rows]
    n = len(cells)
    at_least_static = sum(1 for c in cells if isinstance(c, dict) and c["gpufed"][0] >= c["static"][0] - 1e-9)
    reductions = [
        1 - c["gpufed"][1] / c["static"][1] for c in cells if isinstance(c, dict) and c["static"][1] > 0
    ]
    gaps = [c["gpufed"][0] - c["pooled-fgd"][0] for c in cells if isinstance(c, dict)]
    best_fit = sum(1 for c in cells if isinstance(c, dict) and c["gpufed"][0] >= c["pooled-best-fit"][0] - 1e-9)
    karmada = sum(1 for c in cells if isinstance(c, dict) and c["gpufed"][0] > c["karmada-like"][0])
    return [
        Figure("cells", n),
        Figure("cells gpufed >= static", at_least_static),
        Figure("median unallocated reduction vs static", round(100 * statistics.median(reductions), 1) if reductions else None, "%"),
        Figure("median gpufed - pooled-fgd", round(statistics.median(gaps), 2) if gaps else None, "points"),
        Figure("cells gpufed >= pooled-best-fit", best_fit),
        Figure("cells gpufed > karmada-like", karmada),
    ]


OPTIONS = argparse.ArgumentParser(add_help=False)
OPTIONS.add_argument(
    "--nodes", choices=sorted(NODE_LISTS), default="gpu", help="node list: gpu (the paper's) or all (with CPU-only nodes)"
)
OPTIONS.add_argument("--seed", type=int, default=SEED, help=f"seed of the variants, splits and fill (default {SEED})")
OPTIONS.add_argument(
    "--no-node-shapes-by-member-scoring",
    action="store_true",
    help="gpufed's policy with tieredOverflow.nodeShapesByMemberScoring: false (default: on; node-shape "
    "scarcity counted where a LeastAllocated member puts the replica)",
)
OPTIONS.add_argument(
    "--no-scarcity-steering",
    action="store_true",
    help="gpufed's policy with tieredOverflow.scarcitySteering: false (default: on)",
)
OPTIONS.add_argument(
    "--no-node-shape-scarcity",
    action="store_true",
    help="gpufed's policy with tieredOverflow.nodeShapeScarcity: false (default: on)",
)
OPTIONS.add_argument(
    "--no-packing-hints",
    action="store_true",
    help="gpufed's policy with tieredOverflow.packingHints: false (default: on)",
)
OPTIONS.add_argument(
    "--no-share-remainder-hints",
    action="store_true",
    help="gpufed's policy with tieredOverflow.shareRemainderHints: false (default: on; shares packed toward "
    "the tightest remainder while packing hints wait for multi-GPU demand)",
)
OPTIONS.add_argument(
    "--no-rare-node-steering",
    action="store_true",
    help="gpufed's policy with tieredOverflow.rareNodeSteering: false (default: on; while packing hints are "
    "given, LeastAllocated members steer small replicas off the GPU models whose nodes alone hold recent larger ones)",
)
OPTIONS.add_argument(
    "--no-share-fit-ties",
    action="store_true",
    help="gpufed's policy with tieredOverflow.shareFitTies: false (default: on; while shares ask for half "
    "the recent GPUs, a share tied between MostAllocated members goes to the cluster of the tightest node)",
)
OPTIONS.add_argument(
    "--packing-hints-scope",
    choices=("AllMembers", "SpreadingMembers"),
    help="tieredOverflow.packingHintsScope (default SpreadingMembers: only the members that report node scoring "
    "LeastAllocated)",
)
OPTIONS.add_argument(
    "--packing-hints-multi-gpu-percent",
    type=float,
    metavar="PERCENT",
    help="tieredOverflow.packingHintsMultiGPUPercent (default 20: hints only while replicas of two GPUs or more "
    "asked for at least this percent of the recent arrivals' GPUs; 0: always)",
)
OPTIONS.add_argument(
    "--traces", default="", metavar="NAME,...", help="only these traces of the size, e.g. default,cpu250 (default: all)"
)


def main(argv: Sequence[str]) -> int:
    options, _ = OPTIONS.parse_known_args(argv)
    only = tuple(name for name in options.traces.split(",") if name)
    placement = tiered_placement(
        scarcitySteering=False if options.no_scarcity_steering else None,
        nodeShapeScarcity=False if options.no_node_shape_scarcity else None,
        nodeShapesByMemberScoring=False if options.no_node_shapes_by_member_scoring else None,
        packingHints=False if options.no_packing_hints else None,
        packingHintsScope=options.packing_hints_scope,
        packingHintsMultiGPUPercent=options.packing_hints_multi_gpu_percent,
        shareRemainderHints=False if options.no_share_remainder_hints else None,
        rareNodeSteering=False if options.no_rare_node_steering else None,
        shareFitTies=False if options.no_share_fit_ties else None,
    )
    bound = functools.partial(run, node_list=options.nodes, seed=options.seed, only=only, placement=placement)
    return benchmark_main(bound, argv, description=(__doc__ or "").splitlines()[0], parents=(OPTIONS,))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
