"""Cluster lifecycle on the hub: every registered Cluster gets its execution namespace.

A member's Works live in ``gpufed-es-<cluster>``; the namespace must exist before the
first Work can be written there (by the binding controller, or by hand). This
controller creates it when a Cluster appears, and removes it (with the Works in it)
when the Cluster is deleted. Level-based: a restart re-checks every Cluster, and a namespace
deleted while its Cluster stays is made again. A Cluster's status reports (a hundred members
report every few seconds) are not looked at: only its arrival, its deletion and the
namespaces it owns matter here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from controlplane.apis.constants import (
    LABEL_CLUSTER,
    LABEL_MANAGED_BY,
    MANAGED_BY_VALUE,
    execution_namespace,
)
from controlplane.controllers.informing import Informer
from controlplane.controllers.queueing import ShutDown, WorkQueue
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, WatchEventType, errors

log = logging.getLogger(__name__)


class ClusterNamespaceController:
    def __init__(self, objects: ObjectClient, *, workqueue_metrics: WorkqueueMetrics | None = None) -> None:
        self._objects = objects
        registry = objects.registry
        self._cluster_rt = registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
        self._namespace_rt = registry.require("v1", "Namespace")
        self.clusters = Informer(objects, self._cluster_rt)
        self.namespaces = Informer(objects, self._namespace_rt, label_selector=f"{LABEL_MANAGED_BY}={MANAGED_BY_VALUE},{LABEL_CLUSTER}")
        self._queue: WorkQueue[str] = WorkQueue(name="cluster-namespaces", metrics=workqueue_metrics)
        self.clusters.add_handler(self._on_cluster)
        self.namespaces.add_handler(self._on_namespace)

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and old is not None and _deleting(old) == _deleting(obj):
            return  # a status report, a label: nothing this controller acts on
        await self._queue.add(obj["metadata"]["name"])

    async def _on_namespace(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED:
            cluster = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_CLUSTER)
            if cluster:
                await self._queue.add(cluster)  # made again while its Cluster stays

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.clusters.run())
                group.create_task(self.namespaces.run())
                while True:
                    try:
                        name = await self._queue.get()
                    except ShutDown:
                        return
                    try:
                        await self.reconcile(name)
                        self._queue.forget(name)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("reconciling cluster %s failed; retrying", name)
                        await self._queue.add_rate_limited(name)
                    finally:
                        await self._queue.done(name)
        finally:
            self._queue.stop_reporting()

    async def reconcile(self, name: str) -> None:
        namespace = execution_namespace(name)
        cluster = self.clusters.get(None, name)
        if cluster is None or cluster["metadata"].get("deletionTimestamp"):
            with contextlib.suppress(errors.NotFound):
                await self._objects.delete(self._namespace_rt, name=namespace)
                log.info("removed execution namespace %s of deleted cluster", namespace)
            return
        if self.namespaces.get(None, namespace) is not None:
            return
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {LABEL_CLUSTER: name, LABEL_MANAGED_BY: MANAGED_BY_VALUE},
            },
        }
        try:
            await self._objects.create(self._namespace_rt, body)
            log.info("created execution namespace %s", namespace)
        except errors.AlreadyExists:
            pass


def _deleting(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))
