"""client-go's workqueue metrics, as a scrape of the registry serves them: real reconcile loops
(real time, lower bounds only) and work queues on a clock the test moves (exact durations),
checked against client-go's rules: an add of a waiting key is the same item (neither counted
nor restarting its wait), an add while the key is processed is counted, a delayed key waits
from the end of its delay, every delayed add is a retry."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from controlplane.controllers.queueing import WorkQueue
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import BUCKETS, WorkqueueMetrics
from controlplane.exposition import go_value, render
from controlplane.objectclient import errors

SLOW = 0.3
"""Seconds the slow reconcile sleeps."""

Scrape = dict[tuple[str, str, str], float]


def scrape(registry: CollectorRegistry) -> Scrape:
    """(sample, queue name, le) -> value, parsed from the text ``/metrics`` would serve."""
    out: Scrape = {}
    for family in text_string_to_metric_families(render(registry).decode()):
        for sample in family.samples:
            out[(sample.name, sample.labels.get("name", ""), sample.labels.get("le", ""))] = sample.value
    return out


def value(scraped: Scrape, sample: str, queue: str, le: str = "") -> float:
    return scraped[(f"workqueue_{sample}", queue, le)]


def values(scraped: Scrape, queue: str, *samples: str) -> dict[str, float]:
    return {sample: value(scraped, sample, queue) for sample in samples}


def observed_above(scraped: Scrape, histogram: str, queue: str, bound: float) -> float:
    """Observations of ``histogram`` greater than ``bound`` (one of the bucket bounds)."""
    return value(scraped, f"{histogram}_count", queue) - value(scraped, f"{histogram}_bucket", queue, go_value(bound))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Clocked:
    """A queue named ``q`` on a clock the test moves, and the registry its series are in."""

    clock: Clock = field(default_factory=Clock)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.queue: WorkQueue[str] = WorkQueue(name="q", metrics=WorkqueueMetrics(self.registry), clock=self.clock)

    def scrape(self) -> Scrape:
        return scrape(self.registry)


async def run_until(loop: ReconcileLoop[str], done: asyncio.Event) -> None:
    running = asyncio.create_task(loop.run())
    try:
        await asyncio.wait_for(done.wait(), timeout=30)
    finally:
        await loop.shutdown()
        await asyncio.wait_for(running, timeout=10)


async def test_a_key_held_behind_a_slow_reconcile_waits_at_least_that_long() -> None:
    registry = CollectorRegistry()
    metrics = WorkqueueMetrics(registry)
    started, seen_running, finished = asyncio.Event(), asyncio.Event(), asyncio.Event()
    reconciled: list[str] = []

    async def reconcile(key: str) -> None:
        if key == "slow":
            started.set()
            await seen_running.wait()
            await asyncio.sleep(SLOW)
        reconciled.append(key)
        if len(reconciled) == 2:
            finished.set()

    loop = ReconcileLoop("demo", reconcile, workers=1, metrics=metrics)
    await loop.add("slow")
    await loop.add("behind")
    await loop.add("behind")  # waiting already: the same item
    before = scrape(registry)
    assert value(before, "adds_total", "demo") == 2
    assert value(before, "depth", "demo") == 2

    running = asyncio.create_task(run_until(loop, finished))
    await asyncio.wait_for(started.wait(), timeout=10)
    await asyncio.sleep(0.05)
    during = scrape(registry)
    seen_running.set()
    assert value(during, "depth", "demo") == 1  # "behind" waits; "slow" is being processed
    assert value(during, "longest_running_processor_seconds", "demo") >= 0.05
    assert value(during, "unfinished_work_seconds", "demo") >= 0.05
    await running

    after = scrape(registry)
    assert reconciled == ["slow", "behind"]
    assert value(after, "adds_total", "demo") == 2
    assert value(after, "depth", "demo") == 0
    assert value(after, "retries_total", "demo") == 0
    assert value(after, "queue_duration_seconds_count", "demo") == 2
    assert value(after, "work_duration_seconds_count", "demo") == 2
    # "behind" waited through the whole slow reconcile, which ran at least SLOW + 0.05.
    assert value(after, "queue_duration_seconds_sum", "demo") >= SLOW + 0.05
    assert observed_above(after, "queue_duration_seconds", "demo", 0.1) >= 1
    assert value(after, "work_duration_seconds_sum", "demo") >= SLOW + 0.05
    assert observed_above(after, "work_duration_seconds", "demo", 0.1) == 1
    assert value(after, "unfinished_work_seconds", "demo") == 0
    assert value(after, "longest_running_processor_seconds", "demo") == 0
    # client-go's buckets: 1 µs to 1,000 s, one bucket per decade, then +Inf, labelled as
    # kube-controller-manager's /metrics labels them.
    assert [le for (sample, name, le) in after if sample == "workqueue_work_duration_seconds_bucket"] == [
        "1e-06", "9.999999999999999e-06", "9.999999999999999e-05", "0.001", "0.01", "0.1", "1", "10", "100", "1000",
        "+Inf",
    ]
    assert len(BUCKETS) == 10 and BUCKETS[0] == 1e-6 and round(BUCKETS[-1]) == 1000


async def test_an_add_while_processing_counts_and_retries_count_every_delayed_add() -> None:
    registry = CollectorRegistry()
    metrics = WorkqueueMetrics(registry)
    attempts: list[str] = []
    finished = asyncio.Event()

    async def reconcile(key: str) -> float | None:
        attempts.append(key)
        if len(attempts) == 1:
            await loop.add(key)  # dirtied while processed: counted, processed again afterwards
            await loop.add(key)  # dirty already: not counted
            return None
        if len(attempts) == 2:
            raise errors.Conflict("lost a race")  # re-queued with backoff: a retry
        if len(attempts) == 3:
            return 0.01  # "look again in 10 ms": a retry too, as client-go's AddAfter counts it
        finished.set()
        return None

    loop = ReconcileLoop("again", reconcile, workers=2, metrics=metrics)
    await loop.add("k")
    await run_until(loop, finished)

    after = scrape(registry)
    assert attempts == ["k"] * 4
    # Added: the first time, when dirtied while processed, and as each retry's delay ended.
    assert values(after, "again", "adds_total", "retries_total", "queue_duration_seconds_count",
                  "work_duration_seconds_count", "depth") == {
        "adds_total": 4, "retries_total": 2, "queue_duration_seconds_count": 4, "work_duration_seconds_count": 4,
        "depth": 0,
    }


async def test_a_waiting_key_counts_from_its_first_add() -> None:
    clocked = Clocked()
    clock, queue = clocked.clock, clocked.queue
    await queue.add("k")
    clock.now += 3
    await queue.add("k")
    await queue.add("k", priority=5)  # moves it up: still the same item
    clock.now += 1
    assert value(clocked.scrape(), "depth", "q") == 1
    assert await queue.get() == "k"
    clock.now += 2
    during = clocked.scrape()
    assert value(during, "longest_running_processor_seconds", "q") == 2
    await queue.done("k")

    assert values(clocked.scrape(), "q", "adds_total", "queue_duration_seconds_sum", "work_duration_seconds_sum",
                  "depth") == {"adds_total": 1, "queue_duration_seconds_sum": 4, "work_duration_seconds_sum": 2, "depth": 0}


async def test_a_delayed_key_waits_from_the_end_of_its_delay() -> None:
    clocked = Clocked()
    clock, queue = clocked.clock, clocked.queue
    await queue.add_after("k", 5)
    clock.now += 4
    waiting = clocked.scrape()
    assert value(waiting, "retries_total", "q") == 1
    assert value(waiting, "adds_total", "q") == 0  # not added before its delay ends
    clock.now += 8  # due 7 s ago
    assert await queue.get() == "k"

    after = clocked.scrape()
    assert value(after, "adds_total", "q") == 1
    assert value(after, "queue_duration_seconds_sum", "q") == 7


async def test_work_in_progress_is_summed_and_the_longest_reported() -> None:
    clocked = Clocked()
    clock, queue = clocked.clock, clocked.queue
    for key in ("a", "b", "c"):
        await queue.add(key)
    assert await queue.get() == "a"
    clock.now += 1
    assert await queue.get() == "b"
    clock.now += 3

    scraped = clocked.scrape()
    assert value(scraped, "unfinished_work_seconds", "q") == 4 + 3
    assert value(scraped, "longest_running_processor_seconds", "q") == 4
    assert value(scraped, "depth", "q") == 1


async def test_a_later_queue_of_the_name_carries_on_its_counts_and_a_stopped_one_shows_no_depth() -> None:
    registry = CollectorRegistry()
    metrics = WorkqueueMetrics(registry)
    first: WorkQueue[str] = WorkQueue(name="term", metrics=metrics)
    await first.add("left behind")
    assert value(scrape(registry), "depth", "term") == 1
    await first.shutdown()  # leadership lost with a key still queued
    assert value(scrape(registry), "depth", "term") == 0

    second: WorkQueue[str] = WorkQueue(name="term", metrics=metrics)
    await second.add("new")
    scraped = scrape(registry)
    assert value(scraped, "adds_total", "term") == 2
    assert value(scraped, "depth", "term") == 1
    await first.add("ignored")  # a shut-down queue takes nothing
    assert value(scrape(registry), "adds_total", "term") == 2


async def test_the_queues_of_an_ended_term_show_no_depth_even_if_never_run_or_shut_down() -> None:
    """A leader's term can be cancelled while a controller still waits for its caches: its loop
    never ran, so it never shut its queue down. The hub then detaches every queue at once."""
    registry = CollectorRegistry()
    metrics = WorkqueueMetrics(registry)
    loop: ReconcileLoop[str] = ReconcileLoop("never-ran", lambda key: asyncio.sleep(0), metrics=metrics)
    for key in ("a", "b"):
        await loop.add(key)
    assert value(scrape(registry), "depth", "never-ran") == 2
    metrics.detach_all()
    scraped = scrape(registry)
    assert value(scraped, "depth", "never-ran") == 0 and value(scraped, "adds_total", "never-ran") == 2


async def test_an_unnamed_queue_reports_nothing() -> None:
    registry = CollectorRegistry()
    queue: WorkQueue[str] = WorkQueue(metrics=WorkqueueMetrics(registry))
    await queue.add("k")
    assert not [key for key in scrape(registry) if key[0].startswith("workqueue_")]


async def test_the_longest_wait_is_the_oldest_key_still_waiting_in_any_running_queue() -> None:
    """How far behind the controllers are: the key that has waited longest for a worker, over
    every queue attached; a key taken, or a queue stopped, no longer counts."""
    clock = Clock()
    metrics = WorkqueueMetrics(CollectorRegistry())
    first: WorkQueue[str] = WorkQueue(name="first", metrics=metrics, clock=clock)
    second: WorkQueue[str] = WorkQueue(name="second", metrics=metrics, clock=clock)
    assert metrics.longest_wait() == 0
    await first.add("a")
    clock.now += 2
    await first.add("b")
    await second.add("c")
    clock.now += 3
    await first.add("a")  # still the same item: its wait goes on from its first add
    assert (first.longest_wait(), second.longest_wait(), metrics.longest_wait()) == (5, 3, 5)
    assert await first.get() == "a"
    assert metrics.longest_wait() == 3  # "b" and "c", added 3 s ago
    await first.add("a")  # dirty while being processed: it waits from now
    clock.now += 1
    assert first.longest_wait() == 4
    await second.shutdown()
    assert await first.get() == "b"
    assert metrics.longest_wait() == 1  # "a", waiting for its worker to finish
    await first.done("a")
    assert await first.get() == "a"
    assert metrics.longest_wait() == 0
