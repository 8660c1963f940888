"""Classical preemption (fair sharing off) in a tree of cohorts, table-driven: the shapes of
Kueue's hierarchical preemption tests (``preemption_hierarchical_test.go``: a cohort with quota of
its own under a root, queues under each) and trees of two child cohorts where the old rule (every
queue under the root as one cohort) and Kueue's tree rule part ways."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controlplane.admission.core import Admitted, Pending, PodSetRequest, decide
from controlplane.admission.core.preemption import Preemptor, targets
from controlplane.admission.core.quota import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    Preemption,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Usage,
)

GPU = "nvidia.com/gpu"
FR = ("default", GPU)
LOWER, ANY = PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.ANY


def _group(gpus: int) -> tuple[ResourceGroup, ...]:
    return (ResourceGroup((GPU,), (FlavorQuotas("default", {GPU: Quota(gpus)}),)),)


def cq(name: str, gpus: int, cohort: str, *, reclaim: PreemptionPolicy = ANY,
       borrow_within: PreemptionPolicy = PreemptionPolicy.NEVER, threshold: int | None = None) -> ClusterQueue:
    return ClusterQueue(name, _group(gpus), cohort, preemption=Preemption(LOWER, reclaim, borrow_within, threshold))


def cohort(name: str, parent: str | None = None, gpus: int | None = None) -> Cohort:
    return Cohort(name, parent, _group(gpus) if gpus is not None else ())


def wl(key: str, queue: str, gpus: int, prio: int = 0, at: str = "1") -> Admitted:
    return Admitted(key, queue, {FR: gpus}, prio, "1", at)


@dataclass
class Case:
    queues: list[ClusterQueue]
    cohorts: list[Cohort]
    admitted: list[Admitted]
    gpus: int
    want: dict[str, str]
    """key → the Preempted reason (the preemptor is ClusterQueue ``q``)."""
    prio: int = 0


#           r
#      /        \
#   c (2)    q_borrowing (0)
#    |
#   q (0)
KUEUE_TREE = [cohort("r"), cohort("c", "r", 2)]
CASES: dict[str, Case] = {
    # The 2 GPUs q_borrowing uses are c's: q, in c, reclaims them though it borrows itself.
    "preempt with hierarchical advantage": Case(
        [cq("q", 0, "c"), cq("q_borrowing", 0, "r")], KUEUE_TREE,
        [wl("admitted2", "q_borrowing", 2)], 2, {"admitted2": "InCohortReclamation"},
    ),
    "preempt multiple with hierarchical advantage": Case(
        [cq("q", 0, "c"), cq("q_borrowing", 0, "r")], KUEUE_TREE,
        [wl("admitted1", "q_borrowing", 1, 1), wl("admitted2", "q_borrowing", 1, 2)], 2,
        {"admitted1": "InCohortReclamation", "admitted2": "InCohortReclamation"},
    ),
    # Another queue's workload that uses the quota of q's subtree goes before q's own lower one.
    "prefer to preempt hierarchical candidate": Case(
        [cq("q", 0, "c"), cq("q_borrowing", 0, "r")], KUEUE_TREE,
        [wl("admitted_borrowing", "q_borrowing", 1, 1), wl("admitted_same_queue", "q", 1, -2)], 1,
        {"admitted_borrowing": "InCohortReclamation"},
    ),
    #        r
    #     /     \
    #   c (2)   q_nominal (2)
    #   /   \
    # q (0)  q_same_cohort (0)
    "forced to preempt priority candidate": Case(
        [cq("q", 0, "c", borrow_within=LOWER, threshold=0), cq("q_nominal", 2, "r"), cq("q_same_cohort", 0, "c")],
        KUEUE_TREE, [wl("admitted_nominal", "q_nominal", 2, -10), wl("admitted_same_cohort", "q_same_cohort", 2, -1)], 2,
        {"admitted_same_cohort": "InCohortReclaimWhileBorrowing"},
    ),
    "incoming workload fits in CQ nominal quota": Case(
        [cq("q", 4, "c"), cq("q_borrowing", 0, "r"), cq("q_same_cohort", 0, "c")], KUEUE_TREE,
        [wl("admitted_borrowing", "q_borrowing", 3, 10), wl("admitted_same_cohort", "q_same_cohort", 3, 10)], 4,
        {"admitted_borrowing": "InCohortReclamation", "admitted_same_cohort": "InCohortReclamation"},
    ),
    #            r
    #       /          \
    #     a              b
    #   /    \        /     \
    # q (4)  a2 (4)  b1 (4)  b2 (4)
    # q's 2 fit its own quota. b1 borrows 2 of b2's, but b as a whole stays within its 8: nothing
    # of a's is there to take back, so a2's workload goes (a2 borrows q's share), not b1's of
    # lower priority, which the old rule took.
    "a queue borrowing within its own subtree is nobody else's to reclaim from": Case(
        [cq("q", 4, "a", reclaim=LOWER), cq("a2", 4, "a"), cq("b1", 4, "b"), cq("b2", 4, "b")],
        [cohort("r"), cohort("a", "r"), cohort("b", "r")],
        [wl("q-own", "q", 2, 5), wl("a2-1", "a2", 4, 0, "1"), wl("a2-2", "a2", 2, 0, "2"),
         wl("b1-1", "b1", 4, -1, "1"), wl("b1-2", "b1", 2, -1, "2"), wl("b2", "b2", 2, 5)], 2,
        {"a2-2": "InCohortReclamation"}, prio=1,
    ),
    #        r
    #     /      \
    #   a (2)     b
    #  /    \     |
    # q (2) a2 (2) b1 (2)
    # q's 3 do not fit its own 2 but fit a's 6: b, which uses 3 of a's quota, is reclaimed from
    # while q borrows; a2, borrowing within a, only if q then fitted without borrowing.
    "the subtree that holds the request reclaims from other subtrees while borrowing": Case(
        [cq("q", 2, "a", reclaim=LOWER), cq("a2", 2, "a"), cq("b1", 2, "b")],
        [cohort("r"), cohort("a", "r", 2), cohort("b", "r")],
        [wl("a2-x", "a2", 3, 0), wl("b1-x", "b1", 3, 5, "2"), wl("b1-y", "b1", 2, 5, "1")], 3,
        {"b1-x": "InCohortReclamation"}, prio=10,
    ),
    # The same with borrowWithinCohort: a2's lower-priority workload could go while q borrows, but
    # the candidates over which q has the hierarchical advantage come first.
    "hierarchy candidates before priority candidates of lower priority": Case(
        [cq("q", 2, "a", reclaim=LOWER, borrow_within=LOWER), cq("a2", 2, "a"), cq("b1", 2, "b")],
        [cohort("r"), cohort("a", "r", 2), cohort("b", "r")],
        [wl("a2-x", "a2", 3, 0), wl("b1-x", "b1", 3, 5, "2"), wl("b1-y", "b1", 2, 5, "1")], 3,
        {"b1-x": "InCohortReclamation"}, prio=10,
    ),
    # b is over its 8 through b1; once b1-1 is gone b is back within it, so b1-2 (b1 still over
    # its own 4) is no longer q's to take: a2's is, and b1-1 then goes back.
    "a candidate stops being one once a cohort between it and the preemptor is within its quota": Case(
        [cq("q", 4, "a"), cq("a2", 4, "a"), cq("b1", 4, "b"), cq("b2", 4, "b")],
        [cohort("r"), cohort("a", "r"), cohort("b", "r")],
        [wl("a2-1", "a2", 6, 3), wl("b1-1", "b1", 1, 0, "2"), wl("b1-2", "b1", 5, 0, "1"), wl("b2", "b2", 3, 9)], 4,
        {"a2-1": "InCohortReclamation"},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_tree_targets(case: Case) -> None:
    queues = {q.name: q for q in case.queues}
    usage = Usage(queues, {c.name: c for c in case.cohorts})
    for a in case.admitted:
        usage.add(a.queue, a.usage)
    before = usage.used
    assert case.gpus > usage.available(queues["q"], FR), "the case must need preemption"
    preemptor = Preemptor(queues["q"], {FR: case.gpus}, frozenset({FR}), case.prio, "5")
    got = targets(preemptor, usage, case.admitted)
    assert {t.key: str(t.reason) for t in got} == case.want
    assert usage.used == before, "the simulation leaves usage as it was"


def test_the_cycle_preempts_across_subtrees_for_a_queue_whose_subtree_has_room() -> None:
    """Through the admission cycle: team-b's cohort lends its 8 GPUs, which team-a (in another
    subtree) took; team-b's Job is admitted once team-a's most recent Job is evicted."""
    queues = {q.name: q for q in (cq("team-a", 0, "prod"), cq("team-b", 0, "research"))}
    cohorts = {c.name: c for c in (cohort("org"), cohort("prod", "org"), cohort("research", "org", 8))}
    running = [Admitted("a1", "team-a", {FR: 4}, 0, "0", "10"), Admitted("a2", "team-a", {FR: 4}, 0, "1", "11")]
    decisions = decide(queues, [Pending("b1", "team-b", (PodSetRequest("main", 4, {GPU: 1}),))], running, {}, cohorts=cohorts)
    assert [(p.key, [(t.key, str(t.reason)) for t in p.targets]) for p in decisions.preempting] == [
        ("b1", [("a2", "InCohortReclamation")]),
    ]
