"""Which pending workloads the ClusterQueues admit now, in which flavors, and why the others wait.

Kueue's scheduling cycle, as a pure function: each ClusterQueue offers its next pending workload
(higher priority first, then older; StrictFIFO offers only its head, so a head that does not fit
blocks the queue; BestEffortFIFO offers the next one instead); the offered workloads are tried
in order — those fitting nominal quota before those that must borrow, then priority, then age —
each against the usage the earlier admissions left. A pod set gets one flavor per resource group:
the first flavor (in the ClusterQueue's order) whose node labels the pod set does not contradict
and that has the quota for every resource of the group it requests. A workload that does not fit
may preempt (:mod:`controlplane.admission.core.preemption`): it waits until its targets are
evicted, and is admitted by a later cycle; one preemption per cohort tree (or lone queue) per cycle.
With fair sharing on (Kueue's ``fairSharing.enable``) the offered workloads are tried in
fair-sharing order instead, and preemption in a cohort follows the queues' shares
(:mod:`controlplane.admission.core.fairsharing`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from controlplane.admission.core.fairsharing import fair_targets, tournament
from controlplane.admission.core.preemption import Preemptor, Target, targets
from controlplane.admission.core.quota import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    FlavorResource,
    PreemptionPolicy,
    QueueingStrategy,
    Usage,
)


@dataclass(frozen=True)
class PodSetRequest:
    name: str
    count: int
    per_pod: Mapping[str, int]
    """Requests of one pod per resource, in base units."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """Labels the pods require: a flavor whose node labels give another value for a key is skipped."""

    def total(self, resource: str) -> int:
        return self.per_pod.get(resource, 0) * self.count


@dataclass(frozen=True)
class Pending:
    key: str
    """namespace/name of the Workload."""
    queue: str
    """The ClusterQueue."""
    pod_sets: tuple[PodSetRequest, ...]
    priority: int = 0
    created: str = ""
    """Creation time (RFC 3339 sorts by time) — older first at equal priority."""


@dataclass(frozen=True)
class Admitted:
    key: str
    queue: str
    usage: Mapping[FlavorResource, int]
    priority: int = 0
    created: str = ""
    reserved_at: str = ""
    """When its quota was reserved (RFC 3339): preemption evicts the most recent first."""


@dataclass(frozen=True)
class Assignment:
    """A pod set's flavor per resource."""

    pod_set: str
    flavors: Mapping[str, str]
    usage: Mapping[str, int]
    count: int


@dataclass(frozen=True)
class Admission:
    key: str
    queue: str
    assignments: tuple[Assignment, ...]
    borrows: bool

    def usage(self) -> dict[FlavorResource, int]:
        out: dict[FlavorResource, int] = {}
        for a in self.assignments:
            for resource, amount in a.usage.items():
                fr = (a.flavors[resource], resource)
                out[fr] = out.get(fr, 0) + amount
        return out


@dataclass(frozen=True)
class Waiting:
    key: str
    queue: str
    reason: str
    """Kueue's QuotaReserved=False reason: Pending, or Inadmissible when it can never fit as things are."""
    message: str
    position: int
    """0-based place in its ClusterQueue's order."""


@dataclass(frozen=True)
class Preempting:
    """A waiting workload that fits once ``targets`` are evicted."""

    key: str
    queue: str
    targets: tuple[Target, ...]


@dataclass(frozen=True)
class Decisions:
    admitted: tuple[Admission, ...]
    waiting: tuple[Waiting, ...]
    preempting: tuple[Preempting, ...] = ()


PODS = "pods"


class _NoFit(Exception):
    def __init__(self, message: str, *, never: bool = False) -> None:
        super().__init__(message)
        self.never = never


def _compatible(node_labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(node_labels.get(k, v) == v for k, v in selector.items())


def assign(
    queue: ClusterQueue, workload: Pending, usage: Usage, flavor_labels: Mapping[str, Mapping[str, str]]
) -> Admission:
    """The flavors of each pod set against ``usage`` (pod sets earlier in the workload counted);
    raises :class:`_NoFit` with Kueue's message when some pod set does not fit."""
    if queue.inactive_reason is not None:
        raise _NoFit(f"ClusterQueue {queue.name} is inactive: {queue.inactive_reason}", never=True)
    taken: dict[FlavorResource, int] = {}
    assignments: list[Assignment] = []
    for ps in workload.pod_sets:
        flavors: dict[str, str] = {}
        # Every pod takes one "pods" of the quota when the queue covers it (as in Kueue); else it is not counted.
        requested = [r for r, amount in ps.per_pod.items() if amount > 0 and (r != PODS or queue.group_of(r) is not None)]
        for resource in requested:
            if queue.group_of(resource) is None:
                raise _NoFit(f"resource {resource} unavailable in ClusterQueue", never=True)
        done: set[str] = set()
        for resource in requested:
            if resource in done:
                continue
            group = queue.group_of(resource)
            assert group is not None
            wanted = {r: ps.total(r) for r in requested if r in group.covered}
            done.update(wanted)
            flavors.update({r: _pick_flavor(queue, group.flavors, wanted, ps, usage, taken, flavor_labels) for r in wanted})
            for r, amount in wanted.items():
                fr = (flavors[r], r)
                taken[fr] = taken.get(fr, 0) + amount
        assignments.append(Assignment(ps.name, flavors, {r: ps.total(r) for r in requested}, ps.count))
    return Admission(workload.key, queue.name, tuple(assignments), usage.borrows(queue, taken))


def _pick_flavor(
    queue: ClusterQueue,
    candidates: Sequence[FlavorQuotas],
    wanted: Mapping[str, int],
    ps: PodSetRequest,
    usage: Usage,
    taken: Mapping[FlavorResource, int],
    flavor_labels: Mapping[str, Mapping[str, str]],
) -> str:
    reasons: list[str] = []
    borrowing_fit: str | None = None
    never = True
    for fq in candidates:
        flavor = fq.flavor
        if not _compatible(flavor_labels.get(flavor, {}), ps.node_selector):
            reasons.append(f"flavor {flavor} doesn't match node affinity")
            continue
        fits, borrows = True, False
        for resource, amount in wanted.items():
            fr = (flavor, resource)
            need = amount + taken.get(fr, 0)
            most = usage.maximum(queue, fr)
            if need > most:
                reasons.append(f"insufficient quota for {resource} in flavor {flavor}, request > maximum capacity ({need} > {most})")
                fits = False
                break
            never = False
            free = usage.available(queue, fr)
            if need > free:
                reasons.append(f"insufficient unused quota for {resource} in flavor {flavor}, {need - free} more needed")
                fits = False
                break
            quota = queue.quota(fr)
            borrows = borrows or (quota is not None and usage.of(queue.name, fr) + need > quota.nominal)
        if not fits:
            continue
        if not borrows or not queue.try_next_flavor_before_borrowing:
            return flavor
        borrowing_fit = borrowing_fit or flavor
    if borrowing_fit is not None:
        return borrowing_fit
    raise _NoFit(f"couldn't assign flavors to pod set {ps.name}: " + ", ".join(reasons), never=never)


def _may_preempt_while_borrowing(queue: ClusterQueue, fair_sharing: bool) -> bool:
    """Kueue's ``canPreemptWhileBorrowing``: borrowWithinCohort, or fair sharing with reclaimWithinCohort."""
    policy = queue.preemption
    return policy.borrow_within_cohort is not PreemptionPolicy.NEVER or (
        fair_sharing and policy.reclaim_within_cohort is not PreemptionPolicy.NEVER
    )


def _lacking(
    queue: ClusterQueue, flavor: str, wanted: Mapping[str, int], taken: Mapping[FlavorResource, int], usage: Usage,
    fair_sharing: bool,
) -> set[FlavorResource] | None:
    """Where the flavor lacks quota for ``wanted`` now; None: more than preempting could free."""
    may_borrow = _may_preempt_while_borrowing(queue, fair_sharing)
    lacking: set[FlavorResource] = set()
    for resource, amount in wanted.items():
        fr = (flavor, resource)
        need = amount + taken.get(fr, 0)
        if need <= usage.available(queue, fr):
            continue
        quota = queue.quota(fr)
        if need > (usage.maximum(queue, fr) if may_borrow else (quota.nominal if quota is not None else 0)):
            return None
        lacking.add(fr)
    return lacking


def _preemptor(
    queue: ClusterQueue, workload: Pending, usage: Usage, flavor_labels: Mapping[str, Mapping[str, str]], fair_sharing: bool
) -> Preemptor | None:
    """The flavors the workload would get if preemption freed quota, as Kueue's flavor assigner
    picks them in Preempt mode: per resource group the first flavor that fits now, else the first
    whose nominal quota (with ``borrowWithinCohort``: what the queue may ever borrow) holds the
    request. None: preempting cannot help."""
    taken: dict[FlavorResource, int] = {}
    needs: set[FlavorResource] = set()
    for ps in workload.pod_sets:
        requested = [r for r, amount in ps.per_pod.items() if amount > 0 and (r != PODS or queue.group_of(r) is not None)]
        groups = [g for g in queue.groups if any(r in g.covered for r in requested)]
        if len({r for g in groups for r in g.covered if r in requested}) < len(requested):
            return None
        for group in groups:
            wanted = {r: ps.total(r) for r in requested if r in group.covered}
            best: tuple[str, set[FlavorResource]] | None = None
            for fq in group.flavors:
                if not _compatible(flavor_labels.get(fq.flavor, {}), ps.node_selector):
                    continue
                lacking = _lacking(queue, fq.flavor, wanted, taken, usage, fair_sharing)
                if lacking is None:
                    continue
                if not lacking:
                    best = (fq.flavor, lacking)
                    break
                best = best or (fq.flavor, lacking)
            if best is None:
                return None
            for r, amount in wanted.items():
                taken[(best[0], r)] = taken.get((best[0], r), 0) + amount
            needs |= best[1]
    return Preemptor(queue, taken, frozenset(needs), workload.priority, workload.created) if needs else None


def _try_preempting(
    queue: ClusterQueue,
    workload: Pending,
    usage: Usage,
    holders: Sequence[Admitted],
    flavor_labels: Mapping[str, Mapping[str, str]],
    fair_sharing: bool,
) -> Preempting | None:
    """The evictions that let ``workload`` in; its quota is then reserved in ``usage`` (what is
    left of its nominal quota), so that the rest of the cycle does not take what they free."""
    preemptor = _preemptor(queue, workload, usage, flavor_labels, fair_sharing)
    chosen: tuple[Target, ...] = ()
    if preemptor is not None:
        chosen = fair_targets(preemptor, usage, holders) if fair_sharing else targets(preemptor, usage, holders)
    if preemptor is None or not chosen:
        return None
    reserve: dict[FlavorResource, int] = {}
    for fr, amount in preemptor.request.items():
        quota = queue.quota(fr)
        most = quota.nominal if quota is not None else 0
        if _may_preempt_while_borrowing(queue, fair_sharing):
            most = usage.maximum(queue, fr)
        reserve[fr] = max(0, min(amount, most - usage.of(queue.name, fr)))
    usage.add(queue.name, reserve)
    return Preempting(workload.key, queue.name, chosen)


def _usage_of(first_tries: Mapping[str, Admission | _NoFit], head: Pending) -> Mapping[FlavorResource, int]:
    """What admitting ``head`` would add, as its first try this round found it (nothing when it did not fit)."""
    first_try = first_tries[head.key]
    return first_try.usage() if isinstance(first_try, Admission) else {}


def _order(pending: Pending) -> tuple[int, str, str]:
    return (-pending.priority, pending.created, pending.key)


def decide(
    queues: Mapping[str, ClusterQueue],
    pending: Sequence[Pending],
    admitted: Sequence[Admitted],
    flavor_labels: Mapping[str, Mapping[str, str]],
    *,
    fair_sharing: bool = False,
    cohorts: Mapping[str, Cohort] | None = None,
) -> Decisions:
    """Admit what the quotas allow now; the rest waits with Kueue's reason and message.

    ``fair_sharing`` (Kueue's ``fairSharing.enable``): the heads are taken in fair-sharing order
    and preemption in a cohort follows fair shares (:mod:`controlplane.admission.core.fairsharing`).
    ``cohorts``: Cohort objects (parents, quotas, weights); a cohort only named by ClusterQueues
    has no quota of its own, no parent and weight 1."""
    usage = Usage(queues, cohorts)
    for a in admitted:
        usage.add(a.queue, a.usage)
    by_queue: dict[str, list[Pending]] = {}
    waiting: dict[str, Waiting] = {}
    for p in sorted(pending, key=_order):
        if p.queue not in queues:
            waiting[p.key] = Waiting(p.key, p.queue, "Inadmissible", f"ClusterQueue {p.queue} doesn't exist", 0)
            continue
        by_queue.setdefault(p.queue, []).append(p)
    order = {p.key: i for q in by_queue.values() for i, p in enumerate(q)}
    cursor = dict.fromkeys(by_queue, 0)
    blocked: set[str] = set()
    done: list[Admission] = []
    preempting: list[Preempting] = []
    preempted_in: set[tuple[str, str]] = set()
    while True:
        offered: list[tuple[tuple[bool, int, str, str], Pending, Admission | _NoFit]] = []
        for name, items in by_queue.items():
            if name in blocked or cursor[name] >= len(items):
                continue
            head = items[cursor[name]]
            try:
                result: Admission | _NoFit = assign(queues[name], head, usage, flavor_labels)
            except _NoFit as err:
                result = err
            borrows = result.borrows if isinstance(result, Admission) else True
            offered.append(((borrows, *_order(head)), head, result))
        if not offered:
            break
        offered.sort(key=lambda o: o[0])
        first_tries = {head.key: first_try for _, head, first_try in offered}
        heads: Iterable[Pending] = (head for _, head, _ in offered)
        if fair_sharing:
            heads = tournament([head for _, head, _ in offered], usage, functools.partial(_usage_of, first_tries))
        for head in heads:
            first_try = first_tries[head.key]
            items = by_queue[head.queue]
            cursor[head.queue] += 1
            try:
                # Earlier admissions of this round may have used the quota the first try saw.
                result = assign(queues[head.queue], head, usage, flavor_labels) if isinstance(first_try, Admission) else first_try
            except _NoFit as err:
                result = err
            if isinstance(result, Admission):
                usage.add(head.queue, result.usage())
                done.append(result)
                continue
            reason = "Inadmissible" if result.never else "Pending"
            message = str(result)
            queue = queues[head.queue]
            root = usage.root_of(queue.name)
            scope = ("cohort", root.name) if root is not None else ("queue", queue.name)
            if not result.never and queue.preemption.enabled and scope not in preempted_in:
                chosen = _try_preempting(queue, head, usage, admitted, flavor_labels, fair_sharing)
                if chosen is not None:
                    preempting.append(chosen)
                    preempted_in.add(scope)
                    message += f". Pending the preemption of {len(chosen.targets)} workload(s)"
            waiting[head.key] = Waiting(head.key, head.queue, reason, message, order[head.key])
            if queues[head.queue].strategy is QueueingStrategy.STRICT_FIFO:
                blocked.add(head.queue)
                for later in items[cursor[head.queue]:]:
                    waiting[later.key] = Waiting(
                        later.key, later.queue, "Pending",
                        f"waiting behind {head.key} in ClusterQueue {head.queue} (StrictFIFO)", order[later.key],
                    )
    # Positions among the workloads still waiting in each ClusterQueue.
    still: list[Waiting] = sorted(waiting.values(), key=lambda w: (w.queue, w.position))
    positions: dict[str, int] = {}
    out: list[Waiting] = []
    for w in still:
        out.append(replace(w, position=positions.get(w.queue, 0)))
        positions[w.queue] = positions.get(w.queue, 0) + 1
    return Decisions(tuple(done), tuple(out), tuple(preempting))
