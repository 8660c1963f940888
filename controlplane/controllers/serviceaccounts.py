"""The ``default`` ServiceAccount of every namespace, as kube-controller-manager's ``serviceaccount``
controller keeps it.

Every namespace that is not being deleted has a ServiceAccount named ``default``: created when the
namespace appears (the hub's own namespaces included, as kube's ``kube-system`` has one), and again
when it is deleted. Tools count on it (``kubectl create token default -n NS``, RBAC bindings to
``system:serviceaccount:NS:default``). The hub never propagates it: a workload's
``serviceAccountName: default`` is not a dependency (:mod:`controlplane.interpreter.dependencies`),
each member has its own.

Level-based: a namespace event, or the deletion of a ``default`` ServiceAccount, queues the
namespace; the reconcile creates the account when the namespace is active and the cache has none
(an AlreadyExists, or a namespace that began terminating meanwhile, ends it quietly).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from controlplane.apis.kube.namespaces import is_terminating
from controlplane.apis.views import ObjectView
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.interpreter.dependencies import DEFAULT_SERVICE_ACCOUNT
from controlplane.objectclient import ObjectClient, WatchEventType, errors

log = logging.getLogger(__name__)



class ServiceAccountsController:
    """``accounts``, when given, is the ServiceAccount informer another component of the process runs
    (on the hub, the token check's): read while the controller runs, not run by it."""

    def __init__(
        self, objects: ObjectClient, *, accounts: Informer | None = None,
        workqueue_metrics: WorkqueueMetrics | None = None,
    ) -> None:
        self._objects = objects
        self._accounts_rt = objects.registry.require("v1", "ServiceAccount")
        self.namespaces = Informer(objects, objects.registry.require("v1", "Namespace"))
        self._shared = accounts is not None
        self.accounts = accounts if accounts is not None else Informer(objects, self._accounts_rt)
        self._loop: ReconcileLoop[str] = ReconcileLoop(
            "serviceaccounts", self.reconcile, workers=1, metrics=workqueue_metrics
        )
        self.namespaces.add_handler(self._on_namespace)

    async def _on_namespace(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED:
            await self._loop.add(str(obj["metadata"]["name"]))

    async def _on_account(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        view = ObjectView(obj)
        if event is WatchEventType.DELETED and view.name == DEFAULT_SERVICE_ACCOUNT:
            await self._loop.add(view.namespace)

    async def run(self) -> None:
        self.accounts.add_handler(self._on_account)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.namespaces.run())  # its first list queues every namespace
                if not self._shared:
                    group.create_task(self.accounts.run())
                await self.namespaces.synced.wait()
                await self.accounts.synced.wait()
                group.create_task(self._loop.run())
        finally:
            self.accounts.remove_handler(self._on_account)

    async def reconcile(self, namespace: str) -> None:
        current = self.namespaces.get(None, namespace)
        if current is None or is_terminating(current):
            return
        if self.accounts.get(namespace, DEFAULT_SERVICE_ACCOUNT) is not None:
            return
        account = {
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace},
        }
        try:
            await self._objects.create(self._accounts_rt, account)
        except errors.AlreadyExists:
            return
        except (errors.NotFound, errors.Forbidden):
            return  # the namespace went, or began terminating, since the cache saw it
        log.info("created the default service account of namespace %s", namespace)

