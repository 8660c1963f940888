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
* A cluster that is not Ready is skipped as Karmada's controllers skip it: a provider's slices
  are not dispatched (those it had leave the consumers), a consumer gets no slice Work written
  (those it has of slices still collected stay as they are).
* Karmada's Events on the MultiClusterService (:func:`~controlplane.apis.multicluster_services.mcs_events`:
  ``SyncServiceSucceed``/``SyncServiceFailed``, ``DispatchEndpointSliceSucceed``, ``ClusterNotFound``),
  each recorded when the hub's decision changes, not on every reconcile.
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
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis import constants as c
from controlplane.apis.apienablements import lists_api
from controlplane.apis.conflictresolution import ConflictResolution
from controlplane.apis.events import EventType
from controlplane.apis.kube import endpointslices
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
    Skipped,
    exposure_clusters,
    mcs_conditions,
    mcs_events,
)
from controlplane.apis.views import ObjectView, WorkView
from controlplane.apis.work_v1alpha1 import API_VERSION as WORK_API_VERSION
from controlplane.apis.work_v1alpha1 import WORK_KIND, WorkReason
from controlplane.controllers.binding import ready_since
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.events import record_event
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting, with_condition, without_server_fields
from controlplane.controllers.works import work_name
from controlplane.objectclient import WatchEventType, errors

log = logging.getLogger(__name__)

API_VERSION = "networking.karmada.io/v1alpha1"
_INDEX_MCS: Final = "multi-cluster-service"
Key = tuple[str, str]
#: What the hub has to say on a MultiClusterService: (type, reason, message) of its Events.
Said = frozenset[tuple[str, str, str]]


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


def _mcs_work(
    cluster: str, name: str, manifest: dict[str, Any], mcs: dict[str, Any], **labels: str
) -> dict[str, Any]:
    """A Work of the MultiClusterService ``mcs`` named ``name`` carrying ``manifest`` to ``cluster``."""
    view = ObjectView(mcs)
    all_labels = {
        LABEL_MCS_NAMESPACE: view.namespace,
        LABEL_MCS_NAME: view.name,
        c.LABEL_CLUSTER: cluster,
        c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE,
        **labels,
    }
    permanent_id = view.labels.get(PERMANENT_ID_LABEL)
    if permanent_id:
        all_labels[PERMANENT_ID_LABEL] = str(permanent_id)
    metadata = {"name": name, "namespace": c.execution_namespace(cluster), "labels": all_labels}
    spec = {"workload": {"manifests": [manifest]}, "conflictResolution": str(ConflictResolution.OVERWRITE)}
    return {"apiVersion": WORK_API_VERSION, "kind": WORK_KIND, "metadata": metadata, "spec": spec}


def service_work(
    cluster: str, service: dict[str, Any], mcs: dict[str, Any], *, provider: bool = False
) -> dict[str, Any]:
    """The Work that carries ``service`` to ``cluster`` for the MultiClusterService ``mcs``; a
    ``provider``'s asks its agent to report the Service's EndpointSlices."""
    view = ObjectView(mcs)
    return _mcs_work(
        cluster,
        work_name(view.namespace, view.name, "Service"),
        without_server_fields(service),
        mcs,
        **{LABEL_COLLECT_ENDPOINTSLICES: "true" if provider else "false"},
    )


def slice_work(
    consumer: str, provider: str, collected: dict[str, Any], mcs: dict[str, Any]
) -> dict[str, Any]:
    """The Work that carries the provider's slice ``collected`` to the consumer cluster ``consumer``."""
    view = ObjectView(mcs)
    manifest = dispatched_slice(collected, provider=provider, namespace=view.namespace, service=view.name)
    work = _mcs_work(
        consumer, work_name(view.namespace, manifest["metadata"]["name"], "EndpointSlice"), manifest, mcs
    )
    work["metadata"]["annotations"] = {PROVISION_CLUSTER_ANNOTATION: provider}
    return work


def _kind_not_served(work: dict[str, Any]) -> bool:
    """Whether the Work's agent reported its kind not served by the member (``Applied=False``,
    ``KindNotServed``)."""
    applied = WorkView(work).condition("Applied")
    return applied is not None and applied.get("reason") == WorkReason.KIND_NOT_SERVED


def serves_endpoint_slices(cluster: dict[str, Any]) -> bool | None:
    """Whether a Cluster's ``status.apiEnablements`` lists ``discovery.k8s.io/v1`` EndpointSlice
    (Karmada's ``helper.IsAPIEnabled`` of ``util.EndpointSliceGVK``); None when it lists no APIs."""
    return lists_api(ObjectView(cluster).status, endpointslices.API_VERSION, endpointslices.KIND)


def _key_of(work: dict[str, Any]) -> tuple[str, str]:
    meta = work["metadata"]
    return str(meta.get("namespace") or ""), str(meta["name"])


@dataclass(slots=True)
class _Desired:
    """What a reconcile of a MultiClusterService wants: the Works to write, the Works to keep as
    they are (slices in consumers that are not Ready), the providers whose slices were
    collected, and the clusters skipped."""

    works: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    collected_from: list[str] = field(default_factory=list)
    skipped: Skipped = field(default_factory=Skipped)


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
        #: The Events last recorded on each MultiClusterService: one is recorded again only once
        #: the hub's decision changed (a cluster became Ready, the slices were dispatched ...).
        self._said: dict[Key, Said] = {}

    async def _on_object(
        self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if (
            event is WatchEventType.MODIFIED
            and old is not None
            and old.get("spec") == obj.get("spec")
            and ObjectView(old).labels == ObjectView(obj).labels
        ):
            return  # its own status write
        view = ObjectView(obj)
        await self.loop.add((view.namespace, view.name))

    async def _add_if_served(self, namespace: str, name: str) -> None:
        if self.rt is not None and self.ctx.cached(self.rt, namespace, name) is not None:
            await self.loop.add((namespace, name))

    async def _on_service(
        self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if (
            event is WatchEventType.MODIFIED
            and old is not None
            and without_server_fields(old) == without_server_fields(obj)
        ):
            return  # a status or server-side change: the Works carry neither
        view = ObjectView(obj)
        await self._add_if_served(view.namespace, view.name)

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = mcs_of_work(obj) or (mcs_of_work(old) if old is not None else None)
        if key is not None and (
            event is not WatchEventType.MODIFIED
            or old is None
            or old.get("spec") != obj.get("spec")
            or mcs_of_work(old) != mcs_of_work(obj)
            or collected_slices(old, key[1]) != collected_slices(obj, key[1])
            or _kind_not_served(old) != _kind_not_served(obj)
        ):
            await self.loop.add(key)

    async def _on_binding(
        self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        resource = (obj.get("spec") or {}).get("resource") or {}
        if (
            event is not WatchEventType.MODIFIED
            and resource.get("kind") == "Service"
            and resource.get("apiVersion") == "v1"
        ):
            await self._add_if_served(str(resource.get("namespace") or ""), str(resource.get("name") or ""))

    async def _on_cluster(
        self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if self.rt is None or (
            event is WatchEventType.MODIFIED
            and old is not None
            and (ready_since(old) is None) == (ready_since(obj) is None)
            and serves_endpoint_slices(old) == serves_endpoint_slices(obj)
        ):
            return  # a cluster joins (its Works are due), leaves, becomes Ready or not, or serves EndpointSlices or not
        informer = self.ctx.informer_if_any(self.rt)
        for mcs in informer.items() if informer is not None else ():
            view = ObjectView(mcs)
            await self.loop.add((view.namespace, view.name))

    def _exposure(self, mcs: dict[str, Any]) -> tuple[list[str], list[str], Skipped]:
        """The provider and the consumer clusters, those the hub has (an empty list: every
        cluster), and those skipped: named but missing, not Ready, or Ready and not serving the
        EndpointSlice API, as the Cluster's ``apiEnablements`` says (Karmada's check). A consumer
        whose Cluster lists no APIs (an older agent) is known not to serve it once its agent
        reports a slice's Work ``Applied=False``, ``KindNotServed``; such a provider is not told
        apart (its agent collects no slices)."""
        clusters = {ObjectView(cluster).name: cluster for cluster in self.ctx.clusters.items()}
        named_providers, named_consumers = exposure_clusters(mcs)
        providers = sorted(set(clusters) & set(named_providers or clusters))
        consumers = sorted(set(clusters) & set(named_consumers or clusters))

        def unready(names: list[str]) -> tuple[str, ...]:
            return tuple(n for n in names if ready_since(clusters[n]) is None)

        serving = {name: serves_endpoint_slices(clusters[name]) for name in set(providers) | set(consumers)}

        def incompatible(names: list[str], reported: frozenset[str] = frozenset()) -> tuple[str, ...]:
            return tuple(
                n
                for n in names
                if ready_since(clusters[n]) is not None
                and (serving[n] is False or (serving[n] is None and n in reported))
            )

        not_served = frozenset(
            WorkView(w).labels.get(c.LABEL_CLUSTER, "") for w in self._slice_works(mcs) if _kind_not_served(w)
        )

        skipped = Skipped(
            missing_providers=tuple(n for n in named_providers if n not in clusters),
            missing_consumers=tuple(n for n in named_consumers if n not in clusters),
            unready_providers=unready(providers),
            unready_consumers=unready(consumers),
            incompatible_providers=incompatible(providers),
            incompatible_consumers=incompatible(consumers, not_served),
        )
        return providers, consumers, skipped

    def _slice_works(self, mcs: dict[str, Any]) -> list[dict[str, Any]]:
        view = ObjectView(mcs)
        return [
            w
            for w in self.ctx.works.by_index(_INDEX_MCS, (view.namespace, view.name))
            if PROVISION_CLUSTER_ANNOTATION in WorkView(w).annotations
        ]

    def _desired(self, mcs: dict[str, Any], service: dict[str, Any]) -> _Desired:
        """The Works of ``mcs``: the Service's to every provider and consumer, then each slice
        collected from a Ready provider to every consumer but its provider. As Karmada's
        controllers skip a cluster that is not Ready, a provider that is not Ready has its slices
        left out (their Works in the consumers go), and a consumer that is not Ready gets no slice
        Work written, while those it has of slices still collected are kept as they are."""
        view = ObjectView(mcs)
        providers, consumers, skipped = self._exposure(mcs)
        out = _Desired(skipped=skipped)
        out.works = [
            service_work(cluster, service, mcs, provider=cluster in providers)
            for cluster in sorted(set(providers) | set(consumers))
        ]
        for provider in providers:
            if provider in skipped.unready_providers or provider in skipped.incompatible_providers:
                continue
            reported = self.ctx.works.get(
                c.execution_namespace(provider), work_name(view.namespace, view.name, "Service")
            )
            slices = (
                collected_slices(reported, view.name)
                if reported is not None and mcs_of_work(reported)
                else None
            )
            if not slices:
                continue
            out.collected_from.append(provider)
            for consumer in consumers:
                if consumer != provider:
                    works = [slice_work(consumer, provider, collected, mcs) for collected in slices]
                    skip = consumer in skipped.unready_consumers or consumer in skipped.incompatible_consumers
                    (out.kept if skip else out.works).extend(works)
        return out

    async def reconcile(self, key: Key) -> float | None:
        ctx = self.ctx
        if self.rt is None or self.service_rt is None:
            return None
        namespace, name = key
        obj = ctx.cached(self.rt, namespace, name)
        live = obj is not None and not is_deleting(obj)
        service = ctx.cached(self.service_rt, namespace, name)
        binding = ctx.binding_for(namespace, name, "Service")
        plan = _Desired()
        if (
            obj is not None
            and live
            and service is not None
            and binding is None
            and "CrossCluster" in items((obj.get("spec") or {}).get("types"))
        ):
            plan = self._desired(obj, service)
        desired = {_key_of(w): w for w in plan.works}
        kept = {_key_of(w) for w in plan.kept}
        try:
            for work in desired.values():
                await self._write_work(work)
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS
        for work in ctx.works.by_index(_INDEX_MCS, key):
            meta = work["metadata"]
            if _key_of(work) not in desired and _key_of(work) not in kept:
                await ctx.delete(ctx.work_rt, meta.get("namespace"), str(meta["name"]))
                log.info(
                    "work %s/%s of MultiClusterService %s/%s deleted",
                    meta.get("namespace"),
                    meta["name"],
                    *key,
                )
        if obj is None or not live:
            self._said.pop(key, None)
            return None
        bound_by = f"{namespace}/{ObjectView(binding).name}" if binding is not None else None
        if service is None or binding is not None:
            plan.skipped = self._exposure(obj)[2]
        await self._record(
            key,
            obj,
            mcs_events(
                obj,
                service_found=service is not None,
                bound_by=bound_by,
                collected_from=plan.collected_from,
                skipped=plan.skipped,
            ),
        )
        return await self._write_status(
            obj, service_found=service is not None, bound_by=bound_by, collected_from=plan.collected_from
        )

    async def _record(self, key: Key, obj: dict[str, Any], events: list[tuple[EventType, str, str]]) -> None:
        """Record the Events not recorded by the last reconcile of ``key`` (client-go's recorder
        then folds a repeat into the Event it wrote, its ``count`` grown)."""
        said = self._said.get(key, frozenset())
        for type_, reason, message in events:
            if (str(type_), reason, message) not in said:
                await record_event(self.ctx, obj, type=type_, reason=reason, message=message)
        self._said[key] = frozenset((str(t), r, m) for t, r, m in events)

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
        conditions_now = mcs_conditions(
            obj, service_found=service_found, bound_by=bound_by, collected_from=collected_from
        )
        for condition in conditions_now:
            conditions = with_condition(conditions, condition, now=self.ctx.now_text())
        if conditions == status.get("conditions"):
            return None
        written, requeue_after = await self.ctx.write_status(
            self.rt, {**obj, "status": {**status, "conditions": conditions}}
        )
        if written is None:
            return requeue_after
        log.info("MultiClusterService %s/%s: conditions written", view.namespace, view.name)
        return None
