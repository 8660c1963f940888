"""The controller manager: runs the hub's federation loop over one ObjectClient.

In: an :class:`ObjectClient` (in-process, no HTTP) and :class:`ControllerSettings`. Out:
the detector, scheduler, binding, status, graceful eviction, dependencies (``propagateDeps``),
FederatedResourceQuota (its Works and status),
deletion, ttl-after-finished, rollout-history and Karmada's autoscaler controllers running, sharing one informer per kind, and the
garbage collector (ownerReferences), which watches every kind with informers of its own.

``run()`` builds everything afresh — informers, queues, the scheduler's reservations —
lists and watches every kind, waits until all caches are synced, then starts the
controllers; it returns when ``shutdown()`` is called (or the task is cancelled). So a
hub replica can call ``run()`` when it becomes leader and ``shutdown()`` when it loses
leadership, any number of times: each term starts from the store's state, which is
the whole truth (controllers are level-based; nothing they need lives only in memory
except reservations, which the next capacity reports replace).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from controlplane.admission.metrics import QueueMetrics
from controlplane.controllers.admission import AdmissionController
from controlplane.controllers.binding import BindingController
from controlplane.controllers.clustertaints import ClusterTaintPolicyController
from controlplane.controllers.context import ControllerContext, ControllerSettings, utc_now
from controlplane.controllers.customizations import CustomizationsController
from controlplane.controllers.deleting import DeletionController
from controlplane.controllers.dependencies import DependenciesController
from controlplane.controllers.detecting import Detector
from controlplane.controllers.evicting import GracefulEvictionController
from controlplane.controllers.federatedhpa.controller import FederatedHPAController
from controlplane.controllers.federatedhpa.cron import CronFederatedHPAController
from controlplane.controllers.federatedhpa.podmetrics import PodMetricsSource
from controlplane.controllers.federatedquotas import FederatedQuotaController
from controlplane.controllers.finishedjobs import FinishedJobsController
from controlplane.controllers.garbagecollecting import GarbageCollector
from controlplane.controllers.hpascaletargets import HPAScaleTargetMarker
from controlplane.controllers.multiclusterservices import MultiClusterServiceController
from controlplane.controllers.multikueue import MultiKueueController
from controlplane.controllers.policyselectors import PolicySelectorsController
from controlplane.controllers.rebalancers import RebalancerController
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.reinterpreting import Reinterpreting
from controlplane.controllers.resourceinuse import ResourceInUseController
from controlplane.controllers.rollouthistory import RolloutHistoryController
from controlplane.controllers.scaling import ScaleInterpreters
from controlplane.controllers.status import StatusController
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.interpreter.webhook_calls import InterpreterWebhookCaller
from controlplane.lifecycle import Service
from controlplane.objectclient import ObjectClient
from controlplane.scheduler.controller import SchedulerController

log = logging.getLogger(__name__)

IDLE_HORIZON = 1.0


class ControllerManager(Service):
    """``async with ControllerManager(objects): ...`` or ``await manager.run()`` / ``shutdown()``."""

    def __init__(
        self,
        objects: ObjectClient,
        *,
        settings: ControllerSettings | None = None,
        clock: Callable[[], datetime] = utc_now,
        queue_metrics: QueueMetrics | None = None,
        workqueue_metrics: WorkqueueMetrics | None = None,
        interpreter_webhooks: InterpreterWebhookCaller | None = None,
        pod_metrics: PodMetricsSource | None = None,
    ) -> None:
        super().__init__("controller-manager")
        self.interpreter_webhooks = interpreter_webhooks
        #: The members' pods and resource metrics, which the FederatedHPA controller reads.
        self.pod_metrics = pod_metrics
        self.objects = objects
        self.queue_metrics = queue_metrics
        """Kueue's metrics, which the admission controller feeds while the controllers run."""
        self.workqueue_metrics = workqueue_metrics
        """client-go's workqueue series, which every controller's loop feeds."""
        self.settings = settings or ControllerSettings()
        self._clock = clock
        self._started = asyncio.Event()
        self.context: ControllerContext | None = None
        self.scheduler: SchedulerController | None = None
        self.evictions: GracefulEvictionController | None = None
        self.status: StatusController | None = None
        self._loops: list[ReconcileLoop[Any]] = []
        self._horizons: dict[int, Callable[[], float]] = {}

    @property
    def started(self) -> asyncio.Event:
        """Set once every informer is synced and the controllers run."""
        return self._started

    def reconciles(self) -> dict[str, int]:
        """How many reconciles each controller has run in this term."""
        return {loop.name: loop.reconciles for loop in getattr(self, "_loops", ())}

    async def run(self) -> None:
        """Run the controllers until :meth:`shutdown`."""
        self._stop = asyncio.Event()
        self._started.clear()
        ctx = ControllerContext(
            self.objects, settings=self.settings, clock=self._clock, workqueue_metrics=self.workqueue_metrics,
            interpreter_webhooks=self.interpreter_webhooks, pod_metrics=self.pod_metrics,
        )
        detector = Detector(ctx)
        scheduler = SchedulerController(ctx)
        binder = BindingController(ctx)
        status = StatusController(ctx)
        deletion = DeletionController(ctx)
        evictions = GracefulEvictionController(ctx)
        dependencies = DependenciesController(ctx)
        selectors = PolicySelectorsController(ctx)
        rebalancers = RebalancerController(ctx)
        cluster_taints = ClusterTaintPolicyController(ctx)
        multikueue = MultiKueueController(ctx)
        federated_quotas = FederatedQuotaController(ctx)
        multi_cluster_services = MultiClusterServiceController(ctx)
        finished_jobs = FinishedJobsController(ctx)
        hpa_targets = HPAScaleTargetMarker(ctx)
        federated_hpas = FederatedHPAController(ctx)
        cron_federated_hpas = CronFederatedHPAController(ctx)
        admission = AdmissionController(ctx, metrics=self.queue_metrics)
        resource_in_use = ResourceInUseController(ctx)
        collector = GarbageCollector(ctx)
        history = RolloutHistoryController(ctx)

        reinterpreting = Reinterpreting(
            ctx, detector=detector.loop, bindings=[binder.loop, status.loop], parents=dependencies.parents
        )
        scaling = ScaleInterpreters(ctx.registry, reinterpreting.kind_changed)
        customizations = CustomizationsController(ctx, reinterpreting.kind_changed)
        loops: list[ReconcileLoop[Any]] = [
            customizations.loop, detector.loop, scheduler.loop, binder.loop, status.loop, evictions.loop,
            *dependencies.loops, deletion.loop, selectors.loop, rebalancers.loop, federated_quotas.loop, finished_jobs.loop,
            hpa_targets.loop, admission.loop, resource_in_use.loop, history.loop, federated_hpas.loop,
            cron_federated_hpas.loop, cluster_taints.loop, multikueue.loop, multi_cluster_services.loop,
        ]
        self.context, self.scheduler, self.evictions = ctx, scheduler, evictions
        self._loops = [*loops, collector.loop]  # the collector starts its own, once it has listed every kind
        self.status = status
        self._horizons = {id(status.loop): status.idle_horizon}
        tasks: list[asyncio.Task[None]] = []
        try:
            async with asyncio.TaskGroup() as group:
                tasks.append(group.create_task(ctx.run_informers(), name="informers"))
                tasks.append(group.create_task(collector.run(), name="garbage-collector"))
                synced = group.create_task(ctx.wait_synced())
                stopped = group.create_task(self._stop.wait())
                await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if synced.done():
                    scaling.install()  # custom kinds' replicas, which customizations fall back to
                    await customizations.install()  # scripts in force before any workload is interpreted
                    tasks.append(group.create_task(scaling.run(), name="scale-interpreters"))
                    tasks.append(group.create_task(reinterpreting.follow_webhooks(), name="interpreter-webhooks-followed"))
                    tasks.append(group.create_task(selectors.follow_served_kinds(), name="policy-selectors-served"))
                    for loop in loops:
                        tasks.append(group.create_task(loop.run(), name=f"controller-{loop.name}"))
                    tasks.append(group.create_task(scheduler.maintain(), name="scheduler-maintenance"))
                    self._started.set()
                    log.info("controllers started: %s", ", ".join(loop.name for loop in loops))
                await stopped
                synced.cancel()
                for loop in self._loops:
                    await loop.shutdown()
                for task in tasks:
                    task.cancel()
        finally:
            customizations.forget()  # a later term (or another manager) starts from the stored ones
            scaling.forget()
            if self.queue_metrics is not None:
                self.queue_metrics.forget()  # another replica leads now: it reports the queues
        self._started.clear()
        log.info("controllers stopped")

    def ready(self) -> asyncio.Event:
        return self._started

    def idle(self) -> bool:
        """No key is waiting, being reconciled, or due again within a second (a retry after a lost
        race) or, for the status controller, within its hold of waiting states; keys parked for
        longer (grace periods, periodic re-checks) do not count."""
        if not self._started.is_set():
            return False
        for loop in self._loops:
            horizon = self._horizons.get(id(loop))
            if loop.queue.busy(horizon=max(IDLE_HORIZON, horizon()) if horizon else IDLE_HORIZON):
                return False
        return True

    async def wait_idle(self, *, settle: float = 0.05) -> None:
        """Wait until :meth:`idle` has held for ``settle`` seconds (bound it with ``asyncio.timeout``)."""
        await self._started.wait()
        loop = asyncio.get_running_loop()
        quiet_since: float | None = None
        while True:
            if self.idle():
                quiet_since = quiet_since if quiet_since is not None else loop.time()
                if loop.time() - quiet_since >= settle:
                    return
            else:
                quiet_since = None
            await asyncio.sleep(0.01)
