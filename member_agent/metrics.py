"""The member agent's Prometheus metrics, served on ``--metrics-listen`` at ``/metrics``.

In: what the agent observes -- capacity reports written or failed, DCGM scrapes, Work
applies. Out: the Prometheus text format over plain HTTP (the page holds counts and timings
about one cluster, no credentials; bind it to an address only the monitoring can reach).

Metrics (all prefixed ``gpufed_agent_``, each labelled with the agent's ``cluster``):

* ``report_lag_seconds`` -- seconds since the last capacity report the hub accepted (since the
  agent started, before the first): how stale the hub's view of this cluster is;
* ``reports_written_total`` / ``report_failures_total`` -- capacity reports written / failed;
* ``last_report_timestamp_seconds`` -- when the last report was accepted (Unix time);
* ``dcgm_scrapes_total{result}`` -- DCGM exporter scrapes (ok, error);
* ``leader_election_master_status`` -- 1 while this agent holds its cluster's leader Lease, else 0
  (client-go's gauge of that name; 1 from the start when ``--leader-elect=false``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from functools import partial

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
NAMESPACE = "gpufed_agent"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9464`` for IPv6, ``:9464`` for every address); ValueError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:9464), not {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class _LagCollector(Collector):
    def __init__(self, metrics: AgentMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}_report_lag_seconds",
            "Seconds since the hub last accepted a capacity report from this agent "
            "(since the agent started, before the first).",
            labels=["cluster"],
        )
        family.add_metric([self._metrics.cluster], self._metrics.report_lag())
        yield family


class AgentMetrics:
    """One agent's metrics in their own registry."""

    def __init__(self, cluster: str, *, clock: Callable[[], float] = time.time) -> None:
        self.cluster = cluster
        self._clock = clock
        self._started = clock()
        self.last_report: float | None = None
        self.registry = CollectorRegistry(auto_describe=True)
        # Every metric is gpufed_agent_<name> in this registry.
        counter = partial(Counter, namespace=NAMESPACE, registry=self.registry)
        gauge = partial(Gauge, namespace=NAMESPACE, registry=self.registry)
        self.reports_written = counter(
            "reports_written",
            "Capacity reports the hub accepted.",
            ["cluster"],
        )
        self.report_failures = counter("report_failures", "Capacity reports that failed.", ["cluster"])
        self.last_report_timestamp = gauge(
            "last_report_timestamp_seconds",
            "Unix time of the last capacity report the hub accepted.",
            ["cluster"],
        )
        self.dcgm_scrapes = counter(
            "dcgm_scrapes",
            "DCGM exporter scrapes by result (ok, error).",
            ["cluster", "result"],
        )
        self.leader = gauge(
            "leader_election_master_status",
            "1 while this agent holds its cluster's leader Lease (the agent that runs), else 0.",
            ["cluster"],
        )
        self.registry.register(_LagCollector(self))

    def leading(self, leading: bool) -> None:
        self.leader.labels(self.cluster).set(1 if leading else 0)

    def report_lag(self) -> float:
        since = self.last_report if self.last_report is not None else self._started
        return max(self._clock() - since, 0.0)

    def report_written(self) -> None:
        self.last_report = self._clock()
        self.reports_written.labels(self.cluster).inc()
        self.last_report_timestamp.labels(self.cluster).set(self.last_report)

    def report_failed(self) -> None:
        self.report_failures.labels(self.cluster).inc()

    def dcgm_scraped(self, *, ok: bool) -> None:
        self.dcgm_scrapes.labels(self.cluster, "ok" if ok else "error").inc()

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))


class MetricsServer:
    """``/metrics`` of ``metrics`` over HTTP on ``host:port`` (port 0 picks a free one)."""

    def __init__(self, metrics: AgentMetrics, *, host: str, port: int) -> None:
        self._metrics = metrics
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def start(self) -> None:
        async def serve(_request: web.Request) -> web.StreamResponse:
            response = web.Response(body=self._metrics.render())
            response.headers["Content-Type"] = CONTENT_TYPE_LATEST
            return response

        app = web.Application()
        app.router.add_get(METRICS_PATH, serve)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        self.port = self._port
        for address in self._runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                self.port = int(address[1])
                break
        logger.info("agent metrics at http://%s:%s%s", self._host, self.port, METRICS_PATH)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


__all__ = ["AgentMetrics", "MetricsServer", "parse_listen"]
