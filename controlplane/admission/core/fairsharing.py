"""Kueue's fair sharing (KEP-1714, with hierarchical cohorts): which pending workload goes next,
and which admitted workloads to preempt so that a queue gets its share. Pure.

* **Order** (Kueue's ``fairSharingIterator``): the heads the ClusterQueues offer are taken one
  at a time. Within a cohort tree a tournament runs from the root down: at every cohort each
  child (a ClusterQueue, or a cohort with the winner of its own subtree) is valued by the
  dominant resource share it would have once its candidate is admitted
  (:meth:`~controlplane.admission.core.quota.Usage.share`: borrowing over lendable, divided by
  ``fairSharing.weight``); the lowest share wins, then the higher priority, then the older
  workload. The shares are computed again before every pick, from the usage the earlier
  admissions left. A queue without a cohort offers its head as it comes.
* **Preemption** (Kueue's ``fairPreemptions``, by its ``fairSharing.preemptionStrategies``):
  with the preemptor's request added, the ClusterQueue to take from is found from the root
  down, always entering the child with the highest share (cohorts that do not borrow, and queues
  that do not borrow other than the preemptor's own, are skipped). A workload of another queue
  is taken when the first strategy lets the preemptor's side (its ancestor just below the two
  queues' lowest common ancestor) take it from the target's side: ``LessThanOrEqualToFinalShare``,
  when the preemptor side's share would be at most the target side's after losing it;
  ``LessThanInitialShare``, when it would be below the target side's share before. With both
  (Kueue's default), when the first frees too little, the first workload of each queue whose
  side's share is still above the preemptor side's goes (``LessThanInitialShare``). Workloads of
  the preemptor's own queue are taken by its ``withinClusterQueue`` policy. Those whose return
  still leaves room go back, latest first.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from enum import StrEnum
from typing import Final, TypeVar

from controlplane.admission.core.preemption import (
    Holder,
    Preemptor,
    Queued,
    Reason,
    Target,
    candidates,
    fits_now,
    settle,
)
from controlplane.admission.core.quota import FlavorResource, Node, Usage

#: A head offered to the cycle.
E = TypeVar("E", bound=Queued)


class PreemptionStrategy(StrEnum):
    """Kueue's ``fairSharing.preemptionStrategies`` values (KEP-1714's rules S2-a and S2-b)."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


#: Kueue's default: S2-a, then S2-b for what it left.
DEFAULT_PREEMPTION_STRATEGIES: Final = (
    PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, PreemptionStrategy.LESS_THAN_INITIAL_SHARE)
#: The lists Kueue's configuration validation accepts (one strategy alone, or the two in this order).
VALID_PREEMPTION_STRATEGIES: Final = (
    (PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (PreemptionStrategy.LESS_THAN_INITIAL_SHARE,),
    DEFAULT_PREEMPTION_STRATEGIES,
)


def tournament(entries: Sequence[E], usage: Usage, request: Callable[[E], Mapping[FlavorResource, int]]) -> Iterator[E]:
    """``entries`` (one per ClusterQueue) in fair-sharing order, lazily: each pick sees the usage
    the caller's earlier admissions left. ``request``: what admitting an entry would add."""
    remaining = list(entries)
    # Per entry, its shares and the version of its tree's usage they were computed at.
    known: dict[str, tuple[int, dict[tuple[str, str], int]]] = {}
    while remaining:
        first = remaining[0]
        root = usage.root_of(first.queue)
        if root is None:
            remaining.pop(0)
            yield first
            continue
        in_tree = {e.queue: e for e in remaining if usage.root_of(e.queue) is root}
        version = usage.version(first.queue)
        shares: dict[tuple[str, str], int] = {}
        for e in in_tree.values():
            cached = known.get(e.key)
            if cached is None or cached[0] != version:
                cached = known[e.key] = (version, _shares_after_admission(usage, (e,), request))
            shares.update(cached[1])
        winner = _play(root, usage, in_tree, shares)
        assert winner is not None
        remaining.remove(winner)
        yield winner


def _shares_after_admission(
    usage: Usage, entries: Iterable[E], request: Callable[[E], Mapping[FlavorResource, int]]
) -> dict[tuple[str, str], int]:
    """(cohort, workload) → the share, with the workload admitted, of the cohort's child on the
    workload's path."""
    out: dict[tuple[str, str], int] = {}
    for e in entries:
        amounts = request(e)
        usage.add(e.queue, amounts, counted=False)
        path = usage.nodes[e.queue].path_to_root()
        for child, parent in itertools.pairwise(path):
            out[(parent.name, e.key)] = usage.share(child)
        usage.add(e.queue, amounts, -1, counted=False)
    return out


def _play(cohort: Node, usage: Usage, entries: Mapping[str, E], shares: Mapping[tuple[str, str], int]) -> E | None:
    contenders: list[E] = []
    for child in cohort.children:
        if child.is_cohort:
            if (best := _play(child, usage, entries, shares)) is not None:
                contenders.append(best)
        elif child.name in entries:
            contenders.append(entries[child.name])
    if not contenders:
        return None
    return min(contenders, key=lambda e: (shares[(cohort.name, e.key)], -e.priority, e.created, e.key))


# --- preemption ----------------------------------------------------------------------------------


def _almost_lcas(a: Node, b: Node) -> tuple[Node, Node]:
    """The ancestors of ``a`` and ``b`` (themselves included) just below their lowest common one."""
    path_a, path_b = a.path_to_root(), b.path_to_root()
    on_b = {id(n) for n in path_b}
    i = next(i for i, n in enumerate(path_a) if id(n) in on_b)
    lca = path_a[i]
    j = next(j for j, n in enumerate(path_b) if n is lca)
    return path_a[i - 1], path_b[j - 1]


class _Targets:
    """Kueue's ``TargetClusterQueueOrdering``: the next ClusterQueue to take from."""

    def __init__(self, usage: Usage, preemptor: Node, found: Sequence[Holder]) -> None:
        self.usage, self.preemptor = usage, preemptor
        self.ancestors = {id(n) for n in preemptor.path_to_root()[1:]}
        self.workloads: dict[str, list[Holder]] = {}
        for h in found:
            self.workloads.setdefault(h.queue, []).append(h)
        self.pruned: set[int] = set()

    def __iter__(self) -> Iterator[Node]:
        if self.preemptor.parent is None:
            while self.workloads.get(self.preemptor.name):
                yield self.preemptor
            return
        root = self.preemptor.root()
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def drop(self, queue: Node) -> None:
        self.pruned.add(id(queue))

    def pop(self, queue: Node) -> Holder:
        return self.workloads[queue.name].pop(0)

    def has_workload(self, queue: Node) -> bool:
        return bool(self.workloads.get(queue.name))

    def _next(self, cohort: Node) -> Node | None:
        best_queue: Node | None = None
        best_queue_share = -1
        best_cohort: Node | None = None
        best_cohort_share = -1
        for child in cohort.children:
            if id(child) in self.pruned:
                continue
            share = self.usage.share(child)
            if child.is_cohort:
                if share == 0 and id(child) not in self.ancestors:
                    self.pruned.add(id(child))
                elif share >= best_cohort_share:
                    best_cohort, best_cohort_share = child, share
            elif (share == 0 and child is not self.preemptor) or not self.has_workload(child):
                self.pruned.add(id(child))
            elif share >= best_queue_share:
                best_queue, best_queue_share = child, share
        if best_cohort is None and best_queue is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and best_cohort_share >= best_queue_share:
            return self._next(best_cohort)
        return best_queue


def fair_targets(
    preemptor: Preemptor,
    usage: Usage,
    holders: Iterable[Holder],
    *,
    strategies: Sequence[PreemptionStrategy] = DEFAULT_PREEMPTION_STRATEGIES,
) -> tuple[Target, ...]:
    """The workloads to evict so that the preemptor fits, by Kueue's fair-sharing preemption with
    ``strategies`` (one of :data:`VALID_PREEMPTION_STRATEGIES`); empty: preempting does not help.
    ``usage`` is left as it was."""
    found = candidates(preemptor, usage, holders)
    if not found:
        return ()
    queue = usage.nodes[preemptor.queue.name]
    chosen: list[tuple[Holder, Reason]] = []

    def take(h: Holder, reason: Reason) -> bool:
        usage.add(h.queue, h.usage, -1)
        chosen.append((h, reason))
        usage.add(queue.name, preemptor.request, -1)
        fits = fits_now(preemptor, usage, True)
        usage.add(queue.name, preemptor.request)
        return fits

    # The shares include the incoming workload.
    usage.add(queue.name, preemptor.request)
    fits = False
    retry: list[Holder] = []
    order = _Targets(usage, queue, found)
    for target in order:
        if target is queue:
            if fits := take(order.pop(target), Reason.IN_CLUSTER_QUEUE):
                break
            continue
        mine, theirs = _almost_lcas(queue, target)
        preemptor_share, target_share = usage.share(mine), usage.share(theirs)
        while order.has_workload(target):
            h = order.pop(target)
            if strategies[0] is PreemptionStrategy.LESS_THAN_INITIAL_SHARE:
                passed = preemptor_share < target_share
            else:  # LessThanOrEqualToFinalShare
                usage.add(h.queue, h.usage, -1)
                passed = preemptor_share <= usage.share(theirs)
                usage.add(h.queue, h.usage)
            if passed:
                fits = take(h, Reason.IN_COHORT_FAIR_SHARING)
                break
            retry.append(h)
        if fits:
            break
    # The second strategy can only be LessThanInitialShare (Kueue's validation).
    if not fits and retry and len(strategies) > 1:
        order = _Targets(usage, queue, retry)
        for target in order:
            mine, theirs = _almost_lcas(queue, target)
            less_than_initial = usage.share(mine) < usage.share(theirs)  # LessThanInitialShare
            if less_than_initial and (fits := take(order.pop(target), Reason.IN_COHORT_FAIR_SHARING)):
                break
            order.drop(target)
    usage.add(queue.name, preemptor.request, -1)
    return settle(chosen, usage, (lambda: fits_now(preemptor, usage, True)) if fits else None)
