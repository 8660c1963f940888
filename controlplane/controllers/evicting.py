"""The graceful eviction controller: ends a binding's ``gracefulEvictionTasks``.

In: ResourceBindings with ``spec.gracefulEvictionTasks`` (written by the scheduler when
failover evicts replicas from a cluster), their Works (what the new clusters report) and the
Clusters. Out: the binding's spec without the tasks that are over, which lets the binding
controller delete the evicted cluster's Work, and an ``EvictionCompleted`` Event on the
workload naming why.

A task is over (:func:`failover.assess_task`) at once for ``purgeMode: Directly``; for
``Gracefully`` when every cluster of the new placement runs the workload Healthy — its Work
carries the replicas the binding now gives it, is applied at its current generation and the
member reports the workload Healthy (a TrainJob's replicas are counted with its runtime, as
the detector counted them: :mod:`controlplane.controllers.trainingruntimes`) — or when ``gracePeriodSeconds`` have passed since the
eviction; never by the hub for ``Never``. A task for a cluster that is chosen again, or that
was deleted, is over too. The binding is looked at again on every status report of its
Works and when the grace period runs out.

When an evicted cluster comes back (its agent reconnects or restarts), its Work is gone from
the hub, so the agent prunes the member's copies through its ledger; while the cluster is
cut off nothing reaches it and its copies keep running. A Work that asked to preserve its
objects on deletion is the exception: it stays, without the flag, until the agent has applied
that (see controllers/binding.py), so the copy is deleted rather than released.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.views import BindingView, ObjectView, WorkView
from controlplane.apis.work_v1alpha1 import BindingKey
from controlplane.controllers.context import INDEX_BINDING, ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.failover import assess_task, new_placement_ready
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.status import aggregate
from controlplane.controllers.trainingruntimes import Resolve, TrainingRuntimes
from controlplane.controllers.workloads import WorkloadRef, is_deleting
from controlplane.controllers.works import binding_key_of_work, cluster_of_namespace
from controlplane.interpreter import KindInterpreter, interpreter_for
from controlplane.objectclient import WatchEventType

log = logging.getLogger(__name__)



def _has_tasks(binding: Mapping[str, Any] | None) -> bool:
    return bool(BindingView(binding).eviction_tasks)


def work_carries(
    work: Mapping[str, Any], replicas: int, interpreter: KindInterpreter | None, resolve: Resolve = dict
) -> bool:
    """Whether ``work`` already holds ``replicas`` of the workload (the binding controller has
    rendered the new placement into it), its manifest read as ``resolve`` gives it (a TrainJob
    with its runtime, whose nodes the binding's replicas count); without an interpreter there is
    nothing to count."""
    if interpreter is None:
        return True
    manifests = WorkView(work).manifests
    if not manifests:
        return False
    try:
        return interpreter.replicas(resolve(dict(manifests[0]))) == replicas
    except (KeyError, TypeError, ValueError):
        return False


class GracefulEvictionController(KeyedController[BindingKey]):
    """Reconciles bindings (keys: ``(namespace, name)``) that have graceful eviction tasks."""

    name = "graceful-eviction"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        ctx.bindings.add_handler(self._on_binding)
        ctx.works.add_handler(self._on_work)
        ctx.clusters.add_handler(self._on_cluster)
        # A TrainJob's replicas are its runtime's nodes; a runtime that changes looks at its bindings again.
        self._runtimes = TrainingRuntimes(ctx, self._on_trainjob)

    async def _on_trainjob(self, trainjob: dict[str, Any]) -> None:
        ref = WorkloadRef.of(trainjob)
        key = (ref.binding_namespace, ref.binding_name)
        if _has_tasks(self.ctx.bindings.get(key[0], key[1])):
            await self.loop.add(key)

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED or not _has_tasks(obj):
            return
        meta = ObjectView(obj).metadata
        await self.loop.add((str(meta.get("namespace")), str(meta.get("name"))))

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = binding_key_of_work(obj)
        if key is not None and _has_tasks(self.ctx.bindings.get(key[0], key[1])):
            await self.loop.add(key)

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED:
            return
        name = str(ObjectView(obj).metadata.get("name"))
        for binding in self.ctx.bindings.items():
            tasks = BindingView(binding).eviction_tasks
            if any(task.get("fromCluster") == name for task in tasks):
                meta = binding["metadata"]
                await self.loop.add((str(meta.get("namespace")), str(meta["name"])))

    def _new_placement_ready(self, key: BindingKey, spec: Mapping[str, Any]) -> bool:
        resource = spec.get("resource") or {}
        interpreter = interpreter_for(str(resource.get("apiVersion")), str(resource.get("kind")))
        targets = list(spec.get("clusters") or ())
        works: dict[str, dict[str, Any]] = {}
        for work in self.ctx.works.by_index(INDEX_BINDING, key):
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
            if cluster is not None:
                works[cluster] = work
        for target in targets:
            current = works.get(str(target.get("name")))
            replicas = int(target.get("replicas") or 0)
            if current is None or not work_carries(current, replicas, interpreter, self._runtimes.resolved):
                return False
        items, _, _ = aggregate(resource, targets, works, interpreter)
        return new_placement_ready(items, [str(t.get("name")) for t in targets])

    async def reconcile(self, key: BindingKey) -> float | None:
        ctx = self.ctx
        binding = await ctx.get(ctx.binding_rt, key[0], key[1])
        if binding is None or is_deleting(binding) or not _has_tasks(binding):
            return None
        spec = binding["spec"]
        targets = [str(t.get("name")) for t in spec.get("clusters") or ()]
        ready = self._new_placement_ready(key, spec)
        now = ctx.now()
        kept: list[dict[str, Any]] = []
        ended: list[tuple[dict[str, Any], str]] = []
        recheck = None
        for task in spec.get("gracefulEvictionTasks") or ():
            cluster = str(task.get("fromCluster"))
            verdict = assess_task(
                task,
                targets=targets,
                ready=ready,
                cluster_exists=ctx.clusters.get(None, cluster) is not None,
                now=now,
                default_grace_seconds=ctx.settings.graceful_eviction_timeout_seconds,
            )
            if verdict.done:
                ended.append((task, verdict.why))
                continue
            kept.append(task)
            if verdict.recheck_at is not None:
                recheck = verdict.recheck_at if recheck is None else min(recheck, verdict.recheck_at)
        if ended:
            updated = copy.deepcopy(binding)
            if kept:
                updated["spec"]["gracefulEvictionTasks"] = kept
            else:
                updated["spec"].pop("gracefulEvictionTasks", None)
            await ctx.objects.update(ctx.binding_rt, updated)
            await self._record(binding, ended)
        return None if recheck is None else max((recheck - now).total_seconds(), 0.0)

    async def _record(self, binding: Mapping[str, Any], ended: list[tuple[dict[str, Any], str]]) -> None:
        resource = BindingView(binding).resource
        informer = self.ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
        workload = informer.get(resource.get("namespace"), str(resource.get("name"))) if informer else None
        meta = BindingView(binding).metadata
        for task, why in ended:
            cluster = str(task.get("fromCluster"))
            log.info(
                "binding %s/%s: eviction from %s is over (%s); its Work goes",
                meta.get("namespace"), meta.get("name"), cluster, why, extra={"cluster": cluster},
            )
            if workload is not None:
                await record_event(
                    self.ctx, workload, type=EventType.NORMAL, reason=EventReason.EVICTION_COMPLETED,
                    message=f"the replicas evicted from {cluster} ({task.get('reason')}) are removed: {why}",
                )


__all__ = ["GracefulEvictionController", "work_carries"]
