"""The resourcequota controller, as kube-controller-manager's: every ResourceQuota's ``status.hard``
is its ``spec.hard`` and its ``status.used`` what the namespace holds of each hard resource the
hub can count (:mod:`controlplane.apis.kube.quota`), so ``kubectl describe quota`` shows it and
the API's quota admission has the usage it charges writes against.

A quota is recounted when it appears or its ``spec.hard`` changes, when an object of a kind it
counts is deleted in its namespace (a Service, PersistentVolumeClaim or Pod also when it
changes: its usage may), and every :data:`RESYNC_SECONDS` as kube's full resync (which also
returns what a write charged and then not stored took). The kinds are watched as quotas name
them, with informers that cache nothing. Status is written only when it changes, as a
compare-and-swap on the quota's resourceVersion (admission charges race it; the loser re-reads).
Resources no kind here counts keep the used value they had.

A count reads the namespace's objects of each kind as kube's evaluators read their listers: at
resourceVersion "0", which the hub's watch cache answers from memory when the controller's client
lists from it (the leader's, see ``controlplane.hubleading``); a client that reads the store is answered a
page of at most ``page_size`` objects at a time, each page folded into the sum before the next is
read, so no read is unbounded and no namespace is held in memory whole.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controlplane.apis.kube import quota
from controlplane.apis.kube.field import mapping
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, ResourceType, WatchEventType, errors
from controlplane.objectclient.paging import DEFAULT_PAGE_SIZE, list_pages

log = logging.getLogger(__name__)

#: kube's ``--resource-quota-sync-period`` default.
RESYNC_SECONDS = 300.0
_BY_NAMESPACE = "namespace"
#: Kinds whose update can change what they use (kube's replenishment on update).
_USAGE_ON_UPDATE = (quota.PODS, quota.SERVICES, quota.CLAIMS)

QuotaKey = tuple[str, str]


class ResourceQuotaController:
    def __init__(
        self, objects: ObjectClient, *, resync_seconds: float = RESYNC_SECONDS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC), page_size: int = DEFAULT_PAGE_SIZE,
        workqueue_metrics: WorkqueueMetrics | None = None,
    ) -> None:
        self._objects = objects
        self._resync = resync_seconds
        self._page_size = page_size
        self._clock = clock
        self._rt = objects.registry.require("v1", "ResourceQuota")
        self.quotas = Informer(objects, self._rt)
        self.quotas.add_index(_BY_NAMESPACE, lambda q: (str(q["metadata"].get("namespace") or ""),))
        self.quotas.add_handler(self._on_quota)
        self.loop: ReconcileLoop[QuotaKey] = ReconcileLoop(
            "resourcequota", self.reconcile, workers=2, metrics=workqueue_metrics
        )
        self._watched: dict[quota.Kind, Informer] = {}
        self._group: asyncio.TaskGroup | None = None

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            self._group = group
            group.create_task(self.quotas.run())
            await self.quotas.synced.wait()
            group.create_task(self.loop.run())

    async def _on_quota(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        # Status writes (ours, the admission's charges) are not recounts: kube looks at spec.hard only.
        if event is WatchEventType.DELETED or (
            event is WatchEventType.MODIFIED and old is not None
            and mapping(old.get("spec")).get("hard") == mapping(obj.get("spec")).get("hard")
        ):
            return
        meta = obj["metadata"]
        await self.loop.add((str(meta.get("namespace") or ""), str(meta["name"])))

    async def _on_counted(self, kind: quota.Kind, event: WatchEventType, obj: dict[str, Any]) -> None:
        if event is WatchEventType.DELETED or (event is WatchEventType.MODIFIED and kind in _USAGE_ON_UPDATE):
            await self._recount_namespace(str(obj["metadata"].get("namespace") or ""), kind)

    async def _recount_namespace(self, namespace: str, kind: quota.Kind | None) -> None:
        for q in self.quotas.by_index(_BY_NAMESPACE, namespace):
            if kind is None or quota.matching_resources(kind, mapping(mapping(q.get("spec")).get("hard"))):
                await self.loop.add((namespace, str(q["metadata"]["name"])))

    async def _recount_all(self) -> None:
        for q in self.quotas.items():
            await self.loop.add((str(q["metadata"].get("namespace") or ""), str(q["metadata"]["name"])))

    def _type_of(self, kind: quota.Kind) -> ResourceType | None:
        group, plural = kind
        for rt in self._objects.registry:
            if rt.group == group and rt.plural == plural and rt.namespaced:
                return rt
        return None

    def _watch(self, kind: quota.Kind, rt: ResourceType) -> None:
        """Follow deletes (and changes) of ``kind`` from now on, caching none of its objects."""
        if kind in self._watched or self._group is None:
            return
        informer = Informer(self._objects, rt, keep=lambda _obj: False)

        async def on_event(event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
            await self._on_counted(kind, event, obj)

        informer.add_handler(on_event)
        informer.add_relist_handler(self._recount_all)  # deletes missed while the watch was down
        self._watched[kind] = informer
        self._group.create_task(informer.run(), name=f"resourcequota-{rt.plural}")

    async def reconcile(self, key: QuotaKey) -> float | None:
        namespace, name = key
        current = self.quotas.get(namespace, name)
        if current is None:
            return None
        spec_hard = quota.read_list(mapping(current.get("spec")).get("hard"))
        status = mapping(current.get("status"))
        old_used = quota.read_list(status.get("used"))
        used = {k: v for k, v in old_used.items() if k in spec_hard}
        requirements = quota.scope_requirements(current)
        now = self._clock()
        for kind in sorted({k for k in map(quota.counted_kind, spec_hard) if k is not None} - quota.IGNORED):
            rt = self._type_of(kind)
            if rt is None:
                continue
            self._watch(kind, rt)
            used.update(await self._usage(kind, rt, namespace, resources=list(spec_hard), requirements=requirements, now=now))
        unchanged = (
            (bool(status) or not spec_hard)  # kube writes a first status however empty
            and quota.equal(quota.read_list(status.get("hard")), spec_hard) and quota.equal(old_used, used)
        )
        if unchanged:
            return self._resync
        written = {**current, "status": {"hard": quota.written_list(spec_hard), "used": quota.written_list(used)}}
        try:
            await self._objects.update_status(self._rt, written)
        except errors.NotFound:
            return None
        log.debug("resource quota %s/%s: used %s", namespace, name, written["status"]["used"])
        return self._resync

    async def _usage(
        self, kind: quota.Kind, rt: ResourceType, namespace: str, *, resources: list[str],
        requirements: list[quota.ScopeRequirement], now: datetime,
    ) -> quota.Usage:
        """What ``namespace``'s objects of ``kind`` use (kube's ``ListResourceUsingListerFunc`` and
        ``CalculateUsageStats``): from the watch cache, or the store a page at a time."""
        total: quota.Usage = {}
        async for page in list_pages(self._objects, rt, namespace=namespace, limit=self._page_size, resource_version="0"):
            stats = quota.usage_stats(kind, page.items, resources=resources, requirements=requirements, now=now)
            total = quota.add(total, stats)
        return total
