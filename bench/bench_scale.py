"""Scale: a hub and a hollow fleet (``gpufed sim-fleet``: N clusters x M nodes x 8 GPUs, the
real agent for each cluster, all in one process) joined through bootstrap tokens (issue 17).

What runs, all real processes: a hub (``gpufed controlplane``, embedded etcd) and one
``gpufed sim-fleet`` process whose agents mint nothing themselves: the fleet creates one
one-time bootstrap token per cluster with the admin kubeconfig and every agent joins with
its own, then renews its lease, writes capacity reports and watches its Works over HTTPS
as a ``gpufed agent`` process does, at the agent's default intervals.

What is measured, in order:

* join: seconds until every cluster has reported, and the fleet process's RSS per node;
* steady state (no applies, a window of ``steady_seconds``): hub RSS and CPU (cores), etcd
  database size, report size per cluster (``Cluster.status`` as JSON);
* under load: Deployments (1 or 2 replicas of one whole GPU) created at a steady ``rate``
  in a namespace a PropagationPolicy (Divided by available replicas) claims, Works per
  cluster counted (``works_per_cluster``: the load must reach the whole fleet); per workload, apply -> its first Work
  written (Work watch) and apply -> all replicas Running (the hub's aggregated status);
  hub RSS and CPU over the load; scheduler decision p50/p90/p99 from
  ``gpufed_scheduling_duration_seconds`` and mutating / read API latency p99 from
  ``gpufed_apiserver_request_duration_seconds`` (histogram quantiles over the load, as
  PromQL's ``histogram_quantile`` interpolates); per controller work queue, the adds, retries
  and queue wait and work duration p50/p99 over the load from the hub's ``workqueue_*``
  series (details ``workqueues``; the three longest queue waits p99 are figures), which says
  where inside the hub a workload's time goes;
* watch fan-out (``bench/watch_fanout.py``), after the load: N concurrent watchers of Works
  (tiny 20, quick 200, full 1,000; ``--watchers N`` sets it), each its own HTTPS stream, 1 in
  10 in every namespace, 6 in 10 in one, 3 in 10 by label; the benchmark patches probe Works
  of its own at a steady rate and times each patch from its reply to every matching watcher
  (p50/p99/max, the last watcher's p99), counts missed deliveries and watchers dropped (410
  or closed), and reports the hub's and its own CPU over the phase.

Targets: Karmada's 100-cluster figures (scheduling p50/p90/p99 12/15/32 ms, distribution
p99 989 ms), kube's API SLO (p99 <= 1 s), hub RSS <= 4 GiB, steady-state hub CPU <= 0.5
core and fan-out p99 <= 1 s. When one is missed, ``bottleneck`` in the details (the load's;
``fanout.bottleneck`` for the fan-out phase) says which resource ran out (CPU of the machine,
by process, or memory) with the numbers.

Reproduce: ``.venv/bin/python -m bench.bench_scale [--size tiny|quick|full] [--watchers N] [--workloads N] [--rate PER_S] [--json FILE]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import random
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.bench_e2e_apply import condition_true, deployment, work_ready
from bench.common import (
    BenchmarkResult,
    CpuMeter,
    Figure,
    Size,
    at_least,
    at_most,
    benchmark_main,
    failed_run,
    latency_summary,
    percentile,
)
from bench.hubdriving import (
    WORKS,
    Hub,
    apply_all,
    claim_namespace,
    fleet_meter,
    follow,
    is_running,
    ready_clusters,
)
from bench.watch_fanout import FanoutPlan, FanoutSummary, by_quarter, fan_out
from e2e.harness import Kubectl, Process, ProcessGroup, wait_for

log = logging.getLogger(__name__)

NAME = "scale"
NAMESPACE = "bench-scale"
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
CLUSTERS = "/apis/cluster.gpufed.io/v1alpha1/clusters"
#: Karmada's published 100-cluster figures and the kube API SLO.
KARMADA_SCHEDULE_MS = {50: 12.0, 90: 15.0, 99: 32.0}
KARMADA_DISTRIBUTION_P99_S = 0.989
API_P99_S = 1.0
HUB_RSS_GIB = 4.0
HUB_STEADY_CORES = 0.5
#: Issue 17: 1,000 concurrent watchers of Works receive an event within p99 <= 1 s.
FANOUT_P99_S = 1.0
MUTATING = frozenset({"create", "update", "patch", "delete", "deletecollection", "apply"})
READS = frozenset({"get", "list"})


@dataclass(frozen=True, slots=True)
class Plan:
    clusters: int
    nodes: int
    workloads: int
    rate: float
    steady_seconds: float
    join_timeout: float
    drain_timeout: float
    fanout: FanoutPlan


PLANS = {
    Size.TINY: Plan(clusters=2, nodes=20, workloads=10, rate=5.0, steady_seconds=5, join_timeout=120, drain_timeout=60,
                    fanout=FanoutPlan(watchers=20, namespaces=2, groups=2, rate=5.0, seconds=5)),
    Size.QUICK: Plan(clusters=10, nodes=500, workloads=300, rate=10.0, steady_seconds=30, join_timeout=600,
                     drain_timeout=180, fanout=FanoutPlan(watchers=200, namespaces=10, groups=4, rate=10.0, seconds=30)),
    # 25 applies a second: the rate a 2-core machine sustains with the hub, the fleet's 100 agents,
    # etcd and this client on it (at 50 the machine's CPU runs out: 1.79 of 2 cores busy, and the
    # hub's queues grow for the whole load; ``--rate 50`` runs it, docs/benchmarks.md, "Scale").
    Size.FULL: Plan(clusters=100, nodes=5000, workloads=20_000, rate=25.0, steady_seconds=60, join_timeout=3600,
                    drain_timeout=600, fanout=FanoutPlan(watchers=1000, namespaces=20, groups=4, rate=20.0, seconds=60)),
}


# ----------------------------------------------------------------------------- pure helpers


def histogram(text: str, name: str, keep: Any = None) -> dict[float, float]:
    """Cumulative bucket counts (upper bound -> count) of a Prometheus histogram, summed over
    the label sets ``keep(labels)`` accepts (all when None)."""
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if not sample.name.endswith("_bucket") or (keep is not None and not keep(sample.labels)):
                continue
            bound = float(sample.labels["le"])
            buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return buckets


def bucket_delta(after: Mapping[float, float], before: Mapping[float, float]) -> dict[float, float]:
    return {bound: count - before.get(bound, 0.0) for bound, count in after.items()}


#: The workqueue histograms the summary reads, by the key their quantiles get.
WORKQUEUE_HISTOGRAMS = {"queue_wait": "workqueue_queue_duration_seconds", "work": "workqueue_work_duration_seconds"}


def _workqueue_samples(text: str) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], dict[float, float]]]:
    """The ``workqueue_*`` samples: (sample, queue) -> value, and (histogram, queue) -> cumulative buckets."""
    values: dict[tuple[str, str], float] = {}
    buckets: dict[tuple[str, str], dict[float, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("workqueue_"):
            for sample in family.samples:
                queue = sample.labels.get("name", "")
                if sample.name.endswith("_bucket"):
                    buckets.setdefault((family.name, queue), {})[float(sample.labels["le"])] = sample.value
                else:
                    values[(sample.name, queue)] = sample.value
    return values, buckets


def workqueue_summary(before: str, after: str) -> dict[str, dict[str, Any]]:
    """Per controller work queue (label ``name``), between two scrapes of the hub's /metrics: keys
    added, retried and taken, and the queue wait and work duration p50/p99 in ms (interpolated
    within client-go's decade buckets, as ``histogram_quantile`` does). Queues that took no key
    are left out; the longest queue wait p99 comes first."""
    values_before, buckets_before = _workqueue_samples(before)
    values_after, buckets_after = _workqueue_samples(after)
    out: dict[str, dict[str, Any]] = {}
    for sample, queue in values_after:
        if sample != "workqueue_queue_duration_seconds_count":
            continue
        grew = {name: int(values_after.get((name, queue), 0.0) - values_before.get((name, queue), 0.0))
                for name in ("workqueue_adds_total", "workqueue_retries_total", sample)}
        if grew[sample] <= 0:
            continue
        summary: dict[str, Any] = {"adds": grew["workqueue_adds_total"], "retries": grew["workqueue_retries_total"],
                                   "taken": grew[sample]}
        for key, histogram_name in WORKQUEUE_HISTOGRAMS.items():
            delta = bucket_delta(buckets_after.get((histogram_name, queue), {}),
                                 buckets_before.get((histogram_name, queue), {}))
            for q in (50, 99):
                seconds = histogram_quantile(q / 100, delta)
                summary[f"{key}_p{q}_ms"] = None if seconds is None else round(seconds * 1000, 3)
        out[queue] = summary
    return dict(sorted(out.items(), key=lambda item: -(item[1]["queue_wait_p99_ms"] or 0.0)))


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """PromQL's ``histogram_quantile``: linear within the bucket the rank falls in."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            width = count - lower_count
            return lower_bound + (bound - lower_bound) * ((rank - lower_count) / width if width else 1.0)
        lower_bound, lower_count = bound, count
    return ordered[-1][0]


#: The benchmark's processes whose work runs on one event loop, so on one core at a time (etcd
#: is Go and uses every core).
ONE_LOOP = ("hub", "fleet", "client")


def bottleneck(cpu_seconds: Mapping[str, float], seconds: float, *, cores: int, machine_busy: float,
               memory: Mapping[str, int], timeline: Timeline | None = None) -> str:
    """Which resource ran out over a window: memory when less than 10 % is available; CPU when
    the machine's cores were >= 85 % busy (ours and other processes'); else one core, when a
    process that runs on one event loop (:data:`ONE_LOOP`) kept >= 85 % of a core busy over the
    window, or in at least :data:`SATURATED_SHARE` of the ``timeline``'s intervals; else that
    none did."""
    used = {name: value / seconds for name, value in cpu_seconds.items() if seconds > 0}
    ours = sum(used.values())
    by_process = ", ".join(f"{name} {value:.2f}" for name, value in sorted(used.items(), key=lambda kv: -kv[1]))
    available, installed = memory.get("MemAvailable", 0), memory.get("MemTotal", 0)
    if installed and available < 0.1 * installed:
        return f"memory: {available / 2**30:.1f} of {installed / 2**30:.1f} GiB available"
    busy = f"{machine_busy:.2f} of {cores} cores busy, {ours:.2f} of them ours ({by_process})"
    if machine_busy >= 0.85 * cores:
        return f"CPU: {busy}"
    saturated = [name for name in ONE_LOOP if used.get(name, 0.0) >= 0.85]
    if saturated:
        which = " and ".join(f"the {name}'s ({used[name]:.2f} cores)" for name in saturated)
        return f"one core: {which} event loop runs on one core and kept it busy; {busy}"
    if timeline is not None and timeline.cores:
        intervals = len(timeline.cores)
        part = [(name, n, peak) for name, (n, peak) in timeline.saturated().items() if n >= SATURATED_SHARE * intervals]
        if part:
            which = " and ".join(f"the {name}'s in {n} of {intervals} intervals of {timeline.interval:.0f} s "
                                 f"(up to {peak:.2f} cores)" for name, n, peak in part)
            return f"one core, in part of the run: {which}; over the whole window {busy}"
    return f"neither CPU ({busy}) nor memory ran out"


#: Seconds per interval of the load phase's CPU timeline (:class:`Timeline`).
TIMELINE_SECONDS = 10.0
#: Share of the timeline's intervals in which a one-loop process must have kept its core busy
#: for :func:`bottleneck` to name it (a backlog built in a part of the run delays the rest).
SATURATED_SHARE = 0.2


@dataclass
class Timeline:
    """Cores used by each process (and the whole machine, as ``machine``) interval by interval:
    a process that ran out of its core for part of a long run shows here, not in the average."""

    meter: CpuMeter
    interval: float = TIMELINE_SECONDS
    cores: list[dict[str, float]] = field(default_factory=list)

    async def run(self) -> None:
        before, machine, started = self.meter.sample(), machine_busy_seconds(), time.perf_counter()
        while True:
            await asyncio.sleep(self.interval)
            after, machine_after, now = self.meter.sample(), machine_busy_seconds(), time.perf_counter()
            seconds = now - started
            used = {name.split("-", 1)[0]: value / seconds for name, value in CpuMeter.delta(before, after).items()}
            self.cores.append({**{k: round(v, 3) for k, v in used.items()},
                               "machine": round((machine_after - machine) / seconds, 3)})
            before, machine, started = after, machine_after, now

    def saturated(self) -> dict[str, tuple[int, float]]:
        """For each one-loop process: in how many intervals it kept >= 85 % of a core busy, and its
        busiest interval's cores."""
        return {name: (sum(c.get(name, 0.0) >= 0.85 for c in self.cores), max((c.get(name, 0.0) for c in self.cores), default=0.0))
                for name in ONE_LOOP}


def machine_busy_seconds() -> float:
    """CPU seconds all cores have been busy since boot (``/proc/stat``: all but idle and iowait)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return 0.0
    return (sum(fields) - fields[3] - fields[4]) / (os.sysconf("SC_CLK_TCK") or 100)


def meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[key] = int(parts[0]) * 1024
    return out


def rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def file_mib(path: Path | None) -> float | None:
    try:
        return round(path.stat().st_size / 2**20, 1) if path is not None else None
    except OSError:
        return None


def policy() -> dict[str, Any]:
    """Divided by the clusters' available replicas (Karmada's ``dynamicWeight: AvailableReplicas``),
    so the workloads spread over the whole fleet as the free GPUs do. Equal static weights (the
    ``Weighted`` default) would give a workload of one or two replicas to the first one or two
    clusters by name every time: two agents would carry the whole load and 98 would idle."""
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "placement": {"replicaScheduling": {
                     "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                     "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}},
    }


def workloads(count: int, *, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for index in range(count):
        obj = deployment(f"s-{index:05d}", replicas=rng.choice((1, 2)), resource="nvidia.com/gpu", amount=1)
        obj["metadata"]["namespace"] = NAMESPACE
        obj["metadata"]["labels"]["bench"] = NAME
        out.append(obj)
    return out


# ----------------------------------------------------------------------------- measuring


#: The agent's stages of a workload's Works, as the end-to-end benchmark's probe reads them.
AGENT_STAGES: dict[str, Any] = {
    "Work applied (agent)": lambda work, name: condition_true(work, "Applied"),
    "Work reports replicas ready (agent)": work_ready,
}


@dataclass
class Tracker:
    applied: dict[str, float] = field(default_factory=dict)
    works: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    apply_seconds: list[float] = field(default_factory=list)
    read_seconds: list[float] = field(default_factory=list)
    all_running: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0

    #: Per workload, when the last of its Works seen so far first showed each agent stage
    #: (:data:`AGENT_STAGES`): applied on its member, then reporting the replicas ready.
    stages: dict[str, dict[str, float]] = field(default_factory=lambda: {stage: {} for stage in AGENT_STAGES})
    #: Per cluster execution namespace, the benchmark's workloads it holds a Work of.
    per_cluster: dict[str, set[str]] = field(default_factory=dict)
    _reached: set[tuple[str, str, str]] = field(default_factory=set)

    def saw_work(self, work: Mapping[str, Any], now: float) -> None:
        meta = work.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"  # a Work's name repeats in each cluster's namespace
        whole = dict(work)
        for manifest in ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []:
            name = str((manifest.get("metadata") or {}).get("name"))
            if name not in self.applied:
                continue
            if name not in self.works:
                self.works[name] = now
            self.per_cluster.setdefault(str(meta.get("namespace")), set()).add(name)
            for stage, reached in AGENT_STAGES.items():
                if (key, name, stage) not in self._reached and reached(whole, name):
                    self._reached.add((key, name, stage))
                    self.stages[stage][name] = now

    def saw_workload(self, obj: Mapping[str, Any], now: float) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        if name in self.applied and name not in self.running and is_running(dict(obj)):
            self.running[name] = now
            if len(self.running) >= self.expected:
                self.all_running.set()


def spread(tracker: Tracker, clusters: int) -> dict[str, Any]:
    """How the workloads' Works fell over the fleet: clusters given one, and the fewest, median
    and most workloads one cluster was given (clusters given none count as 0)."""
    counts = sorted(len(names) for names in tracker.per_cluster.values())
    counts = [0] * max(0, clusters - len(counts)) + counts
    if not counts:
        return {"clusters_with_works": 0}
    return {"clusters_with_works": len(tracker.per_cluster), "fewest": counts[0],
            "median": round(percentile(counts, 50)), "most": counts[-1]}


def tail(tracker: Tracker, *, share: float = 0.01, interval: float = 30.0) -> dict[str, Any]:
    """Where the slowest workloads wait: the slowest ``share`` (apply -> Running), each with its
    stages as seconds after its apply, and apply -> Running p99 by the ``interval`` in which the
    workload was applied (seconds from the first apply): a tail that gathers in a few intervals
    points at a stall, one spread over the load at a queue."""
    if not tracker.running:
        return {}
    first = min(tracker.applied.values())
    waits = sorted(((t - tracker.applied[n], n) for n, t in tracker.running.items()), reverse=True)
    slowest = []
    for wait, name in waits[:max(1, round(len(waits) * share))]:
        row = {"name": name, "applied_at_s": round(tracker.applied[name] - first, 2), "running_s": round(wait, 3)}
        if name in tracker.works:
            row["works_s"] = round(tracker.works[name] - tracker.applied[name], 3)
        for stage, times in tracker.stages.items():
            if name in times:
                row[stage] = round(times[name] - tracker.applied[name], 3)
        slowest.append(row)
    by_interval: dict[int, list[float]] = {}
    for wait, name in waits:
        by_interval.setdefault(int((tracker.applied[name] - first) // interval), []).append(wait)
    return {"slowest": slowest,
            "running_p99_by_interval": [{"from_s": k * interval, "count": len(v), "p99_s": round(percentile(v, 99), 3),
                                         "over_1s": sum(w > 1.0 for w in v)}
                                        for k, v in sorted(by_interval.items())]}


async def read_probe(hub: Hub, tracker: Tracker) -> None:
    """A user's LIST of the clusters, twice a second, timed (what a dashboard does)."""
    while True:
        started = time.perf_counter()
        await hub.get(CLUSTERS)
        tracker.read_seconds.append(time.perf_counter() - started)
        await asyncio.sleep(0.5)


async def scrape(hub: Hub) -> str:
    async with hub.session.get(hub.base + "/metrics") as response:
        return await response.text()


@dataclass
class Window:
    """CPU seconds by process and wall seconds between two samples."""

    meter: CpuMeter
    before: dict[str, float] = field(default_factory=dict)
    started: float = 0.0
    machine_before: float = 0.0
    #: Cores the whole machine kept busy over the window (set by :meth:`close`).
    machine_busy: float = 0.0

    def open(self) -> Window:
        self.before, self.started = self.meter.sample(), time.perf_counter()
        self.machine_before = machine_busy_seconds()
        return self

    def close(self) -> tuple[dict[str, float], float]:
        seconds = time.perf_counter() - self.started
        self.machine_busy = (machine_busy_seconds() - self.machine_before) / seconds if seconds > 0 else 0.0
        return CpuMeter.delta(self.before, self.meter.sample()), seconds


def _by_process(used: Mapping[str, float]) -> dict[str, float]:
    return {name.split("-", 1)[0]: round(value, 2) for name, value in used.items()}


async def measure(kubeconfig: Path, plan: Plan, meter: CpuMeter, hub_pid: int, etcd_db: Path | None) -> tuple[list[Figure], dict[str, Any]]:
    figures: list[Figure] = []
    details: dict[str, Any] = {}
    cores = os.cpu_count() or 1
    async with Hub.connect(kubeconfig, connections=64) as hub:
        window = Window(meter).open()
        await asyncio.sleep(plan.steady_seconds)  # the steady-state window: nothing is applied
        steady_cpu, steady_s = window.close()
        steady_cores = steady_cpu.get("hub", 0.0) / steady_s
        _, clusters = await hub.get(CLUSTERS)
        report_sizes = [len(json.dumps(c.get("status") or {}, separators=(",", ":"))) for c in clusters["items"]]
        figures += [
            Figure("hub CPU, steady state", round(steady_cores, 3), "cores", at_most(HUB_STEADY_CORES)),
            Figure("hub RSS, steady state", round(rss(hub_pid) / 2**20, 1), "MiB", at_most(HUB_RSS_GIB * 1024)),
            Figure("report size per cluster (max)", round(max(report_sizes) / 1024, 1), "KiB"),
            Figure("etcd db size", file_mib(etcd_db), "MiB"),
        ]
        details["steady_cpu_cores_by_process"] = {k: round(v / steady_s, 3) for k, v in _by_process(steady_cpu).items()}
        details["report_bytes"] = {"min": min(report_sizes), "median": round(percentile(report_sizes, 50)),
                                   "max": max(report_sizes)}
        details["steady_machine_busy_cores"] = round(window.machine_busy, 2)

        await claim_namespace(hub, NAMESPACE, policy())
        objs = workloads(plan.workloads)
        tracker = Tracker(expected=len(objs))
        metrics_before = await scrape(hub)
        tasks = [asyncio.create_task(follow(hub, WORKS, tracker.saw_work)),
                 asyncio.create_task(follow(hub, DEPLOYMENTS, tracker.saw_workload)),
                 asyncio.create_task(read_probe(hub, tracker))]
        window = Window(meter).open()
        timeline = Timeline(meter)
        tasks.append(asyncio.create_task(timeline.run()))
        peak_rss = 0
        try:
            await apply_all(hub, objs, tracker, rate=plan.rate, path=DEPLOYMENTS)
            peak_rss = rss(hub_pid)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tracker.all_running.wait(), plan.drain_timeout)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        load_cpu, load_s = window.close()
        peak_rss = max(peak_rss, rss(hub_pid))
        metrics_after = await scrape(hub)
        window_fanout = Window(meter).open()
        fanout, seen = await fan_out(hub, kubeconfig, plan.fanout)
        fanout_cpu, fanout_s = window_fanout.close()

    def quantiles(name: str, keep: Any = None) -> dict[int, float | None]:
        delta = bucket_delta(histogram(metrics_after, name, keep), histogram(metrics_before, name, keep))
        return {q: histogram_quantile(q / 100, delta) for q in (50, 90, 99)}

    schedule = quantiles("gpufed_scheduling_duration_seconds")
    mutating = quantiles("gpufed_apiserver_request_duration_seconds", lambda labels: labels.get("verb", "").lower() in MUTATING)
    reads = quantiles("gpufed_apiserver_request_duration_seconds", lambda labels: labels.get("verb", "").lower() in READS)
    queues = workqueue_summary(metrics_before, metrics_after)
    to_works = [tracker.works[n] - tracker.applied[n] for n in tracker.works]
    to_running = [tracker.running[n] - tracker.applied[n] for n in tracker.running]

    def ms(value: float | None) -> float | None:
        return None if value is None else round(value * 1000, 1)

    figures += [
        Figure(f"workloads Running (of {len(objs):,})", len(to_running), "", at_least(len(objs))),
        Figure(f"clusters given Works (of {plan.clusters})", len(tracker.per_cluster), ""),
        Figure("workloads on the busiest cluster", max((len(n) for n in tracker.per_cluster.values()), default=0), ""),
        Figure("hub CPU, under load", round(load_cpu.get("hub", 0.0) / load_s, 3), "cores"),
        Figure("hub RSS, under load (peak seen)", round(peak_rss / 2**20, 1), "MiB", at_most(HUB_RSS_GIB * 1024)),
    ]
    figures += [Figure(f"scheduler decision p{q}", ms(schedule[q]), "ms", at_most(KARMADA_SCHEDULE_MS[q])) for q in (50, 90, 99)]
    if to_works:
        figures += [Figure("apply -> Works written p50", round(percentile(to_works, 50), 3), "s"),
                    Figure("apply -> Works written p99", round(percentile(to_works, 99), 3), "s")]
    for stage, times in tracker.stages.items():
        waits = [t - tracker.applied[n] for n, t in times.items()]
        if waits:
            figures += [Figure(f"apply -> {stage} p50", round(percentile(waits, 50), 3), "s"),
                        Figure(f"apply -> {stage} p99", round(percentile(waits, 99), 3), "s")]
    if to_running:
        figures += [Figure("apply -> Running p50", round(percentile(to_running, 50), 3), "s")]
        figures.append(Figure("apply -> Running p99", round(percentile(to_running, 99), 3), "s",
                              at_most(KARMADA_DISTRIBUTION_P99_S)))
    figures += [Figure(f"queue wait p99, {name} workqueue", queue["queue_wait_p99_ms"], "ms")
                for name, queue in list(queues.items())[:3]]
    figures += [
        Figure("mutating API p99 (hub histogram)", ms(mutating[99]), "ms", at_most(API_P99_S * 1000)),
        Figure("read API p99 (hub histogram)", ms(reads[99]), "ms", at_most(API_P99_S * 1000)),
        Figure("client create p99", round(percentile(tracker.apply_seconds, 99) * 1000, 1) if tracker.apply_seconds else None, "ms"),
        Figure("client creates sent again (Retry-After)", hub.retries, ""),
        Figure("client LIST clusters p99", round(percentile(tracker.read_seconds, 99) * 1000, 1) if tracker.read_seconds else None, "ms"),
    ]
    details.update(
        clusters=plan.clusters, nodes_per_cluster=plan.nodes, gpus_per_node=8, workloads=len(objs), rate_per_s=plan.rate,
        load_seconds=round(load_s, 1), load_cpu_cores_by_process={k: round(v / load_s, 3) for k, v in _by_process(load_cpu).items()},
        apply_to_works=latency_summary(to_works), apply_to_running=latency_summary(to_running),
        apply_to_stage={stage: latency_summary([t - tracker.applied[n] for n, t in times.items()])
                        for stage, times in tracker.stages.items()},
        load_machine_busy_cores=round(window.machine_busy, 2),
        load_cores_by_interval=timeline.cores,
        not_running=len(objs) - len(to_running), workqueues=queues, tail=tail(tracker),
        works_per_cluster=spread(tracker, plan.clusters),
    )
    missed = [f.name for f in figures if f.ok is False]
    if missed:
        details["targets_missed"] = missed
        details["bottleneck"] = bottleneck(load_cpu, load_s, cores=cores, machine_busy=window.machine_busy,
                                           memory=meminfo(), timeline=timeline)
    fanout_figures, details["fanout"] = watch_fanout_figures(fanout, seen, fanout_cpu, fanout_s,
                                                             machine_busy=window_fanout.machine_busy)
    return figures + fanout_figures, details


def watch_fanout_figures(summary: FanoutSummary, seen: dict[str, Any], cpu: Mapping[str, float], seconds: float, *,
                         machine_busy: float) -> tuple[list[Figure], dict[str, Any]]:
    """The watch fan-out phase's figures (issue 17: p99 <= 1 s to 1,000 watchers) and details;
    when a target is missed, which resource ran out over the phase."""
    watchers = int(seen["watchers"])

    def cores(name: str) -> float:
        return round(cpu.get(name, 0.0) / seconds, 3) if seconds > 0 else 0.0

    last_p99 = round(percentile(summary.last, 99) * 1000, 1) if summary.last else None
    deliveries = len(summary.delays) + summary.other_events
    figures = [
        Figure(f"watch fan-out: watchers attached at the end (of {watchers:,})", seen.get("attached_at_end"), "",
               at_least(watchers)),
        Figure("watch fan-out: write -> watcher p50", summary.quantile_ms(50), "ms"),
        Figure("watch fan-out: write -> watcher p99", summary.quantile_ms(99), "ms", at_most(FANOUT_P99_S * 1000)),
        Figure("watch fan-out: write -> watcher max", summary.quantile_ms(100), "ms"),
        Figure("watch fan-out: write -> last watcher p99", last_p99, "ms"),
        Figure(f"watch fan-out: deliveries missed (of {summary.expected:,})", summary.missed, "", at_most(0)),
        Figure(f"watch fan-out: watchers behind (a delivery missed or > {FANOUT_P99_S:g} s)", summary.watchers_behind, ""),
        Figure("watch fan-out: watches dropped (410 or closed by the hub)", summary.dropped + summary.closed, "", at_most(0)),
        Figure("watch fan-out: hub CPU", cores("hub"), "cores"),
        Figure("watch fan-out: hub CPU per delivery (its other work included)",
               round(cpu.get("hub", 0.0) / deliveries * 1e6) if deliveries else None, "us"),
        Figure("watch fan-out: client CPU (the measuring process)", cores("client"), "cores"),
    ]
    details: dict[str, Any] = {
        **seen, "writes": summary.writes, "expected_deliveries": summary.expected, "timed": len(summary.delays),
        "missed": summary.missed, "unexpected": summary.unexpected, "duplicates": summary.duplicates,
        "before_reply": summary.before_reply, "other_events": summary.other_events, "dropped_410": summary.dropped,
        "closed_by_hub": summary.closed, "refused": summary.refused, "watchers_missing": summary.watchers_missing,
        "watchers_late": summary.watchers_late, "watchers_behind": summary.watchers_behind, "by_kind": summary.by_kind, "seconds": round(seconds, 1),
        "from_write_sent": latency_summary(summary.from_sent), "last_watcher_p50_ms_by_quarter": by_quarter(summary.last),
        "cpu_cores_by_process": {k: round(v / seconds, 3) for k, v in _by_process(dict(cpu)).items()} if seconds else {},
        "machine_busy_cores": round(machine_busy, 2),
    }
    missed = [f.name for f in figures if f.ok is False]
    if missed:
        details["targets_missed"] = missed
        details["bottleneck"] = bottleneck(cpu, seconds, cores=os.cpu_count() or 1, machine_busy=machine_busy,
                                           memory=meminfo())
    return figures, details


# ----------------------------------------------------------------------------- processes


def start(group: ProcessGroup, plan: Plan) -> tuple[Process, Kubectl, Process, dict[str, Any]]:
    hub_proc, hub = group.start_hub("hub", "--log-level", "WARNING")
    state = group.root / "fleet"
    fleet = group.start("fleet", "sim-fleet", "--clusters", str(plan.clusters), "--nodes", str(plan.nodes),
                        "--models", f"{A100},{H100}", "--hub-kubeconfig", str(hub.kubeconfig),
                        "--state-dir", str(state), "--log-level", "WARNING")
    stats = state / "fleet.json"
    wait_for(lambda: stats.exists() or not fleet.alive(), timeout=plan.join_timeout, interval=1.0,
             what="every hollow cluster to report")
    assert fleet.alive(), f"sim-fleet exited:\n{fleet.log()[-4000:]}"
    wait_for(lambda: len(ready_clusters(hub)) >= plan.clusters, timeout=plan.join_timeout, interval=2.0, what="clusters Ready")
    return hub_proc, hub, fleet, json.loads(stats.read_text())


OPTIONS = argparse.ArgumentParser(add_help=False)
OPTIONS.add_argument("--watchers", type=int, metavar="N", help="concurrent Work watchers in the fan-out phase (the size's own by default)")
OPTIONS.add_argument("--workloads", type=int, metavar="N", help="Deployments applied under load (the size's own by default)")
OPTIONS.add_argument("--rate", type=float, metavar="PER_S", help="Deployments applied per second (the size's own by default)")


def run(size: Size, *, watchers: int | None = None, workloads: int | None = None,
        rate: float | None = None) -> BenchmarkResult:
    plan = PLANS[size]
    if rate is not None:
        plan = dataclasses.replace(plan, rate=rate)
    if watchers is not None:
        plan = dataclasses.replace(plan, fanout=dataclasses.replace(plan.fanout, watchers=watchers))
    if workloads is not None:
        plan = dataclasses.replace(plan, workloads=workloads)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpufed-bench-scale-") as tmp:
        group = ProcessGroup(root=Path(tmp))
        try:
            hub_proc, hub, _, joined = start(group, plan)
            assert hub_proc.popen is not None
            db = next(iter((group.root / "hub").rglob("member/snap/db")), None)
            figures = [
                Figure("fleet join (all clusters reported)", joined["joinSeconds"], "s"),
                Figure("fleet RSS per node (sim-fleet process)", round(joined["rssPerNodeBytes"] / 1024, 1), "KiB"),
            ]
            measured, details = asyncio.run(measure(hub.kubeconfig, plan, fleet_meter(group), hub_proc.popen.pid, db))
            figures += measured
            details["fleet"] = joined
        except Exception as exc:
            return failed_run(NAME, size, exc, logs=group.dump_logs()[-6000:], started=started)
        finally:
            group.stop_all()
    return BenchmarkResult(benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started)


def main(argv: Sequence[str] | None = None) -> int:
    """The common benchmark options, plus ``--watchers``, ``--workloads`` and ``--rate`` (the size's own otherwise)."""
    known, _ = OPTIONS.parse_known_args(argv)
    bound = functools.partial(run, watchers=known.watchers, workloads=known.workloads, rate=known.rate)
    return benchmark_main(bound, argv, description=(__doc__ or NAME).splitlines()[0], parents=(OPTIONS,))


if __name__ == "__main__":
    sys.exit(main())
