"""``GET /metrics/slis``: the health checks' results as metrics, as kube-apiserver serves them
(component-base ``metrics/prometheus/slis``).

In: each check that ``/healthz``, ``/livez`` or ``/readyz`` ran (:meth:`HealthcheckSLIs.observe`,
called by :class:`~controlplane.apiserver.health.HealthEndpoints`; as kube's ``handleRootHealth``,
an excluded check and a single check's own path record nothing). Out: kube's two metrics in the
Prometheus text format, from their own registry (not on ``/metrics``):

* ``kubernetes_healthcheck{name,type}`` -- 1 when the check last passed, 0 when it failed;
* ``kubernetes_healthchecks_total{name,type,status}`` -- the results, ``status`` ``success`` or
  ``error``;

``name`` is the check (``etcd``), ``type`` the endpoint that ran it (``readyz``). ``DELETE
/metrics/slis`` forgets every result and answers ``metrics reset`` (kube's ``HandlerWithReset``, which
kube-apiserver installs with profiling on, its default). Authorized as any non-resource path, with
the request's verb: the default RBAC policy lets ``system:monitoring`` ``get`` it, as kube's, and only
whom a role grants ``delete`` on the path (``cluster-admin``) may reset it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controlplane.exposition import render
from controlplane.metricstability import Stability, kube_help

SLIS_PATH = "/metrics/slis"
_HEALTHCHECK_HELP = kube_help(Stability.STABLE, "This metric records the result of a single healthcheck.")
_HEALTHCHECKS_TOTAL_HELP = kube_help(Stability.STABLE, "This metric records the results of all healthcheck.")


class HealthcheckSLIs(Collector):
    """The health checks' last results and counts (kube's ``slis.ObserveHealthcheck``)."""

    def __init__(self) -> None:
        #: (check, endpoint) -> whether it passed last time.
        self._last: dict[tuple[str, str], bool] = {}
        #: (check, endpoint, "success" | "error") -> results.
        self._totals: Counter[tuple[str, str, str]] = Counter()
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)

    def observe(self, name: str, endpoint: str, *, passed: bool) -> None:
        self._last[name, endpoint] = passed
        self._totals[name, endpoint, "success" if passed else "error"] += 1

    def reset(self) -> None:
        self._last.clear()
        self._totals.clear()

    def collect(self) -> Iterator[Metric]:
        last = GaugeMetricFamily("kubernetes_healthcheck", _HEALTHCHECK_HELP, labels=["name", "type"])
        for (name, endpoint), passed in sorted(self._last.items()):
            last.add_metric([name, endpoint], 1.0 if passed else 0.0)
        # A family without a creation time: kube's counter has no ``_created`` series.
        totals = CounterMetricFamily("kubernetes_healthchecks", _HEALTHCHECKS_TOTAL_HELP, labels=["name", "type", "status"])
        for (name, endpoint, status), count in sorted(self._totals.items()):
            totals.add_metric([name, endpoint, status], float(count))
        yield last
        yield totals

    def render(self) -> bytes:
        return render(self._registry)

    def routes(self) -> list[web.RouteDef]:
        """``GET /metrics/slis`` in the Prometheus text format, ``DELETE`` to reset it."""

        async def slis(_request: web.Request) -> web.StreamResponse:
            return web.Response(body=self.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def reset(_request: web.Request) -> web.StreamResponse:
            self.reset()
            return web.Response(text="metrics reset\n")

        return [web.get(SLIS_PATH, slis), web.delete(SLIS_PATH, reset)]


__all__ = ["SLIS_PATH", "HealthcheckSLIs"]
