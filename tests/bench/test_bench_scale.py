"""The scale benchmark's pure parts: histogram quantiles from /metrics text, the work queues'
summary between two scrapes, and naming what ran out."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bench.bench_scale import (
    Timeline,
    Tracker,
    bottleneck,
    bucket_delta,
    histogram,
    histogram_quantile,
    spread,
    tail,
    workqueue_summary,
)
from bench.common import CpuMeter
from controlplane.controllers.queueing import WorkQueue
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics

METRICS = """\
# HELP gpufed_scheduling_duration_seconds one decision
# TYPE gpufed_scheduling_duration_seconds histogram
gpufed_scheduling_duration_seconds_bucket{le="0.01",result="scheduled"} 50.0
gpufed_scheduling_duration_seconds_bucket{le="0.02",result="scheduled"} 90.0
gpufed_scheduling_duration_seconds_bucket{le="+Inf",result="scheduled"} 100.0
gpufed_scheduling_duration_seconds_count{result="scheduled"} 100.0
gpufed_scheduling_duration_seconds_sum{result="scheduled"} 1.0
gpufed_scheduling_duration_seconds_bucket{le="0.01",result="unschedulable"} 0.0
gpufed_scheduling_duration_seconds_bucket{le="0.02",result="unschedulable"} 0.0
gpufed_scheduling_duration_seconds_bucket{le="+Inf",result="unschedulable"} 0.0
"""


def test_quantiles_interpolate_within_buckets_as_promql_does() -> None:
    buckets = histogram(METRICS, "gpufed_scheduling_duration_seconds")
    assert buckets == {0.01: 50.0, 0.02: 90.0, float("inf"): 100.0}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.01)
    assert histogram_quantile(0.7, buckets) == pytest.approx(0.015)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.02)  # in +Inf: the last finite bound
    assert histogram_quantile(0.5, bucket_delta(buckets, buckets)) is None
    kept = histogram(METRICS, "gpufed_scheduling_duration_seconds", lambda labels: labels["result"] == "unschedulable")
    assert histogram_quantile(0.5, kept) is None


def test_the_bottleneck_names_the_resource_that_ran_out() -> None:
    plenty = {"MemTotal": 16 * 2**30, "MemAvailable": 8 * 2**30}
    cpu = {"hub": 10.0, "fleet": 6.0, "etcd": 2.0}
    assert bottleneck(cpu, 10.0, cores=2, machine_busy=1.95, memory=plenty).startswith("CPU: 1.95 of 2 cores busy, 1.80")
    # The hub kept one core busy (its event loop can use no other) while the machine had cores to spare.
    one_loop = bottleneck(cpu, 10.0, cores=8, machine_busy=2.0, memory=plenty)
    assert one_loop.startswith("one core: the hub's (1.00 cores) event loop"), one_loop
    assert bottleneck({"hub": 5.0, "fleet": 6.0, "etcd": 9.0}, 10.0, cores=8, machine_busy=2.0,
                      memory=plenty).startswith("neither CPU")  # etcd is not one loop
    low = {"MemTotal": 16 * 2**30, "MemAvailable": 2**30}
    assert bottleneck(cpu, 10.0, cores=8, machine_busy=2.0, memory=low).startswith("memory: 1.0 of 16.0 GiB")


def test_the_bottleneck_names_a_loop_that_ran_out_of_its_core_in_part_of_the_run() -> None:
    """Over the whole window the fleet averaged half a core, but it kept its one core busy in 3 of
    10 intervals (a backlog built then delays the rest): named, with its busiest interval."""
    plenty = {"MemTotal": 16 * 2**30, "MemAvailable": 8 * 2**30}
    timeline = Timeline(CpuMeter({}))
    timeline.cores = [{"hub": 0.5, "fleet": 0.98 if i in (4, 5, 6) else 0.3, "machine": 1.4} for i in range(10)]
    verdict = bottleneck({"hub": 5.0, "fleet": 5.0, "etcd": 2.0}, 10.0, cores=2, machine_busy=1.4, memory=plenty,
                         timeline=timeline)
    assert verdict.startswith("one core, in part of the run: the fleet's in 3 of 10 intervals of 10 s (up to 0.98 cores)"), verdict
    timeline.cores = timeline.cores[:1] * 10  # the fleet never saturated: nothing to name
    assert bottleneck({"hub": 5.0, "fleet": 5.0}, 10.0, cores=2, machine_busy=1.4, memory=plenty,
                      timeline=timeline).startswith("neither CPU")


async def test_the_workqueue_summary_covers_the_window_between_two_scrapes() -> None:
    """Real queues on a clock the test moves feed the hub's workqueue series; the summary counts
    only what happened between the scrapes and puts the longest queue wait first."""
    now = [0.0]
    registry = CollectorRegistry()
    metrics = WorkqueueMetrics(registry)
    slow: WorkQueue[int] = WorkQueue(name="status", metrics=metrics, clock=lambda: now[0])
    fast: WorkQueue[int] = WorkQueue(name="scheduler", metrics=metrics, clock=lambda: now[0])
    WorkQueue[int](name="idle", metrics=metrics, clock=lambda: now[0])

    async def take(queue: WorkQueue[int], key: int, *, wait: float) -> None:
        await queue.add(key)
        now[0] += wait
        assert await queue.get() == key
        await queue.done(key)

    await take(slow, 0, wait=0.5)  # before the window: left out
    before = generate_latest(registry).decode()
    for key in range(3):
        await take(slow, key, wait=2.0)
    await slow.add_after(9, 60.0)  # a retry, not taken yet
    await take(fast, 1, wait=0.002)
    summary = workqueue_summary(before, generate_latest(registry).decode())

    assert list(summary) == ["status", "scheduler"]
    assert summary["status"]["adds"] == 3 and summary["status"]["taken"] == 3 and summary["status"]["retries"] == 1
    assert 1000 < summary["status"]["queue_wait_p50_ms"] <= summary["status"]["queue_wait_p99_ms"] <= 10_000
    assert summary["status"]["work_p99_ms"] <= 0.001  # done at once on the test's clock
    assert 1 < summary["scheduler"]["queue_wait_p99_ms"] <= 10
    assert summary["scheduler"]["adds"] == 1 and summary["scheduler"]["retries"] == 0


def test_a_workloads_agent_stages_are_those_of_the_last_of_its_works() -> None:
    """A workload divided over two clusters has a Work of the same name in each cluster's
    namespace: its stage is reached when the later of the two reaches it."""
    tracker = Tracker(applied={"w": 0.0}, expected=1)

    def work(namespace: str, *, ready: bool) -> dict[str, Any]:
        status: dict[str, Any] = {"conditions": [{"type": "Applied", "status": "True"}]}
        if ready:
            status["manifestStatuses"] = [{"identifier": {"name": "w"}, "status": {"replicas": 1, "readyReplicas": 1}}]
        return {"metadata": {"name": "bench-w", "namespace": namespace},
                "spec": {"workload": {"manifests": [{"metadata": {"name": "w"}}]}}, "status": status}

    tracker.saw_work(work("gpufed-es-a", ready=True), 1.0)
    tracker.saw_work(work("gpufed-es-b", ready=False), 2.0)
    tracker.saw_work(work("gpufed-es-b", ready=True), 3.0)
    tracker.saw_work(work("gpufed-es-a", ready=True), 4.0)  # seen again: no stage is reached anew
    assert tracker.works == {"w": 1.0}
    assert tracker.stages == {"Work applied (agent)": {"w": 2.0}, "Work reports replicas ready (agent)": {"w": 3.0}}


def test_the_tail_names_the_slowest_workloads_and_the_intervals_they_were_applied_in() -> None:
    """The slowest workloads come with their stages as seconds after their apply, and the p99 by
    the interval of their apply shows whether the tail gathers in a few intervals."""
    applied = {f"w{i}": float(i) for i in range(100)}
    running = {name: at + (5.0 if name in ("w40", "w41") else 0.2) for name, at in applied.items()}
    tracker = Tracker(applied=applied, running=running, works={"w40": 40.5}, expected=100)
    tracker.stages["Work applied (agent)"]["w40"] = 43.0

    found = tail(tracker, share=0.02, interval=30.0)

    assert [row["name"] for row in found["slowest"]] == ["w41", "w40"]
    assert found["slowest"][1] == {"name": "w40", "applied_at_s": 40.0, "running_s": 5.0, "works_s": 0.5,
                                   "Work applied (agent)": 3.0}
    assert [(i["from_s"], i["count"], i["over_1s"]) for i in found["running_p99_by_interval"]] == [
        (0.0, 30, 0), (30.0, 30, 2), (60.0, 30, 0), (90.0, 10, 0)]
    assert found["running_p99_by_interval"][0]["p99_s"] == 0.2
    assert tail(Tracker()) == {}


def test_the_spread_counts_the_workloads_each_cluster_was_given_and_the_clusters_given_none() -> None:
    tracker = Tracker(applied={"a": 0.0, "b": 0.0}, expected=2)

    def work(namespace: str, name: str) -> dict[str, Any]:
        return {"metadata": {"name": f"bench-{name}", "namespace": namespace},
                "spec": {"workload": {"manifests": [{"metadata": {"name": name}}]}}}

    for namespace, name in [("gpufed-es-x", "a"), ("gpufed-es-x", "b"), ("gpufed-es-y", "b"), ("gpufed-es-x", "a")]:
        tracker.saw_work(work(namespace, name), 1.0)
    assert spread(tracker, 4) == {"clusters_with_works": 2, "fewest": 0, "median": 0, "most": 2}
    assert spread(Tracker(), 0) == {"clusters_with_works": 0}
