"""What a hub replica runs while it leads: :class:`LeaderTerm`.

One term of controller leadership (``controlplane.leader``): the federation controllers, the
cluster health monitor, kube's controllers the hub runs (namespaces, service accounts and their
tokens, root CA ConfigMaps, quotas, CSR signing, APIServices, …) and the waste sampler, all writing through an
``ObjectStore`` fenced to the term, so that a deposed leader's writes fail; and the Lease
``gpufed-system/gpufed-controllers`` that shows the leader. The next term builds its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from controlplane.apis.constants import COORDINATION_GROUP, LEASE_NAMESPACE, SYSTEM_NAMESPACE
from controlplane.apis.kube.namespaces import SYSTEM_NAMESPACES
from controlplane.apis.timestamps import format_micro_time
from controlplane.apiserver import errors
from controlplane.apiserver.aggregator.frontproxy import authentication_configmap
from controlplane.apiserver.crd.client import ConvertedObjects
from controlplane.apiserver.crd.converted import WebhookConversions
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.openapi.kindschemas import KindSchemas
from controlplane.apiserver.serviceallocation import AllocationRepair
from controlplane.apiserver.tls import client_ca
from controlplane.apiserver.watchcache.client import CachedObjects
from controlplane.controllers.admissionpolicystatus import AdmissionPolicyStatusController
from controlplane.controllers.apiserviceavailability import AvailabilityController
from controlplane.controllers.apiservices import LocalAPIServicesController
from controlplane.controllers.certificatesigning import CertificateSigningController
from controlplane.controllers.clusterroleaggregation import ClusterRoleAggregationController
from controlplane.controllers.clusters import ClusterNamespaceController
from controlplane.controllers.flowcontrolconfig import FlowControlConfigController
from controlplane.controllers.health import ClusterHealthMonitor
from controlplane.controllers.legacytokencleaning import LegacyTokenCleaner
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.namespaces import NamespaceController
from controlplane.controllers.resourcequota import ResourceQuotaController
from controlplane.controllers.rootcapublisher import RootCAPublisher
from controlplane.controllers.serviceaccounts import ServiceAccountsController
from controlplane.controllers.serviceaccounttokens import ServiceAccountTokensController
from controlplane.controllers.systemnamespaces import SystemNamespacesController
from controlplane.leader.election import Term
from controlplane.objectclient import ObjectClient
from controlplane.pki import ca_files
from controlplane.storage.ledger import LedgerStore
from controlplane.storage.recent import RecentStore

if TYPE_CHECKING:
    from controlplane.hub import Hub

log = logging.getLogger(__name__)

#: The coordination.k8s.io Lease in gpufed-system that shows which replica leads.
LEADER_LEASE_NAME = "gpufed-controllers"
#: How long a stopping hub lets the waste sampler save its last rollups.
WASTE_SAVE_SECONDS = 10.0


async def _finish(task: asyncio.Task[None], *, seconds: float) -> None:
    """Wait up to ``seconds`` for ``task`` to end on its own, then cancel it; log what it failed
    with. A cancellation of the caller is not swallowed, unlike ``suppress(CancelledError)``
    around ``await task``."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
        await asyncio.wait({task})
    if not task.cancelled() and (error := task.exception()) is not None:
        log.warning("%s ended with an error while stopping: %s", task.get_name(), error)


class LeaderTerm:
    """The leader's work in one ``term`` of ``hub``: :meth:`start` it when the term begins,
    :meth:`stop` it when it ends (or the hub stops)."""

    def __init__(self, hub: Hub, term: Term) -> None:
        self.hub = hub
        self.term = term
        self.controllers: ControllerManager | None = None
        self.health: ClusterHealthMonitor | None = None
        #: The term's token Secret controller.
        self.token_controller: ServiceAccountTokensController | None = None
        #: Whether :meth:`start` got as far as building the controllers (a term the process lets go of).
        self.started_controllers = False
        self._tasks: list[asyncio.Task[None]] = []
        self._waste_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Run the controllers over an ObjectStore fenced to the term."""
        hub, term = self.hub, self.term
        assert hub.elector is not None and hub.objects is not None and hub.service_allocator is not None
        assert hub.service_account_tokens is not None and hub.pki is not None and hub.aggregation is not None
        fenced_store = hub.elector.fenced_store(term)
        fenced_recent = RecentStore(LedgerStore(fenced_store, hub.ledger), hub.recent)
        writes = ObjectStore(fenced_recent, hub.objects.registry, garbage_collection=True)
        writes.allocate_with(hub.service_allocator)
        if hub.quota_admission is not None:
            writes.admit_writes(hub.quota_admission)  # kube's controllers' writes are admitted too
        config = hub.config
        # Writes fenced to the term; lists and watches from the API's watch cache when it is shared.
        fenced: ObjectClient = writes if hub.watch_cache is None or not config.cached_informers else CachedObjects(
            writes, hub.watch_cache
        )
        if hub.webhooks is not None:
            # As in kube, where controllers read through the API: a CRD's objects in the version
            # asked for, converted by its conversion webhook (with the API's client and metrics).
            conversions = WebhookConversions(hub.webhooks.client, writes.registry, hub.webhooks.metrics)
            fenced = ConvertedObjects(fenced, conversions)
        queues = hub.metrics.workqueues  # every controller's loop feeds client-go's workqueue series
        self.controllers = ControllerManager(
            fenced,
            settings=config.controllers,
            queue_metrics=hub.metrics.queues,
            workqueue_metrics=queues,
            interpreter_webhooks=hub.interpreter_webhooks,
            pod_metrics=hub.resource_metrics,
        )
        self.started_controllers = True
        self.health = ClusterHealthMonitor(
            fenced,
            grace_period=config.cluster_monitor_grace_period,
            unhealthy_threshold=config.unhealthy_fleet_threshold,
            on_fleet_state=hub.metrics.record_fleet_state,
            workqueue_metrics=queues,
        )
        system_namespaces = (*SYSTEM_NAMESPACES, LEASE_NAMESPACE, SYSTEM_NAMESPACE)
        tokens = hub.service_account_tokens  # its caches serve the token controller too: one of each kind
        self.token_controller = ServiceAccountTokensController(
            fenced, tokens, ca_pem=hub.pki.ca_pem, accounts=tokens.accounts, secrets=tokens.secrets,
            workqueue_metrics=queues,
        )
        schemas = KindSchemas(writes.registry)  # the served kinds and their OpenAPI, CRDs' as they come
        runs = {  # each leader-only controller's run
            "cluster-namespaces": ClusterNamespaceController(fenced, workqueue_metrics=queues).run,
            "clusterrole-aggregation": ClusterRoleAggregationController(fenced, workqueue_metrics=queues).run,
            "serviceaccounts": ServiceAccountsController(
                fenced, accounts=tokens.accounts, workqueue_metrics=queues
            ).run,
            "resourcequota": ResourceQuotaController(fenced, workqueue_metrics=queues).run,
            "root-ca-cert-publisher": RootCAPublisher(fenced, ca_pem=hub.pki.ca_pem, workqueue_metrics=queues).run,
            "serviceaccount-tokens": self.token_controller.run,
            "system-namespaces": SystemNamespacesController(fenced, system_namespaces, workqueue_metrics=queues).run,
            "namespace-conditions": NamespaceController(fenced, content=writes, workqueue_metrics=queues).run,
            "flowcontrol-config": FlowControlConfigController(fenced, workqueue_metrics=queues).run,
            "validatingadmissionpolicy-status": AdmissionPolicyStatusController(
                fenced, kinds_for=schemas.kinds_for, schema_for=schemas.schema_for, workqueue_metrics=queues).run,
            "csrsigning": CertificateSigningController(  # the hub's own CA signs; a provided certificate has no CA key
                fenced, ca_files=None if config.tls_cert_file else ca_files(config.state_dir / "pki"),
                duration=config.cluster_signing_duration, workqueue_metrics=queues).run,
            "apiservice-registration": LocalAPIServicesController(fenced, hub.local_group_versions, workqueue_metrics=queues,
                authentication_configmap=authentication_configmap(front_proxy=hub.aggregation.front_proxy, client_ca_pem=client_ca(
                    config.client_ca_file, own_ca_pem=None if config.tls_cert_file else hub.pki.ca_pem))).run,
            "apiservice-availability": AvailabilityController(
                fenced, hub.aggregation, workqueue_metrics=queues,
                recheck_seconds=config.controllers.apiservice_recheck_seconds).run,
        }
        self._tasks = [
            self.controllers.spawn(),
            self.health.spawn(),
            *(asyncio.create_task(run(), name=name) for name, run in runs.items()),
            asyncio.create_task(LegacyTokenCleaner(
                fenced, accounts=tokens.accounts, secrets=tokens.secrets, period=config.legacy_token_clean_up_period,
            ).run(), name="legacy-token-cleaner"),
            asyncio.create_task(AllocationRepair(writes, hub.service_allocator).run(), name="service-allocation-repair"),
        ]
        if hub.waste_sampler is not None:
            self._waste_task = asyncio.create_task(
                hub.waste_sampler.run(store=fenced_store), name="waste-sampler"
            )
        await self._mirror_leader_lease(writes)

    async def stop(self) -> None:
        """Stop everything :meth:`start` started."""
        controllers, health, self.controllers, self.health = self.controllers, self.health, None, None
        self.token_controller = None
        if controllers is not None:
            await controllers.shutdown()
        if health is not None:
            await health.shutdown()
        if self.hub.waste_sampler is not None:
            self.hub.waste_sampler.request_stop()
        waste_task, self._waste_task = self._waste_task, None
        if waste_task is not None:
            # Let the sampler save its last rollups (a deposed leader's save may fail: fine).
            await _finish(waste_task, seconds=WASTE_SAVE_SECONDS)
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _mirror_leader_lease(self, objects: ObjectStore) -> None:
        """Show the leader as ``kubectl get lease -n gpufed-system gpufed-controllers`` (visibility only)."""
        term = self.term
        lease_type = objects.registry.require(f"{COORDINATION_GROUP}/v1", "Lease")
        moment = format_micro_time(term.acquired)
        spec = {
            "holderIdentity": term.identity,
            "leaseDurationSeconds": self.hub.config.leader_lease_ttl,
            "acquireTime": moment,
            "renewTime": moment,
        }
        try:
            try:
                current = await objects.get(lease_type, namespace=SYSTEM_NAMESPACE, name=LEADER_LEASE_NAME)
            except errors.NotFound:
                body = {
                    "apiVersion": f"{COORDINATION_GROUP}/v1",
                    "kind": "Lease",
                    "metadata": {"name": LEADER_LEASE_NAME, "namespace": SYSTEM_NAMESPACE},
                    "spec": {**spec, "leaseTransitions": 0},
                }
                await objects.create(lease_type, body)
                return
            transitions = int((current.get("spec") or {}).get("leaseTransitions") or 0) + 1
            await objects.update(lease_type, {**current, "spec": {**spec, "leaseTransitions": transitions}})
        except errors.ApiError as exc:
            log.warning("could not record the leader in lease %s/%s: %s", SYSTEM_NAMESPACE, LEADER_LEASE_NAME, exc)
