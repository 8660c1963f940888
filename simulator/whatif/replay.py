"""The what-if's replay pass: the trace in its own time against one strategy's members.

See :mod:`simulator.whatif.engine` for what the pass does; :func:`run_replay` runs it.
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.apis.cluster_v1alpha1 import ClusterSpec
from controlplane.reports.classify import WasteState
from simulator.profile import ClusterProfile
from simulator.whatif.metrics import ReplayResult
from simulator.whatif.quotas import QuotaGate, Tenancy, resolve
from simulator.whatif.returns import ReturnTally
from simulator.whatif.settings import PROGRESS_EVERY, Progress, Settings
from simulator.whatif.strategies import FleetNodes, ReturningGpufedStrategy, Strategy
from simulator.whatif.tenants import TenantTally
from simulator.whatif.trace import Job

#: Admission cycles at one moment of the replay at most (each after the previous one's evictions).
MAX_CYCLES_PER_EVENT = 16


def capacity_by_cluster(nodes: FleetNodes) -> dict[str, int]:
    return {name: sum(len(inv.gpus) for inv in invs.values()) for name, invs in nodes.inventories.items()}


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
            self.gate = QuotaGate(
                settings.quotas,
                tenancy,
                fair_sharing=fair_sharing,
                preemption_strategies=settings.fair_sharing_preemption_strategies,
            )
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


