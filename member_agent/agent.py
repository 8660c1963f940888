"""The member agent process: joins the hub, then keeps the hub and the member in step.

In: an :class:`~member_agent.config.AgentConfig`. Out, while :meth:`Agent.run` runs, one task
each in a ``TaskGroup``:

* heartbeat — renews the Lease ``gpufed-cluster-lease/<cluster>`` every ``heartbeat_interval``;
* node and pod informers on the member (list+watch, resume, relist on 410);
* capacity reporter — writes ``Cluster.status`` (:func:`member_agent.capacity.summarize`)
  ``report_debounce`` seconds after nodes/pods change, and every ``report_interval`` anyway;
* Work informer on the hub (``gpufed-es-<cluster>``) and the Work worker, which applies changed
  Works, removes deleted ones and reapplies everything every ``resync_interval`` (repairs drift
  in the member);
* Work status follows the member: informers on the kinds the Works applied (label-selected by
  the ownership labels the agent sets, so they see only gpufed's objects) and the pod informer
  (a pod maps to its Work through its owning workload) mark the owning Work; its status is
  recomputed ``status_debounce`` seconds later and written only when it changed (a status
  saying *applied, replicas starting* is held up to ``status_hold`` seconds, so that a quick
  rollout costs one write: :mod:`member_agent.holding`). Every Work's
  status is recomputed every ``status_resync_interval`` anyway. A status pass reads those
  informers' caches (a synced watch holds every object gpufed owns of its kind) and asks the
  member only for what they do not hold (an object missing, or one not labelled as gpufed's:
  a conflict). The applier's ownership check before an apply reads the member itself: a cache
  can lag behind a release, and an apply must not take over what is no longer gpufed's. The
  watch on a kind stops once no Work holds that kind any more (after its objects were pruned)
  and starts again when a Work needs it;
* ResourceInterpreterCustomization informer on the hub (read-only), whose member-side hooks
  (:mod:`member_agent.interpreting`: retention before each update of an existing member object,
  statusReflection and healthInterpretation on the whole member object for the Work status)
  the applier runs; a change makes every Work's status due;
* member API probe — asks the member's ``/readyz`` and ``/livez`` every
  ``member_probe_interval`` (:mod:`member_agent.probing`); once they have failed for
  ``member_failure_threshold`` the reports say Ready False (``MemberAPIUnreachable`` or
  ``MemberAPINotReady``) instead of what the caches still hold, and a change of that verdict is
  reported at once;
* DCGM scraper (when ``dcgm_url`` is set), whose utilization rides on the next report;
* Prometheus ``/metrics`` (when ``metrics_listen`` is set): report lag, reports written,
  DCGM scrapes (:mod:`member_agent.metrics`).

Every remote call has a timeout; hub and member errors back off with jitter and never end the
agent. :meth:`Agent.shutdown` is idempotent; ``async with Agent(config)`` runs it in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration
from tenacity import AsyncRetrying, retry_if_exception, wait_exponential_jitter

from controlplane.apis import constants as c
from controlplane.lifecycle import Service
from member_agent import capacity, dcgm, hubclient, probing
from member_agent.applying import WorkApplier, status_changed, status_fields
from member_agent.config import AgentConfig
from member_agent.holding import StatusHold
from member_agent.informing import Informer
from member_agent.interpreting import CUSTOMIZATIONS_PATH, MemberInterpreters
from member_agent.kubeapi import ApiError, Conflict, KubeApi, NotFound, is_retryable
from member_agent.ledger import Ledger
from member_agent.manifests import Identifier, desired_manifests, preserves_on_deletion, work_key
from member_agent.metrics import NAMESPACE as METRICS_NAMESPACE
from member_agent.metrics import AgentMetrics, MetricsServer, parse_listen
from member_agent.reclaims import ReclaimLog
from member_agent.registering import (
    desired_cluster,
    register_cluster,
    renew_lease,
    rfc3339,
    write_cluster_status,
)
from member_agent.tunnel import AgentTunnel, TunnelCollector
from member_agent.unserved import UnservedRetries, carries_crd

logger = logging.getLogger(__name__)

WORK_API = f"/apis/{c.WORK_GROUP}/{c.VERSION}"
MAX_BACKOFF = 30.0
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class _Stopped(Exception):
    """Raised inside the task group to end it on shutdown()."""


#: A member kind as a Work's manifest names it: (apiVersion, kind).
Kind = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _KindWatch:
    """The informer on one member kind the Works hold, and the task that runs it."""

    informer: Informer
    task: asyncio.Task[None]


async def member_api(config: AgentConfig) -> KubeApi:
    """A client for the member cluster: the kubeconfig when given, else in-cluster config."""
    configuration = Configuration()
    if config.kubeconfig is not None:
        await kube_config.load_kube_config(
            config_file=str(config.kubeconfig), client_configuration=configuration
        )
    else:
        kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return KubeApi(ApiClient(configuration=configuration), timeout=config.request_timeout)


#: How the agent gets its member client: :func:`member_api` (kubeconfig or in-cluster), or an
#: in-process client of a hollow member (``gpufed sim-fleet``), which sits below this seam.
MemberClient = Callable[[AgentConfig], Awaitable[KubeApi]]


def _retrying(what: str) -> AsyncRetrying:
    def log(state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        logger.warning("%s failed: %s; retrying (attempt %d)", what, exc, state.attempt_number)

    return AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        wait=wait_exponential_jitter(multiplier=0.2, max=MAX_BACKOFF, jitter=0.5),
        before_sleep=log,
        reraise=True,
    )


class Agent(Service):
    """One member agent; see the module docstring for what it runs."""

    def __init__(
        self, config: AgentConfig, *, clock: Clock = _utc_now, member_client: MemberClient = member_api
    ) -> None:
        super().__init__(f"agent-{config.cluster_name}")
        self.config = config
        self.clock = clock
        #: Builds the member client (a hollow member's in-process one in a hollow fleet).
        self._member_client = member_client
        self.hub: KubeApi | None = None
        self.member: KubeApi | None = None
        self.cluster: dict[str, Any] | None = None
        self.lease: dict[str, Any] | None = None
        self.last_status: dict[str, Any] | None = None
        self.reports_written = 0
        self.metrics = AgentMetrics(config.cluster_name)
        self.metrics_server: MetricsServer | None = None
        self.registered = asyncio.Event()
        self._report_due = asyncio.Event()
        self._work_due = asyncio.Event()
        self._dirty_works: set[str] = set()
        #: Works whose status must be recomputed (a pod or workload object of theirs changed).
        self._status_dirty: set[str] = set()
        #: Works whose held status is due now (see :mod:`member_agent.holding`), and the timers.
        self._hold = StatusHold(config.status_hold)
        self._hold_timers: dict[str, asyncio.TimerHandle] = {}
        self._hold_over = False
        #: (namespace, kind, name) of every object a Work holds -> that Work's key.
        self._work_objects: dict[tuple[str, str, str], str] = {}
        self._work_index: dict[str, list[tuple[str, str, str]]] = {}
        #: The Work a member object (pod or workload) was last seen to belong to, by its key
        #: (``Pod:<namespace>/<name>``, or ``<informer name>:<object key>`` for the kinds Works
        #: hold), so its deletion still finds the Work.
        self._owner_of: dict[str, str] = {}
        self._watched_kinds: dict[Kind, _KindWatch] = {}
        #: The kinds each Work held when it was last applied, and the Works holding each kind;
        #: a kind no Work holds is not watched.
        self._kinds_of_work: dict[str, frozenset[Kind]] = {}
        self._holders: dict[Kind, set[str]] = {}
        #: Work status passes made (every ``_refresh_work_status``), for tests and measurements.
        self.status_passes = 0
        self._group: asyncio.TaskGroup | None = None
        self._applied_generation: dict[str, int] = {}
        #: Works waiting for a kind the member does not serve yet (see :mod:`member_agent.unserved`).
        self._unserved = UnservedRetries()
        self._unserved_timers: dict[str, asyncio.TimerHandle] = {}
        #: Per Work, its ``preserveResourcesOnDeletion`` as last seen on the hub: a deleted Work's
        #: objects are released rather than deleted when it was set (the hub clears it before
        #: deleting a Work whose cluster left the placement, and waits until this agent has
        #: applied that generation, whose flag the ledger then holds across restarts).
        self._preserve_on_deletion: dict[str, bool] = {}
        self._utilization: dict[str, list[dict[str, Any]]] | None = None
        self._utilization_time: str | None = None
        self._kubernetes_version: str | None = None
        #: The member API's health by the probe; None until the member client exists.
        self.member_api_health: probing.MemberApiHealth | None = None
        self.nodes: Informer | None = None
        self.pods: Informer | None = None
        self.works: Informer | None = None
        #: The hub's ResourceInterpreterCustomizations, and their member-side hooks in force.
        self.customizations: Informer | None = None
        self.interpreters = MemberInterpreters()
        #: Spot nodes and the pods workloads lost when one was reclaimed.
        self.reclaims = ReclaimLog()
        #: The cluster proxy's tunnel to the hub (``--enable-proxy``).
        self.tunnel: AgentTunnel | None = None

    # lifecycle -------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until :meth:`shutdown`; raises the first fatal error (e.g. the hub CA does not
        match the pinned hash, or the hub refused the bootstrap token)."""
        try:
            if self.config.metrics_listen:
                host, port = parse_listen(self.config.metrics_listen)
                self.metrics_server = MetricsServer(self.metrics, host=host, port=port)
                await self.metrics_server.start()
            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._wait_for_stop())
                    group.create_task(self._main(group))
            except BaseExceptionGroup as errors:
                _, rest = errors.split(_Stopped)
                if rest is not None:
                    first = rest.exceptions[0]
                    raise (
                        first if len(rest.exceptions) == 1 and isinstance(first, Exception) else rest
                    ) from None
        finally:
            if self.metrics_server is not None:
                await self.metrics_server.close()
                self.metrics_server = None
            for api in (self.hub, self.member):
                if api is not None:
                    await api.close()
            self.hub = self.member = None
            logger.info("agent for cluster %s stopped", self.config.cluster_name)

    async def _wait_for_stop(self) -> None:
        await self._stop.wait()
        raise _Stopped

    async def _main(self, group: asyncio.TaskGroup) -> None:
        cfg = self.config
        async for attempt in _retrying("connecting to the member cluster"):
            with attempt:
                self.member = await self._member_client(cfg)
                self._kubernetes_version = await self.member.version()
        async for attempt in _retrying("joining the hub"):
            with attempt:
                self.hub = await hubclient.connect(
                    hub=cfg.hub,
                    ca_hash=cfg.hub_ca_hash,
                    bootstrap_token=cfg.bootstrap_token.get_secret_value() if cfg.bootstrap_token else None,
                    cluster_name=cfg.cluster_name,
                    state=hubclient.StateDir(cfg.state_dir),
                    request_timeout=cfg.request_timeout,
                )
        desired = self._desired_cluster()
        hub = self.hub
        assert hub is not None and self.member is not None
        async for attempt in _retrying("registering the cluster"):
            with attempt:
                self.cluster = await register_cluster(hub, desired)
        self.registered.set()

        self.nodes = Informer(
            self.member,
            "/api/v1/nodes",
            name="nodes",
            transform=capacity.trim_node,
            on_change=self._on_node_change,
        )
        self.pods = Informer(
            self.member,
            "/api/v1/pods",
            name="pods",
            transform=capacity.trim_pod,
            on_change=self._on_pod_change,
        )
        namespace = c.execution_namespace(cfg.cluster_name)
        self.works = Informer(
            hub, f"{WORK_API}/namespaces/{namespace}/works", name="works", on_change=self._on_work_change
        )
        self.customizations = Informer(
            hub, CUSTOMIZATIONS_PATH, name="customizations", on_change=self._on_customization_change
        )
        self._group = group
        group.create_task(self.customizations.run())
        group.create_task(self._heartbeat_loop())
        group.create_task(self.nodes.run())
        group.create_task(self.pods.run())
        group.create_task(self.works.run())
        group.create_task(self._report_loop())
        group.create_task(self._probe_loop())
        group.create_task(self._work_loop())
        if cfg.dcgm_url:
            group.create_task(self._dcgm_loop(cfg.dcgm_url))
        if cfg.enable_proxy:
            self.tunnel = AgentTunnel(
                cluster=cfg.cluster_name, hub=hub.client, member=self.member.client, identity=cfg.proxy_identity
            )
            self.metrics.registry.register(TunnelCollector(self.tunnel, prefix=METRICS_NAMESPACE))
            group.create_task(self.tunnel.run())

    # heartbeat -------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        assert self.hub is not None
        while True:
            try:
                self.lease = await renew_lease(
                    self.hub,
                    self.config.cluster_name,
                    now=self.clock(),
                    duration_seconds=self.config.lease_duration_seconds,
                    last=self.lease,
                )
            except ApiError as exc:
                logger.warning("heartbeat for cluster %s failed: %s", self.config.cluster_name, exc)
                self.lease = None
            await asyncio.sleep(self.config.heartbeat_interval)

    # capacity --------------------------------------------------------------------------

    def _on_capacity_change(self, key: str) -> None:
        self._report_due.set()

    def _on_node_change(self, key: str) -> None:
        """A spot node gone (or given a reclaim notice) is reported like any node change, and the
        Works of the workloads that lost pods with it get their status written."""
        node = self.nodes.objects.get(key) if self.nodes is not None else None
        news, touched = self.reclaims.node_changed(key, node, now=self.clock())
        if news:
            logger.info("spot node %s of cluster %s %s", key, self.config.cluster_name,
                        "got a reclaim notice" if node is not None else f"was reclaimed ({len(touched)} workload(s) hit)")
        self._reclaims_touched(touched)
        self._on_capacity_change(key)

    def _reclaims_touched(self, touched: set[tuple[str, str, str]]) -> None:
        for ref in touched:
            work = self._work_objects.get(ref)
            if work is not None:
                self._status_dirty.add(work)
                self._work_due.set()

    def build_status(self) -> dict[str, Any]:
        assert self.nodes is not None and self.pods is not None
        previous = (self.cluster or {}).get("status") or {}
        return capacity.summarize(
            list(self.nodes.objects.values()),
            list(self.pods.objects.values()),
            now=rfc3339(self.clock()),
            utilization=self._utilization,
            utilization_time=self._utilization_time,
            kubernetes_version=self._kubernetes_version
            or capacity.kubelet_version(self.nodes.objects.values()),
            previous_conditions=previous.get("conditions") or [],
            api_problem=(problem.reason, problem.message)
            if self.member_api_health is not None and (problem := self.member_api_health.problem) is not None
            else None,
        )

    async def _probe_loop(self) -> None:
        assert self.member is not None
        cfg = self.config
        health = self.member_api_health = probing.MemberApiHealth(
            server=self.member.server, failure_threshold=cfg.member_failure_threshold
        )
        loop = asyncio.get_running_loop()
        while True:
            before = health.problem
            result = await probing.probe_member_api(
                self.member, request_timeout=min(cfg.request_timeout, cfg.member_probe_interval)
            )
            problem = health.observe(result, now=loop.time())
            if (before and before.reason) != (problem and problem.reason):
                if problem is None:
                    logger.info("the API of member cluster %s answers again", cfg.cluster_name)
                else:
                    logger.warning("cluster %s is not ready: %s", cfg.cluster_name, problem.message)
                self._report_due.set()
            elif result.outcome is not probing.ProbeOutcome.OK and problem is None:
                logger.info("probe of member cluster %s failed: %s", cfg.cluster_name, result.detail)
            await asyncio.sleep(cfg.member_probe_interval)

    async def _report_loop(self) -> None:
        assert self.nodes is not None and self.pods is not None and self.hub is not None
        await self.nodes.synced.wait()
        await self.pods.synced.wait()
        failures = 0
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.report_interval):
                    await self._report_due.wait()
                await asyncio.sleep(self.config.report_debounce)  # let a burst of changes settle
            self._report_due.clear()
            status = self.build_status()
            try:
                assert self.cluster is not None
                self.cluster = await write_cluster_status(self.hub, self.cluster, status)
                self.last_status = status
                self.reports_written += 1
                self.metrics.report_written()
                failures = 0
            except NotFound:
                logger.warning(
                    "cluster %s is gone from the hub; registering it again", self.config.cluster_name
                )
                self.cluster = await self._reregister()
                self._report_due.set()
            except ApiError as exc:
                failures += 1
                self.metrics.report_failed()
                logger.warning("capacity report for cluster %s failed: %s", self.config.cluster_name, exc)
                self._report_due.set()
                await asyncio.sleep(min(MAX_BACKOFF, 0.5 * 2**failures))

    def _desired_cluster(self) -> dict[str, Any]:
        cfg = self.config
        return desired_cluster(
            cfg.cluster_name,
            provider=cfg.provider,
            region=cfg.region,
            zone=cfg.zone,
            tier=cfg.tier,
            labels=cfg.labels,
            pricing=cfg.pricing,
        )

    async def _reregister(self) -> dict[str, Any]:
        cfg = self.config
        assert self.hub is not None
        desired = self._desired_cluster()
        while True:
            try:
                return await register_cluster(self.hub, desired)
            except ApiError as exc:
                logger.warning("registering cluster %s again failed: %s", cfg.cluster_name, exc)
                await asyncio.sleep(MAX_BACKOFF)

    # utilization -----------------------------------------------------------------------

    async def _dcgm_loop(self, url: str) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    text = await dcgm.scrape(
                        session,
                        url,
                        request_timeout=min(self.config.request_timeout, dcgm.DEFAULT_SCRAPE_TIMEOUT),
                        max_bytes=self.config.dcgm_max_bytes,
                    )
                    self._utilization = dcgm.utilization_by_node(dcgm.parse_metrics(text))
                    self._utilization_time = rfc3339(self.clock())
                    self.metrics.dcgm_scraped(ok=True)
                except dcgm.ScrapeError as exc:
                    self.metrics.dcgm_scraped(ok=False)
                    logger.warning("DCGM scrape failed: %s", exc)
                await asyncio.sleep(self.config.dcgm_interval)

    # works -----------------------------------------------------------------------------

    def _on_work_change(self, key: str) -> None:
        work = self.works.objects.get(key) if self.works is not None else None
        if work is not None:
            self._preserve_on_deletion[key] = preserves_on_deletion(work)
        self._index_work(key)
        self._dirty_works.add(key)
        self._work_due.set()

    def _on_customization_change(self, key: str) -> None:
        """Put the customizations in force; every Work's status is due (its interpretation may
        have changed), and the Works carrying a kind whose retention changed are applied again
        (so the member objects are as the retention now in force keeps them)."""
        if self.customizations is None:
            return
        retention_changed = self.interpreters.update(self.customizations.objects.values())
        if self.works is not None:
            self._status_dirty.update(self.works.objects)
            for work in works_carrying(self.works.objects, retention_changed):
                self._applied_generation.pop(work, None)
                self._dirty_works.add(work)
            self._work_due.set()

    def _index_work(self, key: str) -> None:
        """Keep :attr:`_work_objects` in step with the Work's manifests."""
        for ref in self._work_index.pop(key, ()):
            if self._work_objects.get(ref) == key:
                del self._work_objects[ref]
        work = self.works.objects.get(key) if self.works is not None else None
        if work is None:
            return
        refs = [
            (ident.namespace or "default", ident.kind, ident.name) for ident, _ in desired_manifests(work)
        ]
        self._work_index[key] = refs
        for ref in refs:
            self._work_objects[ref] = key

    def _mark_status(self, member_key: str, work: str | None) -> None:
        """A member object changed: its Work's status is due (the last known Work on deletion)."""
        if work is None:
            work = self._owner_of.pop(member_key, None)
        else:
            self._owner_of[member_key] = work
        if work is not None:
            self._status_dirty.add(work)
            self._work_due.set()

    def _on_pod_change(self, key: str) -> None:
        self._on_capacity_change(key)
        pod = self.pods.objects.get(key) if self.pods is not None else None
        self._reclaims_touched(self.reclaims.pod_changed(key, pod, now=self.clock()))
        work = None
        if pod is not None:
            namespace = str((pod.get("metadata") or {}).get("namespace") or "")
            owner = capacity.owner_workload(pod)
            ref = (
                (namespace, owner["kind"], owner["name"])
                if owner
                else (namespace, "Pod", key.partition("/")[2])
            )
            work = self._work_objects.get(ref)
        self._mark_status(f"Pod:{key}", work)

    def _on_workload_change(self, informer: Informer, key: str) -> None:
        live = informer.objects.get(key)
        work = None
        if live is not None:
            labels = (live.get("metadata") or {}).get("labels") or {}
            work = f"{labels.get(c.LABEL_WORK_NAMESPACE)}/{labels.get(c.LABEL_WORK_NAME)}"
        self._mark_status(f"{informer.name}:{key}", work)

    async def _watch_kinds(self, work: Mapping[str, Any]) -> None:
        """Start an informer on each kind the Work holds that none watches yet, selecting the
        objects this agent's Works own (by the ownership labels every apply sets)."""
        assert self.member is not None
        namespace = (work.get("metadata") or {}).get("namespace")
        selector = f"{c.LABEL_WORK_NAMESPACE}={namespace}"
        for ident, _ in desired_manifests(work):
            kind = (ident.api_version, ident.kind)
            if kind in self._watched_kinds or self._group is None:
                continue
            try:
                info = await self.member.resource_info(ident.api_version, ident.kind)
            except ApiError as exc:
                logger.info("not watching %s %s: %s", ident.api_version, ident.kind, exc.message)
                continue
            prefix = (
                f"/api/{info.api_version}" if "/" not in info.api_version else f"/apis/{info.api_version}"
            )
            informer = Informer(
                self.member,
                f"{prefix}/{info.plural}",
                name=f"{info.plural}.{info.api_version}",
                transform=functools.partial(status_fields, api_version=info.api_version, kind=info.kind),
                query={"labelSelector": selector},
            )
            informer.on_change = lambda key, informer=informer: self._on_workload_change(informer, key)
            task = self._group.create_task(informer.run(), name=f"watch-{informer.name}")
            self._watched_kinds[kind] = _KindWatch(informer=informer, task=task)
            logger.info("watching %s %s owned by works in %s", ident.api_version, ident.kind, namespace)

    def _hold_kinds(self, key: str, work: Mapping[str, Any] | None) -> None:
        """Record the kinds the Work holds now (none once it is gone; its objects are pruned by
        then) and stop watching the kinds no Work holds any more."""
        before = self._kinds_of_work.pop(key, frozenset())
        now: frozenset[Kind] = frozenset()
        if work is not None:
            now = frozenset((ident.api_version, ident.kind) for ident, _ in desired_manifests(work))
            self._kinds_of_work[key] = now
        for kind in before - now:
            holders = self._holders.get(kind, set())
            holders.discard(key)
            if not holders:
                self._holders.pop(kind, None)
        for kind in now - before:
            self._holders.setdefault(kind, set()).add(key)
        # Every watch without a holder, not only this Work's: a Work that failed to apply after
        # its watches started, and then went, leaves watches nobody holds.
        for kind in [kind for kind in self._watched_kinds if kind not in self._holders]:
            watch = self._watched_kinds.pop(kind)
            watch.task.cancel()
            # Forget which Work the kind's objects belonged to: no event of theirs will come.
            prefix = f"{watch.informer.name}:"
            for member_key in [k for k in self._owner_of if k.startswith(prefix)]:
                del self._owner_of[member_key]
            logger.info("stopped watching %s %s: no work holds it any more", *kind)

    @property
    def held_works(self) -> frozenset[str]:
        """The Works whose status is held back right now (:mod:`member_agent.holding`)."""
        return frozenset(self._hold_timers)

    @property
    def watched_kinds(self) -> frozenset[Kind]:
        """The member kinds watched right now: those some Work holds."""
        return frozenset(self._watched_kinds)

    def cached_object(self, ident: Identifier) -> Mapping[str, Any] | None:
        """The member object ``ident`` names as its kind's synced watch last saw it; None when no
        watch covers it (see :data:`member_agent.applying.CachedObject`)."""
        watch = self._watched_kinds.get((ident.api_version, ident.kind))
        if watch is None or not watch.informer.synced.is_set():
            return None
        key = f"{ident.namespace}/{ident.name}" if ident.namespace else ident.name
        return watch.informer.objects.get(key)

    def _pods(self) -> list[Mapping[str, Any]]:
        return list(self.pods.objects.values()) if self.pods is not None else []

    async def _work_loop(self) -> None:
        assert self.works is not None and self.member is not None and self.hub is not None
        cfg = self.config
        applier = WorkApplier(
            member=self.member, ledger=Ledger(cfg.state_dir), pods=self._pods, cached=self.cached_object,
            interpreters=self.interpreters,
        )
        await self.works.synced.wait()
        if self.customizations is not None:
            # Retention must be in force before the first update; a hub that serves no
            # customizations (an older one) delays the start by one request timeout only.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(cfg.request_timeout):
                    await self.customizations.synced.wait()
        for key in list(self.works.objects):
            self._index_work(key)
        loop = asyncio.get_running_loop()
        # Works deleted while the agent was not running (due now, even when no Work is left to
        # announce itself).
        self._dirty_works.update(k for k in applier.ledger if k not in self.works.objects)
        if self._dirty_works:
            self._work_due.set()
        next_status = loop.time() + cfg.status_resync_interval
        next_resync = loop.time() + cfg.resync_interval
        failures = 0
        while True:
            timeout = max(0.0, min(next_status, next_resync) - loop.time())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._work_due.wait()
            if self._status_dirty and not self._dirty_works and not self._hold_over:
                await asyncio.sleep(cfg.status_debounce)  # let a burst of member events settle
            self._work_due.clear()
            self._hold_over = False
            now = loop.time()
            if now >= next_resync:
                self._applied_generation.clear()
                self._dirty_works.update(self.works.objects)
                next_resync = now + cfg.resync_interval
            if now >= next_status:
                self._status_dirty.update(self.works.objects)
                next_status = now + cfg.status_resync_interval
            keys = sorted(self._dirty_works)
            self._dirty_works.clear()
            status_keys = set(self._status_dirty)
            self._status_dirty.clear()
            try:
                for key in keys:
                    if await self._reconcile_work(applier, key):
                        status_keys.discard(key)
                for key in sorted(status_keys):
                    await self._refresh_work_status(applier, key)
                failures = 0
            except ApiError as exc:
                failures += 1
                logger.warning("applying works failed: %s; retrying", exc)
                self._dirty_works.update(keys)
                self._status_dirty.update(status_keys)
                await asyncio.sleep(min(MAX_BACKOFF, 0.2 * 2**failures))
                self._work_due.set()

    async def _refresh_work_status(self, applier: WorkApplier, key: str) -> None:
        assert self.works is not None
        work = self.works.objects.get(key)
        if work is None or _suspended(work) or (work.get("metadata") or {}).get("deletionTimestamp"):
            return
        self.status_passes += 1
        await self._write_work_status(work, await applier.refresh_status(work, now=rfc3339(self.clock())))

    async def _reconcile_work(self, applier: WorkApplier, key: str) -> bool:
        """Apply (or remove) the Work; True when its status was computed and written."""
        assert self.works is not None
        work = self.works.objects.get(key)
        if work is None or (work.get("metadata") or {}).get("deletionTimestamp"):
            self._applied_generation.pop(key, None)
            if key in applier.ledger:
                # As last seen; after a restart, as the ledger recorded it when last applied.
                await applier.remove_work(key, preserve=self._preserve_on_deletion.get(key))
            self._preserve_on_deletion.pop(key, None)
            self._hold.forget(key)
            self._end_hold(key)
            self._hold_kinds(key, None)
            self._unserved.forget(key)
            return False
        if _suspended(work):
            # Not applied, but the flag it carries now decides its objects' fate on deletion,
            # after a restart too.
            applier.record_preserve(key, preserves_on_deletion(work))
            return False
        generation = int((work.get("metadata") or {}).get("generation") or 0)
        if self._applied_generation.get(key) == generation:
            return False  # a status write of ours, or a no-op update
        await self._watch_kinds(work)
        status = await applier.reconcile(work, now=rfc3339(self.clock()))
        self._hold_kinds(key, work)
        self._applied_generation[key] = generation
        await self._write_work_status(work, status)
        self._retry_unserved(key, work, status)
        return True

    def _retry_unserved(self, key: str, work: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """Apply ``key`` again after a back-off while a kind it needs is not served; apply the
        Works waiting so at once when ``work`` brought a CRD."""
        loop = asyncio.get_running_loop()
        timer = self._unserved_timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        delay = self._unserved.after(key, status)
        if delay is not None:
            self._unserved_timers[key] = loop.call_later(delay, self._apply_again, key)
        elif carries_crd(work):
            for waiting in self._unserved.waiting():
                self._apply_again(waiting)

    def _apply_again(self, key: str) -> None:
        self._unserved_timers.pop(key, None)
        self._applied_generation.pop(key, None)
        self._dirty_works.add(key)
        self._work_due.set()

    def _end_hold(self, key: str) -> None:
        timer = self._hold_timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _hold_ended(self, key: str) -> None:
        """The hold on ``key`` ran out: its status is written as it is now, without a debounce."""
        self._hold_timers.pop(key, None)
        self._hold.expire(key)
        self._status_dirty.add(key)
        self._hold_over = True
        self._work_due.set()

    async def _write_work_status(self, work: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        assert self.hub is not None
        status = self.reclaims.annotate(status, now=self.clock())
        loop, held_key = asyncio.get_running_loop(), work_key(work)
        held = self._hold.delay(held_key, status, now=loop.time())
        if held is None:
            self._end_hold(held_key)
        if not status_changed(work.get("status"), status):
            return
        if held is not None:
            if held_key not in self._hold_timers:
                self._hold_timers[held_key] = loop.call_later(held, self._hold_ended, held_key)
            return
        meta = work.get("metadata") or {}
        path = f"{WORK_API}/namespaces/{meta.get('namespace')}/works/{meta.get('name')}/status"
        current = dict(work)
        for _ in range(3):
            try:
                updated = await self.hub.replace(path, {**current, "status": dict(status)})
                key = work_key(updated)
                if self.works is not None and key in self.works.objects:
                    # Keep the cache current so the next comparison sees what was written; a spec
                    # change picked up by a conflict re-read must still be applied.
                    self.works.objects[key] = updated
                    generation = int((updated.get("metadata") or {}).get("generation") or 0)
                    if self._applied_generation.get(key) != generation:
                        self._on_work_change(key)
                return
            except NotFound:
                return  # the Work was deleted meanwhile; its DELETED event follows
            except Conflict:
                current = await self.hub.get(path.removesuffix("/status"))
        logger.warning("work %s kept changing; its status will be written on the next pass", work_key(work))


def _suspended(work: Mapping[str, Any]) -> bool:
    return bool((work.get("spec") or {}).get("suspendDispatching"))


def works_carrying(works: Mapping[str, Mapping[str, Any]], kinds: set[tuple[str, str]]) -> list[str]:
    """The keys of the Works with a manifest of one of ``kinds`` (API group, kind)."""
    if not kinds:
        return []
    return [
        key
        for key, work in works.items()
        if any((ident.group, ident.kind) in kinds for ident, _ in desired_manifests(work))
    ]
