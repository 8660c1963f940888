"""Kueue's Prometheus metrics for the hub's fleet admission, under Kueue's names and labels.

Why this module exists: dashboards and alerts written for Kueue read ``kueue_*`` series; the hub
admits for the whole fleet, so it exports the same names and labels (Kueue's "Prometheus
metrics" reference), fed by the admission controller from what each cycle already computed —
a scrape reads no object. In: per cycle the ClusterQueues as the core reads them, their
objects, the quota usage, the waiting workloads and the quota holders
(:func:`queue_figures`); per event an admission, an eviction or a preemption. Out, in the
``CollectorRegistry`` given (the hub's ``/metrics``):

* gauges per ClusterQueue: ``kueue_pending_workloads{cluster_queue,status}`` (``active``:
  waiting for quota, ``inadmissible``: cannot be admitted as things are),
  ``kueue_reserving_active_workloads{cluster_queue}``, ``kueue_admitted_active_workloads{cluster_queue}``,
  ``kueue_cluster_queue_status{cluster_queue,status}`` (1 for one of ``pending``, ``active``,
  ``terminating``); with fair sharing, ``kueue_cluster_queue_weighted_share{cluster_queue}`` and,
  per Cohort object, ``kueue_cohort_weighted_share{cohort}`` (Kueue's weighted share: its
  ``status.fairSharing.weightedShare``; 9223372036854775807 when a weight-0 queue borrows);
* gauges per ClusterQueue, flavor and resource, labelled ``{cohort,cluster_queue,flavor,resource}``:
  ``kueue_cluster_queue_resource_usage``, ``kueue_cluster_queue_resource_reservation``,
  ``kueue_cluster_queue_nominal_quota``, ``kueue_cluster_queue_borrowing_limit``,
  ``kueue_cluster_queue_lending_limit`` (``+Inf`` when no limit is set, as Kueue reports it), in
  Kueue's units: cpu in cores, memory in bytes, GPUs and pods as counts;
* counters: ``kueue_admitted_workloads_total{cluster_queue}``,
  ``kueue_quota_reserved_workloads_total{cluster_queue}``,
  ``kueue_evicted_workloads_total{cluster_queue,reason}``,
  ``kueue_preempted_workloads_total{preempting_cluster_queue,reason}``,
  ``kueue_admission_attempts_total{result}`` (``success``: the cycle admitted something);
* histograms: ``kueue_admission_wait_time_seconds{cluster_queue}`` and
  ``kueue_quota_reserved_wait_time_seconds{cluster_queue}`` (from creation, or the last
  eviction, to admission; Kueue's buckets 1, 2.5, 5 … 10240 s),
  ``kueue_ready_wait_time_seconds{cluster_queue}`` and
  ``kueue_admitted_until_ready_wait_time_seconds{cluster_queue}`` (from creation or the last
  eviction, and from admission, to ``PodsReady=True``; only with ``waitForPodsReady``, as Kueue),
  ``kueue_admission_attempt_duration_seconds{result}``.

Per LocalQueue, labelled ``{name,namespace}`` (Kueue exports them with its ``LocalQueueMetrics``
feature gate; the hub always does): the gauges ``kueue_local_queue_pending_workloads{…,status}``,
``kueue_local_queue_reserving_active_workloads``, ``kueue_local_queue_admitted_active_workloads``,
``kueue_local_queue_status{…,active}`` (1 for one of ``True``, ``False``, ``Unknown``: its
``Active`` condition), ``kueue_local_queue_resource_usage`` and
``kueue_local_queue_resource_reservation`` ``{…,flavor,resource}`` (what its admitted workloads
hold), the counters ``kueue_local_queue_admitted_workloads_total``,
``kueue_local_queue_quota_reserved_workloads_total`` and
``kueue_local_queue_evicted_workloads_total{…,reason}``, and the histograms
``kueue_local_queue_admission_wait_time_seconds``,
``kueue_local_queue_quota_reserved_wait_time_seconds``, ``kueue_local_queue_ready_wait_time_seconds``
and ``kueue_local_queue_admitted_until_ready_wait_time_seconds``.

A ClusterQueue or LocalQueue deleted takes its series with it (as Kueue clears them); a hub
replica that stops leading forgets the gauges (:meth:`QueueMetrics.forget`), so only the leader
reports queues.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controlplane.admission.core import ClusterQueue, FlavorResource, Usage, Waiting
from controlplane.admission.objects import local_queue_of
from controlplane.admission.stopping import local_queue_active
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kueue_views import LocalQueueView
from controlplane.apis.quantity import MILLI_RESOURCES

NAMESPACE: Final = "kueue"
WAIT_BUCKETS: Final = (1.0, *(2.5 * 2**i for i in range(13)))
"""Kueue's ``generateExponentialBuckets(14)``: 1, 2.5, 5, 10 … 10240 seconds."""
ATTEMPT_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STATUS_PENDING: Final = "pending"
STATUS_ACTIVE: Final = "active"
STATUS_TERMINATING: Final = "terminating"
CQ_STATUSES: Final = (STATUS_PENDING, STATUS_ACTIVE, STATUS_TERMINATING)
PENDING_ACTIVE: Final = "active"
PENDING_INADMISSIBLE: Final = "inadmissible"
CONDITION_STATUSES: Final = ("True", "False", "Unknown")
LocalQueueKey = tuple[str, str]
"""(namespace, name) of a LocalQueue."""
Key = TypeVar("Key", str, LocalQueueKey)


def kueue_units(resource: str, amount: int) -> float:
    """An amount in the core's base unit (cpu: millicores) as Kueue's metrics report it (cpu: cores)."""
    return amount / 1000.0 if resource in MILLI_RESOURCES else float(amount)


@dataclass(frozen=True, slots=True)
class ResourceFigures:
    flavor: str
    resource: str
    nominal: float
    borrowing_limit: float
    lending_limit: float
    usage: float


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """One ClusterQueue's figures at the end of an admission cycle."""

    name: str
    cohort: str
    status: str
    pending_active: int
    pending_inadmissible: int
    reserving: int
    resources: tuple[ResourceFigures, ...]
    weighted_share: int | None = None
    """Its fair-sharing weighted share (None: fair sharing is off)."""
    admitted: int | None = None
    """Of ``reserving``, those admitted (None: all; fewer while admission checks are pending)."""


def queue_figures(
    queues: Mapping[str, ClusterQueue],
    objects: Mapping[str, Mapping[str, Any]],
    usage: Usage,
    waiting: Iterable[Waiting],
    holders: Mapping[str, str],
    *,
    fair_sharing: bool = False,
    admitted: Collection[str] | None = None,
) -> list[QueueFigures]:
    """Each ClusterQueue's figures: ``waiting`` (its reason says active or inadmissible),
    ``holders`` (Workload key → the ClusterQueue whose quota it holds; ``admitted``: those of
    them admitted, None: all) and ``usage`` (with ``fair_sharing``, its weighted share too). Pure."""
    pending: dict[str, list[int]] = {}
    for w in waiting:
        pending.setdefault(w.queue, [0, 0])[0 if w.reason != kueue.REASON_INADMISSIBLE else 1] += 1
    reserving: dict[str, int] = {}
    admitted_in: dict[str, int] = {}
    for key, holder_queue in holders.items():
        reserving[holder_queue] = reserving.get(holder_queue, 0) + 1
        if admitted is None or key in admitted:
            admitted_in[holder_queue] = admitted_in.get(holder_queue, 0) + 1
    out: list[QueueFigures] = []
    for name in sorted(queues):
        queue = queues[name]
        meta = objects.get(name, {}).get("metadata") or {}
        status = STATUS_TERMINATING if meta.get("deletionTimestamp") else (
            STATUS_ACTIVE if queue.inactive_reason is None else STATUS_PENDING
        )
        resources = []
        for group in queue.groups:
            for fq in group.flavors:
                for resource, quota in fq.quotas.items():
                    units = partial(kueue_units, resource)
                    resources.append(ResourceFigures(
                        fq.flavor, resource, units(quota.nominal),
                        math.inf if quota.borrowing_limit is None else units(quota.borrowing_limit),
                        math.inf if quota.lending_limit is None else units(quota.lending_limit),
                        units(usage.of(name, (fq.flavor, resource))),
                    ))
        active, inadmissible = pending.get(name, [0, 0])
        out.append(QueueFigures(
            name, queue.cohort or "", status, active, inadmissible, reserving.get(name, 0), tuple(resources),
            usage.queue_share(name) if fair_sharing else None, admitted_in.get(name, 0),
        ))
    return out


@dataclass(frozen=True, slots=True)
class LocalQueueFigures:
    """One LocalQueue's figures at the end of an admission cycle."""

    namespace: str
    name: str
    active: str
    """Its ``Active`` condition's status: True, False or Unknown."""
    pending_active: int
    pending_inadmissible: int
    reserving: int
    usage: tuple[tuple[str, str, float], ...]
    """(flavor, resource, amount in Kueue's units) its admitted workloads hold."""
    admitted: int | None = None
    """Of ``reserving``, those admitted (None: all; fewer while admission checks are pending)."""


def local_queue_figures(
    local_queues: Mapping[LocalQueueKey, Mapping[str, Any]],
    cluster_queues_active: Mapping[str, Mapping[str, Any]],
    workloads: Mapping[str, Mapping[str, Any]],
    waiting: Iterable[Waiting],
    held: Mapping[str, Mapping[FlavorResource, int]],
    admitted: Collection[str] | None = None,
) -> list[LocalQueueFigures]:
    """Each LocalQueue's figures: ``waiting`` (its reason says active or inadmissible), ``held``
    (Workload key → what it holds per flavor and resource; ``admitted``: those of them admitted,
    None: all) and its ``Active`` condition, from its ClusterQueue's (``cluster_queues_active``). Pure."""
    pending: dict[LocalQueueKey, list[int]] = {}
    for w in waiting:
        pending.setdefault(local_queue_of(workloads[w.key]), [0, 0])[0 if w.reason != kueue.REASON_INADMISSIBLE else 1] += 1
    reserving: dict[LocalQueueKey, int] = {}
    admitted_in: dict[LocalQueueKey, int] = {}
    usage: dict[LocalQueueKey, dict[FlavorResource, int]] = {}
    for key, amounts in held.items():
        lq = local_queue_of(workloads[key])
        reserving[lq] = reserving.get(lq, 0) + 1
        if admitted is None or key in admitted:
            admitted_in[lq] = admitted_in.get(lq, 0) + 1
        mine = usage.setdefault(lq, {})
        for fr, amount in amounts.items():
            mine[fr] = mine.get(fr, 0) + amount
    out = []
    for lq_key in sorted(local_queues):
        obj = local_queues[lq_key]
        active = local_queue_active(obj, cluster_queues_active.get(LocalQueueView(obj).cluster_queue))
        resources = tuple(
            (flavor, resource, kueue_units(resource, amount))
            for (flavor, resource), amount in sorted(usage.get(lq_key, {}).items())
        )
        active_count, inadmissible = pending.get(lq_key, [0, 0])
        out.append(LocalQueueFigures(
            lq_key[0], lq_key[1], str(active.get("status") or "Unknown"), active_count, inadmissible,
            reserving.get(lq_key, 0), resources, admitted_in.get(lq_key, 0),
        ))
    return out


class _QueueSeries(Generic[Key]):
    """Series per queue: gauges rewritten each cycle, counters and histograms kept per ``Key``
    until its queue goes."""

    _gauges: tuple[Gauge, ...]
    _queues: set[Key]

    def _forget_queue(self, key: Key) -> None:
        raise NotImplementedError

    @staticmethod
    def _drop(counter: Counter, tracked: set[tuple[str, ...]], matches: Callable[[tuple[str, ...]], bool]) -> None:
        """Remove ``counter``'s series whose labels (kept in ``tracked``) match."""
        for labels in [t for t in tracked if matches(t)]:
            counter.remove(*labels)
            tracked.discard(labels)

    def forget(self) -> None:
        """Stop reporting queues (this replica no longer runs the admission controller)."""
        for g in self._gauges:
            g.clear()
        for key in list(self._queues):
            self._forget_queue(key)
        self._queues = set()


class LocalQueueMetrics(_QueueSeries[LocalQueueKey]):
    """Kueue's ``kueue_local_queue_*`` series in ``registry`` (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        gauge = partial(Gauge, namespace=NAMESPACE, registry=registry)
        counter = partial(Counter, namespace=NAMESPACE, registry=registry)
        histogram = partial(Histogram, namespace=NAMESPACE, registry=registry, buckets=WAIT_BUCKETS)
        lq, per_resource = ["name", "namespace"], ["name", "namespace", "flavor", "resource"]
        self.pending = gauge("local_queue_pending_workloads", "The number of pending workloads, per 'local_queue' "
                             "and 'status' (active: waiting for quota; inadmissible: cannot be admitted as things "
                             "are).", [*lq, "status"])
        self.reserving = gauge("local_queue_reserving_active_workloads",
                               "The number of Workloads that are reserving quota, per 'localQueue'.", lq)
        self.admitted_active = gauge("local_queue_admitted_active_workloads", "The number of admitted Workloads "
                                     "that are active (unsuspended and not finished), per 'localQueue'.", lq)
        self.status = gauge("local_queue_status", "Reports 'localQueue' with its 'active' status (True, False or "
                            "Unknown): 1 for one of the statuses.", [*lq, "active"])
        self.usage = gauge("local_queue_resource_usage",
                           "Reports the localQueue's total resource usage within all the flavors.", per_resource)
        self.reservation = gauge("local_queue_resource_reservation",
                                 "Reports the localQueue's total resource reservation within all the flavors.",
                                 per_resource)
        self.admitted_total = counter("local_queue_admitted_workloads",
                                      "The total number of admitted workloads per 'local_queue'.", lq)
        self.reserved_total = counter("local_queue_quota_reserved_workloads",
                                      "The total number of quota reserved workloads per 'local_queue'.", lq)
        self.evicted_total = counter("local_queue_evicted_workloads", "The number of evicted workloads per "
                                     "'local_queue' and 'reason'.", [*lq, "reason"])
        self.admission_wait = histogram("local_queue_admission_wait_time_seconds", "The time between a workload "
                                        "was created or requeued until admission, per 'local_queue'.", lq)
        self.reserved_wait = histogram("local_queue_quota_reserved_wait_time_seconds", "The time between a "
                                       "workload was created or requeued until it got quota reservation, per "
                                       "'local_queue'.", lq)
        self.ready_wait = histogram("local_queue_ready_wait_time_seconds", "The time between a workload was "
                                    "created or requeued until ready, per 'local_queue'.", lq)
        self.admitted_ready_wait = histogram("local_queue_admitted_until_ready_wait_time_seconds", "The time "
                                             "between a workload was admitted until ready, per 'local_queue'.", lq)
        self._gauges = (self.pending, self.reserving, self.admitted_active, self.status, self.usage, self.reservation)
        self._queues = set()
        self._evicted: set[tuple[str, ...]] = set()

    def record(self, figures: Iterable[LocalQueueFigures]) -> None:
        """The LocalQueues as the last cycle left them; any other LocalQueue's series go."""
        for g in self._gauges:
            g.clear()
        present: set[LocalQueueKey] = set()
        for q in figures:
            present.add((q.namespace, q.name))
            self.pending.labels(q.name, q.namespace, PENDING_ACTIVE).set(q.pending_active)
            self.pending.labels(q.name, q.namespace, PENDING_INADMISSIBLE).set(q.pending_inadmissible)
            self.reserving.labels(q.name, q.namespace).set(q.reserving)
            self.admitted_active.labels(q.name, q.namespace).set(q.reserving if q.admitted is None else q.admitted)
            for status in CONDITION_STATUSES:
                self.status.labels(q.name, q.namespace, status).set(1 if status == q.active else 0)
            for flavor, resource, amount in q.usage:
                self.usage.labels(q.name, q.namespace, flavor, resource).set(amount)
                self.reservation.labels(q.name, q.namespace, flavor, resource).set(amount)
        for gone in self._queues - present:
            self._forget_queue(gone)
        self._queues = present

    def admitted(self, local_queue: LocalQueueKey, *, waited_seconds: float, reserved: bool = True, admitted: bool = True) -> None:
        namespace, name = local_queue
        if admitted:
            self.admitted_total.labels(name, namespace).inc()
            self.admission_wait.labels(name, namespace).observe(waited_seconds)
        if reserved:
            self.reserved_total.labels(name, namespace).inc()
            self.reserved_wait.labels(name, namespace).observe(waited_seconds)
        self._queues.add(local_queue)

    def ready(self, local_queue: LocalQueueKey, *, queued_seconds: float, admitted_seconds: float) -> None:
        namespace, name = local_queue
        self.ready_wait.labels(name, namespace).observe(queued_seconds)
        self.admitted_ready_wait.labels(name, namespace).observe(admitted_seconds)
        self._queues.add(local_queue)

    def evicted(self, local_queue: LocalQueueKey, *, reason: str) -> None:
        namespace, name = local_queue
        self.evicted_total.labels(name, namespace, reason).inc()
        self._evicted.add((name, namespace, reason))
        self._queues.add(local_queue)

    def _forget_queue(self, local_queue: LocalQueueKey) -> None:
        namespace, name = local_queue
        for metric in (self.admitted_total, self.reserved_total, self.admission_wait, self.reserved_wait,
                       self.ready_wait, self.admitted_ready_wait):
            with contextlib.suppress(KeyError):  # never admitted anything
                metric.remove(name, namespace)
        self._drop(self.evicted_total, self._evicted, lambda labels: labels[:2] == (name, namespace))


class QueueMetrics(_QueueSeries[str]):
    """Kueue's metrics in ``registry`` (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        gauge = partial(Gauge, namespace=NAMESPACE, registry=registry)
        counter = partial(Counter, namespace=NAMESPACE, registry=registry)
        histogram = partial(Histogram, namespace=NAMESPACE, registry=registry)
        cq, per_resource = ["cluster_queue"], ["cohort", "cluster_queue", "flavor", "resource"]
        self.pending = gauge("pending_workloads", "The number of pending workloads, per 'cluster_queue' and 'status' "
                             "(active: waiting for quota; inadmissible: cannot be admitted as things are).",
                             ["cluster_queue", "status"])
        self.reserving = gauge("reserving_active_workloads",
                               "The number of Workloads that are reserving quota, per 'cluster_queue'.", cq)
        self.admitted_active = gauge("admitted_active_workloads", "The number of admitted Workloads that are active "
                                     "(unsuspended and not finished), per 'cluster_queue'.", cq)
        self.status = gauge("cluster_queue_status", "Reports 'cluster_queue' with its 'status' (pending, active or "
                            "terminating): 1 for one of the statuses.", ["cluster_queue", "status"])
        self.usage = gauge("cluster_queue_resource_usage",
                           "Reports the cluster_queue's total resource usage within all the flavors.", per_resource)
        self.reservation = gauge("cluster_queue_resource_reservation",
                                 "Reports the cluster_queue's total resource reservation within all the flavors.",
                                 per_resource)
        self.nominal = gauge("cluster_queue_nominal_quota",
                             "Reports the cluster_queue's resource nominal quota within all the flavors.", per_resource)
        self.borrowing_limit = gauge("cluster_queue_borrowing_limit", "Reports the cluster_queue's resource borrowing "
                                     "limit within all the flavors (+Inf: no limit).", per_resource)
        self.lending_limit = gauge("cluster_queue_lending_limit", "Reports the cluster_queue's resource lending limit "
                                   "within all the flavors (+Inf: no limit).", per_resource)
        self.weighted_share = gauge("cluster_queue_weighted_share", "Reports the maximum of the ratios of usage above "
                                    "nominal quota to the lendable resources in the cohort, among all the resources "
                                    "provided by the ClusterQueue, divided by the weight (9223372036854775807: a "
                                    "weight-0 ClusterQueue that borrows).", cq)
        self.cohort_weighted_share = gauge("cohort_weighted_share", "Reports the maximum of the ratios of usage "
                                           "above nominal quota to the lendable resources in the parent cohort, "
                                           "among all the resources provided by the Cohort, divided by the weight.",
                                           ["cohort"])
        self.admitted_total = counter("admitted_workloads", "The total number of admitted workloads per 'cluster_queue'.", cq)
        self.reserved_total = counter("quota_reserved_workloads",
                                      "The total number of quota reserved workloads per 'cluster_queue'.", cq)
        self.evicted_total = counter("evicted_workloads", "The number of evicted workloads per 'cluster_queue' and "
                                     "'reason' (Preempted).", ["cluster_queue", "reason"])
        self.preempted_total = counter("preempted_workloads", "The number of preempted workloads per "
                                       "'preempting_cluster_queue' and 'reason' (InClusterQueue, InCohortReclamation, "
                                       "InCohortReclaimWhileBorrowing).", ["preempting_cluster_queue", "reason"])
        self.attempts_total = counter("admission_attempts", "The total number of admission cycles, by 'result' "
                                      "(success: at least one workload admitted; inadmissible: none).", ["result"])
        self.admission_wait = histogram("admission_wait_time_seconds", "The time between a workload was created or "
                                        "requeued until admission, per 'cluster_queue'.", cq, buckets=WAIT_BUCKETS)
        self.reserved_wait = histogram("quota_reserved_wait_time_seconds", "The time between a workload was created "
                                       "or requeued until it got quota reservation, per 'cluster_queue'.", cq,
                                       buckets=WAIT_BUCKETS)
        self.ready_wait = histogram("ready_wait_time_seconds", "The time between a workload was created or "
                                    "requeued until ready, per 'cluster_queue'.", cq, buckets=WAIT_BUCKETS)
        self.admitted_ready_wait = histogram("admitted_until_ready_wait_time_seconds", "The time between a workload "
                                             "was admitted until ready, per 'cluster_queue'.", cq, buckets=WAIT_BUCKETS)
        self.attempt_duration = histogram("admission_attempt_duration_seconds", "The latency of an admission cycle, "
                                          "by 'result'.", ["result"], buckets=ATTEMPT_BUCKETS)
        self._gauges = (self.pending, self.reserving, self.admitted_active, self.status, self.usage, self.reservation,
                        self.nominal, self.borrowing_limit, self.lending_limit, self.weighted_share,
                        self.cohort_weighted_share)
        self._queues = set()
        self._evicted: set[tuple[str, ...]] = set()
        self._preempted: set[tuple[str, ...]] = set()
        self.local_queues = LocalQueueMetrics(registry)

    # -- per cycle ----------------------------------------------------------------------------

    def record_queues(self, figures: Iterable[QueueFigures], *, cohort_shares: Mapping[str, int] | None = None) -> None:
        """The ClusterQueues as the last cycle left them, and the Cohorts' weighted shares (fair
        sharing on); any other ClusterQueue's or Cohort's series go."""
        for g in self._gauges:
            g.clear()
        for cohort, share in (cohort_shares or {}).items():
            self.cohort_weighted_share.labels(cohort).set(share)
        present: set[str] = set()
        for q in figures:
            present.add(q.name)
            self.pending.labels(q.name, PENDING_ACTIVE).set(q.pending_active)
            self.pending.labels(q.name, PENDING_INADMISSIBLE).set(q.pending_inadmissible)
            self.reserving.labels(q.name).set(q.reserving)
            self.admitted_active.labels(q.name).set(q.reserving if q.admitted is None else q.admitted)
            if q.weighted_share is not None:
                self.weighted_share.labels(q.name).set(q.weighted_share)
            for status in CQ_STATUSES:
                self.status.labels(q.name, status).set(1 if status == q.status else 0)
            for r in q.resources:
                labels = (q.cohort, q.name, r.flavor, r.resource)
                self.usage.labels(*labels).set(r.usage)
                self.reservation.labels(*labels).set(r.usage)
                self.nominal.labels(*labels).set(r.nominal)
                self.borrowing_limit.labels(*labels).set(r.borrowing_limit)
                self.lending_limit.labels(*labels).set(r.lending_limit)
        for gone in self._queues - present:
            self._forget_queue(gone)
        self._queues = present

    def attempt(self, seconds: float, *, admitted: bool) -> None:
        result = "success" if admitted else "inadmissible"
        self.attempts_total.labels(result).inc()
        self.attempt_duration.labels(result).observe(max(seconds, 0.0))

    # -- per event ----------------------------------------------------------------------------

    def admitted(
        self, cluster_queue: str, *, waited_seconds: float, local_queue: LocalQueueKey | None = None,
        reserved: bool = True, admitted: bool = True,
    ) -> None:
        """A workload reserved quota in ``cluster_queue`` and/or was admitted (``reserved``,
        ``admitted``: apart when admission checks decide) after waiting that long (submitted
        through ``local_queue``)."""
        wait = max(waited_seconds, 0.0)
        if local_queue is not None:
            self.local_queues.admitted(local_queue, waited_seconds=wait, reserved=reserved, admitted=admitted)
        if admitted:
            self.admitted_total.labels(cluster_queue).inc()
            self.admission_wait.labels(cluster_queue).observe(wait)
        if reserved:
            self.reserved_total.labels(cluster_queue).inc()
            self.reserved_wait.labels(cluster_queue).observe(wait)
        self._queues.add(cluster_queue)

    def ready(
        self, cluster_queue: str, *, queued_seconds: float, admitted_seconds: float, local_queue: LocalQueueKey | None = None,
    ) -> None:
        """An admitted workload of ``cluster_queue`` got ``PodsReady=True``, that long after it was
        created or requeued and after it was admitted."""
        queued, admitted = max(queued_seconds, 0.0), max(admitted_seconds, 0.0)
        if local_queue is not None:
            self.local_queues.ready(local_queue, queued_seconds=queued, admitted_seconds=admitted)
        self.ready_wait.labels(cluster_queue).observe(queued)
        self.admitted_ready_wait.labels(cluster_queue).observe(admitted)
        self._queues.add(cluster_queue)

    def evicted(
        self, cluster_queue: str, *, reason: str, preempting_cluster_queue: str | None = None,
        preemption_reason: str | None = None, local_queue: LocalQueueKey | None = None,
    ) -> None:
        """A workload of ``cluster_queue`` (submitted through ``local_queue``) was evicted
        (``reason``: Preempted, PodsReadyTimeout …); when preempted, for one of
        ``preempting_cluster_queue`` (``preemption_reason``: InClusterQueue, InCohortReclamation …)."""
        if local_queue is not None:
            self.local_queues.evicted(local_queue, reason=reason)
        self.evicted_total.labels(cluster_queue, reason).inc()
        self._evicted.add((cluster_queue, reason))
        self._queues.add(cluster_queue)
        if preempting_cluster_queue is not None and preemption_reason is not None:
            self.preempted_total.labels(preempting_cluster_queue, preemption_reason).inc()
            self._preempted.add((preempting_cluster_queue, preemption_reason))
            self._queues.add(preempting_cluster_queue)

    # -- cleaning up ---------------------------------------------------------------------------

    def _forget_queue(self, name: str) -> None:
        for metric in (self.admitted_total, self.reserved_total, self.admission_wait, self.reserved_wait,
                       self.ready_wait, self.admitted_ready_wait):
            with contextlib.suppress(KeyError):  # never admitted anything
                metric.remove(name)
        self._drop(self.evicted_total, self._evicted, lambda labels: labels[0] == name)
        self._drop(self.preempted_total, self._preempted, lambda labels: labels[0] == name)

    def forget(self) -> None:
        super().forget()
        self.local_queues.forget()


__all__ = [
    "LocalQueueFigures", "LocalQueueMetrics", "QueueFigures", "QueueMetrics", "ResourceFigures", "kueue_units",
    "local_queue_figures", "queue_figures",
]
