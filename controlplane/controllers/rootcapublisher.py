"""The ConfigMap ``kube-root-ca.crt`` of every namespace, as kube-controller-manager's
``root-ca-cert-publisher`` keeps it.

Every namespace has a ConfigMap ``kube-root-ca.crt`` whose one key ``ca.crt`` is the CA a client
verifies the hub with (the hub's CA, as in its kubeconfig and the token Secrets' ``ca.crt``), with
kube's ``kubernetes.io/description`` annotation. Tools read it for an in-cluster configuration, and
a pod's ``kube-api-access-*`` projected volume names it. As kube's publisher: created when a
namespace appears or becomes active again, created again when deleted, and its data and
annotation put back when changed (other keys of ``data`` dropped, its other metadata kept; a new CA
replaces the old one when the next leader starts). Nothing is created in a namespace being deleted
(a refusal with the ``NamespaceTerminating`` cause) or gone; any other refusal (a quota, an
admission policy or webhook) is retried with backoff.
The hub never propagates it: each member's own publisher keeps the member's
(:mod:`controlplane.interpreter.dependencies`).

Level-based: a namespace event, or a change or deletion of such a ConfigMap, queues the namespace;
the reconcile reads the cached ConfigMap and creates or updates it.
Only the ConfigMaps of that name are cached.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from controlplane.apis.kube.namespaces import is_terminating
from controlplane.apis.views import ObjectView
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.interpreter.dependencies import ROOT_CA_CONFIG_MAP
from controlplane.objectclient import ObjectClient, WatchEventType, errors

log = logging.getLogger(__name__)

#: The ConfigMap's one key (kube's rootcacertpublisher).
CA_KEY: Final = "ca.crt"
DESCRIPTION_ANNOTATION: Final = "kubernetes.io/description"
#: kube's words for it (rootcacertpublisher's ``Description``).
DESCRIPTION: Final = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such "
    "as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions "
    "of Kubernetes clusters."
)


def _named_root_ca(config_map: dict[str, Any]) -> bool:
    return ObjectView(config_map).name == ROOT_CA_CONFIG_MAP


class RootCAPublisher:
    """Keeps ``kube-root-ca.crt`` with ``ca_pem`` in every active namespace."""

    def __init__(
        self,
        objects: ObjectClient,
        *,
        ca_pem: bytes,
        workqueue_metrics: WorkqueueMetrics | None = None,
    ) -> None:
        self._objects = objects
        self._data = {CA_KEY: ca_pem.decode()}
        self._config_maps_rt = objects.registry.require("v1", "ConfigMap")
        self.namespaces = Informer(objects, objects.registry.require("v1", "Namespace"))
        self.config_maps = Informer(objects, self._config_maps_rt, keep=_named_root_ca)
        self._loop: ReconcileLoop[str] = ReconcileLoop(
            "root_ca_cert_publisher", self.reconcile, workers=1, metrics=workqueue_metrics
        )
        self.namespaces.add_handler(self._on_namespace)
        self.config_maps.add_handler(self._on_config_map)

    async def _on_namespace(
        self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None
    ) -> None:
        # kube's publisher: every namespace added, and an updated one while it is active.
        if event is WatchEventType.ADDED or (event is WatchEventType.MODIFIED and not is_terminating(obj)):
            await self._loop.add(str(obj["metadata"]["name"]))

    async def _on_config_map(
        self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None
    ) -> None:
        if _named_root_ca(obj):  # its ADDED too: one the cache had not seen when a create found it
            await self._loop.add(ObjectView(obj).namespace)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.namespaces.run())  # its first list queues every namespace
            group.create_task(self.config_maps.run())
            await self.namespaces.synced.wait()
            await self.config_maps.synced.wait()
            group.create_task(self._loop.run())

    async def reconcile(self, namespace: str) -> None:
        current = self.config_maps.get(namespace, ROOT_CA_CONFIG_MAP)
        if current is None:
            await self._create(namespace)
            return
        annotations = ObjectView(current).annotations
        if current.get("data") == self._data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        metadata = {
            **current["metadata"],
            "annotations": {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION},
        }
        await self._objects.update(
            self._config_maps_rt, {**current, "metadata": metadata, "data": dict(self._data)}
        )
        log.info("put back the root CA ConfigMap of namespace %s", namespace)

    async def _create(self, namespace: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": ROOT_CA_CONFIG_MAP,
                "namespace": namespace,
                "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION},
            },
            "data": dict(self._data),
        }
        try:
            await self._objects.create(self._config_maps_rt, body)
        except errors.NotFound:
            return  # the namespace is gone: kube's publisher does not retry either
        except errors.Forbidden as refused:
            if any(cause.reason == errors.CauseType.NAMESPACE_TERMINATING for cause in refused.causes):
                return  # nor in a namespace being deleted
            raise  # a quota, a policy, a webhook: the loop retries with backoff, as kube's does
        except errors.AlreadyExists:
            return  # its event queues the namespace again, to check what it holds
        log.info("created the root CA ConfigMap of namespace %s", namespace)
