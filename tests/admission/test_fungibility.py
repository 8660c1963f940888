"""Kueue's flavor assigner (``pkg/scheduler/flavorassigner``) through the admission cycle:
``flavorFungibility`` (whenCanBorrow, whenCanPreempt and their defaults), the preference of a
flavor that fits over one that reclaims over one that preempts in its own queue, the
``preemption`` policies honoured end to end, and a preemptor's claim on the quota its evictions
free."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from controlplane.admission import objects as adm
from controlplane.admission.core import (
    Admission,
    Admitted,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FungibilityPreference,
    Pending,
    PodSetRequest,
    Preemption,
    PreemptionPolicy,
    Quota,
    WhenCanBorrow,
    WhenCanPreempt,
    decide,
)
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kueue_conversion import V1BETA2_FIELDS_ANNOTATION, cluster_queue_to_v1beta1
from controlplane.apiserver.kinds.kueue import CLUSTER_QUEUE
from controlplane.apiserver.validation import check_model
from tests.admission.builders import cluster_queue

GPU = "nvidia.com/gpu"
LOWER, ANY = PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.ANY


def job(key: str, cq: str, gpus: int, *, prio: int = 0, at: str = "") -> Pending:
    return Pending(key, cq, (PodSetRequest("main", 1, {GPU: gpus}),), prio, at or key)


def held(key: str, cq: str, flavor: str, gpus: int, *, prio: int = 0, at: str = "0") -> Admitted:
    return Admitted(key, cq, {(flavor, GPU): gpus}, prio, "0", at)


def flavors_of(admitted: tuple[Admission, ...]) -> dict[str, str]:
    return {a.key: a.assignments[0].flavors[GPU] for a in admitted}


@dataclass
class Case:
    queues: list[ClusterQueue]
    admitted: list[Admitted]
    pending: Pending
    want_flavor: str | None
    """The flavor it is admitted in (None: it waits)."""
    want_targets: list[str]
    """What it preempts (empty: nothing)."""
    cohorts: dict[str, Cohort] = field(default_factory=dict)


def two_flavors(name: str = "a", *, cohort: str | None = None, f1: int | Quota = 4, f2: int | Quota = 4,
                try_next: bool = False, preempt_first: bool = False, preemption: Preemption | None = None) -> ClusterQueue:
    q = cluster_queue(name, {"f1": {GPU: f1}, "f2": {GPU: f2}}, cohort=cohort, try_next=try_next, preempt_first=preempt_first)
    return replace(q, preemption=preemption) if preemption is not None else q


WITHIN = Preemption(within_cluster_queue=LOWER)
RECLAIM = Preemption(within_cluster_queue=LOWER, reclaim_within_cohort=ANY)

CASES = {
    # f1 is full of a lower-priority workload, f2 is free.
    "whenCanPreempt TryNextFlavor (default): the next flavor that fits": Case(
        [two_flavors(preemption=WITHIN)], [held("low", "a", "f1", 4)], job("high", "a", 4, prio=10), "f2", [],
    ),
    "whenCanPreempt Preempt: preempt in the first flavor": Case(
        [two_flavors(preempt_first=True, preemption=WITHIN)], [held("low", "a", "f1", 4)], job("high", "a", 4, prio=10),
        None, ["low"],
    ),
    # a may borrow 2 of f1 from the lender; f2 holds the request in a's own quota.
    "whenCanBorrow Borrow (default): borrow in the first flavor": Case(
        [two_flavors(cohort="c", f1=Quota(2)), cluster_queue("lender", {"f1": {GPU: 4}, "f2": {GPU: 0}}, cohort="c")],
        [], job("w", "a", 4), "f1", [],
    ),
    "whenCanBorrow TryNextFlavor: the flavor that fits without borrowing": Case(
        [two_flavors(cohort="c", f1=Quota(2), try_next=True), cluster_queue("lender", {"f1": {GPU: 4}, "f2": {GPU: 0}}, cohort="c")],
        [], job("w", "a", 4), "f2", [],
    ),
    "whenCanBorrow TryNextFlavor, every flavor borrows: the one borrowing from closest (the first)": Case(
        [two_flavors(cohort="c", f1=Quota(2), f2=Quota(2), try_next=True),
         cluster_queue("lender", {"f1": {GPU: 4}, "f2": {GPU: 4}}, cohort="c")],
        [], job("w", "a", 4), "f1", [],
    ),
    # Cohort x (a, l1) under root (l2): a's 4 GPUs of f1 fit only with root's quota (a subtree
    # of height 2), of f2 within x (height 1).
    "whenCanBorrow TryNextFlavor, every flavor borrows: the one borrowing from the lower subtree": Case(
        [two_flavors(cohort="x", f1=Quota(2), f2=Quota(2), try_next=True),
         cluster_queue("l1", {"f1": {GPU: 0}, "f2": {GPU: 4}}, cohort="x"),
         cluster_queue("l2", {"f1": {GPU: 4}, "f2": {GPU: 0}}, cohort="root")],
        [], job("w", "a", 4), "f2", [], cohorts={"x": Cohort("x", parent="root")},
    ),
    "whenCanBorrow Borrow, hierarchical: the first flavor, borrowing from the root": Case(
        [two_flavors(cohort="x", f1=Quota(2), f2=Quota(2)),
         cluster_queue("l1", {"f1": {GPU: 0}, "f2": {GPU: 4}}, cohort="x"),
         cluster_queue("l2", {"f1": {GPU: 4}, "f2": {GPU: 0}}, cohort="root")],
        [], job("w", "a", 4), "f1", [], cohorts={"x": Cohort("x", parent="root")},
    ),
    # f1: only a's own lower-priority workload to evict (Preempt); f2: b borrows a's quota (Reclaim).
    "reclaiming from a borrower is preferred to preempting in the own queue": Case(
        [two_flavors(cohort="c", preemption=RECLAIM), two_flavors("b", cohort="c", f1=0, f2=0)],
        [held("own", "a", "f1", 4), held("borrower", "b", "f2", 4)], job("high", "a", 4, prio=10), None, ["borrower"],
    ),
    "whenCanPreempt Preempt stops at the first flavor that can preempt": Case(
        [two_flavors(cohort="c", preempt_first=True, preemption=RECLAIM), two_flavors("b", cohort="c", f1=0, f2=0)],
        [held("own", "a", "f1", 4), held("borrower", "b", "f2", 4)], job("high", "a", 4, prio=10), None, ["own"],
    ),
    # f1: nothing a may evict (same priority); f2: a lower-priority one.
    "a flavor where preemption finds no target is passed over": Case(
        [two_flavors(preempt_first=True, preemption=WITHIN)], [held("peer", "a", "f1", 4, prio=10), held("low", "a", "f2", 4)],
        job("high", "a", 4, prio=10), None, ["low"],
    ),
}


BOP, POB = FungibilityPreference.BORROWING_OVER_PREEMPTION, FungibilityPreference.PREEMPTION_OVER_BORROWING


def looking_everywhere(q: ClusterQueue, preference: FungibilityPreference) -> ClusterQueue:
    """``q`` with both whenCan policies TryNextFlavor (as Kueue requires for a preference)."""
    return replace(q, fungibility=FlavorFungibility(WhenCanBorrow.TRY_NEXT_FLAVOR, WhenCanPreempt.TRY_NEXT_FLAVOR, preference))


def preference_case(preference: FungibilityPreference, want_flavor: str | None, want_targets: list[str], *,
                    f1_holder: str, f1_holder_prio: int = 0) -> Case:
    """a (4 of f1, none of f2) in cohort c with a lender of 4 GPUs of f2; f1 is full of
    ``f1_holder``'s workload (a's own: preempting; b's, borrowing a's quota: reclaiming). A job of
    4 at priority 10 fits f2 only by borrowing (from the cohort, height 1), f1 only by evicting (in
    its own quota, height 0)."""
    a = looking_everywhere(two_flavors(cohort="c", f1=4, f2=0, preemption=RECLAIM), preference)
    b = two_flavors("b", cohort="c", f1=0, f2=0)
    lender = cluster_queue("lender", {"f1": {GPU: 0}, "f2": {GPU: 4}}, cohort="c")
    holder = held("holder", f1_holder, "f1", 4, prio=f1_holder_prio)
    return Case([a, b, lender], [holder], job("w", "a", 4, prio=10), want_flavor, want_targets)


# Kueue's isPreferred under each flavorFungibility.preference, where it changes the flavor.
PREFERENCE_CASES = {
    "BorrowingOverPreemption: borrow in f2 rather than preempt a's own workload in f1":
        preference_case(BOP, "f2", [], f1_holder="a"),
    "PreemptionOverBorrowing: preempt a's own workload in f1 rather than borrow in f2":
        preference_case(POB, None, ["holder"], f1_holder="a"),
    # Kueue's issue 9462: a queue whose own quota another queue borrows reclaims it.
    "BorrowingOverPreemption: borrow in f2 rather than reclaim from b in f1":
        preference_case(BOP, "f2", [], f1_holder="b"),
    "PreemptionOverBorrowing: reclaim a's quota from b in f1 rather than borrow in f2":
        preference_case(POB, None, ["holder"], f1_holder="b"),
    # Both flavors evict within a's own quota (height 0): the tie goes to reclaiming from b in f2
    # rather than preempting a's own workload in f1.
    "PreemptionOverBorrowing, a tie of heights: reclaiming beats preempting": Case(
        [looking_everywhere(two_flavors(cohort="c", preemption=RECLAIM), POB), two_flavors("b", cohort="c", f1=0, f2=0)],
        [held("own", "a", "f1", 4), held("borrower", "b", "f2", 4)], job("high", "a", 4, prio=10), None, ["borrower"],
    ),
    # Preemption finds nothing in f1 (its holder is of a's priority): it comes after any flavor
    # that could admit, whatever the preference.
    "PreemptionOverBorrowing: a flavor where preemption finds nothing comes after borrowing":
        preference_case(POB, "f2", [], f1_holder="a", f1_holder_prio=10),
}


@pytest.mark.parametrize("case", PREFERENCE_CASES.values(), ids=PREFERENCE_CASES)
def test_flavor_assignment_follows_the_preference(case: Case) -> None:
    test_flavor_assignment(case)


@pytest.mark.parametrize("preference", [BOP, POB])
def test_a_flavor_that_fits_without_borrowing_ends_the_search_under_either_preference(preference: FungibilityPreference) -> None:
    """f1 preempts in a's own quota, f2 fits in it: both preferences take f2 (nothing is evicted)."""
    a = looking_everywhere(two_flavors(preemption=WITHIN), preference)
    case = Case([a], [held("low", "a", "f1", 4)], job("high", "a", 4, prio=10), "f2", [])
    test_flavor_assignment(case)


def test_preemption_over_borrowing_ranks_the_quota_closest_first() -> None:
    """Cohort x (a, l1) under root (l2): f1 fits only with root's quota (height 2), f3 within x
    (height 1), and f2 by reclaiming a's own quota from l1's borrower (height 0). Preemption over
    borrowing reclaims in f2; borrowing over preemption takes f3, the closer of those that fit."""
    flavors = {"f1": {GPU: Quota(0)}, "f2": {GPU: Quota(4)}, "f3": {GPU: Quota(0)}}
    quotas = {"a": flavors,
              "l1": {"f1": {GPU: 0}, "f2": {GPU: 0}, "f3": {GPU: 4}},
              "l2": {"f1": {GPU: 4}, "f2": {GPU: 0}, "f3": {GPU: 0}}}
    cohorts = {"x": Cohort("x", parent="root")}
    for preference, want_flavor, want_targets in ((BOP, "f3", []), (POB, None, ["borrower"])):
        a = replace(cluster_queue("a", quotas["a"], cohort="x"), preemption=RECLAIM)
        queues = [looking_everywhere(a, preference), cluster_queue("l1", quotas["l1"], cohort="x"),
                  cluster_queue("l2", quotas["l2"], cohort="root")]
        case = Case(queues, [held("borrower", "l1", "f2", 4)], job("w", "a", 4, prio=10), want_flavor, want_targets,
                    cohorts=cohorts)
        test_flavor_assignment(case)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_flavor_assignment(case: Case) -> None:
    decisions = decide({q.name: q for q in case.queues}, [case.pending], case.admitted, {}, cohorts=case.cohorts)
    assert flavors_of(decisions.admitted) == ({case.pending.key: case.want_flavor} if case.want_flavor else {})
    assert [t.key for p in decisions.preempting for t in p.targets] == case.want_targets


# --- borrowWithinCohort, honoured through the cycle ------------------------------------------------


@pytest.mark.parametrize(("threshold", "victim_prio", "want"), [
    (None, 0, ["victim"]),  # LowerPriority: any lower priority
    (5, 5, ["victim"]),  # at the threshold
    (5, 6, []),  # above it: not while borrowing
])
def test_borrow_within_cohort_preempts_below_the_threshold_while_borrowing(
    threshold: int | None, victim_prio: int, want: list[str]
) -> None:
    policy = Preemption(reclaim_within_cohort=ANY, borrow_within_cohort=LOWER, max_priority_threshold=threshold)
    a = replace(cluster_queue("a", {"f": {GPU: 2}}, cohort="c"), preemption=policy)
    b = cluster_queue("b", {"f": {GPU: 2}}, cohort="c")
    lender = cluster_queue("l", {"f": {GPU: 2}}, cohort="c")
    # b borrows 2 with its victim, 2 GPUs are free; a's 3-GPU job fits once the victim is
    # evicted, borrowing 1.
    holding = [held("mine", "b", "f", 2, prio=8), held("victim", "b", "f", 2, prio=victim_prio, at="1")]
    decisions = decide({"a": a, "b": b, "l": lender}, [job("big", "a", 3, prio=10)], holding, {})
    assert [t.key for p in decisions.preempting for t in p.targets] == want


# --- a preemptor's claim ---------------------------------------------------------------------------


def test_a_preemptor_takes_what_its_evictions_freed_before_the_evicted_can_borrow_it_back() -> None:
    """A (4 GPUs, reclaimWithinCohort: Any) and B (4) in a cohort; B borrows A's 4 with ``t``.
    A's older ``w1`` (6 GPUs) cannot preempt while borrowing; ``p`` (4) reclaims from ``t``."""
    a = replace(cluster_queue("a", {"f": {GPU: 4}}, cohort="c"), preemption=Preemption(reclaim_within_cohort=ANY))
    qs = {"a": a, "b": cluster_queue("b", {"f": {GPU: 4}}, cohort="c")}
    keep, t = held("keep", "b", "f", 4), held("t", "b", "f", 4, at="1")
    w1, p = job("w1", "a", 6, at="1"), job("p", "a", 4, at="2")
    first = decide(qs, [w1, p], [keep, t], {})
    assert [(x.key, [y.key for y in x.targets]) for x in first.preempting] == [("p", ["t"])]
    # Next cycle: t is evicted and pending again in b; the 4 GPUs it held are free.
    evicted = job("t", "b", 4, at="0")
    without = decide(qs, [w1, p, evicted], [keep], {})
    assert [d.key for d in without.admitted] == ["t"]  # it borrows them back, p would preempt again
    claimed = decide(qs, [w1, p, evicted], [keep], {}, claims={"p"})
    assert [d.key for d in claimed.admitted] == ["p"]
    assert {w.key for w in claimed.waiting} == {"w1", "t"}


# --- the API ----------------------------------------------------------------------------------------


def test_flavor_fungibility_is_read_with_kueues_defaults() -> None:
    def read(fungibility: dict[str, str] | None) -> FlavorFungibility:
        spec = {"resourceGroups": [], **({"flavorFungibility": fungibility} if fungibility is not None else {})}
        return adm.cluster_queue({"metadata": {"name": "a"}, "spec": spec}, {}).fungibility

    assert read(None) == FlavorFungibility(WhenCanBorrow.BORROW, WhenCanPreempt.TRY_NEXT_FLAVOR)
    assert read({}) == FlavorFungibility(WhenCanBorrow.BORROW, WhenCanPreempt.TRY_NEXT_FLAVOR)
    assert read({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "Preempt"}) == FlavorFungibility(
        WhenCanBorrow.TRY_NEXT_FLAVOR, WhenCanPreempt.PREEMPT,
    )


def test_the_preference_is_read_from_the_stored_queue_and_from_a_v1beta2_one() -> None:
    """The hub stores ClusterQueues in v1beta1, which has no ``preference``: the v1beta2 field
    travels in the stored object's annotation, and admission reads it there."""
    v1beta2 = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "a"},
               "spec": {"resourceGroups": [], "flavorFungibility": {
                   "whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"}}}
    stored = cluster_queue_to_v1beta1(v1beta2)
    assert "preference" not in stored["spec"]["flavorFungibility"]
    assert adm.cluster_queue(stored, {}).fungibility == FlavorFungibility(
        WhenCanBorrow.TRY_NEXT_FLAVOR, WhenCanPreempt.TRY_NEXT_FLAVOR, POB,
    )
    assert adm.cluster_queue(v1beta2, {}).fungibility.preference is POB
    stored["metadata"]["annotations"][V1BETA2_FIELDS_ANNOTATION] = "not json"
    assert adm.cluster_queue(stored, {}).fungibility.preference is BOP  # Kueue's default


@pytest.mark.parametrize(("field", "value", "supported"), [
    # In the order of Kueue's CRD enums (MayStopSearch is the newer name of Borrow and of Preempt).
    ("whenCanBorrow", "Preempt", '"MayStopSearch", "TryNextFlavor", "Borrow"'),
    ("whenCanPreempt", "Borrow", '"MayStopSearch", "TryNextFlavor", "Preempt"'),
])
def test_flavor_fungibility_refuses_other_values(field: str, value: str, supported: str) -> None:
    obj = {"apiVersion": kueue.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": "a"},
           "spec": {"flavorFungibility": {field: value}}}
    causes = check_model(obj, kueue.ClusterQueue).causes
    assert [(c.field, c.message) for c in causes] == [
        (f"spec.flavorFungibility.{field}", f'Unsupported value: "{value}": supported values: {supported}'),
    ]


def test_the_hub_defaults_flavor_fungibility_as_kueues_crd() -> None:
    assert CLUSTER_QUEUE.defaults is not None
    obj: dict[str, object] = {"spec": {"resourceGroups": []}}
    CLUSTER_QUEUE.defaults(obj)
    assert obj["spec"]["flavorFungibility"] == {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"}  # type: ignore[index]
    given: dict[str, object] = {"spec": {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor"}}}
    CLUSTER_QUEUE.defaults(given)
    assert given["spec"]["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}  # type: ignore[index]
    for hostile in ({"spec": None}, {"spec": {"flavorFungibility": "x"}}, {}):
        CLUSTER_QUEUE.defaults(hostile)  # left for validation to refuse
