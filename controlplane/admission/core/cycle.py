"""Which pending workloads the ClusterQueues admit now, in which flavors, and why the others wait.

Kueue's scheduling cycle, as a pure function: each ClusterQueue offers its next pending workload
(higher priority first, then older; StrictFIFO offers only its head, so a head that does not fit
blocks the queue; BestEffortFIFO offers the next one instead); the offered workloads are tried
in order — those fitting nominal quota before those that must borrow, then priority, then age —
each against the usage the earlier admissions left. A pod set gets one flavor per resource group,
as Kueue's flavor assigner picks it: the flavors whose node labels the pod set does not
contradict, in the ClusterQueue's order, each valued by how it takes the request (:class:`Mode`:
fits, fits by reclaiming from other queues' borrowers, by preempting in the own queue, preemption
finds nothing, no fit) and how far up the cohort tree it borrows; ``flavorFungibility`` says
which is taken (``whenCanBorrow`` and ``whenCanPreempt``: whether to look past it,
:func:`_try_next`; ``preference``: which of those looked at is best, :func:`_preferred`). A workload that does not fit may preempt
(:mod:`controlplane.admission.core.preemption`) in the flavors so chosen: it waits until its
targets are evicted, and the next cycle decides it first (its claim); one preemption per cohort
tree (or lone queue) per cycle. A workload whose pod sets have a ``minCount`` and whose full counts
neither fit nor find preemption targets is tried with fewer pods (Kueue's partial admission,
:mod:`controlplane.admission.core.partial`).
With fair sharing on (Kueue's ``fairSharing.enable``) the offered workloads are tried in
fair-sharing order instead, and preemption in a cohort follows the queues' shares
(:mod:`controlplane.admission.core.fairsharing`).
A ClusterQueue with Kueue's admission fair sharing takes its workloads by their LocalQueue's
recent usage first (:mod:`controlplane.admission.core.admissionfairsharing`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import NamedTuple

from controlplane.admission.core import partial
from controlplane.admission.core.admissionfairsharing import LocalQueueUsage
from controlplane.admission.core.fairsharing import (
    DEFAULT_PREEMPTION_STRATEGIES,
    PreemptionStrategy,
    fair_targets,
    tournament,
)
from controlplane.admission.core.preemption import Preemptor, Target, targets
from controlplane.admission.core.quota import (
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FlavorResource,
    FungibilityPreference,
    PreemptionPolicy,
    QueueingStrategy,
    Usage,
    WhenCanBorrow,
    WhenCanPreempt,
)
from controlplane.admission.core.workloads import (
    Admission,
    Admitted,
    Assignment,
    Decisions,
    Pending,
    PodSetRequest,
    Preempting,
    Waiting,
    queue_order,
)
from controlplane.apis.quantity import format_quantity

PODS = "pods"


def _compatible(node_labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(node_labels.get(k, v) == v for k, v in selector.items())


class Mode(IntEnum):
    """How a flavor can take a request (Kueue's ``preemptionMode``), least preferred first."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    """Only preemption could make room, and there is nothing it may evict."""
    PREEMPT = 2
    """Room by evicting workloads of its own ClusterQueue (with others, maybe)."""
    RECLAIM = 3
    """Room by evicting only other queues' workloads that borrow."""
    FIT = 4


class _Granular(NamedTuple):
    """A mode and how far up the cohort tree the quota comes from (0: the queue's own)."""

    mode: Mode
    borrow: int = 0


_BEST = _Granular(Mode.FIT)
_WORST = _Granular(Mode.NO_FIT, 2**31)


def _preferred(a: _Granular, b: _Granular, preference: FungibilityPreference) -> bool:
    """Kueue's ``isPreferred``: whether ``a`` is better than ``b``. Any way to fit beats no fit,
    and a flavor where preemption finds nothing to evict comes after the others. Then, borrowing
    over preemption (the default): fitting beats reclaiming beats preempting, and on a tie the
    quota from closer up the cohort tree; preemption over borrowing: the quota from closer
    first, and on a tie fitting beats reclaiming beats preempting."""
    if a.mode is Mode.NO_FIT:
        return False
    if b.mode is Mode.NO_FIT:
        return True
    if (a.mode is Mode.NO_CANDIDATES) != (b.mode is Mode.NO_CANDIDATES):
        return a.mode is not Mode.NO_CANDIDATES
    if preference is FungibilityPreference.PREEMPTION_OVER_BORROWING:
        return (a.borrow, -a.mode) < (b.borrow, -b.mode)
    return (-a.mode, a.borrow) < (-b.mode, b.borrow)


def _try_next(mode: _Granular, fungibility: FlavorFungibility) -> bool:
    """Kueue's ``shouldTryNextFlavor``."""
    if mode.mode in (Mode.NO_FIT, Mode.NO_CANDIDATES):
        return True
    if mode.mode in (Mode.PREEMPT, Mode.RECLAIM) and fungibility.when_can_preempt is WhenCanPreempt.TRY_NEXT_FLAVOR:
        return True
    return mode.borrow > 0 and fungibility.when_can_borrow is WhenCanBorrow.TRY_NEXT_FLAVOR


#: What preemption could do for a request of one flavor and resource: (mode, borrowing height after it).
Oracle = Callable[[FlavorResource, int], tuple[Mode, int]]


def _no_preemption(fr: FlavorResource, amount: int) -> tuple[Mode, int]:
    return Mode.NO_CANDIDATES, 0


@dataclass(frozen=True)
class _Tried:
    """Kueue's flavor assignment of a workload: the flavors (also when they need preemption),
    the worst mode over its pod sets, where it needs preemption, and why it does not fit now."""

    admission: Admission | None
    mode: Mode
    """FIT, NO_FIT, or PREEMPT for any mode in between."""
    borrowing: int
    needs: frozenset[FlavorResource] = frozenset()
    message: str = ""
    never: bool = False
    usage: Mapping[FlavorResource, int] = field(default_factory=dict)
    """What the assignment takes per flavor and resource (nothing when it does not fit)."""


def _no_fit(message: str, *, never: bool) -> _Tried:
    return _Tried(None, Mode.NO_FIT, 2**31, message=message, never=never)


def _assign(
    queue: ClusterQueue,
    workload: Pending,
    usage: Usage,
    flavor_labels: Mapping[str, Mapping[str, str]],
    oracle: Oracle,
    fair_sharing: bool = False,
) -> _Tried:
    """Kueue's flavor assigner: per pod set and resource group, the flavors in the ClusterQueue's
    order, each valued by how it takes the request (fit, preempt, no fit) and from how far up it
    borrows; the first one ``flavorFungibility`` does not pass over is taken, else the most
    preferred. Pod sets earlier in the workload count against the later ones."""
    if queue.inactive_reason is not None:
        return _no_fit(f"ClusterQueue {queue.name} is inactive: {queue.inactive_reason}", never=True)
    taken: dict[FlavorResource, int] = {}
    assignments: list[Assignment] = []
    mode, borrowing = Mode.FIT, 0
    needs: set[FlavorResource] = set()
    reasons: list[str] = []
    for ps in workload.pod_sets:
        flavors: dict[str, str] = {}
        # Every pod takes one "pods" of the quota when the queue covers it (as in Kueue); else it is not counted.
        requested = [r for r, amount in ps.per_pod.items() if amount > 0 and (r != PODS or queue.group_of(r) is not None)]
        for resource in requested:
            if queue.group_of(resource) is None:
                return _no_fit(f"resource {resource} unavailable in ClusterQueue", never=True)
        ps_reasons: list[str] = []
        ps_mode = Mode.FIT
        done: set[str] = set()
        for resource in requested:
            if resource in done:
                continue
            group = queue.group_of(resource)
            assert group is not None
            wanted = {r: ps.total(r) for r in requested if r in group.covered}
            done.update(wanted)
            pick = _pick_flavor(queue, group.flavors, wanted, ps, usage, taken, flavor_labels, oracle, fair_sharing)
            ps_reasons += pick.reasons
            if pick.flavor is None:
                return _no_fit(f"couldn't assign flavors to pod set {ps.name}: " + ", ".join(ps_reasons), never=pick.never)
            flavors.update(dict.fromkeys(wanted, pick.flavor))
            needs |= pick.needs
            borrowing = max(borrowing, pick.mode.borrow)
            if pick.mode.mode is not Mode.FIT:
                mode = ps_mode = Mode.PREEMPT
            for r, amount in wanted.items():
                fr = (pick.flavor, r)
                taken[fr] = taken.get(fr, 0) + amount
        if ps_mode is not Mode.FIT:
            reasons.append(f"couldn't assign flavors to pod set {ps.name}: " + ", ".join(ps_reasons))
        assignments.append(Assignment(ps.name, flavors, {r: ps.total(r) for r in requested}, ps.count))
    admission = Admission(workload.key, queue.name, tuple(assignments), usage.borrows(queue, taken))
    return _Tried(admission, mode, borrowing, frozenset(needs), "; ".join(reasons), usage=taken)


@dataclass(frozen=True)
class _Pick:
    flavor: str | None
    mode: _Granular
    needs: frozenset[FlavorResource]
    reasons: list[str]
    never: bool


def _pick_flavor(
    queue: ClusterQueue,
    candidates: Sequence[FlavorQuotas],
    wanted: Mapping[str, int],
    ps: PodSetRequest,
    usage: Usage,
    taken: Mapping[FlavorResource, int],
    flavor_labels: Mapping[str, Mapping[str, str]],
    oracle: Oracle,
    fair_sharing: bool,
) -> _Pick:
    """Kueue's ``findFlavorForPodSets`` for one resource group. When preemption only ever makes
    it look further (``whenCanPreempt: TryNextFlavor``), a flavor that fits is found first without
    simulating any preemption: the search stops at it, or, preferring borrowing over preemption,
    it is preferred to any that would preempt. Preferring preemption, a flavor that preempts
    may still beat one that fits by borrowing from further up, so then every one is valued."""
    fungibility = queue.fungibility
    if oracle is not _no_preemption and fungibility.when_can_preempt is WhenCanPreempt.TRY_NEXT_FLAVOR:
        fitting = _pick_flavor(queue, candidates, wanted, ps, usage, taken, flavor_labels, _no_preemption, fair_sharing)
        if fitting.mode.mode is Mode.FIT and (
            not _try_next(fitting.mode, fungibility)
            or fungibility.preference is FungibilityPreference.BORROWING_OVER_PREEMPTION
        ):
            return fitting
    reasons: list[str] = []
    best: _Pick | None = None
    never = True
    for fq in candidates:
        flavor = fq.flavor
        if not _compatible(flavor_labels.get(flavor, {}), ps.node_selector):
            reasons.append(f"flavor {flavor} doesn't match node affinity")
            continue
        worst = _BEST
        needs: set[FlavorResource] = set()
        for resource, amount in wanted.items():
            fr = (flavor, resource)
            mode, exceeds = _fits(queue, fr, taken.get(fr, 0) + amount, usage, oracle, fair_sharing, reasons)
            never = never and exceeds
            if _preferred(worst, mode, fungibility.preference):
                worst = mode
            if worst.mode is Mode.NO_FIT:
                break
            if mode.mode is not Mode.FIT:
                needs.add(fr)
        pick = _Pick(flavor, worst, frozenset(needs), reasons, never)
        if not _try_next(worst, fungibility):
            return pick
        if _preferred(worst, best.mode if best is not None else _WORST, fungibility.preference):
            best = pick
    if best is None:
        return _Pick(None, _WORST, frozenset(), reasons, never)
    return _Pick(best.flavor, best.mode, best.needs, reasons, never)


def _fits(
    queue: ClusterQueue, fr: FlavorResource, need: int, usage: Usage, oracle: Oracle, fair_sharing: bool, reasons: list[str]
) -> tuple[_Granular, bool]:
    """Kueue's ``fitsResourceQuota``: how the flavor takes ``need`` of a resource (with the
    earlier pod sets' share), and whether it exceeds what the queue could ever hold."""
    flavor, resource = fr
    most = usage.maximum(queue, fr)
    if need > most:
        shown = f"{format_quantity(resource, need)} > {format_quantity(resource, most)}"
        reasons.append(f"insufficient quota for {resource} in flavor {flavor}, request > maximum capacity ({shown})")
        return _Granular(Mode.NO_FIT), True
    borrow, may_reclaim = usage.borrowing_height(queue.name, fr, need)
    free = usage.available(queue, fr)
    if need <= free:
        return _Granular(Mode.FIT, borrow), False
    lack = format_quantity(resource, need - free)  # as Kueue's ResourceQuantity prints it: cpu "2", not 2000
    reasons.append(f"insufficient unused quota for {resource} in flavor {flavor}, {lack} more needed")
    quota = queue.quota(fr)
    nominal = quota.nominal if quota is not None else 0
    if nominal >= need or may_reclaim or _may_preempt_while_borrowing(queue, fair_sharing):
        mode, after = oracle(fr, need)
        return _Granular(mode, after), False
    return _Granular(Mode.NO_FIT, borrow), False


def _may_preempt_while_borrowing(queue: ClusterQueue, fair_sharing: bool) -> bool:
    """Kueue's ``canPreemptWhileBorrowing``: borrowWithinCohort, or fair sharing with reclaimWithinCohort."""
    policy = queue.preemption
    return policy.borrow_within_cohort is not PreemptionPolicy.NEVER or (
        fair_sharing and policy.reclaim_within_cohort is not PreemptionPolicy.NEVER
    )


#: How preemption picks its targets: classical, or fair sharing with its strategies.
Chooser = Callable[[Preemptor, Usage, Sequence[Admitted]], tuple[Target, ...]]


def _chooser(fair_sharing: bool, strategies: Sequence[PreemptionStrategy]) -> Chooser:
    if not fair_sharing:
        return targets
    return functools.partial(fair_targets, strategies=tuple(strategies))


def _oracle(
    queue: ClusterQueue,
    workload: Pending,
    usage: Usage,
    holders: Sequence[Admitted],
    choose: Chooser,
    memo: dict[tuple[str, FlavorResource, int], tuple[Mode, int]],
) -> Oracle:
    """Kueue's ``SimulatePreemption``: the targets preemption would pick for one flavor and
    resource; PREEMPT when some are of the workload's own queue, RECLAIM when all are others'.
    Once per workload, flavor and amount in a cycle (``memo``), as Kueue simulates when it
    nominates the heads."""
    if not queue.preemption.enabled:
        return _no_preemption

    def simulate(fr: FlavorResource, amount: int) -> tuple[Mode, int]:
        key = (workload.key, fr, amount)
        if key not in memo:
            memo[key] = _simulate(fr, amount)
        return memo[key]

    def _simulate(fr: FlavorResource, amount: int) -> tuple[Mode, int]:
        preemptor = Preemptor(queue, {fr: amount}, frozenset({fr}), workload.priority, workload.created)
        chosen = choose(preemptor, usage, holders)
        if not chosen:
            return Mode.NO_CANDIDATES, 0
        keys = {t.key for t in chosen}
        evicted = [h for h in holders if h.key in keys]
        for h in evicted:
            usage.add(h.queue, h.usage, -1, counted=False)
        borrow, _ = usage.borrowing_height(queue.name, fr, amount)
        for h in evicted:
            usage.add(h.queue, h.usage, counted=False)
        return (Mode.PREEMPT if any(t.queue == queue.name for t in chosen) else Mode.RECLAIM), borrow

    return simulate


def _targets(
    queue: ClusterQueue, workload: Pending, tried: _Tried, usage: Usage, holders: Sequence[Admitted], choose: Chooser,
) -> tuple[Preemptor, tuple[Target, ...]]:
    """The workloads preemption would evict for ``tried`` (Kueue's ``GetTargets``)."""
    preemptor = Preemptor(queue, tried.usage, tried.needs, workload.priority, workload.created)
    return preemptor, (choose(preemptor, usage, holders) if tried.needs else ())


def _try_preempting(
    queue: ClusterQueue,
    workload: Pending,
    tried: _Tried,
    usage: Usage,
    holders: Sequence[Admitted],
    fair_sharing: bool,
    choose: Chooser,
) -> tuple[Preempting, dict[FlavorResource, int]] | None:
    """The evictions that let ``workload`` in, in the flavors its assignment chose, and its claim:
    the quota reserved in ``usage`` (Kueue's ``resourcesToReserve``), so that the rest of the
    cycle does not take what they free."""
    preemptor, chosen = _targets(queue, workload, tried, usage, holders, choose)
    if not chosen:
        return None
    reserve: dict[FlavorResource, int] = {}
    for fr, amount in preemptor.request.items():
        quota = queue.quota(fr)
        most = quota.nominal if quota is not None else 0
        if tried.borrowing > 0 or _may_preempt_while_borrowing(queue, fair_sharing):
            most = usage.maximum(queue, fr)
        reserve[fr] = max(0, min(amount, most - usage.of(queue.name, fr)))
    usage.add(queue.name, reserve)
    return Preempting(workload.key, queue.name, chosen), reserve


def _usage_of(tries: Mapping[str, _Tried], head: Pending) -> Mapping[FlavorResource, int]:
    return tries[head.key].usage


def decide(
    queues: Mapping[str, ClusterQueue],
    pending: Sequence[Pending],
    admitted: Sequence[Admitted],
    flavor_labels: Mapping[str, Mapping[str, str]],
    *,
    fair_sharing: bool = False,
    preemption_strategies: Sequence[PreemptionStrategy] = DEFAULT_PREEMPTION_STRATEGIES,
    cohorts: Mapping[str, Cohort] | None = None,
    usage: Usage | None = None,
    claims: Collection[str] = (),
    fair_usage: LocalQueueUsage | None = None,
) -> Decisions:
    """Admit what the quotas allow now; the rest waits with Kueue's reason and message.

    ``fair_sharing`` (Kueue's ``fairSharing.enable``): the heads are taken in fair-sharing order
    and preemption in a cohort follows fair shares (:mod:`controlplane.admission.core.fairsharing`)
    by ``preemption_strategies`` (Kueue's ``fairSharing.preemptionStrategies``).
    ``cohorts``: Cohort objects (parents, quotas, weights); a cohort only named by ClusterQueues
    has no quota of its own, no parent and weight 1. ``usage``: the tree of ``queues`` and
    ``cohorts``, built by the caller, with nothing used yet; on return it holds the admitted
    workloads and the new admissions. ``claims``: pending workloads whose preemptions an earlier
    cycle issued; they are decided first, ahead of their queue's order, so that no other
    workload takes the quota their evictions freed (Kueue keeps a preemptor's claim while its
    preemptions complete). ``fair_usage``: with Kueue's admission fair sharing, the ClusterQueues
    that take their workloads by their LocalQueue's usage (an admission adds its entry penalty, so
    the order is taken again after each one)."""
    if usage is None:
        usage = Usage(queues, cohorts)
    for a in admitted:
        usage.add(a.queue, a.usage)
    by_queue: dict[str, list[Pending]] = {}
    waiting: dict[str, Waiting] = {}
    order_of = fair_usage.order if fair_usage is not None else queue_order
    for p in sorted(pending, key=order_of):
        if p.queue not in queues:
            waiting[p.key] = Waiting(p.key, p.queue, "Inadmissible", f"ClusterQueue {p.queue} doesn't exist", 0)
            continue
        by_queue.setdefault(p.queue, []).append(p)
    order = {p.key: i for q in by_queue.values() for i, p in enumerate(q)}
    blocked: set[str] = set()
    #: Usage-ordered ClusterQueues whose order an admission's entry penalty changed since they were sorted
    #: (sorting again only then keeps a cycle of many waiting workloads from sorting every round).
    penalized: set[str] = set()
    done: list[Admission] = []
    preempting: list[Preempting] = []
    reserved: list[tuple[str, dict[FlavorResource, int]]] = []
    preempted_in: set[tuple[str, str]] = set()

    def scope_of(queue: ClusterQueue) -> tuple[str, str]:
        root = usage.root_of(queue.name)
        return ("cohort", root.name) if root is not None else ("queue", queue.name)

    # The admitted workloads a preemptor may evict are in its cohort tree (or its queue).
    holders: dict[tuple[str, str], list[Admitted]] = {}
    for a in admitted:
        if a.queue in queues:
            holders.setdefault(scope_of(queues[a.queue]), []).append(a)

    simulated: dict[tuple[str, FlavorResource, int], tuple[Mode, int]] = {}
    choose = _chooser(fair_sharing, preemption_strategies)

    def may_preempt(queue: ClusterQueue) -> bool:
        """Once its cohort tree has a preemption this cycle a workload cannot preempt."""
        scope = scope_of(queue)
        return queue.preemption.enabled and scope not in preempted_in and bool(holders.get(scope))

    def attempt(head: Pending) -> _Tried:
        queue = queues[head.queue]
        # Flavors are valued without simulating a preemption that cannot happen.
        oracle: Oracle = _no_preemption
        if may_preempt(queue):
            oracle = _oracle(queue, head, usage, holders[scope_of(queue)], choose, simulated)
        tried = _assign(queue, head, usage, flavor_labels, oracle, fair_sharing)
        # Only a workload that does not fit at its full counts is looked at again (cost unchanged otherwise).
        if tried.mode is Mode.FIT or not partial.reducible(bounds := [(ps.count, ps.min_count) for ps in head.pod_sets]):
            return tried

        def admissible(t: _Tried) -> bool:
            """Kueue's test of an assignment: it fits, or preemption finds targets for it."""
            return t.mode is Mode.FIT or (t.mode is Mode.PREEMPT and may_preempt(queue) and bool(
                _targets(queue, head, t, usage, holders[scope_of(queue)], choose)[1]))

        def fewer(counts: tuple[int, ...]) -> _Tried | None:
            pod_sets = tuple(replace(ps, count=c) for ps, c in zip(head.pod_sets, counts, strict=True))
            t = _assign(queue, replace(head, pod_sets=pod_sets), usage, flavor_labels, oracle, fair_sharing)
            return t if admissible(t) else None

        # Partial admission: only when the full counts neither fit nor may preempt.
        if admissible(tried):
            return tried
        return partial.reduce(bounds, fewer) or tried

    def consider(head: Pending, tried: _Tried, later: Sequence[Pending]) -> None:
        if tried.mode is Mode.FIT and tried.admission is not None:
            if fair_usage is not None and fair_usage.orders(head.queue):
                fair_usage.admitted(head.local_queue, tried.usage)
                penalized.add(head.queue)
            usage.add(head.queue, tried.usage)
            done.append(tried.admission)
            return
        queue = queues[head.queue]
        message = tried.message
        scope = scope_of(queue)
        if tried.mode is Mode.PREEMPT and may_preempt(queue):
            found = _try_preempting(queue, head, tried, usage, holders[scope], fair_sharing, choose)
            if found is not None:
                preempting.append(found[0])
                reserved.append((queue.name, found[1]))
                preempted_in.add(scope)
                message += f". Pending the preemption of {len(found[0].targets)} workload(s)"
        reason = "Inadmissible" if tried.never else "Pending"
        waiting[head.key] = Waiting(head.key, head.queue, reason, message, order[head.key])
        if queue.strategy is QueueingStrategy.STRICT_FIFO:
            blocked.add(head.queue)
            for behind in later:
                waiting[behind.key] = Waiting(
                    behind.key, behind.queue, "Pending",
                    f"waiting behind {head.key} in ClusterQueue {head.queue} (StrictFIFO)", order[behind.key],
                )

    # Preemptors whose evictions are done go first, before anyone takes what those freed.
    for head in sorted((p for q in by_queue.values() for p in q if p.key in claims), key=queue_order):
        if head.queue not in blocked:
            by_queue[head.queue].remove(head)
            consider(head, attempt(head), by_queue[head.queue])
    cursor = dict.fromkeys(by_queue, 0)
    while True:
        offered: list[tuple[tuple[int, int, str, str], Pending, _Tried]] = []
        for name, items in by_queue.items():
            if name in blocked or cursor[name] >= len(items):
                continue
            if name in penalized:  # its last admission's penalty counts: its LocalQueue goes later
                items[cursor[name]:] = sorted(items[cursor[name]:], key=order_of)
                penalized.discard(name)
            head = items[cursor[name]]
            tried = attempt(head)
            offered.append(((tried.borrowing, *queue_order(head)), head, tried))
        if not offered:
            break
        offered.sort(key=lambda o: o[0])
        first_tries = {head.key: tried for _, head, tried in offered}
        heads: Iterable[Pending] = (head for _, head, _ in offered)
        if fair_sharing:
            # Each candidate valued with the usage its assignment takes, preempting ones included (Kueue's assignmentUsage).
            heads = tournament([head for _, head, _ in offered], usage, functools.partial(_usage_of, first_tries))
        for head in heads:
            cursor[head.queue] += 1
            first_try = first_tries[head.key]
            # Earlier admissions of this round may have used the quota the first try saw (a workload
            # that waits anyway is tried again only when it may preempt).
            again = first_try.mode is Mode.FIT or (first_try.mode is Mode.PREEMPT and may_preempt(queues[head.queue]))
            tried = attempt(head) if again else first_try
            consider(head, tried, by_queue[head.queue][cursor[head.queue]:])
    for queue_name, amounts in reserved:
        usage.add(queue_name, amounts, -1)
    # Positions among the workloads still waiting in each ClusterQueue.
    still: list[Waiting] = sorted(waiting.values(), key=lambda w: (w.queue, w.position))
    positions: dict[str, int] = {}
    out: list[Waiting] = []
    for w in still:
        out.append(replace(w, position=positions.get(w.queue, 0)))
        positions[w.queue] = positions.get(w.queue, 0) + 1
    return Decisions(tuple(done), tuple(out), tuple(preempting))
