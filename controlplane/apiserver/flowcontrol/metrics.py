"""API Priority and Fairness metrics, under kube-apiserver's names (no ``gpufed_`` prefix, so
kube's dashboards and alerts read them as they are):

* ``apiserver_flowcontrol_current_inqueue_requests{priority_level,flow_schema}`` -- waiting;
* ``apiserver_flowcontrol_current_executing_requests{priority_level,flow_schema}`` -- served;
* ``apiserver_flowcontrol_current_executing_seats{priority_level,flow_schema}`` -- the seats they
  hold (a watch's while it starts, a write's until the end of its additional latency);
* ``apiserver_flowcontrol_work_estimated_seats{priority_level,flow_schema}`` -- each request's
  estimated seats, and ``..._watch_count_samples`` the watches each write may be seen by;
* ``apiserver_flowcontrol_rejected_requests_total{priority_level,flow_schema,reason}`` --
  429s (``queue-full``, ``concurrency-limit``, ``time-out``) and clients gone while waiting
  (``cancelled``);
* ``apiserver_flowcontrol_request_wait_duration_seconds{priority_level,flow_schema,execute}``
  -- time in the queue, ``execute="true"`` for requests that then ran;
* by ``priority_level``, from the last borrowing adjustment: ``..._nominal_limit_seats``,
  ``..._lower_limit_seats``, ``..._upper_limit_seats`` (without ``borrowingLimitPercent``, the
  nominal limit plus the server's seats, as kube's),
  ``..._current_limit_seats``, ``..._target_seats`` and the seat demand's
  ``..._demand_seats_high_watermark``, ``_average``, ``_stdev`` and ``_smoothed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controlplane.metricstability import Stability, kube_help

if TYPE_CHECKING:
    from controlplane.apiserver.flowcontrol.borrowing import DemandStats
    from controlplane.apiserver.flowcontrol.levels import Classification

_LABELS = ["priority_level", "flow_schema"]
#: Gauge name -> (kube's stability level, kube's help text).
_LIMIT_GAUGES = {
    "nominal_limit_seats": (Stability.BETA, "Nominal number of execution seats configured for each priority level"),
    "lower_limit_seats": (
        Stability.ALPHA, "Configured lower bound on number of execution seats available to each priority level",
    ),
    "upper_limit_seats": (
        Stability.ALPHA, "Configured upper bound on number of execution seats available to each priority level",
    ),
    "current_limit_seats": (
        Stability.ALPHA, "current derived number of execution seats available to each priority level",
    ),
    "target_seats": (Stability.ALPHA, "Seat allocation targets"),
    "demand_seats_high_watermark": (Stability.ALPHA, "High watermark, over last adjustment period, of demand_seats"),
    "demand_seats_average": (Stability.ALPHA, "Time-weighted average, over last adjustment period, of demand_seats"),
    "demand_seats_stdev": (
        Stability.ALPHA, "Time-weighted standard deviation, over last adjustment period, of demand_seats",
    ),
    "demand_seats_smoothed": (Stability.ALPHA, "Smoothed seat demands"),
}
_WAIT_BUCKETS = (0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0)
#: kube's buckets of ``work_estimated_seats`` and ``watch_count_samples``.
_SEATS_BUCKETS = (1.0, 2.0, 4.0, 10.0)
_WATCH_COUNT_BUCKETS = (0.0, 1.0, 10.0, 100.0, 1000.0, 10000.0)


class FlowControlMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.inqueue = Gauge(
            "apiserver_flowcontrol_current_inqueue_requests",
            kube_help(
                Stability.BETA,
                "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            ),
            _LABELS, registry=registry,
        )
        self.executing = Gauge(
            "apiserver_flowcontrol_current_executing_requests",
            kube_help(
                Stability.BETA,
                "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API "
                "Priority and Fairness subsystem",
            ),
            _LABELS, registry=registry,
        )
        self.executing_seats = Gauge(
            "apiserver_flowcontrol_current_executing_seats",
            kube_help(
                Stability.BETA,
                "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, "
                "any stage otherwise) requests in the API Priority and Fairness subsystem",
            ),
            _LABELS, registry=registry,
        )
        self.estimated_seats = Histogram(
            "apiserver_flowcontrol_work_estimated_seats",
            kube_help(
                Stability.ALPHA,
                "Number of estimated seats (maximum of initial and final seats) associated with requests in API "
                "Priority and Fairness",
            ),
            _LABELS, buckets=_SEATS_BUCKETS, registry=registry,
        )
        self.watch_counts = Histogram(
            "apiserver_flowcontrol_watch_count_samples",
            kube_help(Stability.ALPHA, "count of watchers for mutating requests in API Priority and Fairness"), _LABELS,
            buckets=_WATCH_COUNT_BUCKETS, registry=registry,
        )
        self.rejected = Counter(
            "apiserver_flowcontrol_rejected_requests",
            kube_help(Stability.BETA, "Number of requests rejected by API Priority and Fairness subsystem"),
            [*_LABELS, "reason"],
            registry=registry,
        )
        self.wait_duration = Histogram(
            "apiserver_flowcontrol_request_wait_duration_seconds",
            kube_help(Stability.BETA, "Length of time a request spent waiting in its queue"), [*_LABELS, "execute"],
            buckets=_WAIT_BUCKETS, registry=registry,
        )
        self.limits = {
            name: Gauge(f"apiserver_flowcontrol_{name}", kube_help(level, text), ["priority_level"], registry=registry)
            for name, (level, text) in _LIMIT_GAUGES.items()
        }

        #: Each (level, flow schema)'s in-queue, executing and seats gauges, looked up once (a
        #: handful: the built-in schemas), not through labels() on every request.
        self._gauges: dict[tuple[str, str], tuple[Gauge, Gauge, Gauge]] = {}

    def gauges(self, found: Classification) -> tuple[Gauge, Gauge, Gauge]:
        """The in-queue, executing and executing-seats gauges of ``found``'s level and flow schema."""
        key = (found.level, found.flow_schema)
        gauges = self._gauges.get(key)
        if gauges is None:
            gauges = self._gauges[key] = (
                self.inqueue.labels(*key), self.executing.labels(*key), self.executing_seats.labels(*key),
            )
        return gauges

    def observe_estimated_seats(self, found: Classification, seats: int) -> None:
        self.estimated_seats.labels(found.level, found.flow_schema).observe(seats)

    def observe_watch_count(self, found: Classification, count: int) -> None:
        self.watch_counts.labels(found.level, found.flow_schema).observe(count)

    def reject(self, found: Classification, reason: str) -> None:
        self.rejected.labels(found.level, found.flow_schema, reason).inc()

    def observe_wait(self, found: Classification, seconds: float, *, executed: bool) -> None:
        self.wait_duration.labels(
            found.level, found.flow_schema, "true" if executed else "false"
        ).observe(max(seconds, 0.0))

    def note_limits(
        self, level: str, *, nominal: int, lower: int, upper: int, current: int, target: float,
        demand: DemandStats | None = None,
    ) -> None:
        values: dict[str, float] = {
            "nominal_limit_seats": nominal, "lower_limit_seats": lower, "upper_limit_seats": upper,
            "current_limit_seats": current, "target_seats": target,
        }
        if demand is not None:
            values |= {
                "demand_seats_high_watermark": demand.high_watermark, "demand_seats_average": demand.average,
                "demand_seats_stdev": demand.stdev, "demand_seats_smoothed": demand.smoothed,
            }
        for name, value in values.items():
            self.limits[name].labels(level).set(value)
