"""Quota arithmetic of ClusterQueues and their cohort, as Kueue's ``pkg/cache`` computes it.

Every amount is an integer in base units (GPUs as a count, CPU in millicores, memory in bytes).
Per flavor and resource a ClusterQueue has a nominal quota; in a cohort it may also lend unused
nominal quota (up to ``lendingLimit``; absent: all of it) and borrow the cohort's unused quota
(up to ``borrowingLimit``; absent: no limit). The part of nominal quota it does not lend is its
own (guaranteed); what it uses beyond that draws on the cohort's pool, which is the sum of what
its members lend.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

#: (flavor, resource)
FlavorResource = tuple[str, str]


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class PreemptionPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


@dataclass(frozen=True)
class Preemption:
    """A ClusterQueue's ``preemption`` policies (Kueue's defaults: preempt nothing)."""

    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    #: ``borrowWithinCohort.policy``: Never or LowerPriority.
    borrow_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    #: ``borrowWithinCohort.maxPriorityThreshold``: only workloads at or below it are preempted.
    max_priority_threshold: int | None = None

    @property
    def enabled(self) -> bool:
        return any(p is not PreemptionPolicy.NEVER for p in (self.within_cluster_queue, self.reclaim_within_cohort))


@dataclass(frozen=True)
class Quota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @property
    def guaranteed(self) -> int:
        """The part of nominal quota the queue does not lend."""
        return self.nominal - min(self.lending_limit, self.nominal) if self.lending_limit is not None else 0


@dataclass(frozen=True)
class FlavorQuotas:
    flavor: str
    quotas: Mapping[str, Quota]
    """Per covered resource."""


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]
    """In the order admission tries them."""


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    groups: tuple[ResourceGroup, ...]
    cohort: str | None = None
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    #: whenCanBorrow: TryNextFlavor (prefer a later flavor that fits without borrowing).
    try_next_flavor_before_borrowing: bool = False
    #: Why the queue admits nothing (stopPolicy Hold, a missing ResourceFlavor ...); None: active.
    inactive_reason: str | None = None
    preemption: Preemption = field(default_factory=Preemption)

    def quota(self, fr: FlavorResource) -> Quota | None:
        flavor, resource = fr
        for group in self.groups:
            if resource in group.covered:
                for fq in group.flavors:
                    if fq.flavor == flavor:
                        return fq.quotas.get(resource)
        return None

    def group_of(self, resource: str) -> ResourceGroup | None:
        for group in self.groups:
            if resource in group.covered:
                return group
        return None


@dataclass
class Usage:
    """What each ClusterQueue uses per flavor and resource (mutable: admission adds to it)."""

    queues: Mapping[str, ClusterQueue]
    used: dict[str, dict[FlavorResource, int]] = field(default_factory=lambda: defaultdict(dict))

    def of(self, queue: str, fr: FlavorResource) -> int:
        return self.used.get(queue, {}).get(fr, 0)

    def add(self, queue: str, amounts: Mapping[FlavorResource, int], sign: int = 1) -> None:
        mine = self.used.setdefault(queue, {})
        for fr, amount in amounts.items():
            mine[fr] = mine.get(fr, 0) + sign * amount

    def members(self, cohort: str) -> Iterable[ClusterQueue]:
        return (q for q in self.queues.values() if q.cohort == cohort)

    def cohort_available(self, cohort: str, fr: FlavorResource) -> int:
        """What the cohort's pool still has of ``fr``: the sum of what members lend, less what
        members use beyond their guaranteed part."""
        capacity = used = 0
        for member in self.members(cohort):
            quota = member.quota(fr)
            if quota is None:
                continue
            capacity += quota.nominal - quota.guaranteed
            used += max(0, self.of(member.name, fr) - quota.guaranteed)
        return capacity - used

    def available(self, queue: ClusterQueue, fr: FlavorResource) -> int:
        """How much more of ``fr`` the queue may take now (borrowing included)."""
        quota = queue.quota(fr)
        if quota is None:
            return 0
        used = self.of(queue.name, fr)
        if queue.cohort is None:
            return max(0, quota.nominal - used)
        available = max(0, quota.guaranteed - used) + self.cohort_available(queue.cohort, fr)
        if quota.borrowing_limit is not None:
            available = min(available, quota.nominal + quota.borrowing_limit - used)
        return max(0, available)

    def maximum(self, queue: ClusterQueue, fr: FlavorResource) -> int:
        """The most the queue could ever hold of ``fr`` (nominal + what it may borrow), for the
        'request > maximum capacity' answer."""
        quota = queue.quota(fr)
        if quota is None:
            return 0
        if queue.cohort is None:
            return quota.nominal
        pool = sum(
            (q.nominal - q.guaranteed)
            for m in self.members(queue.cohort)
            if m.name != queue.name and (q := m.quota(fr)) is not None
        )
        most = quota.nominal + pool
        if quota.borrowing_limit is not None:
            most = min(most, quota.nominal + quota.borrowing_limit)
        return most

    def borrowed(self, queue: str, fr: FlavorResource) -> int:
        """What the queue uses of ``fr`` beyond its nominal quota."""
        q = self.queues.get(queue)
        quota = q.quota(fr) if q is not None else None
        return max(0, self.of(queue, fr) - (quota.nominal if quota is not None else 0))

    def borrowing(self, queue: ClusterQueue, frs: Iterable[FlavorResource]) -> bool:
        """Whether a cohort member uses more than its nominal quota of some of ``frs``."""
        return queue.cohort is not None and any(
            (quota := queue.quota(fr)) is not None and self.of(queue.name, fr) > quota.nominal for fr in frs
        )

    def borrows(self, queue: ClusterQueue, amounts: Mapping[FlavorResource, int]) -> bool:
        """Whether adding ``amounts`` takes the queue beyond its nominal quota somewhere."""
        for fr, amount in amounts.items():
            quota = queue.quota(fr)
            if quota is not None and self.of(queue.name, fr) + amount > quota.nominal:
                return True
        return False
