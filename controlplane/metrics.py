"""The hub's Prometheus metrics: what ``GET /metrics`` on the hub shows.

In: observations from the parts of the hub that see them -- the API server (one middleware
times every request), the scheduler controller (:func:`observe_scheduling_latency`), and the
waste sampler (:meth:`HubMetrics.record_fleet`, :meth:`HubMetrics.record_bindings`,
:meth:`HubMetrics.record_cluster_reports` once per sample). Out: the Prometheus text format
from :meth:`HubMetrics.routes`, as kube's metrics framework writes it (:mod:`controlplane.exposition`).

Metrics (all prefixed ``gpufed_``):

* ``apiserver_request_duration_seconds{verb,group,resource,code}`` -- histogram of API
  request latency; watches are left out (they last as long as the client wants);
* ``scheduling_duration_seconds{result}`` -- histogram of one binding's scheduling attempt (one a
  Kueue pod group's, for all its Pods);
* ``gpus{state,cluster,model}`` -- GPU-equivalents in each waste state at the last sample (a
  MIG slice counts as its share of the GPU);
* ``gpu_hours_total{state,cluster,model}`` and ``gpu_cost_usd_total{state,cluster,model}`` --
  GPU-hours and dollars per state, integrated between samples exactly as the waste report
  does (a sample holds until the next one, gaps longer than ``max_interval`` are not counted);
  counters, so ``increase(gpufed_gpu_hours_total[24h])`` is the last day's hours;
* ``resourcebindings{condition,status}`` -- ResourceBindings by condition type and status
  (``condition="none"`` for bindings without conditions yet);
* ``agent_report_lag_seconds{cluster}`` -- seconds since each member's last capacity report
  (``Cluster.status.lastReportTime``), computed when scraped;
* ``fleet_disruption_state{state}`` -- 1 for the fleet's current disruption state (``Normal``,
  ``PartialDisruption``, ``FullDisruption``: the hub suspects itself and evicts nothing), 0 for
  the others; ``fleet_clusters{health}`` -- clusters ``ready`` and ``unhealthy`` as the cluster
  health monitor last counted them (see controllers/disruption.py);
* ``proxy_requests_total{cluster,verb,code}``, ``proxy_open_streams{cluster}``,
  ``proxy_relayed_bytes_total{cluster,direction}``, ``proxy_tunnel_connected{cluster}`` -- the
  cluster proxy (:mod:`controlplane.apiserver.proxy.metrics`);
* ``apiserver_request_total`` and ``apiserver_request_duration_seconds`` (kube's names, labels and
  buckets, no prefix) -- every resource request by verb, dry run, group, version, resource,
  subresource, scope and code (:mod:`controlplane.apiserver.requestmetrics`);
* ``apiserver_flowcontrol_*`` (kube's names, no prefix) -- API Priority and Fairness
  (:mod:`controlplane.apiserver.flowcontrol.metrics`);
* ``apiserver_admission_webhook_*`` and ``apiserver_validating_admission_policy_*`` (kube's names,
  no prefix) -- admission webhook calls, refusals and latency, and policy checks
  (:mod:`controlplane.apiserver.webhooks.metrics`);
* ``apiserver_client_certificate_expiration_seconds`` (kube's name and buckets, no prefix) -- the
  remaining lifetime of each client certificate offered
  (:mod:`controlplane.apiserver.clientcertificates`);
* ``apiserver_audit_event_total`` and ``apiserver_audit_error_total{plugin}`` (kube's names, no
  prefix) -- audit events made and lost (:mod:`controlplane.apiserver.audit.metrics`);
* ``kueue_*`` (Kueue's names, no prefix) -- fleet admission: pending, reserving and admitted
  workloads, usage and quotas per ClusterQueue, flavor and resource, admissions, evictions and
  wait times (:mod:`controlplane.admission.metrics`);
* ``workqueue_*{name}`` (client-go's names, no prefix) -- every controller's work queue: adds,
  depth, queue and work durations, retries, work in progress
  (:mod:`controlplane.controllers.workqueuemetrics`);
* ``apiserver_storage_size_bytes{storage_cluster_id}`` (kube's name, no prefix) and
  ``etcd_db_size_in_use_bytes{storage_cluster_id}`` -- etcd's database file and what it uses
  (:mod:`controlplane.storage.spacekeeping`);
* ``gpufed_embedded_etcd_restarts_total`` -- times the hub started its embedded etcd again after
  the etcd process exited (:mod:`controlplane.storage.etcdkeeper`);
* ``waste_samples_total{result}`` and ``waste_sample_duration_seconds`` -- the sampler itself;
* ``storage_writes_total{resource,subresource,writer,verb}`` -- every etcd write of the API and
  the controllers, by who wrote (``admin``, ``agent``, ``controller:status``...) and
  ``watch_events_decoded_total{resource,watcher}`` -- every watch event a watcher decoded (the
  write ledger, :mod:`controlplane.storage.ledger`, which also counts
  ``storage_reads_total{resource,reader}``; ``GET /debug/writes`` shows it to admins
  as JSON, with the last writes in full when the hub runs with ``--debug-write-journal N``).

Each :class:`HubMetrics` has its own ``CollectorRegistry`` (with the process and Python GC
collectors), so tests can make fresh ones; :func:`hub_metrics` is the process's instance,
which the hub serves and :func:`observe_scheduling_latency` feeds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from controlplane.admission.metrics import QueueMetrics
from controlplane.apis.timestamps import parse_time
from controlplane.apiserver import errors
from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.clientcertificates import expiration_histogram
from controlplane.apiserver.flowcontrol import FlowControlMetrics
from controlplane.apiserver.proxy.metrics import ProxyMetrics
from controlplane.apiserver.requestmetrics import RequestMetrics, labelled
from controlplane.apiserver.requeststate import REQUEST_INFO
from controlplane.apiserver.webhooks.metrics import AdmissionMetrics
from controlplane.controllers.disruption import FleetState
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.exposition import render
from controlplane.reports.classify import DeviceState
from controlplane.reports.rollups import CELL_GPU, CELL_USD, CellKey, cell_rates
from controlplane.storage.etcdkeeper import EtcdRestartMetrics
from controlplane.storage.ledger import WriteLedger
from controlplane.storage.spacekeeping import StorageSizeMetrics

logger = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
NAMESPACE = "gpufed"
#: A sample older than this is not integrated into the counters (matches the accumulator).
DEFAULT_MAX_INTERVAL = timedelta(minutes=5)
NO_CONDITION = "none"

_API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_SCHEDULING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SAMPLE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_GC_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_STALL_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
_SKIPPED_VERBS = frozenset({"watch"})
#: Label sets of the request histogram whose series the middleware keeps at hand.
_API_SERIES_MEMO = 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: (state, cluster, model)
_StateKey = tuple[str, str, str]


class _ReportLagCollector(Collector):
    """``gpufed_agent_report_lag_seconds``: now minus each cluster's last report, when scraped."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_reports: dict[str, float] = {}

    def update(self, last_reports: Mapping[str, float]) -> None:
        with self._lock:
            self._last_reports = dict(last_reports)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}_agent_report_lag_seconds",
            "Seconds since each member cluster's agent last reported its capacity.",
            labels=["cluster"],
        )
        now = self._clock()
        with self._lock:
            reports = sorted(self._last_reports.items())
        for cluster, reported in reports:
            family.add_metric([cluster], max(now - reported, 0.0))
        yield family


class _LedgerCollector(Collector):
    """``gpufed_storage_writes_total`` and ``gpufed_watch_events_decoded_total`` from the ledger."""

    def __init__(self) -> None:
        self.ledger: WriteLedger | None = None

    def collect(self) -> Iterator[Metric]:
        writes = CounterMetricFamily(
            f"{NAMESPACE}_storage_writes",
            "Writes to etcd by the API and the controllers, by resource, subresource, writer and verb.",
            labels=["resource", "subresource", "writer", "verb"],
        )
        events = CounterMetricFamily(
            f"{NAMESPACE}_watch_events_decoded",
            "Watch events decoded, by resource and watcher (each watcher decodes every event it gets).",
            labels=["resource", "watcher"],
        )
        reads = CounterMetricFamily(
            f"{NAMESPACE}_storage_reads",
            "Single-key reads from etcd by the API and the controllers, by resource and reader.",
            labels=["resource", "reader"],
        )
        ledger = self.ledger
        if ledger is not None:
            for labels, count in sorted(ledger.writes.items()):
                writes.add_metric(list(labels), count)
            for (resource, watcher), count in sorted(ledger.events.items()):
                events.add_metric([resource, watcher], count)
            for (resource, reader), count in sorted(ledger.reads.items()):
                reads.add_metric([resource, reader], count)
        yield writes
        yield events
        yield reads


class HubMetrics:
    """The hub's metrics in their own registry (see the module docstring)."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        max_interval: timedelta = DEFAULT_MAX_INTERVAL,
        process_collectors: bool = True,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._max_interval = max_interval.total_seconds()
        if process_collectors:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        # Every metric is gpufed_<name> in this registry.
        counter = partial(Counter, namespace=NAMESPACE, registry=self.registry)
        gauge = partial(Gauge, namespace=NAMESPACE, registry=self.registry)
        histogram = partial(Histogram, namespace=NAMESPACE, registry=self.registry)
        #: etcd's size, under kube-apiserver's name (controlplane.storage.spacekeeping).
        self.storage_size = StorageSizeMetrics(self.registry)
        #: The embedded etcd's restarts (controlplane.storage.etcdkeeper).
        self.etcd_restarts = EtcdRestartMetrics(self.registry)
        self.api_request_duration = histogram(
            "apiserver_request_duration_seconds",
            "Latency of hub API requests (watches excluded), by verb, API group, resource and HTTP code.",
            ["verb", "group", "resource", "code"],
            buckets=_API_BUCKETS,
        )
        self.scheduling_duration = histogram(
            "scheduling_duration_seconds",
            "Time to schedule one ResourceBinding (filter, score and divide), by result.",
            ["result"],
            buckets=_SCHEDULING_BUCKETS,
        )
        self.gpus = gauge(
            "gpus",
            "GPU-equivalents in each waste state at the last sample (a MIG slice counts as its share).",
            ["state", "cluster", "model"],
        )
        self.gpu_hours = counter(
            "gpu_hours",
            "GPU-hours accounted in each waste state, integrated between samples.",
            ["state", "cluster", "model"],
        )
        self.gpu_cost = counter(
            "gpu_cost_usd",
            "Dollars of GPU time accounted in each waste state (cluster pricing per GPU model).",
            ["state", "cluster", "model"],
        )
        self.bindings = gauge(
            "resourcebindings",
            "ResourceBindings by condition type and status (condition 'none': no condition yet).",
            ["condition", "status"],
        )
        self.waste_samples = counter(
            "waste_samples",
            "Fleet samples taken by the waste accounting, by result (ok, error).",
            ["result"],
        )
        self.waste_sample_duration = histogram(
            "waste_sample_duration_seconds",
            "Time to read the fleet, classify it, account it and persist the rollups.",
            buckets=_SAMPLE_BUCKETS,
        )
        self.gc_pause = histogram(
            "gc_pause_seconds",
            "Time the hub's loop was held by a pass of Python's cyclic garbage collector over its older "
            "generations (1 and 2), by generation (see --gc-freeze-interval).",
            ["generation"],
            buckets=_GC_BUCKETS,
        )
        self.loop_stall = histogram(
            "event_loop_stall_seconds",
            "Stalls of the hub's event loop at least --loop-stall-warning long (each is also logged with "
            "where the loop was held).",
            buckets=_STALL_BUCKETS,
        )
        self.fleet_disruption_state = gauge(
            "fleet_disruption_state",
            "1 for the fleet's current disruption state (Normal, PartialDisruption, FullDisruption), 0 otherwise.",
            ["state"],
        )
        self.fleet_clusters = gauge(
            "fleet_clusters",
            "Clusters Ready ('ready') and not ready or unreachable ('unhealthy') at the health monitor's last pass.",
            ["health"],
        )
        #: kube-apiserver's request counter and latency, under its names (controlplane.apiserver.requestmetrics).
        self.requests = RequestMetrics(self.registry)
        #: The cluster proxy's requests, streams, bytes and tunnels (controlplane.apiserver.proxy).
        self.proxy = ProxyMetrics(self.registry)
        #: API Priority and Fairness, under kube's metric names (controlplane.apiserver.flowcontrol).
        self.flowcontrol = FlowControlMetrics(self.registry)
        #: Admission webhooks and policies, under kube's metric names (controlplane.apiserver.webhooks.metrics).
        self.admission = AdmissionMetrics(self.registry)
        #: Audit events and the ones lost, under kube's metric names (controlplane.apiserver.audit.metrics).
        self.audit = AuditMetrics(self.registry)
        #: Client certificates' remaining lifetimes, under kube's name (controlplane.apiserver.clientcertificates).
        self.client_certificate_expiration = expiration_histogram(self.registry)
        #: Fleet admission, under Kueue's metric names (controlplane.admission.metrics).
        self.queues = QueueMetrics(self.registry)
        #: Every controller's work queue, under client-go's metric names (controlplane.controllers.workqueuemetrics).
        self.workqueues = WorkqueueMetrics(self.registry)
        self._report_lag = _ReportLagCollector(clock)
        self.registry.register(self._report_lag)
        self._ledger = _LedgerCollector()
        self.registry.register(self._ledger)
        #: The last sample's per-second rates: (GPU-equivalents, dollars per second) per key.
        self._held: tuple[float, dict[_StateKey, tuple[float, float]]] | None = None

    # -- observations --------------------------------------------------------------------------

    def count_writes(self, ledger: WriteLedger) -> None:
        """Serve ``ledger``'s counters (the hub's; the last one given wins)."""
        self._ledger.ledger = ledger

    def observe_scheduling(self, seconds: float, *, result: str) -> None:
        """One binding scheduled in ``seconds`` with ``result`` (e.g. Success, NoClusterFit)."""
        self.scheduling_duration.labels(result=result).observe(max(seconds, 0.0))

    def observe_sample(self, seconds: float, *, ok: bool) -> None:
        self.waste_samples.labels(result="ok" if ok else "error").inc()
        if ok:
            self.waste_sample_duration.observe(max(seconds, 0.0))

    def record_fleet(self, states: Iterable[DeviceState], *, time: datetime) -> None:
        """The fleet's device states at ``time``: sets ``gpus`` and integrates the held sample
        into ``gpu_hours_total``/``gpu_cost_usd_total`` up to ``time``."""
        self.record_fleet_cells(cell_rates(states), time=time)

    def record_fleet_cells(self, cells: Mapping[CellKey, Sequence[float]], *, time: datetime) -> None:
        """:meth:`record_fleet` from the sample's cell rates (:func:`~controlplane.reports.rollups.cell_rates`,
        which the accounting has already summed): no pass over every device again."""
        rates: dict[_StateKey, list[float]] = {}
        for (state, cluster, product, *_), values in cells.items():
            slot = rates.setdefault((state, cluster, product), [0.0, 0.0])
            slot[0] += values[CELL_GPU]
            slot[1] += values[CELL_USD]
        now = time.timestamp()
        if self._held is not None:
            held_time, held_rates = self._held
            seconds = min(now - held_time, self._max_interval)
            if seconds > 0:
                for (state, cluster, model), (gpus, usd_per_second) in held_rates.items():
                    self.gpu_hours.labels(state, cluster, model).inc(gpus * seconds / 3600.0)
                    self.gpu_cost.labels(state, cluster, model).inc(usd_per_second * seconds)
        if self._held is None or now > self._held[0]:
            self._held = (now, {key: (values[0], values[1]) for key, values in rates.items()})
        self.gpus.clear()
        for (state, cluster, model), (gpus, _) in sorted(rates.items()):
            self.gpus.labels(state, cluster, model).set(gpus)

    def forget_held_sample(self) -> None:
        """Stop integrating from the last sample (the sampler stopped, e.g. leadership lost)."""
        self._held = None
        self.gpus.clear()

    def record_bindings(self, bindings: Iterable[Mapping[str, Any]]) -> None:
        """Count ResourceBindings by each condition's type and status."""
        counts: dict[tuple[str, str], int] = {}
        for binding in bindings:
            conditions = (binding.get("status") or {}).get("conditions") or []
            if not conditions:
                key = (NO_CONDITION, "")
                counts[key] = counts.get(key, 0) + 1
            for condition in conditions:
                if not isinstance(condition, Mapping):
                    continue
                key = (str(condition.get("type") or ""), str(condition.get("status") or ""))
                counts[key] = counts.get(key, 0) + 1
        self.bindings.clear()
        for (condition_type, status), count in sorted(counts.items()):
            self.bindings.labels(condition_type, status).set(count)

    def record_fleet_state(self, state: str, ready: int, unhealthy: int) -> None:
        """The cluster health monitor's latest count and the fleet's disruption state."""
        for known in FleetState:
            self.fleet_disruption_state.labels(str(known)).set(1 if known == state else 0)
        self.fleet_clusters.labels("ready").set(ready)
        self.fleet_clusters.labels("unhealthy").set(unhealthy)

    def record_cluster_reports(self, clusters: Iterable[Mapping[str, Any]]) -> None:
        """Remember each cluster's ``status.lastReportTime`` for the report lag gauge."""
        reports: dict[str, float] = {}
        for cluster in clusters:
            name = str((cluster.get("metadata") or {}).get("name") or "")
            reported = (cluster.get("status") or {}).get("lastReportTime")
            if not name or not isinstance(reported, str):
                continue
            try:
                reports[name] = parse_time(reported).timestamp()
            except ValueError:
                continue
        self._report_lag.update(reports)

    # -- serving -------------------------------------------------------------------------------

    def render(self) -> bytes:
        return render(self.registry)

    def middleware(self) -> Middleware:
        """Times every API request into ``gpufed_apiserver_request_duration_seconds``, and counts and
        times each resource request under kube's names (:class:`RequestMetrics`); put it outermost."""
        histogram = self.api_request_duration
        requests = self.requests
        # Each label set's series, looked up once (labels() converts, checks and locks on every
        # call); bounded, past which a new label set is looked up each time as before.
        series: dict[tuple[str, str, str, int], Histogram] = {}

        @web.middleware
        async def time_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
            started = time.perf_counter()
            code = 500
            try:
                response = await handler(request)
                code = response.status
                return response
            except web.HTTPException as exc:
                code = exc.status
                raise
            finally:
                info = request.get(REQUEST_INFO)
                if info is not None:
                    info = labelled(request, info)
                if info is not None and info.is_resource:
                    requests.observe(request, info, code=code, seconds=time.perf_counter() - started)
                verb = (info.verb if info is not None else "") or request.method.lower()
                if verb not in _SKIPPED_VERBS:
                    group = info.group if info is not None and info.is_resource else ""
                    resource = info.resource if info is not None and info.is_resource else ""
                    if info is not None and info.subresource:
                        resource = f"{resource}/{info.subresource}"
                    key = (verb, group, resource, code)
                    child = series.get(key)
                    if child is None:
                        child = histogram.labels(verb, group, resource, str(code))
                        if len(series) < _API_SERIES_MEMO:
                            series[key] = child
                    child.observe(time.perf_counter() - started)

        return time_requests

    def routes(self) -> list[web.RouteDef]:
        """``GET /metrics`` in the Prometheus text format."""

        async def metrics(_request: web.Request) -> web.StreamResponse:
            response = web.Response(body=self.render())
            response.headers["Content-Type"] = CONTENT_TYPE_LATEST
            return response

        return [web.get(METRICS_PATH, metrics)]


DEBUG_WRITES_PATH = "/debug/writes"


def write_ledger_routes(ledger: WriteLedger) -> list[web.RouteDef]:
    """``GET /debug/writes[?since=REVISION]``: the write ledger as JSON (the journal's writes after
    ``since`` only, when given). Authorized as any non-resource path: the default policy lets only
    ``cluster-admin`` read it (its journal names objects' keys), as kube's ``/debug/*``."""

    async def writes(request: web.Request) -> web.StreamResponse:
        since = request.query.get("since", "0")
        if not (since.isascii() and since.isdigit()):
            raise errors.BadRequest(f'since: Invalid value: "{since}": must be a revision (a non-negative integer)')
        return web.Response(body=orjson.dumps(ledger.snapshot(since=int(since))), content_type="application/json")

    return [web.get(DEBUG_WRITES_PATH, writes)]


_default: HubMetrics | None = None


def hub_metrics() -> HubMetrics:
    """The process's hub metrics (created on first use)."""
    global _default
    if _default is None:
        _default = HubMetrics()
    return _default


def observe_scheduling_latency(seconds: float, *, result: str) -> None:
    """Hook for the scheduler controller: one binding's scheduling attempt took ``seconds``.

    ``result`` is the Scheduled condition's reason (Success, NoClusterFit, Unschedulable,
    SchedulerError). Safe to call from anywhere in the hub process.
    """
    hub_metrics().observe_scheduling(seconds, result=result)


__all__ = [
    "METRICS_PATH",
    "HubMetrics",
    "hub_metrics",
    "observe_scheduling_latency",
    "write_ledger_routes",
]
