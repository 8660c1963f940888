"""The waste report as values: what :meth:`Accumulator.query` returns and the renderers read.

In: built by :mod:`controlplane.reports.accounting` (totals per state, groups, per-workload
usage, accumulated opportunities) and completed by :mod:`controlplane.reports.recommend`
(recommendations). Out: frozen dataclasses, rendered by :mod:`controlplane.reports.report`.
Pure data, no I/O.

``waste_pct`` is the share of GPU-hours in the waste states (idle-allocated, free-needed,
free-fragmented) among all *available, measured* GPU-hours (every state but unavailable and
unmeasured); free-spare is idle cost but not counted as waste, and unavailable and unmeasured
hours (allocated GPUs whose utilization nobody measured) are reported apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from controlplane.apis.spot import RecordedReclaim
from controlplane.reports.classify import STATES, WASTE_STATES, WasteState
from controlplane.reports.moves import MoveRecord, MovesSummary, summarize


class Dimension(StrEnum):
    """What a report can be grouped by (``gpufed waste --by``)."""

    CLUSTER = "cluster"
    MODEL = "model"
    PROFILE = "profile"
    NAMESPACE = "namespace"
    WORKLOAD = "workload"
    CLUSTER_QUEUE = "clusterqueue"
    """The Kueue ClusterQueue that admitted the workload (``-``: not admitted through a queue)."""


class RecommendationKind(StrEnum):
    MOVE = "move"
    REPARTITION = "repartition"
    RIGHT_SIZE = "right-size"


def _per_state(values: Mapping[WasteState, float] | None = None) -> Mapping[WasteState, float]:
    source = values or {}
    return MappingProxyType({state: float(source.get(state, 0.0)) for state in STATES})


@dataclass(frozen=True, slots=True)
class StateTotals:
    """GPU-hours and dollars per state (every state present, zero when absent)."""

    gpu_hours: Mapping[WasteState, float] = field(default_factory=_per_state)
    cost_usd: Mapping[WasteState, float] = field(default_factory=_per_state)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_hours", _per_state(self.gpu_hours))
        object.__setattr__(self, "cost_usd", _per_state(self.cost_usd))

    @property
    def total_gpu_hours(self) -> float:
        return sum(self.gpu_hours.values())

    @property
    def total_cost_usd(self) -> float:
        return sum(self.cost_usd.values())

    @property
    def available_gpu_hours(self) -> float:
        """GPU-hours whose state says whether they were wasted: not unavailable, not unmeasured."""
        return (
            self.total_gpu_hours
            - self.gpu_hours[WasteState.UNAVAILABLE]
            - self.gpu_hours[WasteState.UNMEASURED]
        )

    @property
    def waste_gpu_hours(self) -> float:
        return sum(self.gpu_hours[state] for state in WASTE_STATES)

    @property
    def waste_cost_usd(self) -> float:
        return sum(self.cost_usd[state] for state in WASTE_STATES)

    @property
    def waste_pct(self) -> float:
        available = self.available_gpu_hours
        return 100.0 * self.waste_gpu_hours / available if available > 0 else 0.0


@dataclass(frozen=True, slots=True)
class GroupTotals:
    """Totals of one group; ``key`` maps each grouping dimension's field to its value
    (``{"cluster": "onprem-a"}``; ``--by workload`` gives ``{"namespace", "workload"}``)."""

    key: Mapping[str, str | None]
    totals: StateTotals


@dataclass(frozen=True, slots=True)
class WorkloadUsage:
    """How one workload used its allocated GPUs over the window, and what it holds now.

    ``allocated_gpus`` is the mean number of GPU-equivalents it held over the observed time (6
    GPUs held for 90 s of a 15-minute window is 0.6: a window average, not a GPU count);
    ``allocated_gpu_hours`` the same as GPU-hours, of which ``measured_gpu_hours`` had a known
    utilization; ``mean_utilization`` is share-weighted over devices with a known utilization
    (None if none). ``gpus_now`` and ``cost_usd_per_hour_now`` are what it holds in the newest
    sample (0 for a workload that is gone or holds no GPU now).
    """

    namespace: str
    workload: str
    allocated_gpus: float
    mean_utilization: float | None
    allocated_gpu_hours: float
    idle_gpu_hours: float
    idle_cost_usd: float
    cost_usd: float
    measured_gpu_hours: float = 0.0
    gpus_now: float = 0.0
    cost_usd_per_hour_now: float = 0.0

    @property
    def live(self) -> bool:
        """Whether it holds GPUs in the newest sample (recommendations are only for these)."""
        return self.gpus_now > 0

    @property
    def idle_share(self) -> float:
        """The share of its measured GPU time that was idle (0 when nothing was measured)."""
        return min(self.idle_gpu_hours / self.measured_gpu_hours, 1.0) if self.measured_gpu_hours > 0 else 0.0


@dataclass(frozen=True, slots=True)
class OpportunityTotal:
    """An opportunity accumulated over the window (see :mod:`controlplane.reports.recommend`).

    ``mean_units`` (replicas or slices) and ``mean_gpus`` are averages over the observed time;
    ``savings_usd`` is what acting would have saved over the window, ``savings_usd_per_day`` the
    same per day of observed time. ``units_now``/``gpus_now``/``savings_usd_per_hour_now`` are
    the opportunity in the newest sample (0 when it is gone: nothing to act on any more).
    """

    kind: str
    key: tuple[str, ...]
    mean_units: float
    mean_gpus: float
    savings_usd: float
    savings_usd_per_day: float
    units_now: float = 0.0
    gpus_now: float = 0.0
    savings_usd_per_hour_now: float = 0.0


@dataclass(frozen=True, slots=True)
class Recommendation:
    kind: RecommendationKind
    text: str
    savings_usd_per_day: float


@dataclass(frozen=True, slots=True)
class NeverFitRequest:
    """A workload's pending pods that no node of the fleet could hold even empty (as of the latest
    sample): listed apart, never counted as free-needed or free-fragmented."""

    namespace: str
    workload: str
    replicas: int
    requests: Mapping[str, int]
    message: str


@dataclass(frozen=True, slots=True)
class WasteReport:
    """GPU waste over ``[window_from, window_to)``.

    ``observed_seconds`` is the time covered by samples inside the window; ``unobserved_seconds``
    the time between samples further apart than the accumulator's ``max_interval`` (accounted as
    unavailable). ``workloads`` is sorted by idle cost, highest first. ``unmeasured`` lists, per
    cluster, the GPU-hours allocated with no utilization measured (largest first).
    """

    window_from: datetime
    window_to: datetime
    observed_seconds: float
    unobserved_seconds: float
    by: tuple[Dimension, ...]
    totals: StateTotals
    groups: tuple[GroupTotals, ...] = ()
    workloads: tuple[WorkloadUsage, ...] = ()
    opportunities: tuple[OpportunityTotal, ...] = ()
    recommendations: tuple[Recommendation, ...] = ()
    unmeasured: tuple[tuple[str, float], ...] = ()
    never_fit: tuple[NeverFitRequest, ...] = ()
    #: Spot reclaims within the window whose replicas were replaced elsewhere (as the bindings record them).
    spot_reclaims: tuple[RecordedReclaim, ...] = ()
    moves: tuple[MoveRecord, ...] = ()
    """Moves back to cheaper tiers finished before the window's end (:func:`moves_summary` counts them)."""

    @property
    def moves_summary(self) -> MovesSummary:
        """The moves finished in the window, and the GPU-hours shifted and dollars saved in it."""
        return summarize(self.moves, self.window_from, self.window_to)

    @property
    def observed_days(self) -> float:
        return self.observed_seconds / 86400.0
