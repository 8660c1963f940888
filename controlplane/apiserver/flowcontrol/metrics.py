"""API Priority and Fairness metrics, under kube-apiserver's names (no ``gpufed_`` prefix, so
kube's dashboards and alerts read them as they are):

* ``apiserver_flowcontrol_current_inqueue_requests{priority_level,flow_schema}`` -- waiting;
* ``apiserver_flowcontrol_current_executing_requests{priority_level,flow_schema}`` -- served;
* ``apiserver_flowcontrol_rejected_requests_total{priority_level,flow_schema,reason}`` --
  429s (``queue-full``, ``concurrency-limit``, ``time-out``) and clients gone while waiting
  (``cancelled``);
* ``apiserver_flowcontrol_request_wait_duration_seconds{priority_level,flow_schema,execute}``
  -- time in the queue, ``execute="true"`` for requests that then ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from controlplane.apiserver.flowcontrol.levels import Classification

_LABELS = ["priority_level", "flow_schema"]
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
