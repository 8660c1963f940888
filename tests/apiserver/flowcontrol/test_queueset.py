"""Fair queuing by virtual time, as kube's queueset does it (fairqueuing/queueset): the queue whose
oldest request would finish earliest in virtual time is served next, requests of several seats, the
estimated service time of 3 ms and the time actually taken, and the final seats a write keeps for its
additional latency. Driven by a simulated clock, no sleeping."""

from __future__ import annotations

import heapq

import pytest

from controlplane.apiserver.flowcontrol.estimating import WorkEstimate
from controlplane.apiserver.flowcontrol.queueing import (
    ESTIMATED_SERVICE_SECONDS,
    FairQueues,
    LevelLimits,
    Outcome,
    deal,
    flow_hash,
)


def _queue_of(flow: str, queues: int) -> int:
    return deal(flow_hash("s", flow), deck_size=queues, hand_size=1)[0]


def _flows(count: int, queues: int) -> list[str]:
    """``count`` flows whose requests land in distinct queues (hand size 1)."""
    found: dict[int, str] = {}
    for n in range(1000):
        found.setdefault(_queue_of(f"user-{n}", queues), f"user-{n}")
        if len(found) == count:
            return list(found.values())
    raise AssertionError("no distinct queues found")


class Simulation:
    """A level whose requests each run a given number of seconds of a simulated clock."""

    def __init__(self, limits: LevelLimits) -> None:
        self.now = 0.0
        self.order: list[str] = []
        self._ends: list[tuple[float, int, str]] = []
        self._durations: dict[str, float] = {}
        self._n = 0
        self.level: FairQueues[str] = FairQueues(limits, wake=self._started)

    def _started(self, item: str) -> None:
        self.order.append(item)
        self._n += 1
        heapq.heappush(self._ends, (self.now + self._durations[item], self._n, item))

    def offer(self, flow: str, item: str, *, seats: int = 1, seconds: float = 3.0,
              estimate: WorkEstimate | None = None) -> Outcome:
        self._durations[item] = seconds
        estimate = estimate or WorkEstimate(seats)
        outcome = self.level.offer(flow_hash("s", flow), item, now=self.now, estimate=estimate)
        if outcome is Outcome.EXECUTE:
            self._started(item)
        return outcome

    def run(self, until: float = float("inf")) -> None:
        while self._ends and self._ends[0][0] <= until:
            self.now, _, item = heapq.heappop(self._ends)
            if item.startswith("release:"):
                self.level.release(item.removeprefix("release:"), now=self.now)
                continue
            lingering = self.level.finish(item, now=self.now)
            if lingering > 0:
                self._n += 1
                heapq.heappush(self._ends, (self.now + lingering, self._n, f"release:{item}"))
        self.now = max(self.now, until) if until != float("inf") else self.now


@pytest.mark.parametrize(
    "waiting",
    [
        {0: 5, 1: 1, 2: 2},
        {0: 1, 1: 6},
        {0: 3, 1: 3, 2: 3, 3: 3},
    ],
)
def test_equal_requests_are_served_in_turns_across_flows(waiting: dict[int, int]) -> None:
    *flows, holder = _flows(len(waiting) + 1, 64)
    sim = Simulation(LevelLimits(1, 64, 50))
    assert sim.offer(holder, "holder") is Outcome.EXECUTE
    for flow, count in waiting.items():
        for n in range(count):
            assert sim.offer(flows[flow], f"{flow}/{n}") is Outcome.QUEUED
    sim.run()
    assert (sim.level.executing, sim.level.waiting, sim.level.seats_in_use) == (0, 0, 0)
    # All queues start at the same virtual time: each round serves every flow still waiting once,
    # ties in queue order from the queue after the last one served (the holder's first).
    served = [tuple(map(int, item.split("/"))) for item in sim.order[1:]]
    after = _queue_of(holder, 64) + 1
    order = sorted(waiting, key=lambda f: (_queue_of(flows[f], 64) - after) % 64)
    assert served == [(f, n) for n in range(max(waiting.values())) for f in order if waiting[f] > n]


@pytest.mark.parametrize(("wide", "narrow"), [(2, 1), (3, 1), (4, 2)])
def test_flows_get_equal_seat_seconds_whatever_their_width(wide: int, narrow: int) -> None:
    a, b = _flows(2, 8)
    sim = Simulation(LevelLimits(4, 8, 100))
    assert sim.offer("holder", "holder", seats=4) is Outcome.EXECUTE
    for n in range(12):  # more than either flow can run in the time: both always have some waiting
        sim.offer(a, f"a{n}", seats=wide)
    for n in range(40):
        sim.offer(b, f"b{n}", seats=narrow)
    sim.run(until=30)
    seats = {"a": 0, "b": 0}
    for item in sim.order[1:]:
        seats[item[0]] += wide if item[0] == "a" else narrow
        # By request count (round robin) the wide flow would get ``wide / narrow`` times the seats;
        # by seat-seconds the two stay within a couple of wide requests (a queue's virtual time
        # moves by the time its requests took when they finish, as in kube).
        assert abs(seats["a"] - seats["b"]) <= 2 * wide
    assert seats["b"] >= wide * 3


def test_a_flow_whose_requests_finish_early_gets_more_turns() -> None:
    quick, slow = _flows(2, 8)
    sim = Simulation(LevelLimits(1, 8, 100))
    for n in range(100):
        sim.offer(quick, f"q{n}", seconds=0.3)
    for n in range(20):
        sim.offer(slow, f"s{n}", seconds=3.0)
    sim.run(until=30)
    served = "".join(item[0] for item in sim.order)
    # Each request moves its queue by the seat-seconds it took (less the estimated 3 ms): over the
    # same time, the slow flow runs as long as the quick one, not as many requests.
    assert served.count("q") >= 4 * served.count("s")
    assert served.count("s") >= 4


def test_the_virtual_clock_runs_at_the_seats_used_per_active_queue() -> None:
    a, b = _flows(2, 8)
    level: FairQueues[str] = FairQueues(LevelLimits(4, 8, 10))
    level.offer(flow_hash("s", a), "a0", now=0)
    level.offer(flow_hash("s", b), "b0", now=0)
    # Two queues active, two seats in use: R advances one seat-second per second.
    level.offer(flow_hash("s", a), "a1", now=10, estimate=WorkEstimate(3))  # waits: 2 + 3 seats > 4
    assert level.virtual_time == pytest.approx(10)
    # Now five seats are asked for, four is the level's limit: 4 / 2 per second.
    level.finish("b0", now=11)  # a1 starts (1 + 3 seats), b's queue is idle: one queue active
    assert level.virtual_time == pytest.approx(12)
    level.finish("a0", now=13)  # 4 seats asked by a1 in the one active queue: 4 per second
    assert level.virtual_time == pytest.approx(20)


def test_the_oldest_request_of_the_next_queue_waits_for_its_seats() -> None:
    a, b, c = _flows(3, 8)
    sim = Simulation(LevelLimits(2, 8, 10))
    assert sim.offer(a, "holder", seconds=10) is Outcome.EXECUTE
    sim.now = 1
    assert sim.offer(b, "wide", seats=2) is Outcome.QUEUED
    sim.now = 2
    # One seat is free, yet a narrow request queued later waits behind the wide one (kube does
    # not let it jump the queue with the earlier virtual time).
    assert sim.offer(c, "narrow") is Outcome.QUEUED
    sim.run(until=10)
    assert sim.order == ["holder", "wide"]
    sim.run()
    assert sim.order == ["holder", "wide", "narrow"]


def test_a_request_wider_than_the_level_runs_alone() -> None:
    a, b = _flows(2, 8)
    sim = Simulation(LevelLimits(2, 8, 10))
    assert sim.offer(a, "small") is Outcome.EXECUTE
    assert sim.offer(b, "huge", seats=5) is Outcome.QUEUED
    sim.run(until=3)
    assert sim.order == ["small", "huge"] and sim.level.seats_in_use == 5
    sim.now = 3.5
    assert sim.offer(a, "next") is Outcome.QUEUED  # a free seat of two, yet the huge one runs alone
    sim.run()
    assert sim.order == ["small", "huge", "next"]


def test_the_queue_length_limit_applies_once_all_seats_are_taken() -> None:
    a, b = _flows(2, 8)
    level: FairQueues[str] = FairQueues(LevelLimits(2, 8, 1))
    assert level.offer(flow_hash("s", a), "one", now=0) is Outcome.EXECUTE
    assert level.offer(flow_hash("s", b), "wide", now=0, estimate=WorkEstimate(2)) is Outcome.QUEUED
    # A seat is still free (kube's rejectOrEnqueueToBoundLocked): the full queue takes one more.
    assert level.offer(flow_hash("s", b), "two", now=0) is Outcome.QUEUED
    level.finish("one", now=1)  # wide starts: both seats taken
    assert level.offer(flow_hash("s", b), "three", now=1) is Outcome.QUEUE_FULL
    assert (level.rejected, level.waiting, level.dispatched) == (1, 1, 2)


def test_a_reject_level_takes_width_into_account() -> None:
    level: FairQueues[str] = FairQueues(LevelLimits(3, 1, 0))
    assert level.offer(1, "a", now=0, estimate=WorkEstimate(2)) is Outcome.EXECUTE
    assert level.offer(1, "b", now=0, estimate=WorkEstimate(2)) is Outcome.CONCURRENCY_LIMIT
    assert level.offer(1, "c", now=0) is Outcome.EXECUTE
    level.finish("a", now=1)
    assert level.offer(1, "d", now=1, estimate=WorkEstimate(2)) is Outcome.EXECUTE


def test_a_write_keeps_its_final_seats_for_its_additional_latency() -> None:
    a, b = _flows(2, 8)
    sim = Simulation(LevelLimits(2, 8, 10))
    # 20 watches: one seat while it runs, two kept 5 ms after it (kube holds the most of both throughout).
    write = WorkEstimate(1, 2, 0.005)
    assert sim.offer(a, "write", estimate=write, seconds=1.0) is Outcome.EXECUTE
    assert sim.level.seats_in_use == 2
    assert sim.offer(b, "next") is Outcome.QUEUED
    sim.run(until=1.004)
    # Answered at 1 s: no longer executing (nor in the dump), its two seats still taken.
    assert (sim.level.executing, sim.level.seats_in_use, sim.order) == (0, 2, ["write"])
    assert sim.level.executing_requests() == {}
    sim.run(until=1.006)  # released at 1.005: the next request gets its seat
    assert sim.order == ["write", "next"] and sim.level.seats_in_use == 1


def test_a_queue_moves_by_the_work_dispatched_and_the_time_taken() -> None:
    (a,) = _flows(1, 8)
    level: FairQueues[str] = FairQueues(LevelLimits(4, 8, 10))
    queue = level.queues[_queue_of(a, 8)]
    assert level.offer(flow_hash("s", a), "w", now=0, estimate=WorkEstimate(2, 3, 0.01)) is Outcome.EXECUTE
    # kube's totalWork: 2 seats x 3 ms, plus 3 final seats x 10 ms.
    assert queue.next_dispatch_r == pytest.approx(2 * ESTIMATED_SERVICE_SECONDS + 3 * 0.01)
    assert level.finish("w", now=0.5) == pytest.approx(0.01)
    # Served in 0.5 s instead of 3 ms: the queue moves by its 2 initial seats x (0.5 s - 3 ms).
    assert queue.next_dispatch_r == pytest.approx(0.036 + 2 * (0.5 - 0.003))
    level.release("w", now=0.51)
    assert (level.seats_in_use, level.requests) == (0, {})


def test_final_seats_beyond_the_level_are_reshaped_to_its_seats() -> None:
    a, b = _flows(2, 8)
    level: FairQueues[str] = FairQueues(LevelLimits(4, 8, 10))
    assert level.offer(flow_hash("s", a), "first", now=0) is Outcome.EXECUTE
    # 15 final seats of 5 ms (150 watches), more than the level's 4: queued, then 4 seats for 18.75 ms.
    assert level.offer(flow_hash("s", b), "wide", now=0, estimate=WorkEstimate(1, 15, 0.005)) is Outcome.QUEUED
    level.finish("first", now=1)
    wide = level.requests["wide"]
    assert wide.running and (wide.estimate.final_seats, level.seats_in_use) == (4, 4)
    assert wide.estimate.additional_latency == pytest.approx(15 * 0.005 / 4)
    assert level.finish("wide", now=2) == pytest.approx(0.01875)


def test_the_queue_whose_oldest_request_finishes_first_is_served() -> None:
    a, b, holder = _flows(3, 8)
    sim = Simulation(LevelLimits(10, 8, 10))
    assert sim.offer(holder, "holder", seats=10, seconds=1) is Outcome.EXECUTE
    # Both queues start at the same virtual time; a's oldest request is 10 seats wide (30 ms of
    # work), b's one seat (3 ms): b's finishes first in virtual time, whichever queue comes first.
    assert sim.offer(a, "a-wide", seats=10) is Outcome.QUEUED
    assert sim.offer(b, "b-narrow", seconds=5) is Outcome.QUEUED
    sim.run(until=1)
    assert sim.order == ["holder", "b-narrow"]


def test_a_level_with_no_seats_serves_nothing_from_its_queues() -> None:
    """kube's dispatchAsMuchAsPossibleLocked serves the queues only while fewer seats than the
    limit are in use: a level whose current limit is 0 (all its seats lent) runs no request, not
    even one alone; its requests wait for seats, or their wait runs out."""
    woken: list[str] = []
    level: FairQueues[str] = FairQueues(LevelLimits(2, 8, 10), wake=woken.append)
    level.set_concurrency(0, now=0)
    assert level.offer(flow_hash("s", "a"), "first", now=0) is Outcome.QUEUED
    assert level.offer(flow_hash("s", "b"), "second", now=0) is Outcome.QUEUED
    assert (level.executing, level.waiting) == (0, 2)
    assert level.withdraw("second", now=15)  # its wait ran out
    level.set_concurrency(1, now=16)  # the next adjustment gives it a seat
    assert woken == ["first"] and level.executing == 1


def test_a_level_without_queues_still_runs_one_request_alone_with_no_seats() -> None:
    """kube's dispatchSansQueue asks canAccommodateSeats only: with nothing running, a request wider
    than the limit (any, at 0) runs."""
    level: FairQueues[str] = FairQueues(LevelLimits(2, 1, 0))
    level.set_concurrency(0, now=0)
    assert level.offer(1, "alone", now=0) is Outcome.EXECUTE
    assert level.offer(1, "next", now=0) is Outcome.CONCURRENCY_LIMIT


def test_a_wide_request_waits_for_the_seats_a_finished_write_keeps() -> None:
    """Nothing runs, but a served write keeps its final seats for its additional latency: a request
    wider than the level waits until fewer seats than the limit are in use (kube)."""
    woken: list[str] = []
    level: FairQueues[str] = FairQueues(LevelLimits(2, 8, 10), wake=woken.append)
    write = WorkEstimate(1, 2, 1.0)
    assert level.offer(flow_hash("s", "a"), "write", now=0, estimate=write) is Outcome.EXECUTE
    assert level.finish("write", now=0.1) == 1.0  # keeps its 2 seats for 1 s
    assert level.executing == 0 and level.seats_in_use == 2
    assert level.offer(flow_hash("s", "b"), "wide", now=0.2, estimate=WorkEstimate(4)) is Outcome.QUEUED
    level.release("write", now=1.1)
    assert woken == ["wide"] and level.seats_in_use == 4
