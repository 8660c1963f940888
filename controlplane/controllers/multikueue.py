"""Kueue's MultiKueue with the hub as its dispatcher (the rules: :mod:`controlplane.admission.multikueue`).

In: the hub's Clusters, MultiKueueClusters, MultiKueueConfigs, AdmissionChecks and Workloads
(informers). Out: each MultiKueueCluster's ``Active`` condition from the Cluster of its name, each
AdmissionCheck of the ``kueue.x-k8s.io/multikueue`` controller's ``Active`` condition, and a
quota-holding Workload's ``Pending`` state of such a check set ``Ready`` once one of its config's
clusters is active, or ``Rejected`` when its job names another ``managedBy`` (so the admission
controller deactivates it, :mod:`controlplane.controllers.admissionchecks`). Two kinds of key: :data:`_ALL`, for a change of a cluster's readiness, a
MultiKueueCluster, a config or a check, looks at every cluster and check again (a hub has few) and
queues the Workloads whose MultiKueue check is ``Pending``; a Workload's own ``namespace/name``, for
a change of that Workload, looks at it alone, so a busy queue costs one Workload per event.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any, Final

from controlplane.admission import multikueue as mk
from controlplane.admission.checks import PENDING, READY, REJECTED, states_of
from controlplane.apis import kueue_jobs
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.controllers.admissiongate import owner_of
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloadevicting import set_conditions
from controlplane.controllers.workloads import is_deleting
from controlplane.objectclient import ResourceType, WatchEventType, errors

log = logging.getLogger(__name__)

API: Final = kueue.API_VERSION
_ALL: Final = "all"


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(o["metadata"]["name"]): o for o in items}


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or ''}/{meta['name']}"


def _same(current: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    return current is not None and all(current.get(k) == wanted[k] for k in ("status", "reason", "message"))


class MultiKueueController(KeyedController[str]):
    """Keeps MultiKueue's clusters, checks and Workloads' check states (see the module docstring)."""

    name = "multikueue"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.clusters_rt = ctx.watch_kind(API, "MultiKueueCluster", self._on_change)
        self.configs_rt = ctx.watch_kind(API, "MultiKueueConfig", self._on_change)
        self.checks_rt = ctx.watch_kind(API, "AdmissionCheck", self._on_change)
        self.workload_rt = ctx.watch_kind(API, "Workload", self._on_workload)
        if self.clusters_rt is not None:
            ctx.clusters.add_handler(self._on_cluster)

    async def _on_change(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        await self.loop.add(_ALL)

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is None or event is WatchEventType.DELETED or mk.condition_of(obj, "Ready") != mk.condition_of(old, "Ready"):
            await self.loop.add(_ALL)

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED and self._waits(obj):
            await self.loop.add(_key(obj))

    def _waits(self, wl: Mapping[str, Any]) -> bool:
        """Whether ``wl`` holds quota with a MultiKueue check still ``Pending``."""
        if not (wl.get("status") or {}).get("admission"):
            return False
        informer = self.ctx.informer_if_any(self.checks_rt) if self.checks_rt is not None else None
        if informer is None:
            return False
        for state in states_of(wl):
            check = informer.get(None, str(state.get("name")))
            if state.get("state") == PENDING and check is not None and mk.is_multikueue(check):
                return True
        return False

    def _items(self, rt: ResourceType | None) -> list[dict[str, Any]]:
        informer = self.ctx.informer_if_any(rt) if rt is not None else None
        return informer.items() if informer is not None else []

    async def _set_condition(self, rt: ResourceType, obj: dict[str, Any], wanted: dict[str, str]) -> bool:
        """Write ``wanted`` into ``obj``'s status unless it already says it; False on a lost race."""
        if _same(mk.condition_of(obj, wanted["type"]), wanted):
            return True
        updated = copy.deepcopy(obj)
        set_conditions(updated.setdefault("status", {}), [{**wanted, "observedGeneration": obj["metadata"].get("generation", 1)}],
                       now=self.ctx.now_text())
        try:
            await self.ctx.objects.update_status(rt, updated)
        except errors.Conflict:
            return False
        except errors.NotFound:
            pass
        return True

    async def reconcile(self, key: str) -> float | None:
        if self.clusters_rt is None or self.configs_rt is None or self.checks_rt is None:
            return None
        hub_clusters = _by_name(self.ctx.clusters.items())
        clusters = {
            name: {**obj, "status": {"conditions": [mk.cluster_active(name, hub_clusters.get(name))]}}
            for name, obj in _by_name(self._items(self.clusters_rt)).items()
        }  # each cluster as its condition is to be, which the checks read
        configs = _by_name(self._items(self.configs_rt))
        checks = {n: c for n, c in _by_name(self._items(self.checks_rt)).items() if mk.is_multikueue(c)}
        if key != _ALL:
            namespace, _, name = key.partition("/")
            informer = self.ctx.informer_if_any(self.workload_rt) if self.workload_rt is not None else None
            wl = informer.get(namespace, name) if informer is not None else None
            done = wl is None or await self._ready(wl, checks, configs, clusters)
            return None if done else CONFLICT_RETRY_SECONDS
        done = True
        for name, obj in _by_name(self._items(self.clusters_rt)).items():
            done &= await self._set_condition(self.clusters_rt, obj, clusters[name]["status"]["conditions"][0])
        for check in checks.values():
            done &= await self._set_condition(self.checks_rt, check, mk.check_active(check, configs, clusters))
        for wl in self._items(self.workload_rt):
            if self._waits(wl):
                await self.loop.add(_key(wl))
        return None if done else CONFLICT_RETRY_SECONDS

    async def _ready(self, wl: dict[str, Any], checks: Mapping[str, Any], configs: Mapping[str, Any],
                     clusters: Mapping[str, Any]) -> bool:
        """A Workload's Pending MultiKueue check states set Ready when a cluster of its config is active."""
        if self.workload_rt is None or not (wl.get("status") or {}).get("admission"):
            return True
        states = states_of(wl)
        changed = False
        unmanaged = self._unmanaged(wl)
        for state in states:
            check = checks.get(str(state.get("name")))
            if check is None or state.get("state") != PENDING:
                continue
            if unmanaged is not None:  # as Kueue: not MultiKueue's to dispatch
                state.update(state=REJECTED, message=mk.unmanaged_message(unmanaged), lastTransitionTime=self.ctx.now_text())
                changed = True
                continue
            names = mk.active_clusters(check, configs, clusters)
            if names:
                state.update(state=READY, message=mk.ready_message(names), lastTransitionTime=self.ctx.now_text())
                changed = True
        if not changed:
            return True
        updated = copy.deepcopy(wl)
        updated["status"]["admissionChecks"] = states
        try:
            await self.ctx.objects.update_status(self.workload_rt, updated)
        except errors.Conflict:
            return False
        except errors.NotFound:
            return True
        log.info("Workload %s/%s: its MultiKueue checks are %s", wl["metadata"].get("namespace"), wl["metadata"]["name"],
                 "rejected (its job is not MultiKueue's)" if unmanaged is not None else "ready")
        return True

    def _unmanaged(self, wl: Mapping[str, Any]) -> str | None:
        """Why the Workload's job is not MultiKueue's to dispatch (its ``managedBy``), None when it is
        (or is a kind without the field, or the hub does not hold it; a Workload being deleted is
        not asked, as in Kueue)."""
        owner = owner_of(wl)
        if owner is None or is_deleting(wl):
            return None
        rt = self.ctx.registry.for_kind(owner.api_version, owner.kind)
        job = self.ctx.cached(rt, owner.namespace, owner.name) if rt is not None else None
        if job is None:
            return None
        return kueue_jobs.multikueue_unmanaged({**job, "apiVersion": owner.api_version, "kind": owner.kind})
