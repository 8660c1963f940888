"""The admission core, table-driven: quota, cohort borrowing and lending (Kueue's documented
examples), flavor choice, queueing strategies and priority order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from controlplane.admission.core import (
    Admitted,
    ClusterQueue,
    Pending,
    PodSetRequest,
    QueueingStrategy,
    Quota,
    decide,
)
from tests.admission.builders import cluster_queue as cq

GPU = "nvidia.com/gpu"
CPU = "cpu"


def job(key: str, queue: str, gpus: int = 1, *, pods: int = 1, prio: int = 0, at: str = "", cpu: int = 0,
        selector: Mapping[str, str] | None = None) -> Pending:
    per_pod = {GPU: gpus} if not cpu else {GPU: gpus, CPU: cpu}
    return Pending(key, queue, (PodSetRequest("main", pods, per_pod, selector or {}),), prio, at or key)


@dataclass
class Case:
    queues: list[ClusterQueue]
    pending: list[Pending]
    admitted: dict[str, str]
    """key → the flavor of its GPUs."""
    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)
    """key → (reason, a part of the message)."""
    running: list[Admitted] = field(default_factory=list)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)


def team(name: str, nominal: int, *, borrow: int | None = None, lend: int | None = None, flavor: str = "onprem") -> ClusterQueue:
    return cq(name, {flavor: {GPU: Quota(nominal, borrow, lend)}}, cohort="team-ab")


CASES: dict[str, Case] = {
    "fits nominal quota": Case([cq("a", {"onprem": {GPU: 8}})], [job("j1", "a", 4), job("j2", "a", 4)], {"j1": "onprem", "j2": "onprem"}),
    "beyond quota waits with the unused-quota message": Case(
        [cq("a", {"onprem": {GPU: 8}})], [job("j1", "a", 6), job("j2", "a", 4)], {"j1": "onprem"},
        {"j2": ("Pending", f"insufficient unused quota for {GPU} in flavor onprem, 2 more needed")},
    ),
    "more than the queue could ever hold is inadmissible": Case(
        [cq("a", {"onprem": {GPU: 8}})], [job("big", "a", 4, pods=3)], {},
        {"big": ("Inadmissible", "request > maximum capacity (12 > 8)")},
    ),
    # Kueue prints the lack as its ResourceQuantity does: cpu in cores ("1500m", "2"), not millicores.
    "a cpu lack is shown as a quantity": Case(
        [cq("a", {"onprem": {GPU: 8, CPU: 4000}}), cq("b", {"onprem": {GPU: 8, CPU: 4000}})],
        [job("j1", "a", 1, cpu=2500), job("j2", "a", 1, cpu=3000), job("big", "b", 0, cpu=2500, pods=2)],
        {"j1": "onprem"},
        {"j2": ("Pending", "insufficient unused quota for cpu in flavor onprem, 1500m more needed"),
         "big": ("Inadmissible", "request > maximum capacity (5 > 4)")},
    ),
    "a resource no group covers is inadmissible": Case(
        [cq("a", {"onprem": {GPU: 8}})], [job("j", "a", 1, cpu=1000)], {},
        {"j": ("Inadmissible", "resource cpu unavailable in ClusterQueue")},
    ),
    "running workloads hold their usage": Case(
        [cq("a", {"onprem": {GPU: 8}})], [job("j", "a", 4)], {},
        {"j": ("Pending", "2 more needed")}, running=[Admitted("r", "a", {("onprem", GPU): 6})],
    ),
    # Kueue's docs (cluster_queue.md, "Borrowing"): an idle cohort member's quota is borrowed.
    "team A borrows team B's idle quota": Case(
        [team("a", 8), team("b", 8)], [job(f"a{i}", "a", 4) for i in range(3)],
        {"a0": "onprem", "a1": "onprem", "a2": "onprem"},
    ),
    # ... up to the borrowingLimit (docs: nominal 9, borrowingLimit 1 → at most 10).
    "borrowingLimit caps borrowing": Case(
        [team("a", 8, borrow=2), team("b", 8)], [job("a0", "a", 8, at="0"), job("a1", "a", 4, at="1"), job("a2", "a", 11, at="2")],
        {"a0": "onprem"},
        {"a1": ("Pending", "2 more needed"), "a2": ("Inadmissible", "request > maximum capacity (11 > 10)")},
    ),
    # ... and the lender's lendingLimit (docs: team-a lends at most 1 of its 9).
    "lendingLimit caps what others borrow": Case(
        [team("a", 8), team("b", 8, lend=2)], [job("a0", "a", 8), job("a1", "a", 2), job("a2", "a", 1)],
        {"a0": "onprem", "a1": "onprem"}, {"a2": ("Pending", "1 more needed")},
    ),
    "a lender's guaranteed part stays its own": Case(
        [team("a", 8), team("b", 8, lend=2)], [job("b0", "b", 6)], {"b0": "onprem"},
        running=[Admitted("a-big", "a", {("onprem", GPU): 10})],
    ),
    "the cohort's pool is shared by every borrower": Case(
        [team("a", 4), team("b", 4), team("c", 4)], [job("b0", "b", 6), job("c0", "c", 6)], {"b0": "onprem"},
        {"c0": ("Pending", "2 more needed")}, running=[Admitted("a0", "a", {("onprem", GPU): 2})],
    ),
    "no cohort, no borrowing": Case(
        [cq("a", {"onprem": {GPU: 8}}), cq("b", {"onprem": {GPU: 8}})], [job("a0", "a", 8), job("a1", "a", 1)], {"a0": "onprem"},
        {"a1": ("Pending", "1 more needed")},
    ),
    "the next flavor when the first is full": Case(
        [cq("a", {"onprem": {GPU: 4}, "cloud": {GPU: 4}})], [job("j1", "a", 3), job("j2", "a", 3)], {"j1": "onprem", "j2": "cloud"},
    ),
    "a flavor whose labels contradict the pods' node selector is skipped": Case(
        [cq("a", {"a100": {GPU: 4}, "h100": {GPU: 4}})],
        [job("j", "a", 2, selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})], {"j": "h100"},
        labels={"a100": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, "h100": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    ),
    "no flavor matches the node selector": Case(
        [cq("a", {"a100": {GPU: 4}})], [job("j", "a", 2, selector={"nvidia.com/gpu.product": "H100"})], {},
        {"j": ("Inadmissible", "flavor a100 doesn't match node affinity")},
        labels={"a100": {"nvidia.com/gpu.product": "A100"}},
    ),
    "Borrow (default) takes the first flavor even when it borrows": Case(
        [cq("a", {"onprem": {GPU: Quota(2)}, "cloud": {GPU: 4}}, cohort="ab"), cq("b", {"onprem": {GPU: 8}}, cohort="ab")],
        [job("j", "a", 3)], {"j": "onprem"},
    ),
    "TryNextFlavor prefers a later flavor that fits without borrowing": Case(
        [cq("a", {"onprem": {GPU: Quota(2)}, "cloud": {GPU: 4}}, cohort="ab", try_next=True),
         cq("b", {"onprem": {GPU: 8}}, cohort="ab")],
        [job("j", "a", 3)], {"j": "cloud"},
    ),
    "StrictFIFO: a head that does not fit blocks those behind it": Case(
        [cq("a", {"onprem": {GPU: 4}}, strategy=QueueingStrategy.STRICT_FIFO)],
        [job("big", "a", 6, at="1"), job("small", "a", 1, at="2")], {},
        {"big": ("Inadmissible", "6 > 4"), "small": ("Pending", "waiting behind big")},
    ),
    "BestEffortFIFO: a later workload that fits goes first": Case(
        [cq("a", {"onprem": {GPU: 4}})], [job("big", "a", 6, at="1"), job("small", "a", 1, at="2")], {"small": "onprem"},
        {"big": ("Inadmissible", "6 > 4")},
    ),
    "higher priority first, then older": Case(
        [cq("a", {"onprem": {GPU: 4}})],
        [job("old", "a", 4, at="1"), job("urgent", "a", 4, prio=100, at="3"), job("mid", "a", 4, at="2")], {"urgent": "onprem"},
        {"old": ("Pending", "4 more needed"), "mid": ("Pending", "4 more needed")},
    ),
    "a workload within nominal quota goes before one that must borrow": Case(
        [team("a", 4), team("b", 4)], [job("a-borrows", "a", 6, at="1"), job("b-own", "b", 4, at="2")], {"b-own": "onprem"},
        {"a-borrows": ("Pending", "2 more needed")},
    ),
    "an inactive queue admits nothing": Case(
        [cq("a", {"onprem": {GPU: 4}}, inactive="stopPolicy is Hold")], [job("j", "a", 1)], {},
        {"j": ("Inadmissible", "stopPolicy is Hold")},
    ),
    "a missing ClusterQueue": Case([], [job("j", "nope", 1)], {}, {"j": ("Inadmissible", "ClusterQueue nope doesn't exist")}),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_decide(case: Case) -> None:
    decisions = decide({q.name: q for q in case.queues}, case.pending, case.running, case.labels)
    assert {a.key: a.assignments[0].flavors[GPU] for a in decisions.admitted} == case.admitted
    got = {w.key: (w.reason, w.message) for w in decisions.waiting}
    assert set(got) == set(case.waiting)
    for key, (reason, part) in case.waiting.items():
        assert got[key][0] == reason, got[key]
        assert part in got[key][1], got[key]


def test_issue_scenario_team_b_gets_its_idle_share_back_as_quota_frees() -> None:
    """Two teams of 8 GPUs in a cohort: A's 12 GPUs admit (4 borrowed); B's 8 then get only the 4
    nobody borrows until A's borrowed Job finishes (no preemption policy: nothing is evicted)."""
    queues = {q.name: q for q in (team("a", 8), team("b", 8))}
    a_jobs = [job(f"a{i}", "a", 4, at=f"0{i}") for i in range(3)]
    first = decide(queues, a_jobs, [], {})
    assert [a.key for a in first.admitted] == ["a0", "a1", "a2"]
    assert [a.borrows for a in first.admitted] == [False, False, True]
    running = [Admitted(a.key, a.queue, a.usage()) for a in first.admitted]
    b_jobs = [job("b0", "b", 4, at="10"), job("b1", "b", 4, at="11")]
    second = decide(queues, b_jobs, running, {})
    assert [a.key for a in second.admitted] == ["b0"]
    assert [(w.key, w.position) for w in second.waiting] == [("b1", 0)]
    third = decide(queues, b_jobs[1:], [r for r in running if r.key != "a2"] + [Admitted("b0", "b", {("onprem", GPU): 4})], {})
    assert [a.key for a in third.admitted] == ["b1"]


def test_positions_count_only_the_workloads_still_waiting() -> None:
    queues = {"a": cq("a", {"onprem": {GPU: 2}})}
    decisions = decide(queues, [job(f"j{i}", "a", 1, at=str(i)) for i in range(5)], [], {})
    assert [a.key for a in decisions.admitted] == ["j0", "j1"]
    assert [(w.key, w.position) for w in decisions.waiting] == [("j2", 0), ("j3", 1), ("j4", 2)]


def test_pod_sets_of_one_workload_add_up() -> None:
    queues = {"a": cq("a", {"onprem": {GPU: 4}, "cloud": {GPU: 8}})}
    gang = Pending("g", "a", (PodSetRequest("launcher", 1, {GPU: 1}), PodSetRequest("worker", 2, {GPU: 2})))
    (admission,) = decide(queues, [gang], [], {}).admitted
    assert [(a.pod_set, a.flavors[GPU], a.usage[GPU]) for a in admission.assignments] == [
        ("launcher", "onprem", 1), ("worker", "cloud", 4),
    ]
    assert admission.usage() == {("onprem", GPU): 1, ("cloud", GPU): 4}
