"""Karmada's FederatedResourceQuota sync and status controllers, as one loop per quota.

In: ``policy.karmada.io/v1alpha1`` FederatedResourceQuotas, the Clusters, and the Works this
controller wrote (labelled as Karmada labels them: ``federatedresourcequota.karmada.io/namespace``
and ``/name``). Out:

* **sync** (Karmada 1.14): for each cluster ``spec.staticAssignments`` lists and the hub has, a Work
  in ``gpufed-es-<cluster>`` named ``<namespace>-<name>-resourcequota`` carrying a ``v1``
  ResourceQuota named as the FederatedResourceQuota, in its namespace, with the cluster's
  ``hard`` (:func:`policies.federated_quota.member_quotas`). A changed assignment rewrites the
  Work; a cluster no longer listed (or gone) loses it, and so does every cluster once the quota is
  deleted. A cluster that joins later gets its Work then. The agent creates the namespace in the
  member before the quota, as for any Work, and the member's own quota admission enforces it.
* **status**: from each applied Work's manifest status (the member ResourceQuota's ``status``, as
  the agent reports it), ``status.aggregatedStatus`` by cluster, ``status.overall`` (=
  ``spec.overall``) and ``status.overallUsed`` (the clusters' ``used`` summed), written only when
  it changed (:func:`policies.federated_quota.quota_status`). With ``--federated-quota-enforcement``
  (Karmada's ``FederatedQuotaEnforcement``), ``status.overallUsed`` is what the namespace's
  ResourceBindings take instead (their per-replica request times their placed replicas, and the
devices of the DRA claims their pods share once per cluster holding a replica), recounted
  when a binding's placement or request changes or it goes, as Karmada's enforcement controller
  does; the scheduler holds back decisions past ``overall``
  (:mod:`controlplane.scheduler.controller.quotas`).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from typing import Any, Final

from controlplane.apis import constants as c
from controlplane.apis.views import BindingView, ObjectView, WorkView
from controlplane.apis.work_v1alpha1 import API_VERSION as WORK_API_VERSION
from controlplane.apis.work_v1alpha1 import WORK_KIND, ConditionType
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, INDEX_NAMESPACE, ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting
from controlplane.controllers.works import cluster_of_namespace, work_name
from controlplane.objectclient import WatchEventType, errors
from policies.federated_quota import (
    API_VERSION,
    KIND,
    binding_usage,
    member_quotas,
    namespace_usage,
    quota_status,
)

log = logging.getLogger(__name__)

#: Karmada's labels on a quota's Works (``util.FederatedResourceQuotaNamespaceLabel``, ``...NameLabel``).
LABEL_QUOTA_NAMESPACE: Final = "federatedresourcequota.karmada.io/namespace"
LABEL_QUOTA_NAME: Final = "federatedresourcequota.karmada.io/name"
_INDEX_QUOTA: Final = "federated-resource-quota"

QuotaKey = tuple[str, str]


def quota_of_work(work: dict[str, Any]) -> QuotaKey | None:
    """(namespace, name) of the FederatedResourceQuota a Work carries the ResourceQuota of."""
    labels = WorkView(work).labels
    namespace, name = labels.get(LABEL_QUOTA_NAMESPACE), labels.get(LABEL_QUOTA_NAME)
    return (str(namespace), str(name)) if namespace and name else None


def _indexed(work: dict[str, Any]) -> Iterable[Hashable]:
    key = quota_of_work(work)
    return (key,) if key is not None else ()


def quota_work(cluster: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """The Work that carries ``manifest`` (a member ResourceQuota) to ``cluster``."""
    namespace, name = str(manifest["metadata"]["namespace"]), str(manifest["metadata"]["name"])
    labels = {
        LABEL_QUOTA_NAMESPACE: namespace, LABEL_QUOTA_NAME: name, c.LABEL_CLUSTER: cluster,
        c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE,
    }
    metadata = {"name": work_name(namespace, name, "ResourceQuota"), "namespace": c.execution_namespace(cluster),
                "labels": labels}
    return {"apiVersion": WORK_API_VERSION, "kind": WORK_KIND, "metadata": metadata,
            "spec": {"workload": {"manifests": [manifest]}}}


def reported_status(work: dict[str, Any]) -> dict[str, Any] | None:
    """The member ResourceQuota's status a Work reports, once the Work is applied (Karmada skips
    Works not applied and Works without a manifest status)."""
    view = WorkView(work)
    applied = any(
        cond.get("type") == ConditionType.APPLIED and cond.get("status") == "True" for cond in view.conditions
    )
    statuses = view.manifest_statuses
    if not applied or not statuses:
        return None
    status = statuses[0].get("status")
    return status if isinstance(status, dict) else {}


class FederatedQuotaController(KeyedController[QuotaKey]):
    """Reconciles FederatedResourceQuotas (keys: ``(namespace, name)``) into Works and a status."""

    name = "federated-resource-quotas"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.rt = ctx.watch_kind(API_VERSION, KIND, self._on_quota)
        ctx.works.add_index(_INDEX_QUOTA, _indexed)
        ctx.works.add_handler(self._on_work)
        ctx.clusters.add_handler(self._on_cluster)
        self.enforcing = ctx.settings.federated_quota_enforcement
        if self.enforcing:
            ctx.bindings.add_handler(self._on_binding)

    async def _on_quota(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = ObjectView(obj)
        await self.loop.add((view.namespace, view.name))

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = quota_of_work(obj)
        if key is not None and (event is not WatchEventType.MODIFIED or old is None or old.get("status") != obj.get("status")
                                or old.get("spec") != obj.get("spec")):
            await self.loop.add(key)

    async def _requeue_quotas(self, namespace: str | None) -> None:
        """Look again at every FederatedResourceQuota (of ``namespace``, when given)."""
        informer = self.ctx.informer_if_any(self.rt) if self.rt is not None else None
        for quota in informer.items() if informer is not None else ():
            view = ObjectView(quota)
            if namespace is None or view.namespace == namespace:
                await self.loop.add((view.namespace, view.name))

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.MODIFIED:  # a cluster joins (its Works are due) or leaves
            await self._requeue_quotas(None)

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = BindingView(obj)
        if old is not None and event is WatchEventType.MODIFIED and binding_usage(BindingView(old).spec) == binding_usage(view.spec):
            return
        await self._requeue_quotas(view.namespace)

    async def reconcile(self, key: QuotaKey) -> float | None:
        ctx = self.ctx
        if self.rt is None:
            return None
        namespace, name = key
        quota = ctx.cached(self.rt, namespace, name)
        works = list(ctx.works.by_index(_INDEX_QUOTA, key))
        desired: dict[str, dict[str, Any]] = {}
        if quota is not None and not is_deleting(quota):
            desired = {
                cluster: quota_work(cluster, manifest)
                for cluster, manifest in member_quotas(quota).items()
                if ctx.clusters.get(None, cluster) is not None
            }
        try:
            for cluster, work in desired.items():
                await self._write_work(cluster, work)
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS
        for work in works:
            meta = work["metadata"]
            if cluster_of_namespace(str(meta.get("namespace") or "")) not in desired:
                await ctx.delete(ctx.work_rt, meta.get("namespace"), str(meta["name"]))
                log.info("work %s/%s of FederatedResourceQuota %s/%s deleted", meta.get("namespace"), meta["name"], *key)
        if quota is None or is_deleting(quota):
            return None
        return await self._write_status(quota, works, set(desired))

    async def _write_work(self, cluster: str, desired: dict[str, Any]) -> None:
        written = await self.ctx.write_work(desired)
        if written is not None:
            meta = desired["metadata"]
            log.info("work %s/%s of FederatedResourceQuota %s (cluster %s)", meta["namespace"], meta["name"], written, cluster)

    async def _write_status(self, quota: dict[str, Any], works: list[dict[str, Any]], clusters: set[str]) -> float | None:
        reported: dict[str, dict[str, Any]] = {}
        for work in works:
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
            status = reported_status(work)
            if cluster in clusters and status is not None:
                reported[cluster] = status
        bindings_use = None
        if self.enforcing:
            namespace = ObjectView(quota).namespace
            bindings_use = namespace_usage(BindingView(b).spec for b in self.ctx.bindings.by_index(INDEX_NAMESPACE, namespace))
        status = quota_status(quota, reported, bindings_use=bindings_use)
        if status == ObjectView(quota).status:
            return None
        assert self.rt is not None
        return (await self.ctx.write_status(self.rt, {**quota, "status": status})).requeue_after
