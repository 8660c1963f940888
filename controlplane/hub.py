"""The hub process: etcd, the API server over TLS with token auth, and (on the leader)
the controllers.

In: a :class:`~controlplane.hubconfig.HubConfig` (state dir, listen address, etcd endpoints and their client TLS
files, or none for an embedded etcd; optionally a provided serving certificate). Out: a
running HTTPS API, ``<state-dir>/hub.kubeconfig`` with an admin token and the CA, and
``/readyz`` answering once everything is up.

State that must survive restarts lives in etcd (objects, tokens) and in the state dir
(the PKI, the embedded etcd's data and its own CA). Restarting the hub on the same state
dir reuses both, and the admin kubeconfig's token keeps working. The embedded etcd
listens on a Unix socket in a directory of the state dir that only the hub's user can enter,
without TLS; with ``embedded_etcd_transport=TLS`` it listens on loopback TCP, serves TLS and
admits only the client certificate it issued for the hub. With
``tls_cert_file`` the hub serves that certificate instead of issuing its own, and
advertises the CA that signed it (at ``/.well-known/gpufed/ca.crt``, in the kubeconfig,
as the agents' pin); the files are read on every start.

Several replicas may share one etcd (``--etcd-endpoints``) for a highly available hub:
all serve the API; one, elected through an etcd lease (``controlplane.leader``), runs the
controllers, whose writes are fenced to its term (:mod:`controlplane.hubleading`). The Lease
``gpufed-system/gpufed-controllers`` shows the current leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from controlplane.apis.cluster_v1alpha1 import API_VERSION as CLUSTER_API_VERSION
from controlplane.apis.cluster_v1alpha1 import KIND as CLUSTER_KIND
from controlplane.apis.constants import (
    CA_PATH,
    CLUSTER_GROUP,
    COORDINATION_GROUP,
    LEASE_NAMESPACE,
    SYSTEM_NAMESPACE,
    WORK_GROUP,
)
from controlplane.apiserver import errors
from controlplane.apiserver.aggregator.frontproxy import ensure_front_proxy
from controlplane.apiserver.aggregator.proxying import aggregation_middleware
from controlplane.apiserver.aggregator.registrations import AggregatedApis, builtin_group_versions
from controlplane.apiserver.anonymous import ANONYMOUS_PATHS, MONITORING_PATHS
from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth.bootstrap import ca_routes, join_routes, token_routes
from controlplane.apiserver.auth.certificates import CertificateAdmission
from controlplane.apiserver.auth.clusterrestriction import ClusterRestriction
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.cache import RbacCache, ensure_default_policy
from controlplane.apiserver.auth.rbac.escalation import RbacEscalationCheck
from controlplane.apiserver.auth.rbac.reviews import review_endpoints
from controlplane.apiserver.auth.serviceaccounts import ServiceAccountTokens
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.clientcertificates import ClientCertificates
from controlplane.apiserver.componentstatus import ComponentStatuses, leader_probe, store_probe
from controlplane.apiserver.identity import Role
from controlplane.apiserver.kubeconfig import KubeconfigError, load_kubeconfig, write_kubeconfig
from controlplane.apiserver.kueuepods import check_job_queue_name, check_managed_label
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.proxy.podlist import pod_list_routes
from controlplane.apiserver.proxy.resourcemetrics import ResourceMetrics
from controlplane.apiserver.proxy.routes import ProxyEndpoints
from controlplane.apiserver.quotaadmission import QuotaAdmission
from controlplane.apiserver.serviceallocation import ServiceAllocator
from controlplane.apiserver.serving import GuardedTCPSite, api_runner
from controlplane.apiserver.tls import ServingCertificate, client_ca, ensure_pki, load_serving_certificate
from controlplane.apiserver.trainjobs import trainjob_runtime_admission
from controlplane.apiserver.visibility import PendingWorkloads
from controlplane.apiserver.watchcache import DEFAULT_WATCH_CACHE, WatchCache
from controlplane.apiserver.watchcache.client import CachedObjects
from controlplane.apiserver.webhooks import WebhookAdmission
from controlplane.apiserver.webhooks.interpreting import InterpreterWebhooks
from controlplane.controllers.admissiongate import default_managed_by, hold_queued_workload
from controlplane.controllers.health import ClusterHealthMonitor
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.serviceaccounttokens import ServiceAccountTokensController
from controlplane.gcpolicy import CollectorPolicy, collector_tuned
from controlplane.hubconfig import HubConfig
from controlplane.hubleading import LeaderTerm
from controlplane.hubregistry import hub_registry
from controlplane.leader.election import LeaderElector, Term, default_identity
from controlplane.lifecycle import ShutdownOnce
from controlplane.loopwatch import Stall, watching_the_loop
from controlplane.metrics import HubMetrics, hub_metrics, write_ledger_routes
from controlplane.pki import PkiError, private_directory
from controlplane.reports.api import ReportSource, waste_report_routes
from controlplane.reports.sampling import WasteSampler
from controlplane.storage.embedded import QUOTA_BACKEND_BYTES, EmbeddedEtcd
from controlplane.storage.etcd import EtcdStore
from controlplane.storage.etcdkeeper import keep_etcd_running
from controlplane.storage.ledger import LedgerStore, WriteLedger
from controlplane.storage.recent import RecentStore, RecentValues
from controlplane.storage.spacekeeping import SpaceKeeper
from controlplane.ui.serving import ui_anonymous_paths, ui_routes

log = logging.getLogger(__name__)

KUBECONFIG_NAME = "hub.kubeconfig"
ADMIN_USER = "gpufed-admin"
#: The kinds every member agent watches: the watch cache holds them from the start.
HOT_KINDS = ((WORK_GROUP, "works"), (CLUSTER_GROUP, "clusters"), (COORDINATION_GROUP, "leases"))


def advertised_host(host: str) -> str:
    """The address clients should use for a listen address (wildcards -> loopback)."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class Hub(ShutdownOnce):
    """One hub replica. ``async with Hub(config) as hub: await hub.wait_stopped()``."""

    def __init__(self, config: HubConfig) -> None:
        self.config = config
        self.etcd: EmbeddedEtcd | None = None
        self.store: EtcdStore | None = None
        self.tokens: TokenStore | None = None
        self.objects: ObjectStore | None = None
        #: The API's watch cache, shared with the leader's controllers (``cached_informers``).
        self.watch_cache: WatchCache | None = None
        self.pki: ServingCertificate | None = None
        self.elector: LeaderElector | None = None
        self.rbac: RbacCache | None = None
        self.service_account_tokens: ServiceAccountTokens | None = None
        self.service_allocator: ServiceAllocator | None = None
        self.quota_admission: QuotaAdmission | None = None
        #: The admission webhooks users' writes are sent to (the hub's own writes are not).
        self.webhooks: WebhookAdmission | None = None
        #: Karmada's resource interpreter webhooks, which the controllers call (with the same client).
        self.interpreter_webhooks: InterpreterWebhooks | None = None
        #: The leader's work while this replica leads (see :mod:`controlplane.hubleading`).
        self._term: LeaderTerm | None = None
        #: Called once a lost term's work has stopped and been let go (see :meth:`after_each_term`).
        self._term_released: list[Callable[[str], None]] = []
        self.metrics: HubMetrics = hub_metrics()
        #: Every write the API and the controllers make, counted (``gpufed_storage_writes_total``).
        self.ledger = WriteLedger(journal=config.write_journal)
        #: The values the API and the controllers have just seen: updates made from them skip a read.
        self.recent = RecentValues()
        self.waste_sampler: WasteSampler | None = None
        #: The cluster proxy: the agents' tunnels and the proxy route.
        self.proxy = ProxyEndpoints(metrics=self.metrics.proxy)
        #: ``metrics.k8s.io`` merged from the members (``kubectl top``); the FederatedHPA controller
        #: reads the target's pods and their usage from it (:meth:`ResourceMetrics.pod_metrics`).
        #: Made with the API.
        self.resource_metrics: ResourceMetrics | None = None
        #: The APIServices this replica proxies to extension API servers, and their group-versions served here.
        self.aggregation: AggregatedApis | None = None
        #: The group-versions served here, which the leader registers as local APIServices.
        self.local_group_versions: list[tuple[str, str]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._background: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()

    @property
    def controllers(self) -> ControllerManager | None:
        """The leader's controllers (None unless this replica leads)."""
        return self._term.controllers if self._term is not None else None

    @property
    def health(self) -> ClusterHealthMonitor | None:
        """The leader's cluster health monitor (None unless this replica leads)."""
        return self._term.health if self._term is not None else None

    @property
    def token_controller(self) -> ServiceAccountTokensController | None:
        """The leader's token Secret controller (None unless this replica leads)."""
        return self._term.token_controller if self._term is not None else None

    @property
    def kubeconfig_path(self) -> Path:
        return self.config.state_dir / KUBECONFIG_NAME

    @property
    def routes(self) -> list[web.AbstractRoute]:
        """Every route the running hub serves (none before it starts)."""
        return [] if self._runner is None else list(self._runner.app.router.routes())

    async def start(self) -> None:
        # etcd's data, the CA key and the admin kubeconfig live here: the owner's alone.
        state = private_directory(self.config.state_dir)
        host = advertised_host(self.config.host)
        # Settings first (the store's constructor checks them without connecting), so that
        # a bad etcd setting or provided certificate fails before anything is started.
        if self.config.etcd_endpoints:
            self.store = EtcdStore(
                list(self.config.etcd_endpoints), tls=self.config.etcd_tls,
                max_response_bytes=self.config.etcd_max_response_bytes,
            )
        self.pki = await asyncio.to_thread(self._serving_certificate, host)
        if self.store is None:
            self.etcd = EmbeddedEtcd(
                state / "etcd", log_file=state / "etcd.log", binary=self.config.etcd_binary,
                transport=self.config.embedded_etcd_transport,
                quota_backend_bytes=self.config.etcd_space.quota_backend_bytes or QUOTA_BACKEND_BYTES,
            )
            url = await self.etcd.start()
            log.info("embedded etcd ready at %s (data in %s)", url, state / "etcd")
            # Started again whenever its process exits; the store redials the same URL.
            self._background.append(asyncio.create_task(
                keep_etcd_running(self.etcd, metrics=self.metrics.etcd_restarts), name="embedded-etcd"
            ))
            self.store = EtcdStore(
                [url], tls=self.etcd.client_tls, max_response_bytes=self.config.etcd_max_response_bytes
            )
        await self.store.connect()
        await self.store.ping()
        keeper = SpaceKeeper(self.store, policy=self.config.etcd_space, metrics=self.metrics.storage_size,
                             embedded=self.etcd is not None)
        self._background.append(asyncio.create_task(keeper.run(), name="etcd-space"))

        self.tokens = TokenStore(self.store)
        registry = hub_registry(allow_no_execute_taint_policy=self.config.allow_no_execute_taint_policy)
        recent = RecentStore(LedgerStore(self.store, self.ledger), self.recent)
        self.objects = ObjectStore(recent, registry, garbage_collection=True)  # the leader's collector runs
        self.service_allocator = ServiceAllocator(
            self.store, cluster_ips=self.config.service_cluster_ips, node_ports=self.config.service_node_ports
        )
        self.objects.allocate_with(self.service_allocator)
        self.metrics.count_writes(self.ledger)
        await self.objects.bootstrap()
        await self._ensure_namespaces(LEASE_NAMESPACE, SYSTEM_NAMESPACE)
        # RBAC: the default policy, then every replica's in-memory index of the four kinds,
        # complete before the first request is authorized.
        await ensure_default_policy(self.objects)
        self.rbac = RbacCache(self.objects)
        self._background.append(asyncio.create_task(self.rbac.run(), name="rbac-cache"))
        await self.rbac.wait_synced()
        self.watch_cache = WatchCache(self.objects, DEFAULT_WATCH_CACHE)
        # Service account tokens are valid while their account exists: checked from this
        # replica's watch of the ServiceAccounts, complete before the first request too.
        self.service_account_tokens = await ServiceAccountTokens.load(
            self.tokens, self.objects, self.store, options=self.config.service_accounts, cache=self.watch_cache
        )
        self._background.append(
            asyncio.create_task(self.service_account_tokens.run(), name="service-account-tokens")
        )
        await self.service_account_tokens.synced()
        authorizer = HubAuthorizer(self.rbac.index)
        self.resource_metrics = resource_metrics = ResourceMetrics(self.objects, self.proxy)
        extra = [
            *join_routes(self.tokens, cluster_exists=self._cluster_exists),
            *token_routes(self.tokens, authorizer=authorizer),
            *ca_routes(ca_pem=self.pki.ca_pem),
            *self.service_account_tokens.openid_routes(),
        ]
        # Served and listed in discovery as kube's create-only resources. The pending workloads
        # are listed from the watch cache, as Kueue's visibility server reads its own memory.
        computed = [
            *review_endpoints(authorizer, self.service_account_tokens), *self.service_account_tokens.endpoints(),
            self._component_statuses().endpoint(),
            *resource_metrics.endpoints(),
            *PendingWorkloads(
                CachedObjects(self.objects, self.watch_cache), timestamp=self.config.controllers.wait_for_pods_ready.timestamp,
                admission_fair_sharing=self.config.controllers.kueue_admission_fair_sharing,
            ).endpoints(),
        ]
        self.waste_sampler = WasteSampler(
            self.objects,
            self.store,
            interval=self.config.waste_sample_interval,
            bucket_seconds=self.config.waste_bucket_length,
            metrics=self.metrics,
            backlog=self.metrics.workqueues.longest_wait,
        )
        # The reports API, the dashboard and /metrics (all read-only; /ui's static files are anyone's,
        # the data they show comes from authenticated API calls).
        extra.extend(waste_report_routes(ReportSource(self.store, sampler=self.waste_sampler), objects=self.objects))
        extra.extend(ui_routes())
        extra.extend(self.proxy.routes())
        extra.extend(pod_list_routes(self.proxy, authorizer))
        extra.extend(self.metrics.routes())
        extra.extend(write_ledger_routes(self.ledger))
        for factory in self.config.extra_routes:
            extra.extend(factory(self))
        self.quota_admission = QuotaAdmission(self.objects, cache=self.watch_cache)
        self.objects.admit_writes(self.quota_admission)
        self.objects.check_creates(hold_queued_workload)  # Kueue's job and pod webhooks' defaults
        self.objects.check_creates(default_managed_by(self.objects))  # and their managedBy for MultiKueue
        self.objects.admit_writes(check_managed_label)  # Kueue's pod webhook's validation
        self.objects.admit_writes(check_job_queue_name)  # Kueue's job webhooks' queue-name rule
        self.objects.admit_writes(trainjob_runtime_admission(self.objects))  # Kubeflow Trainer's webhook
        self.webhooks = WebhookAdmission(self.objects, authorizer, self.metrics.admission, cache=self.watch_cache)
        self.interpreter_webhooks = InterpreterWebhooks(self.objects, self.watch_cache, self.webhooks.client)
        self._background.append(
            asyncio.create_task(self.interpreter_webhooks.run(asyncio.Event()), name="interpreter-webhooks")
        )
        await self.interpreter_webhooks.wait_synced()
        front_proxy = await asyncio.to_thread(ensure_front_proxy, state / "front-proxy")
        self.aggregation = AggregatedApis(self.objects, cache=self.watch_cache, front_proxy=front_proxy)
        self._background.append(asyncio.create_task(self.aggregation.run(), name="aggregated-apis"))
        await self.aggregation.wait_synced()
        self.local_group_versions = builtin_group_versions(registry, [endpoint.resource for endpoint in computed])
        client_ca_pem = client_ca(self.config.client_ca_file, own_ca_pem=None if self.config.tls_cert_file else self.pki.ca_pem)
        app = create_app(
            self.objects,
            registry,
            authenticator=self.service_account_tokens,
            client_certificates=ClientCertificates(client_ca_pem, expiration=self.metrics.client_certificate_expiration)
            if client_ca_pem else None,
            authorizer=authorizer,
            admission=[
                ClusterRestriction(),
                RbacEscalationCheck(self.rbac.index, authorizer, read_role=self.rbac.read_role),
                CertificateAdmission(authorizer),
            ],
            extra_routes=extra,
            computed=computed,
            # Asked as system:anonymous without credentials, then RBAC decides: the CA whatever --anonymous-auth
            # (a joining agent cannot send its token before it trusts the hub; kubeadm's cluster-info).
            anonymous_paths=[CA_PATH, *(
                [*ANONYMOUS_PATHS, *MONITORING_PATHS, *ui_anonymous_paths()] if self.config.anonymous_auth else []
            )],
            outer_middlewares=[self.metrics.middleware()],
            inner_middlewares=[aggregation_middleware(self.aggregation)],
            flow_control=self.config.serving_limits.flow_control(),
            request_timeout=self.config.serving_limits.request_timeout,
            flow_control_metrics=self.metrics.flowcontrol,
            watch_limits=self.config.watch_limits,
            watch_cache=self.watch_cache,
            warm=HOT_KINDS,
            webhooks=self.webhooks,
            audit=self.config.audit.auditor(self.metrics.audit) if self.config.audit is not None else None,
        )
        self._runner = api_runner(app)
        await self._runner.setup()
        site = GuardedTCPSite(
            self._runner, self.config.host, self.config.port, ssl_context=self.pki.server_ssl_context(client_ca_pem),
            limits=self.config.serving_limits,
        )
        await site.start()
        port = _bound_port(site, default=self.config.port)
        self.url = f"https://{url_host(host)}:{port}"
        await self._write_admin_kubeconfig()
        # Every replica serves the API; the controllers and the waste sampler run only on
        # the elected leader (other replicas' reports API reads the saved rollups).
        self.elector = LeaderElector(
            self.store,
            self.config.identity or default_identity(),
            ttl=self.config.leader_lease_ttl,
            on_started_leading=self._start_leading,
            on_stopped_leading=self._stop_leading,
        )
        self.elector.spawn()
        log.info("hub serving at %s; kubeconfig: %s", self.url, self.kubeconfig_path)

    def _serving_certificate(self, host: str) -> ServingCertificate:
        """The provided certificate when configured, else the one issued from the hub's own CA."""
        config = self.config
        if config.tls_cert_file is not None:
            if config.tls_private_key_file is None:
                raise PkiError("--tls-cert-file needs --tls-private-key-file")
            # A wildcard listen address says nothing about the names clients use.
            explicit = [host] if advertised_host(config.host) == config.host else []
            return load_serving_certificate(
                config.tls_cert_file,
                key_file=config.tls_private_key_file,
                ca_file=config.tls_ca_file,
                hosts=[*explicit, *config.tls_hosts],
            )
        if config.tls_private_key_file is not None or config.tls_ca_file is not None:
            raise PkiError("--tls-private-key-file and --tls-ca-file need --tls-cert-file")
        return ensure_pki(config.state_dir, hosts=[host, socket.gethostname(), *config.tls_hosts]).serving

    def _component_statuses(self) -> ComponentStatuses:
        """``kubectl get componentstatuses``: the store as etcd; the controller manager, which runs
        the scheduler too, as the elected leader runs it."""
        controllers = leader_probe(
            leader=lambda: self.elector.leader if self.elector is not None else None,
            leading=lambda: self.elector is not None and self.elector.is_leader,
            started=lambda: self.controllers is not None and self.controllers.started.is_set(),
        )
        assert self.store is not None
        return ComponentStatuses(
            {"scheduler": controllers, "controller-manager": controllers, "etcd-0": store_probe(self.store)}
        )

    async def _start_leading(self, term: Term) -> None:
        """This replica leads: run the leader's work (:class:`LeaderTerm`) for ``term``."""
        self._term = LeaderTerm(self, term)
        await self._term.start()

    def after_each_term(self, released: Callable[[str], None]) -> None:
        """Call ``released(what)`` each time a leadership term this replica lost has stopped and
        the hub holds nothing of it any more (not when the hub itself stops): the process's
        garbage-collector policy collects it then (:meth:`CollectorTuning.released`)."""
        self._term_released.append(released)

    async def _stop_leading(self) -> None:
        """Leadership ended (or the hub stops): stop everything :meth:`_start_leading` started,
        and let it go: the next term builds its own."""
        term, self._term = self._term, None
        if term is not None:
            await term.stop()
        elif self.waste_sampler is not None:
            self.waste_sampler.request_stop()
        self.metrics.workqueues.detach_all()  # a loop cancelled before it ran never detached its queue
        if term is not None and term.started_controllers and not self._stopped.is_set():
            for released in self._term_released:
                released("a lost leadership term")

    async def _cluster_exists(self, name: str) -> bool:
        """Whether a Cluster of this name is on the hub (the join endpoint asks)."""
        assert self.objects is not None
        try:
            await self.objects.get(self.objects.registry.require(CLUSTER_API_VERSION, CLUSTER_KIND), name=name)
        except errors.NotFound:
            return False
        return True

    async def _ensure_namespaces(self, *names: str) -> None:
        assert self.objects is not None
        namespace_type = self.objects.registry.require("v1", "Namespace")
        for name in names:
            with contextlib.suppress(errors.AlreadyExists):
                await self.objects.create(
                    namespace_type, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )

    async def _write_admin_kubeconfig(self) -> None:
        """Reuse the admin token of an existing kubeconfig if it still works, else mint one."""
        assert self.tokens is not None and self.pki is not None
        token: str | None = None
        with contextlib.suppress(FileNotFoundError, KubeconfigError):
            existing = load_kubeconfig(self.kubeconfig_path)
            user = await self.tokens.authenticate(existing.token)
            if user is not None and user.role is Role.ADMIN:
                token = existing.token
        if token is None:
            issued = await self.tokens.create(role=Role.ADMIN, name=ADMIN_USER)
            token = issued.token
        write_kubeconfig(
            self.kubeconfig_path, server=self.url, ca_pem=self.pki.ca_pem, token=token, user=ADMIN_USER
        )

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def request_stop(self) -> None:
        self._stopped.set()

    async def _release(self) -> None:
        self._stopped.set()
        if self.elector is not None:
            # Stops the leader's work and resigns, so another replica takes over at once.
            await self.elector.shutdown()
        # Whatever leading started, before the store closes (already stopped when the elector
        # stopped it; stopping it again does nothing).
        await self._stop_leading()
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.proxy.close()
        if self.aggregation is not None:
            await self.aggregation.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.store is not None:
            await self.store.close()
        if self.etcd is not None:
            await self.etcd.stop()


def _bound_port(site: web.TCPSite, *, default: int) -> int:
    server = site._server  # aiohttp exposes the bound sockets only here
    sockets = getattr(server, "sockets", None) or []
    for sock in sockets:
        return int(sock.getsockname()[1])
    return default


async def run_until_signalled(
    hub: Hub,
    *,
    on_ready: Callable[[Hub], Awaitable[None]] | None = None,
    collector: CollectorPolicy | None = None,
    stall_warning: float = 0.0,
) -> None:
    """Run ``hub`` until SIGINT/SIGTERM, then shut down cleanly. The process's garbage collector
    follows ``collector`` meanwhile (:mod:`controlplane.gcpolicy`): a process-wide setting,
    so it is the process's runner that applies it, not the hub; what it froze stays frozen, as
    the process is about to exit. With ``stall_warning`` seconds, a thread watches the loop
    and a stall that long is logged with where the loop was held (:mod:`controlplane.loopwatch`)."""
    import signal

    loop = asyncio.get_running_loop()
    observe = hub.metrics.gc_pause.labels

    def on_stall(stall: Stall) -> None:
        log.warning("%s", stall.message())
        hub.metrics.loop_stall.observe(stall.seconds)

    async with contextlib.AsyncExitStack() as stack:
        if collector is not None:
            tuning = await stack.enter_async_context(collector_tuned(
                collector, observe=lambda generation, seconds: observe(str(generation)).observe(seconds)
            ))
            hub.after_each_term(tuning.released)  # a lost term is collected, not kept frozen
        async with watching_the_loop(stall_warning, on_stall), hub:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, hub.request_stop)
            if on_ready is not None:
                await on_ready(hub)
            await hub.wait_stopped()
            log.info("shutting down")
