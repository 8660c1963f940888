"""The what-if engine: replay a GPU job trace against a fleet, once per strategy, in virtual time.

Per strategy, two passes over fresh simulated members (:mod:`simulator.whatif.strategies`):

1. **Fill** -- the FGD paper's inflation workload (Weng et al., ATC '23, and its simulator
   ``kubernetes-scheduler-simulator``): the trace's jobs in a seeded random order, then jobs
   drawn from the trace with replacement, until arrived GPU demand reaches ``inflate`` x the
   fleet's GPU capacity. Jobs never leave; a job nothing can place stays unplaced. After
   each arrival the allocated GPUs are recorded against arrived demand, in whole percent.
2. **Replay** (:mod:`simulator.whatif.replay`) -- the trace in its own time: a job arrives
   at its submit time and runs for its duration from the moment it is placed. A job that cannot start waits, at the hub or
   in the member it was sent to, and is tried again in arrival order whenever a job leaves
   the cluster it waits for (or, waiting at the hub, any cluster). Between events every
   cluster's GPUs are classified into waste states (busy / idle-allocated by the job's
   drawn utilization; free-needed / free-fragmented / free-spare by what waits). For
   ``gpufed-rebalance``, once the waiting jobs had their try, running jobs move back to a
   cheaper tier where a job left (:mod:`simulator.whatif.returns`). With quotas
   (:mod:`simulator.whatif.quotas`) a job first waits in its tenant's queue until the
   admission core admits it, and is placed then; a finished job frees its quota. Per-tenant
   figures go to a :class:`~simulator.whatif.tenants.TenantTally`; with
   ``Settings.fair_sharing = (False, True)`` the replay runs once more, with fair sharing,
   for the tenants' figures.

In: a validated :class:`~simulator.profile.Fleet` and jobs from :mod:`simulator.whatif.trace`.
Out: :class:`Comparison` with one :class:`~simulator.whatif.metrics.StrategyResult` per
strategy. Pure and deterministic for a seed; progress is reported through a callback. The
run's :class:`~simulator.whatif.settings.Settings` are importable from here too.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from controlplane.apis.fragmentation import DemandMix
from simulator.nodes import build_inventory, build_nodes
from simulator.profile import Fleet
from simulator.whatif.member import trace_mix
from simulator.whatif.metrics import MARKS, FillResult, ReplayResult, StrategyResult
from simulator.whatif.quotas import resolve
from simulator.whatif.replay import capacity_by_cluster, run_replay
from simulator.whatif.returns import ReturnTally
from simulator.whatif.settings import PROGRESS_EVERY, Progress, Settings
from simulator.whatif.strategies import (
    DEFAULT_STRATEGIES,
    POOLED_SCORING,
    FleetNodes,
    Strategy,
    StrategyName,
    build_strategy,
)
from simulator.whatif.tenants import TenantTally
from simulator.whatif.trace import Job

__all__ = [
    "Comparison",
    "Progress",
    "Settings",
    "capacity_by_cluster",
    "compare",
    "fill_sequence",
    "fleet_nodes",
    "run_fill",
    "run_replay",
    "scoring_used",
]

logger = logging.getLogger(__name__)

_DEFAULT_SETTINGS = Settings()

@dataclass
class Comparison:
    capacity_gpus: int
    clusters: dict[str, int]
    jobs: int
    settings: Settings
    results: dict[str, StrategyResult] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        settings = self.settings
        return {
            "strategies": {name: result.to_json() for name, result in self.results.items()},
            "fleet": {"gpus": self.capacity_gpus, "clusters": self.clusters},
            "rebalance": self.rebalance_json(),
            "trace": {"jobs": self.jobs},
            "settings": {
                "seed": settings.seed,
                "inflate": settings.inflate,
                "member_scoring": str(settings.scoring) if settings.scoring else None,
                "percentage_of_nodes_to_score": settings.percentage_of_nodes_to_score,
                "utilization_threshold": settings.utilization_threshold,
                "fair_sharing": list(settings.fair_sharing) if settings.quotas is not None else None,
                "fair_sharing_preemption_strategies": (
                    [str(s) for s in settings.fair_sharing_preemption_strategies]
                    if settings.quotas is not None and any(settings.fair_sharing)
                    else None
                ),
            },
        }


    def rebalance_json(self) -> dict[str, Any] | None:
        """``gpufed-rebalance`` against ``gpufed`` (no automatic returns), when both replayed."""
        plain = self.results.get(str(StrategyName.GPUFED))
        returning = self.results.get(str(StrategyName.GPUFED_REBALANCE))
        if plain is None or returning is None or not (plain.replayed and returning.replayed):
            return None
        tally = returning.replay.returns or ReturnTally()
        return {
            "saved_usd": round(plain.replay.allocated_cost_usd - returning.replay.allocated_cost_usd, 2),
            "cost_usd": {
                "without": round(plain.replay.allocated_cost_usd, 2),
                "with": round(returning.replay.allocated_cost_usd, 2),
            },
            "gpu_hours_by_tier": {
                "without": {t: round(h, 3) for t, h in sorted(plain.replay.gpu_hours_by_tier.items())},
                "with": {t: round(h, 3) for t, h in sorted(returning.replay.gpu_hours_by_tier.items())},
            },
            **tally.to_json(),
        }


def fleet_nodes(fleet: Fleet) -> FleetNodes:
    """Build every cluster's nodes and device inventories once."""
    return FleetNodes(
        profiles=tuple(fleet.clusters),
        nodes={p.name: build_nodes(p) for p in fleet.clusters},
        inventories={p.name: build_inventory(p) for p in fleet.clusters},
    )


def fill_sequence(jobs: Sequence[Job], *, capacity_gpus: float, inflate: float, seed: int) -> list[Job]:
    """The trace shuffled, then jobs drawn with replacement until demand reaches ``inflate`` x capacity."""
    rng = random.Random(seed)
    order = list(jobs)
    rng.shuffle(order)
    target = inflate * capacity_gpus
    out: list[Job] = []
    arrived = 0.0
    for job in order:
        if arrived >= target:
            return out
        out.append(job)
        arrived += job.gpus
    if not any(job.gpus for job in jobs):
        return out
    clone = 0
    while arrived < target:
        job = jobs[rng.randrange(len(jobs))]
        out.append(replace(job, name=f"{job.name}-clone-{clone}"))
        clone += 1
        arrived += job.gpus
    return out


def run_fill(
    strategy: Strategy,
    sequence: Sequence[Job],
    *,
    capacity_gpus: float,
    progress: Progress | None = None,
) -> FillResult:
    result = FillResult(capacity_gpus=float(capacity_gpus))
    if capacity_gpus <= 0:
        return result
    arrived = 0.0
    held = 0.0
    next_mark = 0
    total = len(sequence)
    for index, job in enumerate(sequence, 1):
        arrived += job.gpus
        outcome = strategy.try_place(job)
        result.jobs_submitted += 1
        if outcome.placed is not None:
            result.jobs_placed += 1
            held += outcome.placed.shape.held_gpus
        else:
            strategy.forget(job)
            _note_unplaced(result, job, arrived=arrived, counted=next_mark <= 100)
        reached = math.floor(arrived / capacity_gpus * 100 + 1e-9)
        while next_mark <= reached:
            result.curve[next_mark] = held / capacity_gpus * 100
            result.allocated_gpus[next_mark] = held
            next_mark += 1
        if progress is not None and (index % PROGRESS_EVERY == 0 or index == total):
            progress("fill", index, total)
    return result


def _note_unplaced(result: FillResult, job: Job, *, arrived: float, counted: bool) -> None:
    """Record a job the fill left unplaced (its GPUs count while the 100 % mark is not passed)."""
    if not job.gpus:
        return
    if result.first_unplaced_at is None:
        result.first_unplaced_at = arrived / result.capacity_gpus * 100
    if counted:
        result.unplaced_gpus[job.kind] = result.unplaced_gpus.get(job.kind, 0.0) + job.gpus

def _strategy(name: StrategyName, nodes: FleetNodes, settings: Settings, mix: DemandMix) -> Strategy:
    return build_strategy(
        name,
        nodes,
        scoring=settings.scoring,
        seed=settings.seed,
        placement=settings.placement,
        percentage=settings.percentage_of_nodes_to_score,
        demand_mix=mix,
    )


def scoring_used(name: StrategyName, nodes: FleetNodes, settings: Settings) -> str:
    """The member scoring a strategy runs with: forced, else the run's, else the clusters' own."""
    forced = POOLED_SCORING.get(name)
    if forced is not None:
        return str(forced)
    if settings.scoring is not None:
        return str(settings.scoring.scoring)
    profiles = nodes.profiles[:1] if name is StrategyName.POOLED else nodes.profiles
    return ",".join(sorted({str(p.simulation.scoring) for p in profiles}))


def compare(
    fleet: Fleet,
    jobs: Sequence[Job],
    *,
    strategies: Sequence[StrategyName] = DEFAULT_STRATEGIES,
    settings: Settings = _DEFAULT_SETTINGS,
    progress: Progress | None = None,
    nodes: FleetNodes | None = None,
) -> Comparison:
    """Run every strategy over the fleet and trace; see the module docstring."""
    if settings.inflate < max(MARKS) / 100:
        raise ValueError(
            f"inflate must be at least {max(MARKS) / 100} (the fill reports allocation at {max(MARKS)} %)"
        )
    nodes = nodes or fleet_nodes(fleet)
    capacity = capacity_by_cluster(nodes)
    total = sum(capacity.values())
    comparison = Comparison(capacity_gpus=total, clusters=capacity, jobs=len(jobs), settings=settings)
    tenancy = resolve(settings.quotas, jobs) if settings.quotas is not None and settings.replay else None
    sequence = fill_sequence(jobs, capacity_gpus=total, inflate=settings.inflate, seed=settings.seed)
    mix = trace_mix(jobs)
    for name in strategies:

        def report(phase: str, done: int, of: int, _name: str = str(name)) -> None:
            if progress is not None:
                progress(f"{_name} {phase}", done, of)

        started = time.perf_counter()
        fill = run_fill(_strategy(name, nodes, settings, mix), sequence, capacity_gpus=total, progress=report)
        seconds = {"fill": time.perf_counter() - started}
        replay = ReplayResult()
        tenants: list[TenantTally] = []
        if settings.replay:
            modes = settings.fair_sharing if tenancy is not None else (False,)
            for index, mode in enumerate(modes):
                started = time.perf_counter()
                replayed = run_replay(
                    _strategy(name, nodes, settings, mix), jobs, nodes, settings=settings, progress=report,
                    tenancy=tenancy, fair_sharing=mode,
                )
                if index == 0:
                    replay = replayed
                seconds["replay" if index == 0 else "replay_fair_sharing"] = time.perf_counter() - started
                if replayed.tenants is not None:
                    tenants.append(replayed.tenants)
        comparison.results[str(name)] = StrategyResult(
            str(name),
            fill,
            replay,
            seconds,
            member_scoring=scoring_used(name, nodes, settings),
            replayed=settings.replay,
            tenants=tenants,
        )
        logger.info(
            "strategy replayed",
            extra={"strategy": str(name), "allocation_at_100": round(fill.allocation_at(100), 2), **seconds},
        )
    return comparison
