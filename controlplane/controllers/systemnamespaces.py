"""The namespaces that always exist: created again when one is deleted.

kube-apiserver's ``systemnamespaces`` controller creates ``kube-system``, ``kube-public`` and
``kube-node-lease`` whenever they are missing (and its bootstrap controller ``default``); deleting
``kube-node-lease`` is allowed, so it is gone only until the controller sees it. The hub does the
same for kube's namespaces and for its own (the agents' lease namespace, ``gpufed-system``), which
it creates at start. Level-based: a namespace's deletion, or the first sync, queues the name; the
reconcile creates the namespace when the cache has none (AlreadyExists ends it quietly).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, WatchEventType, errors

log = logging.getLogger(__name__)


class SystemNamespacesController:
    """Keeps ``names`` existing in ``objects``."""

    def __init__(
        self, objects: ObjectClient, names: Iterable[str], *, workqueue_metrics: WorkqueueMetrics | None = None
    ) -> None:
        self._objects = objects
        self._namespace_rt = objects.registry.require("v1", "Namespace")
        self.names = frozenset(names)
        self.namespaces = Informer(objects, self._namespace_rt)
        self._loop: ReconcileLoop[str] = ReconcileLoop(
            "system-namespaces", self.reconcile, workers=1, metrics=workqueue_metrics
        )
        self.namespaces.add_handler(self._on_namespace)

    async def _on_namespace(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        if event is WatchEventType.DELETED and name in self.names:
            await self._loop.add(name)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.namespaces.run())
            await self.namespaces.synced.wait()
            for name in sorted(self.names):
                await self._loop.add(name)
            group.create_task(self._loop.run())

    async def reconcile(self, name: str) -> None:
        if self.namespaces.get(None, name) is not None:
            return
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        try:
            await self._objects.create(self._namespace_rt, body)
        except errors.AlreadyExists:
            return
        log.info("created system namespace %s", name)
