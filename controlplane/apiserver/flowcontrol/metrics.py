"""API Priority and Fairness metrics, under kube-apiserver's names (no ``gpufed_`` prefix, so
kube's dashboards and alerts read them as they are):

* ``apiserver_flowcontrol_current_inqueue_requests{priority_level,flow_schema}`` -- waiting;
* ``apiserver_flowcontrol_current_executing_requests{priority_level,flow_schema}`` -- served;
* ``apiserver_flowcontrol_rejected_requests_total{priority_level,flow_schema,reason}`` --
  429s (``queue-full``, ``concurrency-limit``, ``time-out``) and clients gone while waiting
  (``cancelled``);
* ``apiserver_flowcontrol_request_wait_duration_seconds{priority_level,flow_schema,execute}``
  -- time in the queue, ``execute="true"`` for requests that then ran;
* by ``priority_level``, from the last borrowing adjustment: ``..._nominal_limit_seats``,
  ``..._lower_limit_seats``, ``..._upper_limit_seats`` (the seats of every level when unbounded),
  ``..._current_limit_seats``, ``..._target_seats`` and the seat demand's
  ``..._demand_seats_high_watermark``, ``_average``, ``_stdev`` and ``_smoothed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from controlplane.apiserver.flowcontrol.borrowing import DemandStats
    from controlplane.apiserver.flowcontrol.levels import Classification

_LABELS = ["priority_level", "flow_schema"]
_LIMIT_GAUGES = {
    "nominal_limit_seats": "Nominal number of execution seats configured for each priority level.",
    "lower_limit_seats": "Configured lower bound on number of execution seats available to each priority level.",
    "upper_limit_seats": "Configured upper bound on number of execution seats available to each priority level.",
    "current_limit_seats": "Current derived number of execution seats available to each priority level.",
    "target_seats": "Seat allocation targets.",
    "demand_seats_high_watermark": "High watermark, over last adjustment period, of demand_seats.",
    "demand_seats_average": "Time-weighted average, over last adjustment period, of demand_seats.",
    "demand_seats_stdev": "Time-weighted standard deviation, over last adjustment period, of demand_seats.",
    "demand_seats_smoothed": "Smoothed seat demands.",
}
_WAIT_BUCKETS = (0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0)


class FlowControlMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.inqueue = Gauge(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Requests waiting in a priority level's queues.", _LABELS, registry=registry,
        )
        self.executing = Gauge(
            "apiserver_flowcontrol_current_executing_requests",
            "Requests being served, by priority level.", _LABELS, registry=registry,
        )
        self.rejected = Counter(
            "apiserver_flowcontrol_rejected_requests",
            "Requests rejected by API Priority and Fairness, by reason.", [*_LABELS, "reason"],
            registry=registry,
        )
        self.wait_duration = Histogram(
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "Time requests spent waiting in their queue.", [*_LABELS, "execute"],
            buckets=_WAIT_BUCKETS, registry=registry,
        )
        self.limits = {
            name: Gauge(f"apiserver_flowcontrol_{name}", help_text, ["priority_level"], registry=registry)
            for name, help_text in _LIMIT_GAUGES.items()
        }

        #: Each (level, flow schema)'s in-queue and executing gauges, looked up once (a handful:
        #: the built-in schemas), not through labels() on every request.
        self._gauges: dict[tuple[str, str], tuple[Gauge, Gauge]] = {}

    def gauges(self, found: Classification) -> tuple[Gauge, Gauge]:
        """The in-queue and executing gauges of ``found``'s level and flow schema."""
        key = (found.level, found.flow_schema)
        pair = self._gauges.get(key)
        if pair is None:
            pair = self._gauges[key] = (self.inqueue.labels(*key), self.executing.labels(*key))
        return pair

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
