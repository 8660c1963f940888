"""kube-controller-manager's namespace controller: a terminating namespace's content is deleted,
its status says what is left, and it is removed once empty
(:mod:`controlplane.apis.kube.namespacedeletion`).

Deleting a namespace only marks it ``Terminating`` (:mod:`controlplane.apiserver.objects.deleting`);
this controller, on the leader, deletes its content in kube's order (``OrderedNamespaceDeletion``,
on and locked since kube 1.34): the Pods first, and every other object only once no Pod is left,
each deleted in the Background. It writes, to the namespace's status, what is left in it and which
finalizers hold it, and looks again every :data:`RECHECK_SECONDS` while the namespace lasts (a
finalizer taken off an object that keeps another one deletes nothing, so no event would tell).
Each pass deletes what is not being deleted yet (content created as the deletion began, too); the
API server removes the namespace as its last object goes, and an empty one is deleted again to
remove it. Level-based: a new leader lists the namespaces and finishes every deletion left
under way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis.kube.garbagecollection import DeletionPropagation
from controlplane.apis.kube.namespacedeletion import deletion_conditions, updated_conditions
from controlplane.apis.timestamps import format_time
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, ResourceType, WatchEventType, errors, utc_now
from controlplane.objectclient.paging import DEFAULT_PAGE_SIZE, list_pages

#: How often a terminating namespace's content is counted again.
RECHECK_SECONDS: Final = 5.0


class NamespaceController:
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
        self._pods = self._content.registry.get("", "v1", "pods")
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
            # As each pass of kube's namespace controller: what is not being deleted yet is
            # deleted (the Pods first, the rest once no Pod is left), and an empty namespace removed.
            pods = self._pods
            pods_left = pods is not None and content.remaining[f"{pods.plural}.{pods.group}"] > 0
            for rt, item in content.unmarked:
                if pods_left and rt is not self._pods:
                    continue
                with contextlib.suppress(errors.NotFound):
                    await self._objects.delete(
                        rt, namespace=name, name=item, propagation_policy=DeletionPropagation.BACKGROUND
                    )
            if not content.remaining:
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
                    if not item["metadata"].get("deletionTimestamp"):
                        content.unmarked.append((rt, item["metadata"]["name"]))
        return content


@dataclass
class Content:
    """What is left in a terminating namespace."""

    #: The objects by ``plural.group``.
    remaining: Counter[str] = field(default_factory=Counter)
    #: The finalizers on them, each with the number of objects it holds.
    finalizers: Counter[str] = field(default_factory=Counter)
    #: Those not being deleted yet, by kind and name.
    unmarked: list[tuple[ResourceType, str]] = field(default_factory=list)
