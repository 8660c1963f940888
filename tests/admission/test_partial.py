"""Kueue's partial admission in the admission core, table-driven: the reducer's search, and the
cycle admitting fewer pods (down to ``minCount``) only when the full count neither fits nor may
preempt (Kueue's ``getInitialAssignments``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controlplane.admission.core import (
    Admitted,
    Pending,
    PodSetRequest,
    Preemption,
    PreemptionPolicy,
    Quota,
    decide,
    partial,
)
from controlplane.admission.core.quota import ClusterQueue
from tests.admission.builders import cluster_queue as cq

GPU = "nvidia.com/gpu"
FR = ("onprem", GPU)


@pytest.mark.parametrize(("bounds", "limit", "want", "probes"), [
    # One pod set: the largest count that fits, at most log2(slack) + 1 probes.
    ([(4, 2)], 3, (3,), 2),
    ([(4, 2)], 2, (2,), 2),
    ([(4, 2)], 1, None, 2),
    ([(100, 1)], 57, (57,), 7),
    # Two pod sets share the reduction in proportion to their slack (10 and 2 of 12), rounded
    # down per pod set as Kueue does: 5 of 12 cuts 4 and 0 pods (10 > 9), 6 of 12 cuts 5 and 1.
    ([(10, 0), (4, 2)], 9, (5, 3), None),
    # No usable minCount: nothing to search.
    ([(4, None)], 3, None, 0),
    ([(4, 4)], 3, None, 0),
])
def test_reducer_finds_the_largest_counts_that_fit(
    bounds: list[partial.Bounds], limit: int, want: tuple[int, ...] | None, probes: int | None,
) -> None:
    calls: list[tuple[int, ...]] = []

    def fits(counts: tuple[int, ...]) -> tuple[int, ...] | None:
        calls.append(counts)
        return counts if sum(counts) <= limit else None

    assert partial.reduce(bounds, fits) == want
    assert all(sum(c) != sum(b for b, _ in bounds) for c in calls), "the full counts were tried before"
    if probes is not None:
        assert len(calls) <= probes


def job(key: str, queue: str, pods: int, min_count: int | None = None, *, gpus: int = 1, prio: int = 0, at: str = "") -> Pending:
    return Pending(key, queue, (PodSetRequest("main", pods, {GPU: gpus}, {}, min_count),), prio, at or key)


def preempting(name: str, nominal: int) -> ClusterQueue:
    q = cq(name, {"onprem": {GPU: nominal}})
    return ClusterQueue(q.name, q.groups, preemption=Preemption(within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY))


@dataclass
class Case:
    queues: list[ClusterQueue]
    pending: list[Pending]
    counts: dict[str, int]
    """key → the pods admitted."""
    waiting: list[str] = field(default_factory=list)
    running: list[Admitted] = field(default_factory=list)
    preempts: dict[str, set[str]] = field(default_factory=dict)
    """preemptor → the keys it evicts."""


CASES: dict[str, Case] = {
    "fits at the full count: no reduction": Case([cq("a", {"onprem": {GPU: 8}})], [job("j", "a", 4, 2)], {"j": 4}),
    "admitted with fewer pods, the most that fit": Case([cq("a", {"onprem": {GPU: 3}})], [job("j", "a", 4, 2)], {"j": 3}),
    "down to minCount and no further": Case(
        [cq("a", {"onprem": {GPU: 3}})], [job("j", "a", 4, 2, gpus=2)], {}, waiting=["j"],
    ),
    "without minCount it waits": Case([cq("a", {"onprem": {GPU: 3}})], [job("j", "a", 4)], {}, waiting=["j"]),
    "more than the queue could ever hold, fewer pods fit": Case([cq("a", {"onprem": {GPU: 3}})], [job("j", "a", 10, 1)], {"j": 3}),
    "the rest of the quota after earlier admissions": Case(
        [cq("a", {"onprem": {GPU: 8}})], [job("first", "a", 5, at="1"), job("second", "a", 6, 2, at="2")],
        {"first": 5, "second": 3},
    ),
    "borrowing from the cohort counts as fitting": Case(
        [cq("a", {"onprem": {GPU: Quota(2)}}, cohort="c"), cq("b", {"onprem": {GPU: Quota(2)}}, cohort="c")],
        [job("j", "a", 6, 1)], {"j": 4},
    ),
    "preemption for the full count comes first": Case(
        [preempting("a", 4)], [job("high", "a", 4, 1, prio=10)], {},
        running=[Admitted("low", "a", {FR: 2}, -1, "0", "0")], waiting=["high"], preempts={"high": {"low"}},
    ),
    "no preemption target for the full count: fewer pods fit": Case(
        [preempting("a", 4)], [job("j", "a", 4, 1)], {"j": 2},
        running=[Admitted("peer", "a", {FR: 2}, 0, "0", "0")],
    ),
    "fewer pods may preempt what the full count could not": Case(
        [preempting("a", 4)], [job("j", "a", 4, 1)], {},
        running=[Admitted("low", "a", {FR: 2}, -1, "0", "0"), Admitted("peer", "a", {FR: 2}, 0, "0", "0")],
        waiting=["j"], preempts={"j": {"low"}},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_partial_admission_in_the_cycle(name: str) -> None:
    case = CASES[name]
    decisions = decide({q.name: q for q in case.queues}, case.pending, case.running, {})
    admitted = {d.key: d for d in decisions.admitted}
    assert {k: d.assignments[0].count for k, d in admitted.items()} == case.counts
    per_pod = {p.key: p.pod_sets[0].per_pod[GPU] for p in case.pending}
    for key, d in admitted.items():
        assert d.usage() == {FR: case.counts[key] * per_pod[key]}, "the quota taken is the admitted count's"
    assert sorted(w.key for w in decisions.waiting) == sorted(case.waiting)
    assert {p.key: {t.key for t in p.targets} for p in decisions.preempting} == case.preempts


def test_a_waiting_workload_keeps_the_full_counts_message() -> None:
    running = [Admitted("other", "a", {FR: 3})]
    decisions = decide({"a": cq("a", {"onprem": {GPU: 4}})}, [job("j", "a", 4, 2)], running, {})
    assert decisions.waiting[0].message.endswith(f"insufficient unused quota for {GPU} in flavor onprem, 3 more needed")
