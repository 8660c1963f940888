"""Karmada's MultiClusterServices at the hub: their Service propagated, their EndpointSlices
dispatched, and their status.

In: ``networking.karmada.io/v1alpha1`` MultiClusterServices, the hub's Services, the Clusters,
the ResourceBindings of Services and the Works this controller wrote (with the EndpointSlices the
provider clusters' agents report on them). Out, for a ``CrossCluster`` one whose Service exists:

* a Work per cluster of the provider and consumer clusters (every cluster when a list is empty;
  clusters the hub does not have are skipped), named as a binding's Work of the Service would be
  (``<namespace>-<name>-service`` in ``gpufed-es-<cluster>``), carrying the Service as any Work
  does (no ``clusterIP``), with ``conflictResolution: Overwrite`` as Karmada's binding for it has,
  and labelled as Karmada labels a MultiClusterService's Works
  (``multiclusterservice.karmada.io/name``, ``/namespace``, ``/permanent-id``); a provider's also
  ``endpointslice.gpufed.io/collect: "true"``, for its agent to report the Service's slices
  (:mod:`member_agent.collecting`).
* For each slice a provider reported, a Work per consumer cluster but that provider carrying the
  slice as Karmada's endpointslice-dispatch controller writes it
  (:func:`~controlplane.apis.mcs_endpointslices.dispatched_slice`), named
  ``<namespace>-<provider>-<slice>-endpointslice``.
* Any other Work of the MultiClusterService goes: a cluster no longer listed (or gone), a slice
  its provider no longer reports, and every Work once the MultiClusterService is deleted, its
  type is not ``CrossCluster`` or its Service goes.
* A Service a PropagationPolicy already binds is left to that policy: no Work is written for the
  MultiClusterService (the policy's Works carry the same names, so two writers never take turns on
  them), and the status says so. Karmada instead takes the Service from the policy.
* ``status.conditions`` from :func:`~controlplane.apis.multicluster_services.mcs_conditions`:
  ``ServiceApplied`` (``True``, Karmada's ``ServiceAppliedSucceed``, once the Works are written)
  and ``EndpointSliceDispatched`` (``True``, ``EndpointSliceDispatchedSucceed``, once a provider's
  slices were dispatched; ``False``, ``EndpointSlicesNotCollected``, before), written only when
  they change.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from typing import Any, Final

from controlplane.apis import constants as c
from controlplane.apis.conflictresolution import ConflictResolution
from controlplane.apis.kube.field import items
from controlplane.apis.mcs_endpointslices import (
    LABEL_COLLECT_ENDPOINTSLICES,
    PROVISION_CLUSTER_ANNOTATION,
    collected_slices,
    dispatched_slice,
)
from controlplane.apis.multicluster_services import (
    LABEL_MCS_NAME,
    LABEL_MCS_NAMESPACE,
    MULTI_CLUSTER_SERVICE_KIND,
    PERMANENT_ID_LABEL,
    exposure_clusters,
    mcs_conditions,
)
from controlplane.apis.views import ObjectView, WorkView
from controlplane.apis.work_v1alpha1 import API_VERSION as WORK_API_VERSION
from controlplane.apis.work_v1alpha1 import WORK_KIND
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting, with_condition, without_server_fields
from controlplane.controllers.works import work_name
from controlplane.objectclient import WatchEventType, errors

log = logging.getLogger(__name__)

API_VERSION = "networking.karmada.io/v1alpha1"
_INDEX_MCS: Final = "multi-cluster-service"
Key = tuple[str, str]


def mcs_of_work(work: dict[str, Any]) -> Key | None:
    """(namespace, name) of the MultiClusterService a Work was written for; None for a Work a
    binding wrote (or took over: the binding controller keeps labels it did not write)."""
    labels = WorkView(work).labels
    namespace, name = labels.get(LABEL_MCS_NAMESPACE), labels.get(LABEL_MCS_NAME)
    if not namespace or not name or labels.get(c.LABEL_BINDING):
        return None
    return str(namespace), str(name)


def _indexed(work: dict[str, Any]) -> Iterable[Hashable]:
    key = mcs_of_work(work)
    return (key,) if key is not None else ()


def _mcs_work(cluster: str, name: str, manifest: dict[str, Any], mcs: dict[str, Any], **labels: str) -> dict[str, Any]:
    """A Work of the MultiClusterService ``mcs`` named ``name`` carrying ``manifest`` to ``cluster``."""
    view = ObjectView(mcs)
    all_labels = {
        LABEL_MCS_NAMESPACE: view.namespace, LABEL_MCS_NAME: view.name, c.LABEL_CLUSTER: cluster,
        c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE, **labels,
    }
    permanent_id = view.labels.get(PERMANENT_ID_LABEL)
    if permanent_id:
        all_labels[PERMANENT_ID_LABEL] = str(permanent_id)
    metadata = {"name": name, "namespace": c.execution_namespace(cluster), "labels": all_labels}
    spec = {"workload": {"manifests": [manifest]}, "conflictResolution": str(ConflictResolution.OVERWRITE)}
    return {"apiVersion": WORK_API_VERSION, "kind": WORK_KIND, "metadata": metadata, "spec": spec}


def service_work(cluster: str, service: dict[str, Any], mcs: dict[str, Any], *, provider: bool = False) -> dict[str, Any]:
    """The Work that carries ``service`` to ``cluster`` for the MultiClusterService ``mcs``; a
    ``provider``'s asks its agent to report the Service's EndpointSlices."""
    view = ObjectView(mcs)
    return _mcs_work(cluster, work_name(view.namespace, view.name, "Service"), without_server_fields(service), mcs,
                     **{LABEL_COLLECT_ENDPOINTSLICES: "true" if provider else "false"})


def slice_work(consumer: str, provider: str, collected: dict[str, Any], mcs: dict[str, Any]) -> dict[str, Any]:
    """The Work that carries the provider's slice ``collected`` to the consumer cluster ``consumer``."""
    view = ObjectView(mcs)
    manifest = dispatched_slice(collected, provider=provider, namespace=view.namespace, service=view.name)
    work = _mcs_work(consumer, work_name(view.namespace, manifest["metadata"]["name"], "EndpointSlice"), manifest, mcs)
    work["metadata"]["annotations"] = {PROVISION_CLUSTER_ANNOTATION: provider}
    return work


class MultiClusterServiceController(KeyedController[Key]):
    """Propagates each MultiClusterService's Service and keeps its conditions (keys: ``(namespace, name)``)."""

    name = "multi-cluster-services"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.rt = ctx.watch_kind(API_VERSION, MULTI_CLUSTER_SERVICE_KIND, self._on_object)
        self.service_rt = ctx.watch_kind("v1", "Service", self._on_service)
        ctx.works.add_index(_INDEX_MCS, _indexed)
        ctx.works.add_handler(self._on_work)
        ctx.clusters.add_handler(self._on_cluster)
        ctx.bindings.add_handler(self._on_binding)

    async def _on_object(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if (event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec")
                and ObjectView(old).labels == ObjectView(obj).labels):
            return  # its own status write
        view = ObjectView(obj)
        await self.loop.add((view.namespace, view.name))

    async def _add_if_served(self, namespace: str, name: str) -> None:
        if self.rt is not None and self.ctx.cached(self.rt, namespace, name) is not None:
            await self.loop.add((namespace, name))

    async def _on_service(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and old is not None and without_server_fields(old) == without_server_fields(obj):
            return  # a status or server-side change: the Works carry neither
        view = ObjectView(obj)
        await self._add_if_served(view.namespace, view.name)

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = mcs_of_work(obj) or (mcs_of_work(old) if old is not None else None)
        if key is not None and (event is not WatchEventType.MODIFIED or old is None or old.get("spec") != obj.get("spec")
                                or mcs_of_work(old) != mcs_of_work(obj)
                                or collected_slices(old, key[1]) != collected_slices(obj, key[1])):
            await self.loop.add(key)

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        resource = (obj.get("spec") or {}).get("resource") or {}
        if event is not WatchEventType.MODIFIED and resource.get("kind") == "Service" and resource.get("apiVersion") == "v1":
            await self._add_if_served(str(resource.get("namespace") or ""), str(resource.get("name") or ""))

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED or self.rt is None:
            return  # a cluster joins (its Works are due) or leaves
        informer = self.ctx.informer_if_any(self.rt)
        for mcs in informer.items() if informer is not None else ():
            view = ObjectView(mcs)
            await self.loop.add((view.namespace, view.name))

    def _exposure(self, mcs: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The provider and the consumer clusters, those the hub has (an empty list: every cluster)."""
        known = {ObjectView(cluster).name for cluster in self.ctx.clusters.items()}
        providers, consumers = exposure_clusters(mcs)
        return sorted(known & set(providers or known)), sorted(known & set(consumers or known))

    def _desired(self, mcs: dict[str, Any], service: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
        """The Works of ``mcs`` (the Service's to every provider and consumer, then each collected
        slice's to every consumer but its provider) and the providers whose slices were collected."""
        view = ObjectView(mcs)
        providers, consumers = self._exposure(mcs)
        works = [service_work(cluster, service, mcs, provider=cluster in providers)
                 for cluster in sorted(set(providers) | set(consumers))]
        collected_from = []
        for provider in providers:
            reported = self.ctx.works.get(c.execution_namespace(provider), work_name(view.namespace, view.name, "Service"))
            slices = collected_slices(reported, view.name) if reported is not None and mcs_of_work(reported) else None
            if not slices:
                continue
            collected_from.append(provider)
            works += [slice_work(consumer, provider, collected, mcs)
                      for consumer in consumers if consumer != provider for collected in slices]
        return works, collected_from

    async def reconcile(self, key: Key) -> float | None:
        ctx = self.ctx
        if self.rt is None or self.service_rt is None:
            return None
        namespace, name = key
        obj = ctx.cached(self.rt, namespace, name)
        live = obj is not None and not is_deleting(obj)
        service = ctx.cached(self.service_rt, namespace, name)
        binding = ctx.binding_for(namespace, name, "Service")
        desired: dict[tuple[str, str], dict[str, Any]] = {}
        collected_from: list[str] = []
        if obj is not None and live and service is not None and binding is None and \
                "CrossCluster" in items((obj.get("spec") or {}).get("types")):
            works, collected_from = self._desired(obj, service)
            desired = {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in works}
        try:
            for work in desired.values():
                await self._write_work(work)
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS
        for work in ctx.works.by_index(_INDEX_MCS, key):
            meta = work["metadata"]
            if (meta.get("namespace"), meta["name"]) not in desired:
                await ctx.delete(ctx.work_rt, meta.get("namespace"), str(meta["name"]))
                log.info("work %s/%s of MultiClusterService %s/%s deleted", meta.get("namespace"), meta["name"], *key)
        if obj is None or not live:
            return None
        bound_by = f"{namespace}/{ObjectView(binding).name}" if binding is not None else None
        return await self._write_status(
            obj, service_found=service is not None, bound_by=bound_by, collected_from=collected_from
        )

    async def _write_work(self, desired: dict[str, Any]) -> None:
        # A Work a policy's binding wrote first (same name) is that binding's.
        written = await self.ctx.write_work(desired, yields_to=c.LABEL_BINDING)
        if written is not None:
            meta = desired["metadata"]
            log.info("work %s/%s of MultiClusterService %s", meta["namespace"], meta["name"], written)

    async def _write_status(
        self, obj: dict[str, Any], *, service_found: bool, bound_by: str | None, collected_from: list[str]
    ) -> float | None:
        assert self.rt is not None
        view = ObjectView(obj)
        status = dict(view.status)
        conditions = status.get("conditions") or []
        conditions_now = mcs_conditions(obj, service_found=service_found, bound_by=bound_by, collected_from=collected_from)
        for condition in conditions_now:
            conditions = with_condition(conditions, condition, now=self.ctx.now_text())
        if conditions == status.get("conditions"):
            return None
        try:
            await self.ctx.objects.update_status(self.rt, {**obj, "status": {**status, "conditions": conditions}})
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS
        except errors.NotFound:
            return None
        log.info("MultiClusterService %s/%s: conditions written", view.namespace, view.name)
        return None
