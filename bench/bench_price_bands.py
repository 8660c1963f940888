"""Price bands on the ``--by model`` split: allocation of gpufed with and without
``tieredOverflow.priceBandPercent``, against static, karmada-like and pooled clusters.

Split by GPU model, each cluster holds one or a few models at its own amortised price (T4
$0.18, A10 $0.34, P100 $0.49, V100 and the G2/G3 models $1.02, V100-32GB $1.30 per GPU-hour),
so price order, which the tie-break never overrides, sends replicas that accept any model to
the T4 cluster first. A price band makes those prices equal, and the tie-break (fragmentation,
and the scarcity of each model against the demand constrained to it) chooses instead. Trace:
the ``gpuspec`` variant at 33 % (a third of the GPU tasks must run on one model, drawn by the
models' GPU counts), the what-if fill (no replay), allocation at 100 % arrived demand, seed 42,
under each member scoring; gpufed with no band, ``100`` and ``500`` percent.

Sizes as ``bench_placement_quality``: ``full`` the whole node list, ``quick`` every fourth
node, ``tiny`` every eighth and best-fit members only.

Reproduce::

    .venv/bin/python -m bench.bench_price_bands --size quick
"""

from __future__ import annotations

import time

from bench.bench_placement_quality import SCORINGS, _allocation, gpus_by_model, inputs
from bench.bench_whatif import DATA, NODES, SEED
from bench.common import BenchmarkResult, Figure, Size, Status, script_main
from policies.models import Placement
from simulator.whatif.fleetsplit import SplitBy, split_nodes
from simulator.whatif.member import MemberScoring
from simulator.whatif.strategies import StrategyName
from simulator.whatif.variants import VariantKind, make_variant

BANDS = (0, 100, 500)
BASELINES = (
    StrategyName.STATIC,
    StrategyName.KARMADA_LIKE,
    StrategyName.POOLED,
    StrategyName.POOLED_BEST_FIT,
    StrategyName.POOLED_FGD,
)


def banded(percent: int) -> Placement:
    tiered: dict[str, object] = {"priceBandPercent": percent} if percent else {}
    scheduling: dict[str, object] = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}
    if tiered:
        scheduling["tieredOverflow"] = tiered
    return Placement.model_validate({"replicaScheduling": scheduling})


def run(size: Size) -> BenchmarkResult:
    started = time.perf_counter()
    found = inputs(size)
    if found is None:
        return BenchmarkResult(benchmark="pricebands", size=size, status=Status.SKIPPED, reason=f"no trace under {DATA}")
    nodes, jobs = found
    trace = make_variant(jobs, VariantKind.GPUSPEC, 33, seed=SEED, model_gpus=gpus_by_model(nodes))
    fleet = split_nodes(nodes, clusters=4, by=SplitBy.MODEL, seed=SEED, csv_path=str(NODES))
    scorings = SCORINGS if size is not Size.TINY else (MemberScoring.BEST_FIT,)
    columns = [f"gpufed band {b} %" for b in BANDS] + [str(s) for s in BASELINES]
    print("| member scoring | " + " | ".join(columns) + " |")
    print("|" + "---|" * (len(columns) + 1), flush=True)
    figures: list[Figure] = []
    rows: list[dict[str, object]] = []
    for scoring in scorings:
        cells = _allocation(fleet, trace, BASELINES, scoring)
        for band in BANDS:
            found = _allocation(fleet, trace, (StrategyName.GPUFED,), scoring, banded(band))
            cells[f"gpufed band {band} %"] = found[StrategyName.GPUFED]
        rows.append({"scoring": str(scoring), "cells": cells})
        print(f"| {scoring} | " + " | ".join(f"{cells[c][0]:.1f}" for c in columns) + " |", flush=True)
        figures.extend(Figure(f"{scoring}: {c}", round(cells[c][0], 1), "%") for c in columns)
    details: dict[str, object] = {"nodes": len(nodes), "rows": rows}
    seconds = time.perf_counter() - started
    return BenchmarkResult(benchmark="pricebands", size=size, figures=figures, details=details, seconds=seconds)


if __name__ == "__main__":
    script_main(run, __doc__, name="price bands: gpuspec33 split by model, gpufed with and without bands")
