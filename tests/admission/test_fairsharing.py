"""Fair sharing, table-driven with Kueue's documented semantics (KEP-1714 and the hierarchical
cohorts it builds on): the dominant resource share of ClusterQueues and cohorts, the order of
heads by the share they would have once admitted, weight 0, fair-sharing preemption with the
default strategies (LessThanOrEqualToFinalShare, then LessThanInitialShare) and with either one
alone (Kueue's ``fairSharing.preemptionStrategies``), and the KEP's own
example: two cohorts of equal weight share 300 GPUs 150/150, and inside one of them three queues
weighted 1:1:3 get 30/30/90."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest

from controlplane.admission.core import (
    INFINITE_SHARE,
    Admitted,
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    Pending,
    PodSetRequest,
    Preemption,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Usage,
    decide,
)
from controlplane.admission.core.fairsharing import PreemptionStrategy, fair_targets
from controlplane.admission.core.preemption import Preemptor
from controlplane.admission.objects import deactivate_cycles

GPU = "nvidia.com/gpu"
CPU = "cpu"
FR = ("default", GPU)
ANY, LOWER = PreemptionPolicy.ANY, PreemptionPolicy.LOWER_PRIORITY


def queue(name: str, gpus: int, *, cohort: str | None = "all", weight: float = 1, cpu: int | None = None,
          lend: int | None = None, reclaim: PreemptionPolicy = ANY) -> ClusterQueue:
    quotas = {GPU: Quota(gpus, lending_limit=lend)}
    if cpu is not None:
        quotas[CPU] = Quota(cpu)
    group = ResourceGroup(tuple(quotas), (FlavorQuotas("default", quotas),))
    return ClusterQueue(name, (group,), cohort, preemption=Preemption(LOWER, reclaim), fair_weight=int(weight * 1000))


def queues(*items: ClusterQueue) -> dict[str, ClusterQueue]:
    return {q.name: q for q in items}


def job(key: str, cq: str, gpus: int, *, prio: int = 0, at: str = "") -> Pending:
    return Pending(key, cq, (PodSetRequest("main", 1, {GPU: gpus}),), prio, at or key)


def held(key: str, cq: str, gpus: int, *, at: str = "0", prio: int = 0) -> Admitted:
    return Admitted(key, cq, {FR: gpus}, prio, "0", at)


# --- the dominant resource share ------------------------------------------------------------------


@dataclass
class ShareCase:
    queues: dict[str, ClusterQueue]
    usage: dict[str, dict[tuple[str, str], int]]
    want: dict[str, int]
    cohorts: dict[str, Cohort] = field(default_factory=dict)


SHARES: dict[str, ShareCase] = {
    "within nominal quota the share is 0": ShareCase(
        queues(queue("a", 4), queue("b", 6)), {"a": {FR: 4}}, {"a": 0, "b": 0},
    ),
    # 2 borrowed of the 10 the cohort could lend: 200 per thousand.
    "borrowed per thousand of what the cohort lends": ShareCase(
        queues(queue("a", 4), queue("b", 6)), {"a": {FR: 6}}, {"a": 200, "b": 0},
    ),
    "divided by the weight": ShareCase(
        queues(queue("a", 4, weight=2), queue("b", 6, weight=0.5)), {"a": {FR: 6}, "b": {FR: 7}}, {"a": 100, "b": 200},
    ),
    "weight 0 that borrows: an infinite share": ShareCase(
        queues(queue("a", 4, weight=0), queue("b", 6, weight=0)), {"a": {FR: 5}, "b": {FR: 6}}, {"a": INFINITE_SHARE, "b": 0},
    ),
    "the dominant resource decides": ShareCase(
        queues(queue("a", 4, cpu=10_000), queue("b", 4, cpu=10_000)),
        {"a": {FR: 5, ("default", CPU): 15_000}}, {"a": 250, "b": 0},  # cpu 5000/20000 > gpu 1/8
    ),
    "lendingLimit bounds what the cohort lends": ShareCase(
        queues(queue("a", 4), queue("b", 6, lend=2)), {"a": {FR: 5}}, {"a": 166},  # 1 of 4 + 2
    ),
    "no cohort, no share": ShareCase(queues(queue("a", 4, cohort=None)), {"a": {FR: 4}}, {"a": 0}),
    # Hierarchical cohorts: a queue's share is over what its parent could lend it, which includes
    # what the whole tree lends.
    "a cohort's own quota is lent to its subtree": ShareCase(
        queues(queue("a", 0, cohort="left"), queue("b", 0, cohort="left")), {"a": {FR: 3}, "b": {FR: 1}}, {"a": 300, "b": 100},
        cohorts={"left": Cohort("left", "root"), "root": Cohort("root", groups=(
            ResourceGroup((GPU,), (FlavorQuotas("default", {GPU: Quota(10)}),)),
        ))},
    ),
}


@pytest.mark.parametrize("case", SHARES.values(), ids=list(SHARES))
def test_share(case: ShareCase) -> None:
    usage = Usage(case.queues, case.cohorts)
    for name, amounts in case.usage.items():
        usage.add(name, amounts)
    assert {name: usage.queue_share(name) for name in case.want} == case.want


def test_a_cycle_of_parents_makes_its_queues_inactive() -> None:
    """Kueue disables the queues of a cohort whose parents loop; the arithmetic still ends."""
    cohorts = {"x": Cohort("x", "y"), "y": Cohort("y", "x")}
    qs = queues(queue("a", 4, cohort="x"), queue("b", 4, cohort=None))
    usage = Usage(qs, cohorts)
    assert usage.cycles >= {"x", "y"}
    qs = deactivate_cycles(qs, usage.cycles)
    decisions = decide(qs, [job("a1", "a", 1), job("b1", "b", 1)], [], {}, fair_sharing=True, cohorts=cohorts)
    assert [a.key for a in decisions.admitted] == ["b1"]
    assert [(w.key, w.reason) for w in decisions.waiting] == [("a1", "Inadmissible")]
    assert "cycle" in decisions.waiting[0].message


def test_cohort_share_sums_its_subtree() -> None:
    """Two cohorts under one root, sharing the 300 GPUs of a third: a cohort's share is what its
    queues borrow together (the KEP's value of a sub-organization)."""
    usage = Usage(kep_queues(), KEP_COHORTS)
    usage.add("1a", {FR: 30})
    usage.add("1c", {FR: 90})
    usage.add("2a", {FR: 60})
    assert usage.share(usage.cohorts["c1"]) == 400  # 120 of 300
    assert usage.share(usage.cohorts["c2"]) == 200
    assert usage.queue_share("1c") == 100  # 300 / weight 3


# --- order of the heads ----------------------------------------------------------------------------


@dataclass
class OrderCase:
    queues: dict[str, ClusterQueue]
    running: list[Admitted]
    pending: list[Pending]
    fair: list[str]
    """Admitted with fair sharing."""
    classic: list[str]
    """Admitted without."""


ORDER: dict[str, OrderCase] = {
    # a already borrows 6 of the 10 b and c lend; both offer 2 more, only 2 are left. Without fair
    # sharing the older head goes first; with it, the head whose queue would borrow less.
    "the queue that would borrow less goes first": OrderCase(
        queues(queue("a", 0), queue("b", 0), queue("l", 10)), [held("a-run", "a", 8)],
        [job("a1", "a", 2, at="1"), job("b1", "b", 2, at="2")], ["b1"], ["a1"],
    ),
    "shares are weighted": OrderCase(
        queues(queue("a", 0, weight=10), queue("b", 0), queue("l", 10)), [held("a-run", "a", 8)],
        [job("a1", "a", 2, at="2"), job("b1", "b", 2, at="1")], ["a1"], ["b1"],  # a: 1000 / 10 < b: 200
    ),
    "priority does not buy a bigger share": OrderCase(
        queues(queue("a", 0), queue("b", 0), queue("l", 10)), [held("a-run", "a", 8)],
        [job("a1", "a", 2, prio=100, at="1"), job("b1", "b", 2, at="2")], ["b1"], ["a1"],
    ),
    "equal shares: priority, then age": OrderCase(
        queues(queue("a", 0), queue("b", 0), queue("l", 10)), [held("a-run", "a", 4), held("b-run", "b", 4)],
        [job("a1", "a", 2, at="2"), job("b1", "b", 2, at="1", prio=1)], ["b1"], ["b1"],
    ),
    # Weight 0: the queue only gets what no other queue wants, however old or urgent its head.
    "weight 0 waits for what others do not want": OrderCase(
        queues(queue("zero", 0, weight=0), queue("b", 0), queue("l", 4)), [],
        [job("z1", "zero", 2, prio=100, at="1"), job("b1", "b", 4, at="2")], ["b1"], ["z1"],
    ),
    "weight 0 borrows when nobody else wants it": OrderCase(
        queues(queue("zero", 0, weight=0), queue("b", 0), queue("l", 4)), [], [job("z1", "zero", 2)], ["z1"], ["z1"],
    ),
}


@pytest.mark.parametrize("case", ORDER.values(), ids=list(ORDER))
def test_order(case: OrderCase) -> None:
    qs = {name: replace(q, preemption=Preemption()) for name, q in case.queues.items()}  # order alone
    fair = decide(qs, case.pending, case.running, {}, fair_sharing=True)
    classic = decide(qs, case.pending, case.running, {})
    assert [a.key for a in fair.admitted] == case.fair
    assert [a.key for a in classic.admitted] == case.classic
    assert not fair.preempting and not classic.preempting


# --- preemption -----------------------------------------------------------------------------------


@dataclass
class PreemptCase:
    queues: dict[str, ClusterQueue]
    admitted: list[Admitted]
    cq: str
    gpus: int
    fair: set[str]
    """Targets with fair sharing (reason InCohortFairSharing unless in the preemptor's queue)."""
    classic: set[str] | None = None
    """Targets of classical preemption, when the case contrasts the two."""
    prio: int = 0


def ones(cq: str, n: int, *, first: int = 0) -> list[Admitted]:
    """n one-GPU workloads, admitted one after the other (``<cq><i>``, the last the most recent)."""
    return [held(f"{cq}{i}", cq, 1, at=f"{first + i:03d}") for i in range(1, n + 1)]


THREE = queues(queue("a", 4), queue("b", 4), queue("c", 4))
PREEMPT: dict[str, PreemptCase] = {
    # c reclaims its nominal 2: fair sharing takes from the biggest borrower (a borrows 3, b 1),
    # classical preemption from the most recently admitted borrower first (b's).
    "reclaim from the queue with the highest share": PreemptCase(
        THREE, [*ones("a", 7), *ones("b", 5, first=100)], "c", 2, fair={"a7", "a6"}, classic={"b5", "a7"},
    ),
    "the highest share moves as workloads go": PreemptCase(
        THREE, [*ones("a", 6), *ones("b", 6, first=100)], "c", 4, fair={"a6", "a5", "b6", "b5"},
    ),
    # b would borrow 2 like a, which borrows 2: taking one of a's would leave a below b.
    "no preemption when the preemptor would end above the target": PreemptCase(
        THREE, [*ones("a", 6), *ones("b", 4), *ones("c", 2)], "b", 2, fair=set(),
    ),
    "a weight protects its queue": PreemptCase(
        queues(queue("a", 4, weight=2), queue("b", 4), queue("c", 4)), [*ones("a", 8), *ones("b", 4)], "b", 2, fair=set(),
    ),
    "the same case at weight 1": PreemptCase(
        THREE, [*ones("a", 8), *ones("b", 4)], "b", 2, fair={"a8", "a7"},
    ),
    "weight 0 is preempted first": PreemptCase(
        queues(queue("a", 4), queue("zero", 0, weight=0), queue("c", 4)), [*ones("a", 6), *ones("zero", 2)], "c", 2,
        fair={"zero2", "zero1"},
    ),
    # LessThanInitialShare: a single greedy workload (a borrows 6 with it) is preempted for a
    # workload that would borrow less, though a would then borrow nothing.
    "a greedy workload goes (LessThanInitialShare)": PreemptCase(
        THREE, [held("greedy", "a", 10)], "b", 6, fair={"greedy"},
    ),
    "lower priority in the preemptor's own queue (withinClusterQueue)": PreemptCase(
        queues(queue("a", 4, cohort=None)), [held("low", "a", 2, prio=-1), held("mid", "a", 2)], "a", 2, fair={"low"}, prio=1,
    ),
    "reclaimWithinCohort Never: no fair-sharing preemption of others": PreemptCase(
        queues(queue("a", 4), queue("b", 4), queue("c", 4, reclaim=PreemptionPolicy.NEVER)), [*ones("a", 8), *ones("b", 4)],
        "c", 2, fair=set(),
    ),
}


@pytest.mark.parametrize("case", PREEMPT.values(), ids=list(PREEMPT))
def test_fair_preemption_targets(case: PreemptCase) -> None:
    usage = Usage(case.queues)
    for a in case.admitted:
        usage.add(a.queue, a.usage)
    before = usage.used
    preemptor = Preemptor(case.queues[case.cq], {FR: case.gpus}, frozenset({FR}), case.prio, "9")
    chosen = fair_targets(preemptor, usage, case.admitted)
    assert usage.used == before, "the simulation leaves usage as it was"
    assert {t.key for t in chosen} == case.fair
    for t in chosen:
        assert t.reason == ("InClusterQueue" if t.queue == case.cq else "InCohortFairSharing")
    if case.classic is not None:
        pending = [job("p", case.cq, case.gpus, prio=case.prio, at="9")]
        decisions = decide(case.queues, pending, case.admitted, {})
        assert {t.key for p in decisions.preempting for t in p.targets} == case.classic


def test_the_cycle_preempts_by_fair_share_only_when_enabled() -> None:
    running = [*ones("a", 7), *ones("b", 5, first=100)]
    pending = [job("c1", "c", 2)]
    fair = decide(THREE, pending, running, {}, fair_sharing=True)
    (preempting,) = fair.preempting
    assert {t.key for t in preempting.targets} == {"a7", "a6"}
    assert "Pending the preemption of 2 workload(s)" in fair.waiting[0].message


FINAL, INITIAL = PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, PreemptionStrategy.LESS_THAN_INITIAL_SHARE
# Shares in GPUs borrowed (the same denominator for a and b). Greedy: a holds 10 of nominal 4
# (borrows 6); b takes 6 with its nominal 4 (would borrow 2). Without greedy a borrows nothing:
# 2 <= 0 fails (S2-a); 2 < 6 holds (S2-b). Big and small: a holds small (2, older) and big (6,
# newer), borrows 4; b holds its 4 and takes 2 more (borrows 2). Without big a borrows 0, 2 <= 0
# fails; without small a borrows 2, 2 <= 2 holds (S2-a takes small); S2-b alone takes the first
# candidate, big (2 < 4), where S2-a would have refused it.
STRATEGY_CASES: dict[str, tuple[list[Admitted], str, int, dict[tuple[PreemptionStrategy, ...], set[str]]]] = {
    "a greedy workload": ([held("greedy", "a", 10)], "b", 6, {
        (FINAL,): set(), (INITIAL,): {"greedy"}, (FINAL, INITIAL): {"greedy"}}),
    "a big and a small workload": ([held("small", "a", 2, at="001"), held("big", "a", 6, at="002"), *ones("b", 4, first=100)], "b", 2, {
        (FINAL,): {"small"}, (INITIAL,): {"big"}, (FINAL, INITIAL): {"small"}}),
}


@pytest.mark.parametrize("strategies", [(FINAL,), (INITIAL,), (FINAL, INITIAL)], ids=lambda s: ",".join(s))
@pytest.mark.parametrize("case", STRATEGY_CASES.values(), ids=list(STRATEGY_CASES))
def test_preemption_follows_the_configured_strategies(
    case: tuple[list[Admitted], str, int, dict[tuple[PreemptionStrategy, ...], set[str]]], strategies: tuple[PreemptionStrategy, ...],
) -> None:
    admitted, cq, gpus, want = case
    usage = Usage(THREE)
    for a in admitted:
        usage.add(a.queue, a.usage)
    preemptor = Preemptor(THREE[cq], {FR: gpus}, frozenset({FR}), 0, "9")
    assert {t.key for t in fair_targets(preemptor, usage, admitted, strategies=strategies)} == want[strategies]
    # The cycle passes the setting on.
    decisions = decide(THREE, [job("p", cq, gpus, at="9")], admitted, {}, fair_sharing=True, preemption_strategies=strategies)
    assert {t.key for p in decisions.preempting for t in p.targets} == want[strategies]


# --- the KEP's example -----------------------------------------------------------------------------

KEP_COHORTS = {
    "org": Cohort("org"),
    "cs": Cohort("cs", "org"),
    "c1": Cohort("c1", "org", fair_weight=1000),
    "c2": Cohort("c2", "org", fair_weight=1000),
}


def kep_queues() -> dict[str, ClusterQueue]:
    """CS holds the 300 GPUs; C1 has 1A, 1B and 1C (three times as important); C2 has 2A."""
    return queues(
        queue("shared", 300, cohort="cs"),
        queue("1a", 0, cohort="c1"), queue("1b", 0, cohort="c1"), queue("1c", 0, cohort="c1", weight=3),
        queue("2a", 0, cohort="c2"),
    )


@dataclass
class Hub:
    """The workloads of a simulated hub, cycle after cycle."""

    waiting: dict[str, Pending] = field(default_factory=dict)
    running: dict[str, Admitted] = field(default_factory=dict)

    def held(self) -> dict[str, int]:
        out = dict.fromkeys(("shared", "1a", "1b", "1c", "2a"), 0)
        for a in self.running.values():
            out[a.queue] += a.usage[FR]
        return out


def run_cycles(qs: Mapping[str, ClusterQueue], cohorts: Mapping[str, Cohort], hub: Hub, *, fair_sharing: bool,
               limit: int = 200) -> dict[str, int]:
    """Cycles of the hub: admissions hold quota, preempted workloads go back to their queue;
    until nothing changes. Returns the GPUs each queue holds."""
    waiting, running = hub.waiting, hub.running
    for cycle in range(limit):
        decisions = decide(qs, list(waiting.values()), list(running.values()), {}, fair_sharing=fair_sharing, cohorts=cohorts)
        for a in decisions.admitted:
            p = waiting.pop(a.key)
            running[a.key] = Admitted(a.key, a.queue, a.usage(), p.priority, p.created, f"{cycle:04d}")
        evicted = [t.key for p in decisions.preempting for t in p.targets]
        for key in evicted:
            a = running.pop(key)
            waiting[key] = Pending(key, a.queue, (PodSetRequest("main", 1, {GPU: a.usage[FR]}),), a.priority, a.created)
        if not decisions.admitted and not evicted:
            break
    else:
        pytest.fail(f"no steady state after {limit} cycles")
    return hub.held()


def backlog(*names: str, jobs: int = 30, gpus: int = 10) -> dict[str, Pending]:
    return {f"{q}-{i:02d}": job(f"{q}-{i:02d}", q, gpus, at=f"{i:02d}-{q}") for q in names for i in range(jobs)}


def test_kep_example_150_150_then_30_30_90() -> None:
    """KEP-1714 story 3: C1 and C2 (equal weights) get 150 GPUs each of CS's 300; inside C1, 1A,
    1B and 1C (weights 1:1:3) get 30, 30 and 90 — whatever order the backlogs arrived in."""
    held_by = run_cycles(kep_queues(), KEP_COHORTS, Hub(backlog("1a", "1b", "1c", "2a")), fair_sharing=True)
    assert held_by == {"shared": 0, "1a": 30, "1b": 30, "1c": 90, "2a": 150}


def test_kep_example_without_fair_sharing_is_first_come() -> None:
    """The same backlogs without fair sharing: each queue takes one 10-GPU head per round until the
    300 GPUs are gone (the older heads of the last round first: 80, 80, 70, 70), and nothing moves
    afterwards, whatever the weights."""
    held_by = run_cycles(kep_queues(), KEP_COHORTS, Hub(backlog("1a", "1b", "1c", "2a")), fair_sharing=False)
    assert held_by == {"shared": 0, "1a": 80, "1b": 80, "1c": 70, "2a": 70}


def test_kep_example_when_one_cohort_came_first() -> None:
    """C1 took all 300 GPUs before C2's work arrived: fair-sharing preemption gives C2 its 150."""
    qs, hub = kep_queues(), Hub(backlog("1a", "1b", "1c"))
    first = run_cycles(qs, KEP_COHORTS, hub, fair_sharing=True)
    assert first == {"shared": 0, "1a": 60, "1b": 60, "1c": 180, "2a": 0}
    hub.waiting.update(backlog("2a"))
    held_by = run_cycles(qs, KEP_COHORTS, hub, fair_sharing=True)
    assert held_by == {"shared": 0, "1a": 30, "1b": 30, "1c": 90, "2a": 150}


# --- the tournament values a head that must preempt with the usage it would take -----------------


@dataclass
class ShareCase:
    a_gpus: int
    b_gpus: int
    want_preemptor: str
    """One preemption per cohort tree per cycle: the tournament's first pick gets it."""


# Cohort of 8 GPUs: A and B 2 each, C 4; C holds 8 (4 borrowed: share 4*1000//8 = 500), nothing free.
# Share after admission: A with 4 GPUs borrows 2 → 2*1000//8 = 250; with 2 GPUs → 0. Same for B.
# a1 is older, so it wins a tie; at the current shares (both 0) it would always go first.
SHARE_CASES = {
    "the head that would borrow less goes first, though younger": ShareCase(4, 2, "b1"),
    "equal shares after admission: the older head": ShareCase(2, 2, "a1"),
    "the older head would borrow less": ShareCase(2, 4, "a1"),
}


@pytest.mark.parametrize("case", SHARE_CASES.values(), ids=SHARE_CASES)
def test_a_head_that_must_preempt_competes_with_its_share_after_admission(case: ShareCase) -> None:
    qs = queues(queue("A", 2), queue("B", 2), queue("C", 4))
    holding = [held("c1", "C", 4, at="1"), held("c2", "C", 4, at="2")]
    pending = [job("a1", "A", case.a_gpus, at="1"), job("b1", "B", case.b_gpus, at="2")]
    decisions = decide(qs, pending, holding, {}, fair_sharing=True)
    assert not decisions.admitted
    assert [(p.key, [t.key for t in p.targets]) for p in decisions.preempting] == [(case.want_preemptor, ["c2"])]
