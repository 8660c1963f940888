"""The what-if engine: replay a GPU job trace against a fleet, once per strategy, in virtual time.

Per strategy, two passes over fresh simulated members (:mod:`simulator.whatif.strategies`):

1. **Fill** -- the FGD paper's inflation workload (Weng et al., ATC '23, and its simulator
   ``kubernetes-scheduler-simulator``): the trace's jobs in a seeded random order, then jobs
   drawn from the trace with replacement, until arrived GPU demand reaches ``inflate`` x the
   fleet's GPU capacity. Jobs never leave; a job nothing can place stays unplaced. After
   each arrival the allocated GPUs are recorded against arrived demand, in whole percent.
2. **Replay** -- the trace in its own time: a job arrives at its submit time and runs for
   its duration from the moment it is placed. A job that cannot start waits, at the hub or
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
strategy. Pure and deterministic for a seed; progress is reported through a callback.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from controlplane.apis.cluster_v1alpha1 import ClusterSpec
from controlplane.apis.fragmentation import DemandMix
from controlplane.reports.classify import DEFAULT_THRESHOLD, WasteState
from policies.models import Placement
from simulator.nodes import build_inventory, build_nodes
from simulator.profile import ClusterProfile, Fleet
from simulator.whatif.member import MemberScoring, trace_mix
from simulator.whatif.metrics import MARKS, FillResult, ReplayResult, StrategyResult
from simulator.whatif.quotas import QuotaGate, Quotas, Tenancy, resolve
from simulator.whatif.returns import ReturnTally
from simulator.whatif.strategies import (
    DEFAULT_STRATEGIES,
    POOLED_SCORING,
    FleetNodes,
    ReturningGpufedStrategy,
    Strategy,
    StrategyName,
    build_strategy,
)
from simulator.whatif.tenants import TenantTally
from simulator.whatif.trace import Job

logger = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``, called every few hundred jobs."""

PROGRESS_EVERY = 250
#: Admission cycles at one moment of the replay at most (each after the previous one's evictions).
MAX_CYCLES_PER_EVENT = 16


@dataclass(frozen=True)
class Settings:
    seed: int = 0
    #: The fill stops once arrived GPU demand reaches this multiple of capacity (at least 1.3).
    inflate: float = 1.3
    #: Member scoring for every cluster; None keeps each cluster profile's ``simulation.scoring``.
    scoring: MemberScoring | None = None
    placement: Placement | None = None
    #: kube's percentageOfNodesToScore for the members: 0 is kube's adaptive default, 100
    #: scores every feasible node (as the FGD paper's simulator does).
    percentage_of_nodes_to_score: int = 0
    utilization_threshold: float = DEFAULT_THRESHOLD
    #: Run the replay pass (off for allocation-only runs such as the paper validation).
    replay: bool = True
    #: Kueue quotas the replay admits jobs through (None: every job is placed on arrival).
    quotas: Quotas | None = None
    #: With quotas: the admission modes replayed, the first for the strategy's own figures.
    fair_sharing: tuple[bool, ...] = (False,)


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


def capacity_by_cluster(nodes: FleetNodes) -> dict[str, int]:
    return {name: sum(len(inv.gpus) for inv in invs.values()) for name, invs in nodes.inventories.items()}


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


@dataclass
class _Running:
    job: Job
    cluster: str
    held: float
    busy: bool
    start: float


def cluster_tier(profile: ClusterProfile) -> str:
    """The cluster's overflow tier as the hub reads it (``tier``, else 0 on-prem and 1 elsewhere)."""
    return f"tier {ClusterSpec(provider=profile.provider, tier=profile.tier).effective_tier}"


class _Replay:
    """The replay pass: events in time order, waiting jobs, waste-state integration."""

    def __init__(
        self,
        strategy: Strategy,
        nodes: FleetNodes,
        *,
        settings: Settings,
        progress: Progress | None,
        tenancy: Tenancy | None = None,
        fair_sharing: bool = False,
    ) -> None:
        self.strategy = strategy
        self.settings = settings
        self.progress = progress
        self.node_cluster = nodes.node_cluster
        self.capacity = capacity_by_cluster(nodes)
        self.profiles = {p.name: p for p in nodes.profiles}
        self.products: dict[str, set[str]] = {
            name: {inv.gpus[0].product for inv in invs.values() if inv.gpus}
            for name, invs in nodes.inventories.items()
        }
        self.prices: dict[str, float] = {}
        for profile in nodes.profiles:
            gpus_by_product: dict[str, int] = defaultdict(int)
            for inv in nodes.inventories[profile.name].values():
                if inv.gpus:
                    gpus_by_product[inv.gpus[0].product] += len(inv.gpus)
            total = sum(gpus_by_product.values())
            self.prices[profile.name] = (
                sum(profile.pricing.get(p, 0.0) * n for p, n in gpus_by_product.items()) / total
                if total
                else 0.0
            )
        self.running: dict[str, _Running] = {}
        self.busy: dict[str, float] = defaultdict(float)
        self.idle: dict[str, float] = defaultdict(float)
        self.pending: dict[str, tuple[Job, str | None]] = {}
        self.result = ReplayResult()
        self.tiers = {p.name: cluster_tier(p) for p in nodes.profiles}
        if isinstance(strategy, ReturningGpufedStrategy):
            self.result.returns = ReturnTally()
        self.gate: QuotaGate | None = None
        self.tally: TenantTally | None = None
        if settings.quotas is not None and tenancy is not None:
            self.gate = QuotaGate(settings.quotas, tenancy, fair_sharing=fair_sharing)
            self.tally = self.result.tenants = TenantTally.for_tenants(
                tenancy.queue_of, tenancy.shares, fair_sharing=fair_sharing
            )
        self.events: list[tuple[float, int, int, Job]] = []
        self._seq = 0
        self._states: dict[str, dict[WasteState, float]] | None = None

    def _push(self, when: float, kind: int, job: Job) -> None:
        self._seq += 1
        heapq.heappush(self.events, (when, kind, self._seq, job))

    def _start(self, job: Job, now: float, cluster: str, node: str, held: float) -> None:
        account = self.node_cluster.get(node, cluster)
        profile = self.profiles.get(account)
        rng = random.Random(f"{self.settings.seed}:util:{job.name}")
        utilization = profile.simulation.gpuUtilization.draw(rng) if profile is not None else 1.0
        busy = utilization >= self.settings.utilization_threshold
        self.running[job.name] = _Running(job, account, held, busy, now)
        (self.busy if busy else self.idle)[account] += held
        if self.tally is not None:
            self.tally.hold(str(job.tenant), held)
        self._push(now + job.duration_s, 0, job)
        self._states = None

    def _attempt(self, job: Job, now: float) -> bool:
        outcome = self.strategy.try_place(job)
        if outcome.placed is None:
            self.pending[job.name] = (job, outcome.waiting_in)
            return False
        placed = outcome.placed
        self.pending.pop(job.name, None)
        self._start(job, now, placed.cluster, placed.node, placed.shape.held_gpus)
        return True

    def _retry(self, now: float, freed: str | None) -> None:
        failed: set[tuple[Any, ...]] = set()
        for name, (job, waiting_in) in list(self.pending.items()):
            if waiting_in is not None and freed is not None and waiting_in != freed:
                continue
            signature = (
                waiting_in,
                job.num_gpu,
                job.gpu_milli,
                job.cpu_milli,
                job.memory_mib,
                job.gpu_products,
            )
            if signature in failed:
                continue
            if name in self.pending and not self._attempt(job, now):
                failed.add(signature)
        self._states = None

    def _return(self, now: float, freed: set[str | None]) -> None:
        """Move running jobs back to a cheaper tier into the room ``freed`` clusters gained."""
        strategy, tally = self.strategy, self.result.returns
        if not isinstance(strategy, ReturningGpufedStrategy) or tally is None:
            return
        clusters = {c for c in freed if c is not None}
        if not clusters:
            return
        running = {name: run.job for name, run in self.running.items()}
        for returned in strategy.return_jobs(running, clusters, now_s=now):
            run = self.running[returned.job]
            held = returned.placed.shape.held_gpus
            (self.busy if run.busy else self.idle)[run.cluster] -= run.held
            run.cluster = self.node_cluster.get(returned.placed.node, returned.placed.cluster)
            if self.tally is not None:
                self.tally.hold(str(run.job.tenant), held - run.held)
            run.held = held
            (self.busy if run.busy else self.idle)[run.cluster] += held
            hours_left = max(run.start + run.job.duration_s - now, 0.0) / 3600
            tally.count(returned.move, gpus=held, hours_left=hours_left)
        self._states = None

    def _tier_hours(self, seconds: float) -> None:
        if seconds <= 0:
            return
        by_tier = self.result.gpu_hours_by_tier
        for cluster in self.capacity:
            allocated = self.busy[cluster] + self.idle[cluster]
            if allocated:
                tier = self.tiers[cluster]
                by_tier[tier] = by_tier.get(tier, 0.0) + allocated * seconds / 3600

    def _waste_states(self) -> dict[str, dict[WasteState, float]]:
        if self._states is not None:
            return self._states
        free = {c: max(cap - self.busy[c] - self.idle[c], 0.0) for c, cap in self.capacity.items()}
        needed: dict[str, float] = defaultdict(float)
        unmet: list[Job] = []
        fits_memo: dict[tuple[Any, ...], list[str]] = {}
        waiting = sorted((job for job, _ in self.pending.values()), key=lambda j: (-j.gpus, j.name))
        for job in waiting:
            if not job.gpus:
                continue
            key = (job.num_gpu, job.gpu_milli, job.cpu_milli, job.memory_mib, job.gpu_products)
            where = fits_memo.get(key)
            if where is None:
                where = fits_memo[key] = self.strategy.fits_now(job)
            for cluster in where:
                if free.get(cluster, 0.0) - needed[cluster] >= job.gpus - 1e-9:
                    needed[cluster] += job.gpus
                    break
            else:
                unmet.append(job)
        states: dict[str, dict[WasteState, float]] = {}
        for cluster, capacity in self.capacity.items():
            if not capacity:
                continue
            rest = free[cluster] - needed[cluster]
            stranded = any(
                not job.gpu_products or self.products[cluster] & set(job.gpu_products) for job in unmet
            )
            states[cluster] = {
                WasteState.BUSY: self.busy[cluster],
                WasteState.IDLE_ALLOCATED: self.idle[cluster],
                WasteState.FREE_NEEDED: needed[cluster],
                WasteState.FREE_FRAGMENTED: rest if stranded else 0.0,
                WasteState.FREE_SPARE: 0.0 if stranded else rest,
            }
        self._states = states
        return states

    def run(self, jobs: Sequence[Job]) -> ReplayResult:
        for job in jobs:
            self._push(job.submit_s, 1, job)
        total = len(jobs)
        arrived = 0
        last = jobs[0].submit_s if jobs else 0.0
        while self.events:
            now = self.events[0][0]
            self.result.waste.add(now - last, self._waste_states(), self.prices)
            self._tier_hours(now - last)
            if self.tally is not None and self.gate is not None:
                self.tally.advance(now - last, self.gate.waiting_by_tenant)
                self.gate.advance(now)
            last = now
            freed: set[str | None] = set()
            while self.events and self.events[0][0] == now:
                _, kind, _, job = heapq.heappop(self.events)
                if kind == 0:
                    run = self.running.get(job.name)
                    if run is None or run.start + job.duration_s != now:
                        continue  # the end of a run that was preempted
                    del self.running[job.name]
                    # A job's wait runs from its arrival to the start of the run that completes.
                    self.result.waits_s.append(run.start - job.submit_s)
                    if self.tally is not None:
                        self.tally.tenants[str(job.tenant)].waits_s.append(run.start - job.submit_s)
                    (self.busy if run.busy else self.idle)[run.cluster] -= run.held
                    placed = self.strategy.release(job)
                    freed.add(placed.cluster if placed is not None else None)
                    self._states = None
                    if self.gate is not None and self.tally is not None:
                        self.gate.release(job)
                        self.tally.hold(str(job.tenant), -run.held)
                else:
                    arrived += 1
                    if self.gate is not None and self.tally is not None:
                        self.gate.submit(job)
                        self.tally.tenants[str(job.tenant)].jobs += 1
                    else:
                        self._attempt(job, now)
                    if self.progress is not None and (arrived % PROGRESS_EVERY == 0 or arrived == total):
                        self.progress("replay", arrived, total)
            if self.pending:
                for cluster in sorted(freed, key=lambda c: c or ""):
                    self._retry(now, cluster)
            self._admit(now)
            self._return(now, freed)
        self.result.end_s = last
        never = [job for job, _ in self.pending.values()]
        if self.gate is not None:
            never += [job for job, _ in self.gate.waiting.values()] + [job for _, job in self.gate.returning]
        for job in never:
            self.result.waits_s.append(max(last - job.submit_s, 0.0))
            self.result.never_started += 1
            if self.tally is not None:
                self.tally.tenants[str(job.tenant)].waits_s.append(max(last - job.submit_s, 0.0))
        return self.result

    def _admit(self, now: float) -> None:
        """Admit what the quotas allow now and place it (an admitted job that does not fit waits,
        holding its quota, as an admitted workload does at the hub). Preempted jobs stop at once
        (their work is lost) and queue again; cycles repeat while they evict."""
        if self.gate is None or self.tally is None:
            return
        for _ in range(MAX_CYCLES_PER_EVENT):
            cycle = self.gate.admit(now)
            for key in cycle.evict:
                self._evict(self.gate.evict(key, now), now)
            for job in cycle.admitted:
                self.tally.tenants[str(job.tenant)].admitted += 1
                self._attempt(job, now)
            if not cycle.evict:
                return

    def _evict(self, job: Job, now: float) -> None:
        assert self.tally is not None
        figures = self.tally.tenants[str(job.tenant)]
        figures.preempted += 1
        figures.admitted -= 1  # back in the queue; admitted again later
        self.pending.pop(job.name, None)
        run = self.running.pop(job.name, None)
        if run is None:
            # Admitted, not placed yet: the strategy drops what it kept for it (karmada-like's
            # assigned cluster, cached pods), so the job is placed afresh when admitted again.
            self.strategy.release(job)
            return
        (self.busy if run.busy else self.idle)[run.cluster] -= run.held
        self.tally.hold(str(job.tenant), -run.held)
        placed = self.strategy.release(run.job)
        self._states = None
        if self.pending:
            self._retry(now, placed.cluster if placed is not None else None)


def run_replay(
    strategy: Strategy,
    jobs: Sequence[Job],
    nodes: FleetNodes,
    *,
    settings: Settings,
    progress: Progress | None = None,
    tenancy: Tenancy | None = None,
    fair_sharing: bool = False,
) -> ReplayResult:
    if settings.quotas is not None and tenancy is None:
        tenancy = resolve(settings.quotas, jobs)
    return _Replay(
        strategy, nodes, settings=settings, progress=progress, tenancy=tenancy, fair_sharing=fair_sharing
    ).run(jobs)


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
    settings: Settings = Settings(),
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
