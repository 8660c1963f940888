"""Which pending workloads the ClusterQueues admit now, in which flavors, and why the others wait.

Kueue's scheduling cycle, as a pure function: each ClusterQueue offers its next pending workload
(higher priority first, then older; StrictFIFO offers only its head, so a head that does not fit
blocks the queue; BestEffortFIFO offers the next one instead); the offered workloads are tried
in order — those fitting nominal quota before those that must borrow, then priority, then age —
each against the usage the earlier admissions left. A pod set gets one flavor per resource group:
the first flavor (in the ClusterQueue's order) whose node labels the pod set does not contradict
and that has the quota for every resource of the group it requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from controlplane.admission.core.quota import (
    ClusterQueue,
    FlavorQuotas,
    FlavorResource,
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
class Decisions:
    admitted: tuple[Admission, ...]
    waiting: tuple[Waiting, ...]


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


def _order(pending: Pending) -> tuple[int, str, str]:
    return (-pending.priority, pending.created, pending.key)


def decide(
    queues: Mapping[str, ClusterQueue],
    pending: Sequence[Pending],
    admitted: Sequence[Admitted],
    flavor_labels: Mapping[str, Mapping[str, str]],
) -> Decisions:
    """Admit what the quotas allow now; the rest waits with Kueue's reason and message."""
    usage = Usage(queues)
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
        for _, head, first_try in sorted(offered, key=lambda o: o[0]):
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
            waiting[head.key] = Waiting(head.key, head.queue, reason, str(result), order[head.key])
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
    return Decisions(tuple(done), tuple(out))
