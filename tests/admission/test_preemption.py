"""Preemption-target selection, table-driven with the cases of Kueue's own preemption tests
(``pkg/scheduler/preemption/preemption_test.go``: same names, GPUs for CPUs), and the issue's
scenario through the admission cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controlplane.admission.core import Admitted, Pending, PodSetRequest, Preemption, PreemptionPolicy, decide
from controlplane.admission.core.preemption import Preemptor, targets
from controlplane.admission.core.quota import ClusterQueue, FlavorQuotas, Quota, ResourceGroup, Usage

GPU = "nvidia.com/gpu"
FR = ("default", GPU)
NEVER, LOWER, LOWER_OR_NEWER, ANY = (
    PreemptionPolicy.NEVER, PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, PreemptionPolicy.ANY,
)


def queue(name: str, nominal: int, *, borrow: int | None = None, cohort: str | None = None, within: PreemptionPolicy = NEVER,
          reclaim: PreemptionPolicy = NEVER, borrow_within: PreemptionPolicy = NEVER, threshold: int | None = None) -> ClusterQueue:
    group = ResourceGroup((GPU,), (FlavorQuotas("default", {GPU: Quota(nominal, borrow)}),))
    return ClusterQueue(name, (group,), cohort, preemption=Preemption(within, reclaim, borrow_within, threshold))


# Kueue's test snapshot.
QUEUES = {q.name: q for q in (
    queue("standalone", 6, within=LOWER),
    queue("c1", 6, borrow=6, cohort="cohort", within=LOWER, reclaim=LOWER),
    queue("c2", 6, borrow=6, cohort="cohort", within=NEVER, reclaim=ANY),
    queue("preventStarvation", 6, within=LOWER_OR_NEWER),
    queue("a_standard", 1, borrow=12, cohort="with_shared_cq", reclaim=LOWER, borrow_within=LOWER, threshold=0),
    queue("b_standard", 1, borrow=12, cohort="with_shared_cq", within=LOWER, reclaim=ANY, borrow_within=LOWER, threshold=0),
    queue("shared", 10, cohort="with_shared_cq"),
)}


def wl(key: str, cq: str, gpus: int, prio: int = 0, *, at: str = "1", created: str = "1") -> Admitted:
    return Admitted(key, cq, {FR: gpus}, prio, created, at)


@dataclass
class Case:
    admitted: list[Admitted]
    cq: str
    gpus: int
    want: dict[str, str]
    """key → the Preempted reason."""
    prio: int = 0
    created: str = "5"
    queues: dict[str, ClusterQueue] = field(default_factory=lambda: QUEUES)


CASES: dict[str, Case] = {
    "preempt lowest priority": Case(
        [wl("low", "standalone", 2, -1), wl("mid", "standalone", 2), wl("high", "standalone", 2, 1)], "standalone", 2,
        {"low": "InClusterQueue"}, prio=1,
    ),
    "preempt multiple": Case(
        [wl("low", "standalone", 2, -1), wl("mid", "standalone", 2), wl("high", "standalone", 2, 1)], "standalone", 3,
        {"low": "InClusterQueue", "mid": "InClusterQueue"}, prio=1,
    ),
    "no preemption for low priority": Case(
        [wl("low", "standalone", 3, -1), wl("mid", "standalone", 3)], "standalone", 1, {}, prio=-1,
    ),
    "not enough low priority workloads": Case(
        [wl("low", "standalone", 3, -1), wl("mid", "standalone", 3)], "standalone", 4, {},
    ),
    "some free quota, preempt low priority": Case(
        [wl("low", "standalone", 1, -1), wl("mid", "standalone", 1), wl("high", "standalone", 3, 1)], "standalone", 2,
        {"low": "InClusterQueue"}, prio=1,
    ),
    "minimal set excludes low priority": Case(
        [wl("low", "standalone", 1, -1), wl("mid", "standalone", 2), wl("high", "standalone", 3, 1)], "standalone", 2,
        {"mid": "InClusterQueue"}, prio=1,
    ),
    "the most recently admitted goes first": Case(
        [wl("old", "standalone", 3, at="1"), wl("new", "standalone", 3, at="2")], "standalone", 3,
        {"new": "InClusterQueue"}, prio=1,
    ),
    "reclaim quota from borrower": Case(
        [wl("c1-low", "c1", 3, -1), wl("c2-mid", "c2", 3), wl("c2-high", "c2", 6, 1)], "c1", 3,
        {"c2-mid": "InCohortReclamation"}, prio=1,
    ),
    "no workloads borrowing": Case([wl("c1-high", "c1", 6, 1), wl("c2-low", "c2", 6, -1)], "c1", 1, {}, prio=1),
    "not enough workloads borrowing": Case(
        [wl("c1-high", "c1", 4, 1), wl("c2-low-1", "c2", 4, -1), wl("c2-low-2", "c2", 4, -1)], "c1", 4, {}, prio=1,
    ),
    "do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority": Case(
        [wl("c1", "c1", 2), wl("c2-1", "c2", 4), wl("c2-2", "c2", 4)], "c1", 4, {},
    ),
    "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny": Case(
        [wl("c1-1", "c1", 4, at="1"), wl("c1-2", "c1", 4, at="2"), wl("c2", "c2", 2)], "c2", 4,
        {"c1-2": "InCohortReclamation"},
    ),
    "can't preempt workloads in ClusterQueue for withinClusterQueue=Never": Case(
        [wl("c2-low", "c2", 6, -1), wl("c1", "c1", 6)], "c2", 1, {}, prio=1,
    ),
    "preempt newer workloads with the same priority": Case(
        [wl("wl1", "preventStarvation", 2, 2, created="1"), wl("wl2", "preventStarvation", 2, 1, created="9"),
         wl("wl3", "preventStarvation", 2, 1, created="0")],
        "preventStarvation", 2, {"wl2": "InClusterQueue"}, prio=1, created="5",
    ),
    "use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue while borrowing": Case(
        [wl("b_standard", "b_standard", 10, -1)], "a_standard", 10, {"b_standard": "InCohortReclaimWhileBorrowing"},
    ),
    "use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above MaxPriorityThreshold": Case(
        [wl("b_standard", "b_standard", 10, 1)], "a_standard", 10, {}, prio=2,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_targets(case: Case) -> None:
    usage = Usage(case.queues)
    for a in case.admitted:
        usage.add(a.queue, a.usage)
    before = {q: dict(u) for q, u in usage.used.items()}
    cq = case.queues[case.cq]
    lacking = case.gpus > usage.available(cq, FR)
    preemptor = Preemptor(cq, {FR: case.gpus}, frozenset({FR}) if lacking else frozenset(), case.prio, case.created)
    got = targets(preemptor, usage, case.admitted)
    assert {t.key: str(t.reason) for t in got} == case.want
    assert {q: dict(u) for q, u in usage.used.items()} == before, "the simulation leaves usage as it was"


def team(name: str) -> ClusterQueue:
    return queue(name, 8, cohort="research", reclaim=ANY)


def test_issue_scenario_team_b_reclaims_what_team_a_borrowed() -> None:
    """Two teams of 8 GPUs in a cohort, reclaimWithinCohort: Any. A's 12 GPUs are admitted (4
    borrowed); B's first 4 GPUs fit what nobody borrows, its next 4 preempt A's borrowing Job —
    the most recently admitted — and are admitted once it is evicted; A's Job waits."""
    queues = {q.name: q for q in (team("a"), team("b"))}
    a_jobs = [Pending(f"a{i}", "a", (PodSetRequest("main", 4, {GPU: 1}),), 0, f"0{i}") for i in range(3)]
    first = decide(queues, a_jobs, [], {})
    assert [(a.key, a.borrows) for a in first.admitted] == [("a0", False), ("a1", False), ("a2", True)]
    running = [Admitted(a.key, a.queue, a.usage(), 0, f"0{i}", f"1{i}") for i, a in enumerate(first.admitted)]
    b_jobs = [Pending(f"b{i}", "b", (PodSetRequest("main", 4, {GPU: 1}),), 0, f"2{i}") for i in range(2)]
    second = decide(queues, b_jobs, running, {})
    assert [a.key for a in second.admitted] == ["b0"]
    (preempting,) = second.preempting
    assert (preempting.key, [(t.key, t.queue, str(t.reason)) for t in preempting.targets]) == (
        "b1", [("a2", "a", "InCohortReclamation")],
    )
    (waiting,) = second.waiting
    assert waiting.key == "b1" and waiting.message.endswith("Pending the preemption of 1 workload(s)")
    # a2 evicted: back in the queue, it waits; b1 is admitted in its place.
    holders = [r for r in running if r.key != "a2"] + [Admitted("b0", "b", {("default", GPU): 4}, 0, "20", "30")]
    third = decide(queues, [a_jobs[2], b_jobs[1]], holders, {})
    assert [a.key for a in third.admitted] == ["b1"]
    assert [(w.key, w.reason) for w in third.waiting] == [("a2", "Pending")]
    assert third.preempting == ()


def test_without_a_policy_nothing_is_preempted() -> None:
    queues = {q.name: q for q in (queue("a", 8, cohort="r"), queue("b", 8, cohort="r"))}
    running = [Admitted("a-big", "a", {FR: 16})]
    decisions = decide(queues, [Pending("b0", "b", (PodSetRequest("main", 1, {GPU: 4}),))], running, {})
    assert decisions.preempting == () and [w.key for w in decisions.waiting] == ["b0"]


def test_a_gang_is_preempted_whole_and_one_preemption_per_cohort_per_cycle() -> None:
    queues = {q.name: q for q in (team("a"), team("b"))}
    # A borrows 8 with one 8-pod gang; B's two jobs each need 4 of it back.
    running = [Admitted("a-own", "a", {FR: 8}, 0, "0", "0"), Admitted("a-gang", "a", {FR: 8}, 0, "1", "1")]
    b_jobs = [Pending(f"b{i}", "b", (PodSetRequest("workers", 4, {GPU: 1}),), 0, f"2{i}") for i in range(2)]
    decisions = decide(queues, b_jobs, running, {})
    assert [(p.key, [t.key for t in p.targets]) for p in decisions.preempting] == [("b0", ["a-gang"])]
    assert decisions.admitted == ()
    assert {w.key for w in decisions.waiting} == {"b0", "b1"}
