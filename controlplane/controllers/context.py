"""What every hub controller shares: the object store, settings, informers and parsed policies.

One :class:`ControllerContext` is built per run of the :class:`ControllerManager`: it owns
one :class:`Informer` per kind (controllers share them, so each kind is listed and watched
once), the indexes controllers need to avoid scans (bindings by policy, by cluster and by
namespace; Works by binding; namespaced objects by namespace), a memo of parsed policy
models keyed by resourceVersion, and the workqueue metrics the controllers' loops feed. The
propagatable kinds follow the hub's :class:`DynamicRegistry` while the informers run: a CRD
established later gets an informer (with every handler controllers registered through
``add_workload_handler``), a deleted one's is stopped. Controllers read from here and write
through ``objects``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pydantic import ValidationError

from controlplane.admission.core.admissionfairsharing import AdmissionFairSharing
from controlplane.admission.core.fairsharing import DEFAULT_PREEMPTION_STRATEGIES, PreemptionStrategy
from controlplane.admission.requeuing import WaitForPodsReady
from controlplane.apis import constants as c
from controlplane.apis.timestamps import format_time
from controlplane.apis.views import BindingView, ObjectView
from controlplane.apis.work_v1alpha1 import binding_name
from controlplane.controllers.apiserviceavailability import RECHECK_SECONDS as APISERVICE_RECHECK_SECONDS
from controlplane.controllers.eventcorrelating import EventCorrelator
from controlplane.controllers.federatedhpa.podmetrics import PodMetricsSource
from controlplane.controllers.informing import Handler, Informer
from controlplane.controllers.workloads import propagatable_types
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.controllers.works import binding_key_of_work
from controlplane.interpreter.webhook_calls import InterpreterWebhookCaller
from controlplane.objectclient import WRITER, DynamicRegistry, ObjectClient, ResourceType, errors
from policies.matching import PolicyRef, ServedAs
from policies.models import AnyPropagationPolicy, ClusterPropagationPolicy, PropagationPolicy
from policies.override_models import AnyOverridePolicy, AnyPolicy, ClusterOverridePolicy, OverridePolicy
from policies.validation import parse_policy

log = logging.getLogger(__name__)

INDEX_NAMESPACE = "namespace"
INDEX_POLICY = "policy"
INDEX_CLUSTER = "cluster"
INDEX_BINDING = "binding"

PROPAGATION_KINDS = ("PropagationPolicy", "ClusterPropagationPolicy")
OVERRIDE_KINDS = ("OverridePolicy", "ClusterOverridePolicy")
#: How soon a reconcile that needs a workload informer not listed yet (a custom kind just watched,
#: or one whose list fails, its conversion webhook down) looks again.
UNSYNCED_RETRY_SECONDS = 1.0
#: How soon a reconcile whose write lost a race (a 409 Conflict: its copy was stale) looks again,
#: the informer having brought the newer copy by then.
CONFLICT_RETRY_SECONDS = 0.2
#: How long a status in which a cluster is only waiting (controllers/status.py) is held back
#: (within the controller manager's idle horizon: a held binding counts as work to do).
WAITING_HOLD_SECONDS = 1.0
#: The longest that hold grows to when members report late (a busy hub or fleet): a member that
#: stays silent shows as waiting after this at most.
MAX_WAITING_HOLD_SECONDS = 10.0


class Written(NamedTuple):
    """What a reconcile's compare-and-swap write came to (:meth:`ControllerContext.write_status`):
    the object as stored, or None and what the reconcile returns instead, controller-runtime's
    "requeue after": :data:`CONFLICT_RETRY_SECONDS` when the write lost a race (its copy was
    stale; the informer brings the newer one, and the write is redone on it), None when the
    object is gone (nothing left to write)."""

    obj: dict[str, Any] | None
    requeue_after: float | None


def not_listed(informer: Informer | None) -> bool:
    """Whether ``informer`` exists and has not listed yet: an object absent from it may exist, so
    a reconcile that would act on its absence looks again in :data:`UNSYNCED_RETRY_SECONDS`."""
    return informer is not None and not informer.synced.is_set()


@dataclass(frozen=True)
class ControllerSettings:
    """Tunables of the hub's controllers (defaults suit production; tests shorten them)."""

    workers: int = 4
    """Concurrent reconciles per controller (different keys)."""
    unschedulable_grace_seconds: float = 120.0
    """How long a member may report replicas it cannot place before the hub moves them."""
    reservation_settle_seconds: float = 5.0
    """A reservation never marked applied is dropped by a report at least this much newer."""
    reservation_bind_timeout_seconds: float = 60.0
    """A reservation whose pods a report can name waits for them to show bound; this long after
    its Work was applied it settles by time instead (the report may not list their node), unless
    the member reports pods of the binding unschedulable there (those stay reserved until moved)."""
    reservation_max_age_seconds: float = 600.0
    """Safety net: reservations older than this go even without a report."""
    deletion_poll_seconds: float = 0.5
    """How often a deleting workload re-checks that its Works are gone."""
    record_events: bool = True
    """Write v1 Events (Scheduled, FailedScheduling, OverrideFailed) on workloads."""
    default_unreachable_toleration_seconds: int = 300
    """How long replicas stay in an unreachable cluster when the placement has no toleration for
    ``cluster.gpufed.io/unreachable:NoExecute`` (``--default-unreachable-toleration-seconds``)."""
    default_not_ready_toleration_seconds: int = 300
    """The same for ``cluster.gpufed.io/not-ready:NoExecute`` (``--default-not-ready-toleration-seconds``)."""
    kueue_fair_sharing: bool = False
    """Fleet admission with Kueue's fair sharing (``--kueue-fair-sharing``, Kueue's ``fairSharing.enable``)."""
    kueue_fair_sharing_preemption_strategies: tuple[PreemptionStrategy, ...] = DEFAULT_PREEMPTION_STRATEGIES
    """How fair sharing picks what to preempt (``--kueue-fair-sharing-preemption-strategies``,
    Kueue's ``fairSharing.preemptionStrategies``)."""
    kueue_admission_fair_sharing: AdmissionFairSharing | None = None
    """Kueue's admission fair sharing (``--kueue-admission-fair-sharing``, Kueue's
    ``admissionFairSharing``): None when off."""
    federated_quota_enforcement: bool = False
    """Karmada's ``FederatedQuotaEnforcement``: no decision takes a namespace past a
    FederatedResourceQuota's ``overall`` (``--federated-quota-enforcement``)."""
    graceful_eviction_timeout_seconds: int = 600
    """How long a Gracefully evicted copy waits for its replacement to be Healthy when the policy
    sets no ``failover.*.gracePeriodSeconds`` (``--graceful-eviction-timeout``)."""
    federated_hpa_sync_seconds: float = 15.0
    """How often each FederatedHPA's metrics are read and its target scaled
    (``--horizontal-pod-autoscaler-sync-period``, Karmada's default)."""
    waiting_hold_seconds: float = WAITING_HOLD_SECONDS
    """How long the status controller holds back a status in which a cluster is only waiting."""
    max_waiting_hold_seconds: float = MAX_WAITING_HOLD_SECONDS
    """The longest that hold grows to when members report late."""
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    """Fleet admission: Kueue's ``waitForPodsReady`` timeout and requeuing backoff
    (``--kueue-wait-for-pods-ready-timeout``, ``--kueue-requeuing-backoff-*``)."""
    apiservice_recheck_seconds: float = APISERVICE_RECHECK_SECONDS
    """How often an Available aggregated APIService is checked again (a server that stopped is
    noticed within it)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def _namespace_of(obj: dict[str, Any]) -> Iterable[Hashable]:
    namespace = ObjectView(obj).metadata.get("namespace")
    return (namespace,) if namespace else ()


def _policy_of_binding(obj: dict[str, Any]) -> Iterable[Hashable]:
    policy = BindingView(obj).policy
    if not policy.get("name"):
        return ()
    return ((str(policy.get("kind")), policy.get("namespace") or None, str(policy["name"])),)


def _clusters_of_binding(obj: dict[str, Any]) -> Iterable[Hashable]:
    return tuple(str(t.get("name")) for t in BindingView(obj).clusters if t.get("name"))


def _binding_of_work(obj: dict[str, Any]) -> Iterable[Hashable]:
    key = binding_key_of_work(obj)
    return (key,) if key else ()


def _key(rt: ResourceType) -> tuple[str, str, str]:
    return (rt.group, rt.version, rt.plural)


def policy_key(ref: PolicyRef) -> tuple[str, str | None, str]:
    """The ``policy`` index value of bindings claimed by ``ref``."""
    return (ref.kind, ref.namespace or None, ref.name)


class ControllerContext:
    def __init__(
        self,
        objects: ObjectClient,
        *,
        settings: ControllerSettings,
        clock: Callable[[], datetime] = utc_now,
        workqueue_metrics: WorkqueueMetrics | None = None,
        interpreter_webhooks: InterpreterWebhookCaller | None = None,
        pod_metrics: PodMetricsSource | None = None,
    ) -> None:
        self.objects = objects
        #: Karmada's resource interpreter webhooks (the hub's); None: none are called.
        self.interpreter_webhooks = interpreter_webhooks
        #: The members' pods and their ``metrics.k8s.io`` usage (the hub's resource metrics); None:
        #: FederatedHPA metrics answered from them (cpu, memory) are unavailable.
        self.pod_metrics = pod_metrics
        self.registry = objects.registry
        self.settings = settings
        self.clock = clock
        #: client-go's workqueue series (the hub's /metrics), fed by every controller's loop; None: not exported.
        self.workqueue_metrics = workqueue_metrics
        require = self.registry.require
        work_api = f"{c.WORK_GROUP}/{c.VERSION}"
        self.binding_rt = require(work_api, "ResourceBinding")
        self.work_rt = require(work_api, "Work")
        self.cluster_rt = require(f"{c.CLUSTER_GROUP}/{c.VERSION}", "Cluster")
        self.namespace_rt = require("v1", "Namespace")
        self.event_rt = self.registry.for_kind("v1", "Event")
        #: client-go's EventCorrelator: a repeated Event is one Event whose count grows.
        self.event_correlator = EventCorrelator()
        self.workload_types = propagatable_types(self.registry)
        self.propagation_types = self._policy_types(PROPAGATION_KINDS)
        self.override_types = self._policy_types(OVERRIDE_KINDS)
        self._informers: dict[tuple[str, str, str], Informer] = {}
        self._informer_tasks: dict[tuple[str, str, str], asyncio.Task[None]] = {}
        self._informer_group: asyncio.TaskGroup | None = None
        self._workload_handlers: list[Handler] = []
        self._namespaces: set[str] = set()
        self._parsed: dict[tuple[str, str, str, str], tuple[str, AnyPolicy | None]] = {}

        self.bindings = self.informer(self.binding_rt)
        self.bindings.add_index(INDEX_POLICY, _policy_of_binding)
        self.bindings.add_index(INDEX_CLUSTER, _clusters_of_binding)
        self.bindings.add_index(INDEX_NAMESPACE, _namespace_of)
        self.works = self.informer(self.work_rt)
        self.works.add_index(INDEX_BINDING, _binding_of_work)
        self.clusters = self.informer(self.cluster_rt)
        for rt in (*self.workload_types, *self.propagation_types, *self.override_types):
            informer = self.informer(rt)
            if rt.namespaced:
                informer.add_index(INDEX_NAMESPACE, _namespace_of)

    def add_workload_handler(self, handler: Handler) -> None:
        """Call ``handler`` with the changes of every propagatable kind: those served now and
        those a CustomResourceDefinition adds later (see :meth:`follow_registry`)."""
        self._workload_handlers.append(handler)
        for rt in self.workload_types:
            self.informer(rt).add_handler(handler)

    def follow_registry(self) -> tuple[list[ResourceType], list[ResourceType]]:
        """Watch the propagatable kinds the registry serves now: an informer (with the namespace
        index and every workload handler) for each new kind, started at once when the informers
        run; the informer of a kind no longer served is stopped and dropped. Returns (added,
        removed). A CRD's kind goes only after its objects are gone (its cleanup finalizer), so
        the handlers have seen them deleted by then."""
        wanted = {_key(rt): rt for rt in propagatable_types(self.registry)}
        current = {_key(rt): rt for rt in self.workload_types}
        removed = [rt for key, rt in current.items() if key not in wanted]
        added = [rt for key, rt in wanted.items() if key not in current]
        for rt in removed:
            self._informers.pop(_key(rt), None)
            task = self._informer_tasks.pop(_key(rt), None)
            if task is not None:
                task.cancel()
        for rt in added:
            informer = self.informer(rt)
            informer.add_index(INDEX_NAMESPACE, _namespace_of)
            for handler in self._workload_handlers:
                informer.add_handler(handler)
            self._start(informer)
        self.workload_types = list(wanted.values())
        for rt in removed:
            log.info("stopped watching %s.%s: no longer served", rt.plural, rt.group)
        for rt in added:
            log.info("watching %s.%s for propagation", rt.plural, rt.group)
        return added, removed

    def _policy_types(self, kinds: Iterable[str]) -> list[ResourceType]:
        """The policy kinds as stored: policy.karmada.io serves the same objects (one set)."""
        out = []
        for kind in kinds:
            rt = self.registry.for_kind(f"{c.POLICY_GROUP}/{c.VERSION}", kind)
            if rt is not None:
                out.append(rt)
        return out

    # --- informers --------------------------------------------------------------------

    def informer(self, rt: ResourceType) -> Informer:
        key = _key(rt)
        found = self._informers.get(key)
        if found is None:
            found = self._informers[key] = Informer(self.objects, rt)
        return found

    def watch_kind(self, api_version: str, kind: str, handler: Handler) -> ResourceType | None:
        """The served type of ``kind``, its informer calling ``handler``; None when the hub does
        not serve it (the controller then has nothing to watch)."""
        rt = self.registry.for_kind(api_version, kind)
        if rt is not None:
            self.informer(rt).add_handler(handler)
        return rt

    def informer_if_any(self, rt: ResourceType) -> Informer | None:
        """The informer of ``rt`` when a controller made one (None otherwise)."""
        return self._informers.get(_key(rt))

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    async def run_informers(self) -> None:
        """Run every informer; with a :class:`DynamicRegistry`, also follow the kinds it serves
        (CRDs established or deleted while the controllers run) until cancelled."""
        WRITER.set("controller:informers")  # their watches, in the write ledger
        changed = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            self._informer_group = group
            for informer in list(self._informers.values()):
                self._start(informer)
            if isinstance(self.registry, DynamicRegistry):
                self.registry.add_listener(changed.set)
                try:
                    self.follow_registry()  # what changed between __init__ and now
                    while True:
                        await changed.wait()
                        changed.clear()
                        self.follow_registry()
                finally:
                    self.registry.remove_listener(changed.set)
                    self._informer_group = None

    def _start(self, informer: Informer) -> None:
        group, key = self._informer_group, _key(informer.rt)
        if group is None or key in self._informer_tasks:
            return
        self._informer_tasks[key] = group.create_task(
            informer.run(), name=f"informer-{informer.rt.plural}.{informer.rt.group}"
        )

    async def wait_synced(self) -> None:
        """Until every informer but a custom kind's has listed. The informers change meanwhile (a CRD
        established, or its storage version moved, while the controllers start); a custom kind's list
        may fail for as long as its conversion webhook does, so its informer does not hold the others
        back: the controllers treat its objects as unknown until it has listed."""
        while pending := [i for i in self._informers.values() if i.rt.custom is None and not i.synced.is_set()]:
            await pending[0].synced.wait()

    def workload_informer(self, api_version: str, kind: str) -> Informer | None:
        rt = self.registry.for_kind(api_version, kind)
        if rt is not None and rt.stored_in_version:
            rt = self.registry.for_kind(rt.stored_in_version, kind)  # watched in its storage version
        if rt is None:
            return None
        return self._informers.get(_key(rt))

    def served_as(self, rt: ResourceType) -> ServedAs | None:
        """For a custom kind's objects, read in ``rt`` (its storage version): whether an apiVersion
        is another served version of its CRD (a resource selector naming it selects them); None
        for other kinds, whose selectors name the version they are read in."""
        if rt.custom is None:
            return None

        def serves(api_version: str) -> bool:
            other = self.registry.for_kind(api_version, rt.kind)
            return other is not None and other.custom is not None and other.stored_in_version == rt.api_version

        return serves

    # --- time ------------------------------------------------------------------------

    def now(self) -> datetime:
        return self.clock()

    def now_text(self) -> str:
        return format_time(self.clock())

    # --- reads -----------------------------------------------------------------------

    async def ensure_namespace(self, namespace: str) -> None:
        """Create ``namespace`` on the hub unless it exists (remembered for this term)."""
        if namespace in self._namespaces:
            return
        if await self.get(self.namespace_rt, None, namespace) is None:
            with contextlib.suppress(errors.AlreadyExists):
                await self.objects.create(
                    self.namespace_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                )
        self._namespaces.add(namespace)

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A fresh read from the store (None when absent)."""
        try:
            return await self.objects.get(rt, namespace=namespace, name=name)
        except errors.NotFound:
            return None

    async def latest_seen(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object as the hub last saw it (its own writes included, which the informers see
        only when their events come), read from the store only when it has not seen it; None
        when absent. A write by another hub process may not be seen yet: every write made from
        it is a compare-and-swap, which that loses, and the write's event queues it again."""
        try:
            return await self.objects.get_latest_seen(rt, namespace=namespace, name=name)
        except errors.NotFound:
            return None

    def cached(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The informer's copy (None when absent or the kind has no informer). Reconciles read
        here: every write is a compare-and-swap, so a stale copy only loses a race and is retried."""
        informer = self._informers.get((rt.group, rt.version, rt.plural))
        return informer.get(namespace, name) if informer is not None else None

    def binding_for(self, namespace: str | None, name: str, kind: str) -> dict[str, Any] | None:
        """The cached binding of workload ``kind`` ``namespace/name`` (None when it has none)."""
        return self.bindings.get(namespace, binding_name(name, kind))

    def policy_selects_kind(self, namespace: str | None, api_version: str, kind: str) -> bool:
        """Whether any PropagationPolicy of ``namespace`` or ClusterPropagationPolicy names the kind
        in a resource selector (plain objects such as ConfigMaps matter only then); for a custom
        kind, in any of its served versions (:meth:`served_as`)."""
        watched = self.registry.for_kind(api_version, kind)
        served_as = self.served_as(watched) if watched is not None else None
        for rt in self.propagation_types:
            for obj in self._policy_objects(rt, namespace):
                for selector in ObjectView(obj).spec.get("resourceSelectors") or ():
                    named = str(selector.get("apiVersion"))
                    if selector.get("kind") == kind and (named == api_version or (served_as and served_as(named))):
                        return True
        return False

    async def delete(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        with contextlib.suppress(errors.NotFound):
            await self.objects.delete(rt, namespace=namespace, name=name)

    async def write_status(self, rt: ResourceType, obj: dict[str, Any]) -> Written:
        """Write ``obj``'s status (a compare-and-swap on its resourceVersion); a 409 Conflict or a
        404 NotFound is not a failure of the reconcile but its outcome (see :class:`Written`)."""
        try:
            return Written(await self.objects.update_status(rt, obj), None)
        except errors.Conflict:
            return Written(None, CONFLICT_RETRY_SECONDS)
        except errors.NotFound:
            return Written(None, None)

    async def write_work(self, desired: dict[str, Any], *, yields_to: str | None = None) -> str | None:
        """Create the Work ``desired`` (its namespace first) or bring the stored one's spec and
        labels to it, keeping its other labels; one labelled ``yields_to`` is another writer's and
        is left as it is. ``"created"``/``"updated"``, or None when nothing was written. A Work
        deleted between the create and the read is a Conflict (the caller retries)."""
        namespace, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
        current = self.works.get(namespace, name)
        if current is None:
            await self.ensure_namespace(namespace)
            try:
                await self.objects.create(self.work_rt, desired)
                return "created"
            except errors.AlreadyExists:
                current = await self.get(self.work_rt, namespace, name)
                if current is None:
                    raise errors.conflict_modified(plural=self.work_rt.plural, group=self.work_rt.group, name=name) from None
        labels = current["metadata"].get("labels") or {}
        if yields_to is not None and labels.get(yields_to):
            return None
        wanted = desired["metadata"]["labels"]
        if current.get("spec") == desired["spec"] and all(labels.get(k) == v for k, v in wanted.items()):
            return None
        updated = copy.deepcopy(current)
        updated["spec"] = desired["spec"]
        updated["metadata"]["labels"] = {**labels, **wanted}
        await self.objects.update(self.work_rt, updated)
        return "updated"

    # --- policies --------------------------------------------------------------------

    def parsed_policy(self, obj: dict[str, Any]) -> AnyPolicy | None:
        meta = ObjectView(obj).metadata
        key = (str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
        version = str(meta.get("resourceVersion") or "")
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        policy: AnyPolicy | None
        try:
            policy = parse_policy(obj)
        except (ValidationError, ValueError) as exc:
            log.warning("ignoring invalid policy %s: %s", "/".join(key[1:]), exc)
            policy = None
        self._parsed[key] = (version, policy)
        return policy

    def _policies(self, types: Iterable[ResourceType], namespace: str | None) -> list[AnyPolicy]:
        out: list[AnyPolicy] = []
        for rt in types:
            for obj in self._policy_objects(rt, namespace):
                policy = self.parsed_policy(obj)
                if policy is not None:
                    out.append(policy)
        return out

    def _policy_objects(self, rt: ResourceType, namespace: str | None) -> Iterable[dict[str, Any]]:
        """The cached policies of kind ``rt`` that apply in ``namespace``: its own when ``rt`` is
        namespaced (none for a cluster-scoped object), every one when ``rt`` is cluster-scoped."""
        informer = self.informer(rt)
        if rt.namespaced:
            return informer.by_index(INDEX_NAMESPACE, namespace) if namespace else []
        return informer.items()

    def propagation_policies(self, namespace: str | None) -> list[AnyPropagationPolicy]:
        """The PropagationPolicies of ``namespace`` and every ClusterPropagationPolicy."""
        return [
            p
            for p in self._policies(self.propagation_types, namespace)
            if isinstance(p, PropagationPolicy | ClusterPropagationPolicy)
        ]

    def override_policies(self, namespace: str | None) -> list[AnyOverridePolicy]:
        """The OverridePolicies of ``namespace`` and every ClusterOverridePolicy."""
        return [
            p
            for p in self._policies(self.override_types, namespace)
            if isinstance(p, OverridePolicy | ClusterOverridePolicy)
        ]

    def propagation_policy(self, ref: PolicyRef) -> AnyPropagationPolicy | None:
        """The policy a binding names in ``spec.policy``."""
        for rt in self.propagation_types:
            if rt.kind != ref.kind:
                continue
            obj = self.informer(rt).get(ref.namespace if rt.namespaced else None, ref.name)
            if obj is None:
                continue
            policy = self.parsed_policy(obj)
            if isinstance(policy, PropagationPolicy | ClusterPropagationPolicy):
                return policy
        return None


def policy_ref_of_binding(binding: dict[str, Any] | None) -> PolicyRef | None:
    policy = BindingView(binding).policy
    if not policy.get("name"):
        return None
    return PolicyRef(kind=str(policy.get("kind")), name=str(policy["name"]), namespace=policy.get("namespace") or None)
