"""Which admitted workloads to evict so that a pending one fits: Kueue's classical preemption
(``pkg/scheduler/preemption``), as a pure function.

Candidates are the admitted workloads that use a flavor and resource the preemptor lacks and
that the preemptor's ClusterQueue may preempt: its own (``withinClusterQueue``: LowerPriority,
or LowerOrNewerEqualPriority), and those of cohort members that borrow (``reclaimWithinCohort``:
LowerPriority, or Any). They are tried in order — other queues' first, lower priority first,
most recently admitted first — each removed until the preemptor fits; then every removed one
whose return still leaves room goes back, so the set is small. A workload is evicted whole.
A member stops being a candidate once it no longer borrows. Reclaiming from the cohort is done
without borrowing; preempting its own queue's workloads may borrow; with ``borrowWithinCohort``
a borrowing preemptor may evict other queues' workloads below the priority threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from controlplane.admission.core.quota import ClusterQueue, FlavorResource, PreemptionPolicy, Usage


class Reason(StrEnum):
    """Kueue's reasons for the ``Preempted`` condition."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"


#: Kueue's words for each reason, in the eviction message ("... due to <words>").
HUMAN_REASONS = {
    Reason.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    Reason.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    Reason.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    Reason.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
}


class Queued(Protocol):
    """A workload of a ClusterQueue, pending or admitted, as ordering reads it."""

    @property
    def key(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def created(self) -> str: ...


class Holder(Queued, Protocol):
    """An admitted workload, as preemption reads it."""

    @property
    def usage(self) -> Mapping[FlavorResource, int]: ...
    @property
    def reserved_at(self) -> str:
        """When its quota was reserved (RFC 3339); more recent ones go first."""
        ...


@dataclass(frozen=True)
class Target:
    key: str
    queue: str
    reason: Reason


@dataclass(frozen=True)
class Preemptor:
    queue: ClusterQueue
    request: Mapping[FlavorResource, int]
    """Its whole usage in the flavors it would get."""
    needs: frozenset[FlavorResource]
    """The flavors and resources where it does not fit now."""
    priority: int = 0
    created: str = ""


def candidates(preemptor: Preemptor, usage: Usage, holders: Iterable[Holder]) -> list[Holder]:
    """The admitted workloads the preemptor's policies allow it to evict, in Kueue's order."""
    queue, policy = preemptor.queue, preemptor.queue.preemption
    out: list[Holder] = []
    # Every other queue of the preemptor's cohort tree (hierarchical cohorts: under the same root).
    lenders = usage.tree_queues(queue.name) - {queue.name}
    borrowing = {name for name in lenders if usage.borrowing(usage.queues[name], preemptor.needs)}
    for h in holders:
        if not any(fr in preemptor.needs for fr in h.usage):
            continue
        if h.queue == queue.name:
            within = policy.within_cluster_queue
            if within is PreemptionPolicy.NEVER or h.priority > preemptor.priority:
                continue
            newer = within is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY and preemptor.created < h.created
            if h.priority == preemptor.priority and not newer:
                continue
            out.append(h)
        elif queue.cohort is not None and h.queue in borrowing:
            reclaim = policy.reclaim_within_cohort
            if reclaim is PreemptionPolicy.NEVER or (reclaim is not PreemptionPolicy.ANY and h.priority >= preemptor.priority):
                continue
            out.append(h)
    # Other queues' first, lower priority first, most recently admitted first (then the newest:
    # times have a resolution of a second).
    out.sort(key=lambda h: (h.reserved_at, h.created, h.key), reverse=True)
    out.sort(key=lambda h: (h.queue == queue.name, h.priority))
    return out


def targets(preemptor: Preemptor, usage: Usage, holders: Iterable[Holder]) -> tuple[Target, ...]:
    """The smallest set (by Kueue's heuristic) whose eviction makes the preemptor fit; empty:
    preempting does not help. ``usage`` is left as it was."""
    found = candidates(preemptor, usage, holders)
    if not found:
        return ()
    queue = preemptor.queue
    own = [h for h in found if h.queue == queue.name]
    if len(own) == len(found):
        return _minimal(preemptor, usage, found, borrow=True)
    policy = queue.preemption
    if policy.borrow_within_cohort is not PreemptionPolicy.NEVER:
        threshold = preemptor.priority
        if policy.max_priority_threshold is not None and policy.max_priority_threshold < threshold:
            threshold = policy.max_priority_threshold + 1
        if not _under_nominal(preemptor, usage):
            found = [h for h in found if h.queue == queue.name or h.priority < threshold]
        return _minimal(preemptor, usage, found, borrow=True, threshold=threshold)
    # Reclaiming from the cohort without borrowing, while the queue is under its nominal quota;
    # else only its own workloads, borrowing.
    if _under_nominal(preemptor, usage) and (chosen := _minimal(preemptor, usage, found, borrow=False)):
        return chosen
    return _minimal(preemptor, usage, own, borrow=True)


def _under_nominal(preemptor: Preemptor, usage: Usage) -> bool:
    queue = preemptor.queue
    return all(usage.of(queue.name, fr) < (q.nominal if (q := queue.quota(fr)) else 0) for fr in preemptor.needs)


def fits_now(preemptor: Preemptor, usage: Usage, borrow: bool) -> bool:
    """Whether the preemptor's request fits ``usage`` now (without borrowing unless ``borrow``)."""
    queue = preemptor.queue
    for fr, amount in preemptor.request.items():
        if not borrow and usage.borrows(queue, {fr: amount}):
            return False
        if amount > usage.available(queue, fr):
            return False
    return True


def _minimal(
    preemptor: Preemptor, usage: Usage, found: Sequence[Holder], *, borrow: bool, threshold: int | None = None
) -> tuple[Target, ...]:
    queue = preemptor.queue
    chosen: list[tuple[Holder, Reason]] = []
    fits = False
    for h in found:
        reason = Reason.IN_CLUSTER_QUEUE
        if h.queue != queue.name:
            if not usage.borrowing(usage.queues[h.queue], preemptor.needs):
                continue
            reason = Reason.IN_COHORT_RECLAMATION
            if threshold is not None:
                if h.priority >= threshold:
                    # Evicting one at or above the threshold: the preemptor may not borrow then.
                    borrow = False
                else:
                    reason = Reason.IN_COHORT_RECLAIM_WHILE_BORROWING
        usage.add(h.queue, h.usage, -1)
        chosen.append((h, reason))
        if fits_now(preemptor, usage, borrow):
            fits = True
            break
    return settle(chosen, usage, (lambda: fits_now(preemptor, usage, borrow)) if fits else None)


def settle(chosen: list[tuple[Holder, Reason]], usage: Usage, fits: Callable[[], bool] | None) -> tuple[Target, ...]:
    """The targets of a search that removed ``chosen`` from ``usage``: none when the preemptor
    still does not fit (``fits`` None); else those still needed once the others are given back,
    latest first (never the last one, Kueue's fillBackWorkloads). ``usage`` is restored."""
    if fits is not None:
        for i in range(len(chosen) - 2, -1, -1):
            h = chosen[i][0]
            usage.add(h.queue, h.usage)
            if fits():
                del chosen[i]
            else:
                usage.add(h.queue, h.usage, -1)
    for h, _ in chosen:
        usage.add(h.queue, h.usage)
    return tuple(Target(h.key, h.queue, reason) for h, reason in chosen) if fits is not None else ()
