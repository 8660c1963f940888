"""Which admitted workloads to evict so that a pending one fits: Kueue's classical preemption
(``pkg/scheduler/preemption``, its ``classical`` package), as a pure function.

Candidates are the admitted workloads that use a flavor and resource the preemptor lacks and
that the preemptor's ClusterQueue may preempt: its own (``withinClusterQueue``: LowerPriority,
or LowerOrNewerEqualPriority), and, by ``reclaimWithinCohort`` (LowerPriority, or Any), those of
other queues of its cohort tree found by walking up from its cohort to the root: at each
cohort, the queues under it that use more than their nominal quota, entering only the child
cohorts whose subtree uses more than its own quota (a queue that borrows only within its
subtree, while the subtree stays within its quota, is nobody else's to reclaim from). Until
the walk reaches a subtree whose quota holds the preemptor's request, those found are
"priority" candidates: evicted only if the preemptor then fits without borrowing, or, with
``borrowWithinCohort``, while borrowing when below its priority and the threshold. From that
subtree up, the preemptor has the hierarchical advantage: those found are evicted also while it
borrows, whatever ``borrowWithinCohort`` says.

They are tried in order — hierarchy candidates, priority candidates, then its own queue's; in
each, lower priority first, most recently admitted first — each removed until the preemptor
fits; then every removed one whose return still leaves room goes back, so the set is small. A
workload is evicted whole. Another queue's workload stops being a candidate once its queue, or
a cohort between that queue and where it was found, no longer uses more than its quota.

:func:`candidates` is the flat set fair sharing starts from (Kueue's ``findCandidates``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Protocol

from controlplane.admission.core.quota import ClusterQueue, FlavorResource, Node, PreemptionPolicy, Usage


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
    """The admitted workloads fair-sharing preemption may weigh (Kueue's ``findCandidates``): its
    own queue's by ``withinClusterQueue``, and by ``reclaimWithinCohort`` those of every queue
    under the same root cohort that borrows, in Kueue's order."""
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


class _Variant(Enum):
    """How a candidate may be preempted (Kueue's ``preemptionVariant``)."""

    WITHIN_QUEUE = "WithinCQ"
    #: The preemptor's queue sits nearer the quota the candidate uses: evicted whatever the
    #: preemptor borrows, and ``borrowWithinCohort`` does not apply.
    HIERARCHY = "HierarchicalReclaim"
    #: Only when the preemptor then fits without borrowing.
    WITHOUT_BORROWING = "ReclaimWithoutBorrowing"
    #: Also while the preemptor borrows (``borrowWithinCohort``, below its threshold).
    WHILE_BORROWING = "ReclaimWhileBorrowing"


_REASONS = {
    _Variant.WITHIN_QUEUE: Reason.IN_CLUSTER_QUEUE,
    _Variant.HIERARCHY: Reason.IN_COHORT_RECLAMATION,
    _Variant.WITHOUT_BORROWING: Reason.IN_COHORT_RECLAMATION,
    _Variant.WHILE_BORROWING: Reason.IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(frozen=True)
class _Candidate:
    holder: Holder
    variant: _Variant
    #: The cohort where the search up the tree found it (None: the preemptor's own queue).
    lca: Node | None


def _allowed(policy: PreemptionPolicy, preemptor: Preemptor, h: Holder) -> bool:
    """Kueue's ``satisfiesPreemptionPolicy``."""
    if policy is PreemptionPolicy.LOWER_PRIORITY:
        return h.priority < preemptor.priority
    if policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return h.priority < preemptor.priority or (h.priority == preemptor.priority and preemptor.created < h.created)
    return policy is PreemptionPolicy.ANY


def _variant(preemptor: Preemptor, h: Holder, advantage: bool) -> _Variant | None:
    """Kueue's ``classifyPreemptionVariant``; None: not a candidate."""
    if not any(fr in preemptor.needs for fr in h.usage):
        return None
    policy = preemptor.queue.preemption
    own = h.queue == preemptor.queue.name
    if not _allowed(policy.within_cluster_queue if own else policy.reclaim_within_cohort, preemptor, h):
        return None
    if own:
        return _Variant.WITHIN_QUEUE
    if advantage:
        return _Variant.HIERARCHY
    if policy.borrow_within_cohort is PreemptionPolicy.NEVER or h.priority >= preemptor.priority:
        return _Variant.WITHOUT_BORROWING
    if policy.max_priority_threshold is not None and h.priority > policy.max_priority_threshold:
        return _Variant.WITHOUT_BORROWING
    return _Variant.WHILE_BORROWING


class _Search:
    """Kueue's classical candidate collection over the tree of cohorts
    (``collectCandidatesForHierarchicalReclaim``)."""

    def __init__(self, preemptor: Preemptor, usage: Usage, holders: Iterable[Holder]) -> None:
        self.preemptor, self.usage = preemptor, usage
        self.node = usage.nodes[preemptor.queue.name]
        self.by_queue: dict[str, list[Holder]] = {}
        for h in holders:
            self.by_queue.setdefault(h.queue, []).append(h)
        self.hierarchy: list[_Candidate] = []
        self.priority: list[_Candidate] = []
        self.same = self._of(self.node.name, None, advantage=False)
        if self.node.parent is not None and preemptor.queue.preemption.reclaim_within_cohort is not PreemptionPolicy.NEVER:
            self._up_the_tree()

    def _of(self, queue: str, lca: Node | None, *, advantage: bool) -> list[_Candidate]:
        out = []
        for h in self.by_queue.get(queue, ()):
            variant = _variant(self.preemptor, h, advantage)
            if variant is not None:
                out.append(_Candidate(h, variant, lca))
        return out

    def _up_the_tree(self) -> None:
        # The preemptor has the advantage over the workloads that use quota of the lowest subtree
        # around it that holds its request, and over those further up once one did.
        advantage, remaining = self.node.fits_in_quota(self.preemptor.request)
        previous: Node | None = None
        at = self.node.parent
        while at is not None:
            self._collect(at, at, previous, advantage, self.hierarchy if advantage else self.priority)
            fits, remaining = at.fits_in_quota(remaining)
            advantage = advantage or fits
            previous, at = at, at.parent

    def _collect(self, cohort: Node, lca: Node, skip: Node | None, advantage: bool, out: list[_Candidate]) -> None:
        """The workloads of the queues under ``cohort`` that use more than their quota, entering
        only the subtrees that do (``skip``: the subtree already searched)."""
        needs = self.preemptor.needs
        for child in cohort.children:
            if child.is_cohort:
                if child is not skip and not child.within_quota(needs):
                    self._collect(child, lca, skip, advantage, out)
            elif child is not self.node and not child.within_quota(needs):
                out.extend(self._of(child.name, lca, advantage=advantage))

    def valid(self, c: _Candidate, borrow: bool) -> bool:
        """Kueue's ``candidateIsValid``: another queue's workload stays a candidate while its queue,
        and every cohort between it and where it was found, still use more than their quota."""
        if c.variant is _Variant.WITHIN_QUEUE:
            return True
        if borrow and c.variant is _Variant.WITHOUT_BORROWING:
            return False
        at: Node | None = self.usage.nodes[c.holder.queue]
        while at is not None and at is not c.lca:
            if at.within_quota(self.preemptor.needs):
                return False
            at = at.parent
        return True


def _ordered(found: list[_Candidate]) -> list[_Candidate]:
    """Kueue's ``CandidatesOrdering`` within one kind of candidate: lower priority first, then the
    most recently admitted (then the newest: times have a resolution of a second)."""
    found = sorted(found, key=lambda c: (c.holder.reserved_at, c.holder.created, c.holder.key), reverse=True)
    return sorted(found, key=lambda c: c.holder.priority)


def targets(preemptor: Preemptor, usage: Usage, holders: Iterable[Holder]) -> tuple[Target, ...]:
    """The smallest set (by Kueue's heuristic) whose eviction makes the preemptor fit; empty:
    preempting does not help. ``usage`` is left as it was."""
    search = _Search(preemptor, usage, holders)
    order = [*_ordered(search.hierarchy), *_ordered(search.priority), *_ordered(search.same)]
    if not order:
        return ()
    others = bool(search.hierarchy or search.priority)
    forbidden = preemptor.queue.preemption.borrow_within_cohort is PreemptionPolicy.NEVER
    # Kueue tries with borrowing and without, in this order (without first where that was its
    # behaviour before hierarchical cohorts).
    runs: tuple[bool, ...] = (True, False)
    if not others or (forbidden and not _under_nominal(preemptor, usage)):
        runs = (True,)
    elif forbidden and not search.hierarchy:
        runs = (False, True)
    for borrow in runs:
        if found := _run(preemptor, usage, search, order, borrow):
            return found
    return ()


def _run(preemptor: Preemptor, usage: Usage, search: _Search, order: list[_Candidate], borrow: bool) -> tuple[Target, ...]:
    """One pass over the candidates, with or without letting the preemptor borrow."""
    chosen: list[tuple[Holder, Reason]] = []
    for c in order:
        if not search.valid(c, borrow):
            continue
        usage.add(c.holder.queue, c.holder.usage, -1)
        chosen.append((c.holder, _REASONS[c.variant]))
        if fits_now(preemptor, usage, borrow):
            return settle(chosen, usage, lambda: fits_now(preemptor, usage, borrow))
    return settle(chosen, usage, None)


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
