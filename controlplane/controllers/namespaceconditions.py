"""The conditions of a terminating namespace, as kube-controller-manager's namespace controller
keeps them (:mod:`controlplane.apis.kube.namespacedeletion`).

The API server deletes a namespace's content itself and removes the namespace once it is
empty (:mod:`controlplane.apiserver.objects.namespaces`); an object held by a finalizer keeps
it ``Terminating``. This controller writes, to each terminating namespace's status, what is
left in it and which finalizers hold it, and looks again every :data:`RECHECK_SECONDS` while
the namespace lasts (a finalizer taken off an object that keeps another one deletes nothing,
so no event would tell). As kube's controller does on each pass, a namespace found empty, or
holding an object not being deleted yet (created as its deletion began), is deleted again: the
API server then deletes what is left and removes the namespace once it is empty.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis.kube.namespacedeletion import deletion_conditions, updated_conditions
from controlplane.apis.timestamps import format_time
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, WatchEventType, errors, utc_now
from controlplane.objectclient.paging import DEFAULT_PAGE_SIZE, list_pages

#: How often a terminating namespace's content is counted again.
RECHECK_SECONDS: Final = 5.0


class NamespaceConditionsController:
    """Keeps the deletion conditions of the terminating namespaces of ``objects``."""

    #: How many objects of a kind one read of a namespace's content holds at most.
    page_size: int = DEFAULT_PAGE_SIZE

    def __init__(
        self, objects: ObjectClient, *, content: ObjectClient | None = None, workqueue_metrics: WorkqueueMetrics | None = None
    ) -> None:
        self._objects = objects
        #: Where the namespaces' content is counted: the store itself, so that counting every kind
        #: starts no watch cache of kinds nothing else watches.
        self._content = content or objects
        self._rt = objects.registry.require("v1", "Namespace")
        self.namespaces = Informer(objects, self._rt)
        self._loop: ReconcileLoop[str] = ReconcileLoop(
            "namespace-conditions", self.reconcile, workers=1, metrics=workqueue_metrics
        )
        self.namespaces.add_handler(self._on_namespace)

    async def _on_namespace(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED and obj["metadata"].get("deletionTimestamp"):
            await self._loop.add(str(obj["metadata"]["name"]))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.namespaces.run())
            group.create_task(self._loop.run())

    async def reconcile(self, name: str) -> float | None:
        namespace = self.namespaces.get(None, name)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return None
        content = await self._count(name)
        if content.unmarked or not content.remaining:
            # As each pass of kube's namespace controller: what is left unmarked (created as the
            # deletion began) is deleted, and an empty namespace removed.
            with contextlib.suppress(errors.NotFound):
                if (await self._objects.delete(self._rt, name=name)).deleted:
                    return None
            content = await self._count(name)
        status = namespace.get("status") or {}
        conditions = updated_conditions(
            status.get("conditions") or [], deletion_conditions(content.remaining, content.finalizers),
            now=format_time(utc_now()),
        )
        if conditions is not None:
            with contextlib.suppress(errors.NotFound):  # removed meanwhile; a Conflict is retried by the loop
                await self._objects.update_status(self._rt, {**namespace, "status": {**status, "conditions": conditions}})
        return RECHECK_SECONDS

    async def _count(self, namespace: str) -> Content:
        content = Content()
        for rt in self._content.registry.namespaced_types():
            # Page by page: a namespace of many objects is counted without holding them all.
            async for page in list_pages(self._content, rt, namespace=namespace, limit=self.page_size):
                if page.items:
                    content.remaining[f"{rt.plural}.{rt.group}"] += len(page.items)
                for item in page.items:
                    content.finalizers.update(item["metadata"].get("finalizers") or [])
                    content.unmarked += not item["metadata"].get("deletionTimestamp")
        return content


@dataclass
class Content:
    """What is left in a terminating namespace."""

    #: The objects by ``plural.group``.
    remaining: Counter[str] = field(default_factory=Counter)
    #: The finalizers on them, each with the number of objects it holds.
    finalizers: Counter[str] = field(default_factory=Counter)
    #: How many of them are not being deleted yet.
    unmarked: int = 0
