"""The local APIServices, kept as kube's autoregister and crdregistration controllers keep them,
and the ``kube-system/extension-apiserver-authentication`` ConfigMap.

One APIService per group-version the hub serves itself: its built-in ones (label
``kube-aggregator.kubernetes.io/automanaged: onstart``, kube's priorities where kube has them) and
each served version of every CustomResourceDefinition (label ``true``, group priority 1000, version
priority 100, as kube's crdregistration). A version no longer served (a CRD deleted, or a version
marked ``served: false``) loses its APIService; an APIService without the label (an admin's)
is never touched, as kube's autoregister leaves unmanaged ones alone.

Level-based: a CRD's event queues the names of its versions, an APIService's event its own name;
the reconcile creates, corrects (spec) or deletes the one APIService. The ConfigMap is written at
the start of each leadership term, as each kube-apiserver writes it when it starts.

In: an ObjectClient, the built-in group-versions, the ConfigMap's body. Out: APIService and ConfigMap writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from controlplane.apis.apiextensions.crd import GROUP as CRD_GROUP
from controlplane.apis.apiextensions.crd import VERSION as CRD_VERSION
from controlplane.apis.kube import apiregistration
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, Preconditions, WatchEventType, errors

log = logging.getLogger(__name__)

_MANAGED = (apiregistration.AUTOMANAGED_ON_START, apiregistration.AUTOMANAGED_SYNC)


def crd_served_versions(crd: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``(group, version)`` a CustomResourceDefinition serves."""
    spec = crd.get("spec") or {}
    group = str(spec.get("group") or "")
    return [(group, str(v.get("name"))) for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("served")]


class LocalAPIServicesController:
    """Keeps one APIService per group-version served by the hub itself."""

    def __init__(
        self, objects: ObjectClient, builtin: Iterable[tuple[str, str]], *,
        authentication_configmap: dict[str, Any] | None = None, workqueue_metrics: WorkqueueMetrics | None = None,
    ) -> None:
        self._objects = objects
        self._rt = objects.registry.require(f"{apiregistration.GROUP}/{apiregistration.VERSION}", "APIService")
        self._builtin = {f"{v}.{g}": (g, v) for g, v in builtin}
        self._configmap = authentication_configmap
        self.api_services = Informer(objects, self._rt)
        self.crds = Informer(objects, objects.registry.require(f"{CRD_GROUP}/{CRD_VERSION}", "CustomResourceDefinition"))
        self._loop: ReconcileLoop[str] = ReconcileLoop("apiservice-registration", self.reconcile, workers=2,
                                                       metrics=workqueue_metrics)
        self.api_services.add_handler(self._on_api_service)
        self.crds.add_handler(self._on_crd)

    async def _on_api_service(self, _event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        await self._loop.add(str(obj["metadata"]["name"]))

    async def _on_crd(self, _event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for group, version in {*crd_served_versions(obj), *(crd_served_versions(old) if old else [])}:
            await self._loop.add(f"{version}.{group}")

    def _crd_versions(self) -> set[str]:
        return {f"{v}.{g}" for crd in self.crds.items() for g, v in crd_served_versions(crd)}

    async def run(self) -> None:
        await self._write_configmap()
        async with asyncio.TaskGroup() as group:
            group.create_task(self.api_services.run())
            group.create_task(self.crds.run())
            await self.api_services.synced.wait()
            await self.crds.synced.wait()
            for name in sorted({*self._builtin, *self._crd_versions()}):
                await self._loop.add(name)
            group.create_task(self._loop.run())

    def desired(self, name: str) -> dict[str, Any] | None:
        """The APIService ``name`` should be, or None when no local group-version has it."""
        if name in self._builtin:
            group, version = self._builtin[name]
            priority = apiregistration.KUBE_PRIORITIES.get((group, version), apiregistration.CRD_PRIORITY)
            label = apiregistration.AUTOMANAGED_ON_START
        elif name in self._crd_versions():
            version, _, group = name.partition(".")
            priority, label = apiregistration.CRD_PRIORITY, apiregistration.AUTOMANAGED_SYNC
        else:
            return None
        return apiregistration.local_api_service(
            group, version, group_priority=priority[0], version_priority=priority[1], automanaged=label,
        )

    async def reconcile(self, name: str) -> None:
        current = self.api_services.get(None, name)
        wanted = self.desired(name)
        if current is not None and (current.get("metadata", {}).get("labels") or {}).get(
                apiregistration.AUTOMANAGED_LABEL) not in _MANAGED:
            return  # an admin's APIService: never ours to change
        if wanted is None:
            if current is not None:
                uid = current["metadata"].get("uid")
                try:
                    await self._objects.delete(self._rt, name=name, preconditions=Preconditions(uid=uid))
                except errors.NotFound:
                    return
                log.info("deleted APIService %s: its group-version is not served here any more", name)
            return
        if current is None:
            try:
                await self._objects.create(self._rt, wanted)
            except errors.AlreadyExists:
                return  # the watch brings it
            return
        labels = current["metadata"].get("labels") or {}
        if apiregistration.same_spec(current, wanted) and labels == wanted["metadata"]["labels"]:
            return
        await self._objects.update(self._rt, {
            **current, "metadata": {**current["metadata"], "labels": {**labels, **wanted["metadata"]["labels"]}},
            "spec": wanted["spec"],
        })

    async def _write_configmap(self) -> None:
        body = self._configmap
        if body is None:
            return
        rt = self._objects.registry.require("v1", "ConfigMap")
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            try:
                current = await self._objects.get(rt, namespace=namespace, name=name)
            except errors.NotFound:
                with contextlib.suppress(errors.AlreadyExists):
                    await self._objects.create(rt, body, namespace=namespace)
                return
            if current.get("data") != body["data"]:
                await self._objects.update(rt, {**current, "data": body["data"]}, namespace=namespace)
        except errors.ApiError as exc:  # the next term writes it again; the APIServices are kept meanwhile
            log.warning("could not write ConfigMap %s/%s: %s", namespace, name, exc)
