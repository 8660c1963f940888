"""Kueue quotas in the what-if replay: each job waits in its tenant's queue until admitted.

``gpufed whatif run --quotas FILE`` reads a YAML file of Kueue objects as a user would apply
them to the hub (ResourceFlavor, ClusterQueue, LocalQueue and Cohort; WorkloadPriorityClass is
accepted and ignored), at ``kueue.x-k8s.io/v1beta2`` or v1beta1 (a Cohort at v1alpha1 too, its
parent ``spec.parent``), validated by the hub's own models
(:mod:`controlplane.apis.kueue_v1beta2`, ``kueue_v1beta1``, ``kueue_v1alpha1``), converted to the
form the hub stores (:mod:`controlplane.apis.kueue_conversion`) and translated by the hub's own translation
(:mod:`controlplane.admission.objects`). A job's tenant is a namespace: the job goes to that
namespace's LocalQueue and so to its ClusterQueue, and is admitted by the same pure core the
hub's admission controller calls (:func:`controlplane.admission.core.decide`, with or without
fair sharing), with every admitted job's usage held until it finishes. When a ClusterQueue's
``preemption`` policies let a waiting job preempt, the gate reports the admitted jobs to evict;
the replay stops them (their work is lost) and they queue again. With Kueue's admission fair
sharing (:attr:`Quotas.admission_fair_sharing`, the hub's settings) a ClusterQueue whose
``admissionScope`` is usage-based takes its jobs by their LocalQueue's consumed resources, kept
as the hub keeps them (:mod:`controlplane.admission.core.admissionfairsharing`): sampled every
``usageSamplingInterval`` of replay time from what the queue's admitted jobs hold, and an
admission's entry penalty added at once.

A job is one pod set of one pod. It requests what its pod would: ``nvidia.com/gpu`` (whole
GPUs) or ``nvidia.com/gpu-milli`` (thousandths of one GPU), ``cpu`` and ``memory`` when the
trace gives them, and ``pods`` (counted only where a ClusterQueue covers it). As in Kueue a
ClusterQueue must cover every resource its jobs request; :func:`resolve` says which are
missing before the replay starts. A job that accepts exactly one GPU model carries it as a
``nvidia.com/gpu.product`` nodeSelector, so flavors whose node labels say otherwise are
skipped; once admitted, a flavor's ``nvidia.com/gpu.product`` narrows the models the job
accepts, so placement honours the flavor.

In: Kueue YAML (:func:`read_quotas` is the only I/O), jobs. Out: :class:`QuotaGate`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from controlplane.admission import objects, usagehistory
from controlplane.admission.core import (
    Admitted,
    ClusterQueue,
    Pending,
    PodSetRequest,
    QueueingStrategy,
    decide,
)
from controlplane.admission.core.admissionfairsharing import (
    AdmissionFairSharing,
    LocalQueueUsage,
    flattened,
    sampled_consumed,
)
from controlplane.admission.core.fairsharing import DEFAULT_PREEMPTION_STRATEGIES, PreemptionStrategy
from controlplane.admission.core.quota import Cohort, Usage
from controlplane.apis import kueue_conversion as convert
from controlplane.apis import kueue_defaulting as defaulting
from controlplane.apis import kueue_v1alpha1, kueue_v1beta2
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.constants import LABEL_GPU_PRODUCT, RESOURCE_GPU
from controlplane.apis.meta import SpecModel
from controlplane.yamlfile import yaml_problem
from simulator.profile import format_validation_error
from simulator.scheduling.model import RESOURCE_GPU_MILLI
from simulator.whatif.trace import Job

MIB = 2**20
_MODELS: dict[str, type[SpecModel]] = {
    "ResourceFlavor": kueue.ResourceFlavor,
    "ClusterQueue": kueue.ClusterQueue,
    "LocalQueue": kueue.LocalQueue,
    "WorkloadPriorityClass": kueue.WorkloadPriorityClass,
    "Cohort": kueue_v1beta2.CohortV1beta1,
}
#: The kinds also accepted at ``kueue.x-k8s.io/v1beta2``: the model, and the conversion to the
#: form above (as the hub stores them; a ClusterQueue's v1beta2-only fields, its flavor
#: fungibility ``preference`` among them, travel in an annotation the translation reads).
_V1BETA2: dict[str, tuple[type[SpecModel], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "ResourceFlavor": (kueue_v1beta2.ResourceFlavor, convert.to_version(kueue.API_VERSION)),
    "ClusterQueue": (kueue_v1beta2.ClusterQueue, convert.cluster_queue_to_v1beta1),
    "LocalQueue": (kueue_v1beta2.LocalQueue, convert.local_queue_to_v1beta1),
    "WorkloadPriorityClass": (kueue_v1beta2.WorkloadPriorityClass, convert.to_version(kueue.API_VERSION)),
    "Cohort": (kueue_v1beta2.Cohort, convert.to_version(kueue.API_VERSION)),
}
#: The kinds also accepted at ``kueue.x-k8s.io/v1alpha1``, likewise.
_V1ALPHA1: dict[str, tuple[type[SpecModel], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "Cohort": (kueue_v1alpha1.Cohort, convert.cohort_v1alpha1_to_v1beta1),
}


class QuotaError(ValueError):
    """A quotas file that cannot be used; the message says what to change."""


@dataclass(frozen=True)
class Quotas:
    """The Kueue objects of a quotas file, read into the admission core's values."""

    queues: Mapping[str, ClusterQueue]
    flavor_labels: Mapping[str, Mapping[str, str]]
    #: namespace -> (LocalQueue, ClusterQueue) for every LocalQueue in the file.
    local_queues: Mapping[str, tuple[str, str]]
    #: ClusterQueue -> ``spec.fairSharing.weight`` (default 1).
    weights: Mapping[str, float]
    #: ClusterQueue objects as written, for their namespaceSelector.
    raw_queues: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Cohort objects (parents, quotas, weights); a cohort only named by ClusterQueues has none.
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)
    #: LocalQueue (namespace/name) -> ``spec.fairSharing.weight`` (default 1).
    local_queue_weights: Mapping[str, float] = field(default_factory=dict)
    #: Kueue's admission fair sharing settings (None: off, every queue by priority then age).
    admission_fair_sharing: AdmissionFairSharing | None = None


def parse_quotas(documents: Iterable[Any], *, source: str = "quotas") -> Quotas:
    """Validate Kueue objects (YAML documents) as the hub would and read them."""
    flavors: list[Mapping[str, Any]] = []
    cqs: dict[str, Mapping[str, Any]] = {}
    cohorts: dict[str, Cohort] = {}
    local: dict[str, list[tuple[str, str]]] = {}
    local_weights: dict[str, float] = {}
    for index, doc in enumerate(documents, 1):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise QuotaError(f"{source}: document {index} is not a Kubernetes object")
        kind = str(doc.get("kind"))
        if kind not in _MODELS:
            raise QuotaError(
                f"{source}: document {index}: kind {kind!r} is not a quota kind "
                "(give ResourceFlavor, ClusterQueue, LocalQueue and Cohort objects)"
            )
        api_version = kueue.API_VERSION
        model = _MODELS[kind]
        is_v1beta2 = doc.get("apiVersion") == kueue_v1beta2.API_VERSION
        if kind == "ClusterQueue":  # Kueue's CRD defaults come before its validation
            doc = copy.deepcopy(doc)
            defaulting.cluster_queue("MayStopSearch" if is_v1beta2 else "Borrow")(doc)
        if is_v1beta2:
            model, to_stored = _V1BETA2[kind]
        elif kind in _V1ALPHA1 and doc.get("apiVersion") == kueue_v1alpha1.API_VERSION:
            model, to_stored = _V1ALPHA1[kind]
        elif doc.get("apiVersion") != api_version:
            raise QuotaError(
                f"{source}: {kind} {_name(doc)!r}: apiVersion must be {kueue_v1beta2.API_VERSION} or {api_version}, "
                f"not {doc.get('apiVersion')!r}"
            )
        try:
            model.model_validate(doc)
        except ValidationError as exc:
            raise QuotaError(f"{source}: {kind} {_name(doc)!r}: {format_validation_error(exc)}") from exc
        if model is not _MODELS[kind]:
            doc = to_stored(doc)
        name = _name(doc)
        if kind == "ResourceFlavor":
            flavors.append(doc)
        elif kind == "ClusterQueue":
            cqs[name] = doc
        elif kind == "Cohort":
            cohorts[name] = objects.cohort(doc)
        elif kind == "LocalQueue":
            namespace = str((doc.get("metadata") or {}).get("namespace") or "default")
            cluster_queue = str((doc.get("spec") or {}).get("clusterQueue") or "")
            if not cluster_queue:
                raise QuotaError(f"{source}: LocalQueue {namespace}/{name}: spec.clusterQueue is required")
            local.setdefault(namespace, []).append((name, cluster_queue))
            local_weights[f"{namespace}/{name}"] = usagehistory.weight_of(doc)
    if not cqs:
        raise QuotaError(f"{source}: no ClusterQueue (give ResourceFlavor, ClusterQueue and LocalQueue objects)")
    several = {ns: sorted(q for q, _ in qs) for ns, qs in local.items() if len(qs) > 1}
    if several:
        ns, names = sorted(several.items())[0]
        raise QuotaError(
            f"{source}: namespace {ns} has several LocalQueues ({', '.join(names)}); the what-if puts a "
            "tenant's jobs in its namespace's one LocalQueue"
        )
    labels = objects.flavor_labels(flavors)
    queues = {name: objects.cluster_queue(doc, labels) for name, doc in cqs.items()}
    return Quotas(
        queues=objects.deactivate_cycles(queues, Usage(queues, cohorts).cycles),
        flavor_labels=labels,
        local_queues={ns: qs[0] for ns, qs in local.items()},
        weights={name: objects.fair_weight(doc.get("spec") or {}) / 1000 for name, doc in cqs.items()},
        raw_queues=cqs,
        cohorts=cohorts,
        local_queue_weights=local_weights,
    )


def _name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name") or "")


def read_quotas(path: str | Path) -> Quotas:
    path = Path(path)
    try:
        documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise QuotaError(f"cannot read quotas {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise QuotaError(f"{path} is not valid YAML: {yaml_problem(exc)}") from exc
    return parse_quotas(documents, source=str(path))


def requests(job: Job) -> dict[str, int]:
    """What the job's pod requests, in the admission core's base units."""
    out = {"pods": 1}
    if job.num_gpu:
        if job.fractional:
            out[RESOURCE_GPU_MILLI] = job.gpu_milli
        else:
            out[RESOURCE_GPU] = job.num_gpu
    if job.cpu_milli:
        out["cpu"] = job.cpu_milli
    if job.memory_mib:
        out["memory"] = job.memory_mib * MIB
    return out


@dataclass(frozen=True)
class Tenancy:
    """Where each tenant's jobs queue, and each tenant's share."""

    queue_of: Mapping[str, str]
    """tenant -> ClusterQueue"""
    shares: Mapping[str, float]


def resolve(quotas: Quotas, jobs: Sequence[Job]) -> Tenancy:
    """Each tenant's ClusterQueue; raises :class:`QuotaError` naming what the file lacks."""
    untenanted = [job for job in jobs if job.tenant is None]
    if untenanted:
        first = untenanted[0]
        raise QuotaError(
            f"{len(untenanted)} job(s) have no tenant (first: {first.name}, line {first.line}); give the "
            "trace a tenant column or use --synthetic-tenants N"
        )
    queue_of: dict[str, str] = {}
    tenants = sorted({str(job.tenant) for job in jobs})
    lacking = [t for t in tenants if t not in quotas.local_queues]
    if lacking:
        raise QuotaError(
            f"namespace(s) {', '.join(lacking)} of the trace's tenants have no LocalQueue in the quotas file; "
            "add one per namespace for its jobs"
        )
    for tenant in tenants:
        local, cq = quotas.local_queues[tenant]
        if cq not in quotas.queues:
            raise QuotaError(f"LocalQueue {tenant}/{local} points at ClusterQueue {cq}, which the quotas file lacks")
        namespace_labels = {"kubernetes.io/metadata.name": tenant}
        if not objects.namespace_allowed(quotas.raw_queues[cq], namespace_labels):
            raise QuotaError(
                f"ClusterQueue {cq}'s namespaceSelector does not select namespace {tenant} (absent selects none, "
                "as in Kueue; {} selects all)"
            )
        queue_of[tenant] = cq
    for job in jobs:
        queue = quotas.queues[queue_of[str(job.tenant)]]
        missing = sorted(r for r in requests(job) if r != "pods" and queue.group_of(r) is None)
        if missing:
            raise QuotaError(
                f"ClusterQueue {queue.name} does not cover {', '.join(missing)}, which job {job.name} of tenant "
                f"{job.tenant} requests; Kueue would keep it Inadmissible: add them to a resourceGroup's "
                "coveredResources"
            )
    tenants_of: dict[str, int] = {}
    for cq in queue_of.values():
        tenants_of[cq] = tenants_of.get(cq, 0) + 1
    shares = {t: quotas.weights[cq] / tenants_of[cq] for t, cq in queue_of.items()}
    return Tenancy(queue_of, shares)


def _moment(seconds: float) -> str:
    """A time as a string that sorts as the time does (the core orders by creation time)."""
    return f"{seconds:020.6f}"


class QuotaGate:
    """Jobs wait here until their ClusterQueue admits them; admitted jobs hold quota until they finish."""

    def __init__(
        self,
        quotas: Quotas,
        tenancy: Tenancy,
        *,
        fair_sharing: bool = False,
        preemption_strategies: Sequence[PreemptionStrategy] = DEFAULT_PREEMPTION_STRATEGIES,
        park_inadmissible: bool = True,
    ) -> None:
        self.quotas = quotas
        #: With fair sharing: Kueue's ``fairSharing.preemptionStrategies``.
        self.preemption_strategies = tuple(preemption_strategies)
        #: False: every cycle offers every waiting job (the reference the parking is checked against).
        self.park_inadmissible = park_inadmissible
        self.tenancy = tenancy
        self.fair_sharing = fair_sharing
        self.waiting: dict[str, tuple[Job, Pending]] = {}
        #: Admitted jobs (as submitted) and their usage, until they finish or are evicted.
        self.holding: dict[str, tuple[Job, Admitted]] = {}
        self.waiting_by_tenant: dict[str, int] = dict.fromkeys(tenancy.queue_of, 0)
        #: Jobs that arrived since the last cycle; quota freed since then.
        self._fresh: list[str] = []
        self._freed = False
        #: Evicted jobs, back in their queue at the next moment (once their pods are gone).
        self.returning: list[tuple[float, Job]] = []
        self._preempting = any(q.preemption.enabled for q in quotas.queues.values())
        #: Jobs whose preemptions the last cycle issued: the next one decides them first, as the hub does.
        self._claims: set[str] = set()
        self._fair = _UsageHistory.of(quotas, tenancy)

    def submit(self, job: Job) -> None:
        tenant = str(job.tenant)
        selector = {LABEL_GPU_PRODUCT: job.gpu_products[0]} if len(job.gpu_products) == 1 else {}
        pod_set = PodSetRequest("main", 1, requests(job), selector)
        key = f"{tenant}/{job.name}"
        local_queue = f"{tenant}/{self.quotas.local_queues[tenant][0]}"
        pending = Pending(key, self.tenancy.queue_of[tenant], (pod_set,), 0, _moment(job.submit_s), local_queue=local_queue)
        self.waiting[key] = (job, pending)
        self.waiting_by_tenant[tenant] += 1
        self._fresh.append(key)

    def release(self, job: Job) -> None:
        """The job finished: its quota is free again."""
        if self.holding.pop(f"{job.tenant}/{job.name}", None) is not None:
            self._freed = True

    def evict(self, key: str, now: float) -> Job:
        """A preempted job gives its quota back now and queues again (as submitted, in its place by
        submit time) at the next moment of the replay: as in Kueue, an evicted workload is requeued
        once its pods are gone, so the preemptor gets the quota first."""
        job, _ = self.holding.pop(key)
        self._freed = True
        self.returning.append((now, job))
        return job

    def advance(self, now: float) -> None:
        """Replay time reached ``now`` (before its events): the LocalQueues' usage samples due by
        then are taken, with what their jobs held since the last event."""
        if self._fair is not None and self._fair.advance(now, self.holding.values()):
            self._freed = True  # the order of the waiting jobs changed: offer them all again

    def admit(self, now: float) -> Cycle:
        """Run one admission cycle if a job arrived or quota was freed since the last one (one cycle
        admits everything that fits); the jobs it admitted, in admission order, with the GPU
        models their flavor allows.

        As Kueue parks inadmissible workloads until quota frees, a cycle after arrivals alone
        offers only the new jobs: with usage unchanged since the last cycle, the jobs that did
        not fit then do not fit now (and a StrictFIFO queue with an older waiting job admits
        nothing), so the decisions are those of a cycle over every waiting job. Where a queue may
        preempt, a cycle after an admission offers every waiting job too (a new holder may be a
        target for a parked job)."""
        back = [job for when, job in self.returning if when < now]
        self.returning = [(when, job) for when, job in self.returning if when >= now]
        for job in back:
            self.submit(job)
        fresh, self._fresh = self._fresh, []
        freed, self._freed = self._freed, False
        if not self.waiting or not (fresh or freed):
            return Cycle()
        if freed or not self.park_inadmissible:
            offered = [pending for _, pending in self.waiting.values()]
        else:
            fresh_keys = set(fresh)
            blocked = {
                pending.queue
                for key, (_, pending) in self.waiting.items()
                if key not in fresh_keys and self.quotas.queues[pending.queue].strategy is QueueingStrategy.STRICT_FIFO
            }
            # A StrictFIFO queue ordered by usage may put a new job ahead of its parked head: all its jobs are offered.
            ordering = self._fair.ordering if self._fair is not None else frozenset()
            reordered = {self.waiting[key][1].queue for key in fresh} & blocked & ordering
            offered = [p for key in fresh if (p := self.waiting[key][1]).queue not in blocked]
            offered += [p for _, p in self.waiting.values() if p.queue in reordered]
        if not offered:
            return Cycle()
        decisions = decide(
            self.quotas.queues,
            offered,
            [admitted for _, admitted in self.holding.values()],
            self.quotas.flavor_labels,
            fair_sharing=self.fair_sharing,
            preemption_strategies=self.preemption_strategies,
            cohorts=self.quotas.cohorts,
            claims=self._claims,
            fair_usage=self._fair.usage() if self._fair is not None else None,
        )
        self._claims = {p.key for p in decisions.preempting}
        admitted: list[Job] = []
        for admission in decisions.admitted:
            job, _ = self.waiting.pop(admission.key)
            self.waiting_by_tenant[str(job.tenant)] -= 1
            self.holding[admission.key] = job, Admitted(
                admission.key, admission.queue, admission.usage(), 0, _moment(job.submit_s), _moment(now)
            )
            products = {
                labels[LABEL_GPU_PRODUCT]
                for a in admission.assignments
                for flavor in a.flavors.values()
                if LABEL_GPU_PRODUCT in (labels := self.quotas.flavor_labels.get(flavor, {}))
            }
            if len(products) == 1:
                job = replace(job, gpu_products=tuple(products))
            admitted.append(job)
        if self._fair is not None:  # as the hub: the admissions' entry penalties are sampled in at once
            self._fair.sample_penalties(now, self.holding.values())
        if admitted and self._preempting:
            self._freed = True
        evict = sorted({t.key for p in decisions.preempting for t in p.targets if t.key in self.holding})
        return Cycle(admitted, evict)


class _UsageHistory:
    """The consumed resources of the LocalQueues of usage-based ClusterQueues, kept as the hub
    keeps them in their ``status.fairSharing``: each sampled every interval since its last
    sample, and at once when an admission adds its entry penalty."""

    def __init__(self, settings: AdmissionFairSharing, quotas: Quotas, local_queue_of: Mapping[str, str]) -> None:
        self.settings = settings
        self.weights = quotas.local_queue_weights
        self.ordering = frozenset(name for name, obj in quotas.raw_queues.items() if usagehistory.usage_based(obj))
        #: tenant -> its LocalQueue (namespace/name), for the tenants of usage-based ClusterQueues.
        self.local_queue_of = local_queue_of
        self.consumed: dict[str, dict[str, float]] = {}
        self.penalties: dict[str, dict[str, float]] = {}
        #: LocalQueue -> the replay time of its last sample (its ``lastUpdate``).
        self.last: dict[str, float] = {}

    @classmethod
    def of(cls, quotas: Quotas, tenancy: Tenancy) -> _UsageHistory | None:
        settings = quotas.admission_fair_sharing
        if settings is None:
            return None
        ordering = {name for name, obj in quotas.raw_queues.items() if usagehistory.usage_based(obj)}
        local = {t: f"{t}/{quotas.local_queues[t][0]}" for t, cq in tenancy.queue_of.items() if cq in ordering}
        return cls(settings, quotas, local) if local else None

    def usage(self) -> LocalQueueUsage:
        return LocalQueueUsage(
            self.settings, cluster_queues=self.ordering, consumed=self.consumed, weights=self.weights, penalties=self.penalties,
        )

    def _held(self, holding: Iterable[tuple[Job, Admitted]]) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for job, admitted in holding:
            local_queue = self.local_queue_of.get(str(job.tenant))
            if local_queue is not None:
                mine = out.setdefault(local_queue, {})
                for resource, amount in flattened(admitted.usage).items():
                    mine[resource] = mine.get(resource, 0.0) + amount
        return out

    def _sample(self, local_queue: str, at: float, held: Mapping[str, Mapping[str, float]]) -> bool:
        """Sample one LocalQueue at ``at``; whether its usage changed."""
        last = self.last.get(local_queue)
        before = self.consumed.get(local_queue) if last is not None else None
        self.consumed[local_queue] = sampled_consumed(
            before, held.get(local_queue, {}), self.penalties.pop(local_queue, None),
            elapsed=at - last if last is not None else 0.0, settings=self.settings,
        )
        self.last[local_queue] = at
        return self.consumed[local_queue] != (before or {})

    def advance(self, now: float, holding: Iterable[tuple[Job, Admitted]]) -> bool:
        """Take the samples due by ``now``; whether a LocalQueue's usage changed."""
        interval = self.settings.usage_sampling_interval_seconds
        held: dict[str, dict[str, float]] | None = None
        changed = False
        for local_queue in self.local_queue_of.values():
            if local_queue not in self.last:  # the first sample: nothing consumed yet
                changed = self._sample(local_queue, now, {}) or changed
            while now - self.last[local_queue] >= interval:
                held = self._held(holding) if held is None else held  # constant since the last event
                changed = self._sample(local_queue, self.last[local_queue] + interval, held) or changed
        return changed

    def sample_penalties(self, now: float, holding: Iterable[tuple[Job, Admitted]]) -> None:
        """Fold the entry penalties of a cycle's admissions in, at ``now``."""
        if self.penalties:
            held = self._held(holding)
            for local_queue in list(self.penalties):
                self._sample(local_queue, now, held)


@dataclass(frozen=True)
class Cycle:
    """What one admission cycle decided."""

    admitted: list[Job] = field(default_factory=list)
    """Jobs to place now, with the GPU models their flavor allows."""
    evict: list[str] = field(default_factory=list)
    """Keys (``tenant/job``) of admitted jobs to preempt."""
