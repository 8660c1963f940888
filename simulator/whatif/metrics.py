"""What one strategy achieved in the what-if: allocation as demand grows, waits, GPU-hours, money.

Two measurements, from the engine's two passes (:mod:`simulator.whatif.engine`):

* the **fill** (the FGD paper's workload inflation): jobs arrive and never leave; after
  each arrival the allocated share of the fleet's GPUs is recorded against the arrived GPU
  demand as a percentage of capacity. ``allocation_at(100)`` is the allocation when arrived
  demand first reaches 100 % of capacity;
* the **replay** in trace time: per-job waits and, per cluster and interval between events,
  how many GPUs were in each waste state of DESIGN.md (the
  :class:`controlplane.reports.classify.WasteState` names), summed into GPU-hours and
  dollars at the cluster's price; allocated GPU-hours per cluster tier; and, for
  ``gpufed-rebalance``, the moves back to a cheaper tier.

In: numbers from the engine. Out: :class:`StrategyResult` and its JSON form
(``to_json``), whose keys follow the what-if JSON contract. Pure; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controlplane.reports.classify import WasteState
from simulator.whatif.returns import ReturnTally

if TYPE_CHECKING:
    from simulator.whatif.tenants import TenantTally

#: The two arrived-demand marks of the JSON contract, in percent of capacity.
MARKS = (100, 130)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


@dataclass
class FillResult:
    """Allocation (% of capacity) at each whole percent of arrived GPU demand."""

    capacity_gpus: float
    curve: dict[int, float] = field(default_factory=dict)
    allocated_gpus: dict[int, float] = field(default_factory=dict)
    jobs_submitted: int = 0
    jobs_placed: int = 0
    unplaced_gpus: dict[str, float] = field(default_factory=dict)
    """GPUs of the jobs left unplaced by the time arrived demand reached 100 % of capacity, by
    :attr:`~simulator.whatif.trace.Job.kind` (what the allocation at 100 % lacks)."""
    first_unplaced_at: float | None = None
    """Arrived GPU demand (% of capacity) when the first job asking for GPUs was left unplaced."""

    def allocation_at(self, mark: int) -> float:
        if mark in self.curve:
            return self.curve[mark]
        below = [m for m in self.curve if m <= mark]
        return self.curve[max(below)] if below else 0.0

    def unallocated_gpus_at(self, mark: int) -> float:
        held = self.allocated_gpus.get(mark)
        if held is None:
            below = [m for m in self.allocated_gpus if m <= mark]
            held = self.allocated_gpus[max(below)] if below else 0.0
        return self.capacity_gpus - held


@dataclass
class WasteLedger:
    """GPU-hours and dollars per waste state, summed over clusters and intervals."""

    gpu_hours: dict[WasteState, float] = field(default_factory=lambda: dict.fromkeys(WasteState, 0.0))
    cost_usd: dict[WasteState, float] = field(default_factory=lambda: dict.fromkeys(WasteState, 0.0))

    def add(
        self,
        seconds: float,
        amounts: Mapping[str, Mapping[WasteState, float]],
        prices: Mapping[str, float],
    ) -> None:
        if seconds <= 0:
            return
        hours = seconds / 3600
        for cluster, states in amounts.items():
            price = prices.get(cluster, 0.0)
            for state, gpus in states.items():
                if gpus:
                    self.gpu_hours[state] += gpus * hours
                    self.cost_usd[state] += gpus * hours * price


@dataclass
class ReplayResult:
    waits_s: list[float] = field(default_factory=list)
    never_started: int = 0
    end_s: float = 0.0
    waste: WasteLedger = field(default_factory=WasteLedger)
    #: Allocated (busy + idle-allocated) GPU-hours per cluster tier ("tier 0", "tier 1", ...).
    gpu_hours_by_tier: dict[str, float] = field(default_factory=dict)
    #: What automatic returns to a cheaper tier did (None: the strategy makes none).
    returns: ReturnTally | None = None
    #: Per-tenant figures of a replay with quotas (None: no quotas).
    tenants: TenantTally | None = None

    @property
    def wait_mean_s(self) -> float:
        return math.fsum(self.waits_s) / len(self.waits_s) if self.waits_s else 0.0

    @property
    def wait_p99_s(self) -> float:
        return percentile(self.waits_s, 99)

    @property
    def allocated_cost_usd(self) -> float:
        return self.waste.cost_usd[WasteState.BUSY] + self.waste.cost_usd[WasteState.IDLE_ALLOCATED]


@dataclass
class StrategyResult:
    name: str
    fill: FillResult
    replay: ReplayResult
    seconds: dict[str, float] = field(default_factory=dict)
    #: The member scoring the strategy's members ran with.
    member_scoring: str = ""
    #: False when no replay ran: waits, GPU-hours and costs are then null, not zero.
    replayed: bool = True
    #: With quotas: the tenants' figures, one per admission mode replayed (without, with fair sharing).
    tenants: list[TenantTally] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        replay = self.replay
        measured = self.replayed
        return {
            "member_scoring": self.member_scoring,
            "allocation_pct_at_100": round(self.fill.allocation_at(100), 3),
            "allocation_pct_at_130": round(self.fill.allocation_at(130), 3),
            "unallocated_gpus_at_100": round(self.fill.unallocated_gpus_at(100), 3),
            "unplaced_gpus_at_100": {k: round(v, 3) for k, v in sorted(self.fill.unplaced_gpus.items())},
            "first_unplaced_at_pct": (
                round(self.fill.first_unplaced_at, 2) if self.fill.first_unplaced_at is not None else None
            ),
            "wait_mean_s": round(replay.wait_mean_s, 3) if measured else None,
            "wait_p99_s": round(replay.wait_p99_s, 3) if measured else None,
            "gpu_hours": {str(s): round(h, 3) for s, h in replay.waste.gpu_hours.items()} if measured else None,
            "cost_usd": round(replay.allocated_cost_usd, 2) if measured else None,
            "cost_by_state_usd": (
                {str(s): round(v, 2) for s, v in replay.waste.cost_usd.items()} if measured else None
            ),
            "gpu_hours_by_tier": (
                {tier: round(h, 3) for tier, h in sorted(replay.gpu_hours_by_tier.items())} if measured else None
            ),
            "returns": replay.returns.to_json() if measured and replay.returns is not None else None,
            "tenants": (
                {("with_fair_sharing" if t.fair_sharing else "without_fair_sharing"): t.to_json() for t in self.tenants}
                if self.tenants
                else None
            ),
            "allocation_curve": [[mark, round(pct, 3)] for mark, pct in sorted(self.fill.curve.items())],
            "jobs": {
                "fill_submitted": self.fill.jobs_submitted,
                "fill_placed": self.fill.jobs_placed,
                "replay_never_started": replay.never_started if measured else None,
            },
            "replay_seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }
