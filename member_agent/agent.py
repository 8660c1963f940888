"""The member agent process: joins the hub, then keeps the hub and the member in step.

In: an :class:`~member_agent.config.AgentConfig`. Out, while :meth:`Agent.run` runs, one task
each in a ``TaskGroup``:

* leader election first (``--leader-elect``, off by default): the agent waits until it holds the
  Lease ``gpufed-agent-<cluster>`` in the member (:mod:`member_agent.electing`), and everything
  below runs only while it does; a task renews it, and losing it ends :meth:`Agent.run` with
  :class:`~member_agent.electing.LeadershipLost` (the process exits and is restarted, as
  karmada-agent's), a clean shutdown releases it;
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
  status is recomputed every ``status_resync_interval`` anyway (both resyncs vary by a tenth
  either way, so agents started together do not resync together). A status pass reads those
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
* EndpointSlice informer on the member, started once a Work asks for a MultiClusterService's
  slices (:mod:`member_agent.collecting`), which go into that Work's status;
* DCGM scraper (when ``dcgm_url`` is set), whose utilization rides on the next report;
* Prometheus ``/metrics`` (when ``metrics_listen`` is set): report lag, reports written,
  DCGM scrapes (:mod:`member_agent.metrics`).

Every remote call has a timeout; hub and member errors back off with jitter and never end the
agent. :meth:`Agent.shutdown` is idempotent; ``async with Agent(config)`` runs it in the background.

The concerns live in their own modules, on the state they share (:mod:`member_agent.agentbase`):
capacity reports, the probe and DCGM in :mod:`member_agent.reporting`, the Works in
:mod:`member_agent.syncing`; this module starts them and routes the member's node and pod events.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration
from tenacity import AsyncRetrying, retry_if_exception, wait_exponential_jitter

from controlplane.apis import constants as c
from member_agent import capacity, hubclient
from member_agent.agentbase import MAX_BACKOFF, WORK_API, Clock, MemberClient, utc_now
from member_agent.collecting import EndpointSliceCollector
from member_agent.config import AgentConfig
from member_agent.draclaims import DraClaims
from member_agent.electing import ElectionTiming, LeaderElector, default_identity, lease_name
from member_agent.informing import Informer
from member_agent.interpreting import CUSTOMIZATIONS_PATH
from member_agent.kubeapi import ApiError, KubeApi, is_retryable
from member_agent.metrics import NAMESPACE as METRICS_NAMESPACE
from member_agent.metrics import MetricsServer, parse_listen
from member_agent.nodetotals import NodeTotals
from member_agent.reachability import Reachability, Unreachable, failure_level
from member_agent.registering import register_cluster, renew_lease
from member_agent.reporting import CapacityReporting
from member_agent.syncing import WorkSyncing
from member_agent.tunnel import AgentTunnel, ReconnectBackoff, TunnelCollector

logger = logging.getLogger(__name__)


class _Stopped(Exception):
    """Raised inside the task group to end it on shutdown()."""


async def member_api(config: AgentConfig) -> KubeApi:
    """A client for the member cluster: the kubeconfig when given, else in-cluster config."""
    configuration = Configuration()
    if config.kubeconfig is not None:
        await kube_config.load_kube_config(
            config_file=str(config.kubeconfig), client_configuration=configuration
        )
    else:
        kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return KubeApi(
        ApiClient(configuration=configuration), timeout=config.request_timeout,
        reachability=Reachability("member cluster", str(configuration.host)),
    )


def _retrying(what: str, reachability: Reachability | None = None) -> AsyncRetrying:
    def log(state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, Unreachable) and reachability is not None:
            reachability.failed(exc)  # logged there once, not at every attempt
        logger.log(failure_level(exc), "%s failed: %s; retrying (attempt %d)", what, exc, state.attempt_number)

    return AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        wait=wait_exponential_jitter(multiplier=0.2, max=MAX_BACKOFF, jitter=0.5),
        before_sleep=log,
        reraise=True,
    )


class Agent(CapacityReporting, WorkSyncing):
    """One member agent; see the module docstring for what it runs."""

    def __init__(
        self, config: AgentConfig, *, clock: Clock = utc_now, member_client: MemberClient = member_api
    ) -> None:
        super().__init__(config, clock=clock, member_client=member_client)

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
            if self.elector is not None:
                await self.elector.release()  # every loop has stopped: a follower may take over now
                self.elector = None
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
        self.metrics.leading(not cfg.leader_elect)
        async for attempt in _retrying("connecting to the member cluster"):
            with attempt:
                self.member = await self._member_client(cfg)
                self._kubernetes_version = await self.member.version()
        if cfg.leader_elect:
            assert self.member is not None
            self.elector = LeaderElector(
                self.member, namespace=cfg.leader_elect_resource_namespace, name=lease_name(cfg.cluster_name),
                identity=cfg.leader_elect_identity or default_identity(), clock=self.clock,
                timing=ElectionTiming(
                    cfg.leader_elect_lease_duration, cfg.leader_elect_renew_deadline, cfg.leader_elect_retry_period
                ),
                on_change=self._leading_changed,
            )
            await self.elector.acquire()
            group.create_task(self.elector.hold())
        async for attempt in _retrying("joining the hub", self.hub_reachability):
            with attempt:
                self.hub = await hubclient.connect(
                    hub=cfg.hub,
                    ca_hash=cfg.hub_ca_hash,
                    bootstrap_token=cfg.bootstrap_token.get_secret_value() if cfg.bootstrap_token else None,
                    cluster_name=cfg.cluster_name,
                    state=hubclient.StateDir(cfg.state_dir),
                    request_timeout=cfg.request_timeout,
                    reachability=self.hub_reachability,
                )
        desired = self._desired_cluster()
        hub = self.hub
        assert hub is not None and self.member is not None
        async for attempt in _retrying("registering the cluster", self.hub_reachability):
            with attempt:
                self.cluster = await register_cluster(hub, desired)
        self.registered.set()

        self.node_totals = NodeTotals()  # the new informer's list reports every node
        self.nodes = Informer(
            self.member,
            "/api/v1/nodes",
            name="nodes",
            transform=capacity.NodeTrimmer(),
            on_change=self._on_node_change,
        )
        self.pending_pods.clear()
        self.pods = Informer(
            self.member,
            "/api/v1/pods",
            name="pods",
            transform=capacity.trim_pod,
            on_change=self._on_pod_change,
        )
        self.dra = DraClaims(self.member, on_change=self._on_capacity_change)
        namespace = c.execution_namespace(cfg.cluster_name)
        self.works = Informer(
            hub, f"{WORK_API}/namespaces/{namespace}/works", name="works", on_change=self._on_work_change
        )
        self.customizations = Informer(
            hub, CUSTOMIZATIONS_PATH, name="customizations", on_change=self._on_customization_change
        )
        self.endpoint_slices = EndpointSliceCollector(self.member, on_due=self._collected_due)
        self._group = group
        group.create_task(self.customizations.run())
        group.create_task(self._heartbeat_loop())
        group.create_task(self.nodes.run())
        group.create_task(self.pods.run())
        group.create_task(self.dra.run())
        group.create_task(self.works.run())
        group.create_task(self._report_loop())
        group.create_task(self._api_enablements_loop())
        group.create_task(self._probe_loop())
        group.create_task(self._work_loop())
        if cfg.dcgm_url:
            group.create_task(self._dcgm_loop(cfg.dcgm_url))
        if cfg.enable_proxy:
            if not isinstance(self.member, KubeApi):
                raise ValueError(f"the cluster proxy needs an HTTP client of the member, not {self.member.server}")
            self.tunnel = AgentTunnel(
                cluster=cfg.cluster_name, hub=hub.client, member=self.member.client, identity=cfg.proxy_identity,
                backoff=ReconnectBackoff(cfg.proxy_reconnect_initial_backoff, cfg.proxy_reconnect_max_backoff),
                reachability=self.hub_reachability,
            )
            self.metrics.registry.register(TunnelCollector(self.tunnel, prefix=METRICS_NAMESPACE))
            group.create_task(self.tunnel.run())

    def _leading_changed(self, leading: bool) -> None:
        """Logged and counted; on a loss, both clients are fenced and the proxy tunnel's streams
        cancelled at once, before any other task runs again, so nothing writes while the task
        group winds down."""
        name = self.config.cluster_name
        if not leading:
            for api in (self.hub, self.member):
                if api is not None:
                    api.fenced = True
            if self.tunnel is not None:
                self.tunnel.fence()
        logger.info("became leader of cluster %s" if leading else "stopped leading cluster %s", name)
        self.metrics.leading(leading)

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
                logger.log(failure_level(exc), "heartbeat for cluster %s failed: %s", self.config.cluster_name, exc)
                self.lease = None
            await asyncio.sleep(self.config.heartbeat_interval)

    # member events ---------------------------------------------------------------------

    def _on_node_change(self, key: str) -> None:
        """A spot node gone (or given a reclaim notice) is reported like any node change, and the
        Works of the workloads that lost pods with it get their status written."""
        node = self.nodes.objects.get(key) if self.nodes is not None else None
        news, touched = self.reclaims.node_changed(key, node, now=self.clock())
        if news:
            logger.info("spot node %s of cluster %s %s", key, self.config.cluster_name,
                        "got a reclaim notice" if node is not None else f"was reclaimed ({len(touched)} workload(s) hit)")
        self._reclaims_touched(touched)
        self.node_totals.changed(key, node)
        self._on_capacity_change(key)

    def _on_pod_change(self, key: str) -> None:
        self._on_capacity_change(key)
        pod = self.pods.objects.get(key) if self.pods is not None else None
        self.pending_pods.changed(key, pod)
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

