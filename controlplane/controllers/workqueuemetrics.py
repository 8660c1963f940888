"""client-go's workqueue metrics for the hub's controllers, under kube's names and help texts.

Why this module exists: when a change takes seconds to go through the hub, the time is spent
waiting in some controller's queue or inside its reconciles; kube-controller-manager answers
which with these series, and dashboards written for it read them as they are (no ``gpufed_``
prefix). One set of series per queue name, label ``name`` (the controller's loop):

* ``workqueue_adds_total`` -- adds that put a key in the queue (an add of a key already
  waiting is the same item, not counted: client-go's de-duplication);
* ``workqueue_depth`` -- keys waiting (those added again while being processed included);
* ``workqueue_queue_duration_seconds`` -- from a key's first add (for a delayed add, the end
  of its delay) to a worker taking it;
* ``workqueue_work_duration_seconds`` -- from a worker taking a key to its ``done`` (the reconcile);
* ``workqueue_retries_total`` -- delayed adds: retries after a failure and "look again in
  N seconds" alike, as client-go's ``AddAfter`` counts them;
* ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds``
  -- the seconds the keys being processed have run so far, summed and the longest.

In: each :class:`~controlplane.controllers.queueing.WorkQueue` asks :meth:`WorkqueueMetrics.series`
for its name's series once, when it is made, and feeds it plain numbers (no lock, no label
lookup: the queues run on one event loop). Out: the families above, built when scraped; the
gauges read the queue that last attached to its name (a new leadership term's), 0 once it stops.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterator
from itertools import accumulate
from typing import Final, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from controlplane.metricstability import Stability, kube_help

#: kube's help texts (component-base ``metrics/prometheus/workqueue``), all ``BETA``.
_HELP: Final = {
    key: kube_help(Stability.BETA, text) for key, text in {
        "depth": "Current depth of workqueue",
        "adds": "Total number of adds handled by workqueue",
        "queue_duration": "How long in seconds an item stays in workqueue before being requested.",
        "work_duration": "How long in seconds processing an item from workqueue takes.",
        "unfinished_work": "How many seconds of work has done that is in progress and hasn't been observed by "
        "work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by "
        "observing the rate at which this increases.",
        "longest_running_processor": "How many seconds has the longest running processor for workqueue been running.",
        "retries": "Total number of retries handled by workqueue",
    }.items()
}


def _exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus's ``ExponentialBuckets``, multiplied out as Go does (so the ``le`` labels match kube's)."""
    bounds = [start]
    for _ in range(count - 1):
        bounds.append(bounds[-1] * factor)
    return tuple(bounds)


BUCKETS: Final = _exponential_buckets(10e-7, 10, 10)
"""client-go's buckets for both durations: 1 µs to 1,000 s, one bucket per decade."""
LABELS: Final = ["name"]


#: The bounds as ``le`` labels (the exposition writes them in Go's form: ``1e-06``, ``1``).
_BOUNDS: Final = [*(repr(bound) for bound in BUCKETS), "+Inf"]


class LiveQueue(Protocol):
    """What a scrape reads from the queue a series is attached to."""

    @property
    def depth(self) -> int: ...

    def running_seconds(self) -> Collection[float]:
        """How long each key being processed has been, by the queue's clock."""
        ...

    def longest_wait(self) -> float:
        """How long the key that has waited longest for a worker has waited (0: none waits)."""
        ...


class DurationBuckets:
    """A histogram's counts (per bucket, not cumulative; the last is +Inf) and sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds

    def add_to(self, family: HistogramMetricFamily, name: str) -> None:
        family.add_metric([name], list(zip(_BOUNDS, accumulate(self.counts), strict=True)), self.total)


class QueueSeries:
    """One queue name's series: what its queues fed so far, and the queue a scrape reads live."""

    __slots__ = ("adds", "live", "name", "queue_duration", "retries", "work_duration")

    def __init__(self, name: str) -> None:
        self.name = name
        self.adds = 0
        self.retries = 0
        self.queue_duration = DurationBuckets()
        self.work_duration = DurationBuckets()
        self.live: LiveQueue | None = None

    def attach(self, queue: LiveQueue) -> None:
        self.live = queue

    def detach(self, queue: LiveQueue) -> None:
        """``queue`` stopped: the gauges read 0 unless a newer queue of the name took over."""
        if self.live is queue:
            self.live = None


class WorkqueueMetrics(Collector):
    """The workqueue series of every queue name, in ``registry`` (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._series: dict[str, QueueSeries] = {}
        if registry is not None:
            registry.register(self)

    def detach_all(self) -> None:
        """Every queue stopped (a leader's term ended, some of its loops before they ran): the
        gauges read 0 until the next term's queues attach."""
        for series in self._series.values():
            series.live = None

    def series(self, name: str) -> QueueSeries:
        """The series of queue ``name`` (made on first use; a later queue of the name carries on its counts)."""
        found = self._series.get(name)
        if found is None:
            found = self._series[name] = QueueSeries(name)
        return found

    def longest_wait(self) -> float:
        """Seconds the key that has waited longest for a worker, in any running queue, has
        waited (0 when none waits): how far behind the controllers are. The waste sampler yields
        more of the event loop while it is long (:mod:`controlplane.reports.sampling`)."""
        return max((series.live.longest_wait() for series in self._series.values() if series.live is not None),
                   default=0.0)

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("workqueue_depth", _HELP["depth"], labels=LABELS)
        adds = CounterMetricFamily("workqueue_adds", _HELP["adds"], labels=LABELS)
        latency = HistogramMetricFamily("workqueue_queue_duration_seconds", _HELP["queue_duration"], labels=LABELS)
        work = HistogramMetricFamily("workqueue_work_duration_seconds", _HELP["work_duration"], labels=LABELS)
        unfinished = GaugeMetricFamily("workqueue_unfinished_work_seconds", _HELP["unfinished_work"], labels=LABELS)
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds", _HELP["longest_running_processor"], labels=LABELS,
        )
        retries = CounterMetricFamily("workqueue_retries", _HELP["retries"], labels=LABELS)
        for name, series in sorted(self._series.items()):
            queue = series.live
            ages = queue.running_seconds() if queue is not None else ()
            depth.add_metric([name], queue.depth if queue is not None else 0)
            adds.add_metric([name], series.adds)
            series.queue_duration.add_to(latency, name)
            series.work_duration.add_to(work, name)
            unfinished.add_metric([name], sum(ages))
            longest.add_metric([name], max(ages, default=0.0))
            retries.add_metric([name], series.retries)
        yield from (depth, adds, latency, work, unfinished, longest, retries)
