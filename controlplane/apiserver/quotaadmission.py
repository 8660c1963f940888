"""ResourceQuota admission, as kube-apiserver's ``ResourceQuota`` plugin: a write that would take a
namespace past a quota is refused, and one that fits is charged to the quota's ``status.used``
before it is stored.

In: every create and main-resource update the object layer makes in a namespace (an
:data:`~controlplane.apiserver.admission.AdmitWrite`, in-process writers included). Out: nothing,
or a 403 Forbidden in kube's words (``configmaps "c" is forbidden: exceeded quota: q, requested:
count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2``; ``status unknown for
quota: q, resources: ...`` while the resourcequota controller has not counted yet).

Charging is a compare-and-swap of each quota's status on its resourceVersion, so two writes
racing for the last slot cannot both take it, in one hub replica or several: the loser re-reads
the quota and is checked again (three times, as kube; then the Conflict is the answer). Writes in
one namespace are checked one at a time in a replica (kube's evaluator batches per namespace).
A dry run is checked and charges nothing. A write charged and then not stored (its name taken, a
lost race) stays charged until the controller's next count, as in kube. The namespace's quotas
are read from the watch cache when one is given; a namespace the cache shows none in is looked
up in the store, that answer kept for :data:`LIVE_LOOKUP_SECONDS` (kube's live lookup).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controlplane.apis.kube import quota
from controlplane.apiserver import errors
from controlplane.apiserver.admission import WriteAttributes
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.watchcache import WatchCache

#: How many times a charge lost to a concurrent one is checked again (kube's ``checkQuotas``).
RETRIES = 3
LIVE_LOOKUP_SECONDS = 30.0
LIVE_LOOKUP_NAMESPACES = 1024
_LOCK_STRIPES = 64

class QuotaAdmission:
    """``await admission(write)`` for every write (:meth:`ObjectStore.admit_writes`)."""

    def __init__(
        self, objects: ObjectStore, *, cache: WatchCache | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._objects = objects
        self._cache = cache
        self._clock = clock
        self._rt = objects.registry.require("v1", "ResourceQuota")
        self._locks = [asyncio.Lock() for _ in range(_LOCK_STRIPES)]
        self._live: OrderedDict[str, tuple[float, list[dict[str, Any]]]] = OrderedDict()

    async def __call__(self, write: WriteAttributes) -> None:
        rt = write.resource
        namespace = write.new["metadata"].get("namespace")
        kind = (rt.group, rt.plural)
        if write.subresource or not rt.namespaced or not namespace or not quota.handles(kind, write.operation):
            return
        if not await self._quotas(namespace):
            return  # most namespaces have none: their writes do not wait for each other
        async with self._locks[zlib.crc32(namespace.encode()) % _LOCK_STRIPES]:
            quotas = await self._quotas(namespace)  # again: the write before may have charged them
            for attempt in range(RETRIES + 1):
                if not quotas:
                    return
                charged = self._check(quotas, write)
                if write.dry_run or not charged:
                    return
                lost = await self._charge(quotas, charged)
                if not lost:
                    return
                if attempt == RETRIES:
                    raise errors.conflict_modified(plural=self._rt.plural, group="", name=lost[0])
                # Only the quotas whose charge lost are checked again (the others took theirs).
                fresh = await self._live_list(namespace)
                quotas = [q for q in fresh if q["metadata"]["name"] in lost]

    def _check(self, quotas: list[dict[str, Any]], write: WriteAttributes) -> dict[int, quota.Usage]:
        rt = write.resource
        try:
            return quota.check_request(
                quotas, (rt.group, rt.plural), operation=str(write.operation), obj=write.new, old=write.old,
                now=self._clock(),
            )
        except quota.QuotaRefused as refused:
            meta = write.new["metadata"]
            name = meta.get("name") or meta.get("generateName") or "Unknown"
            raise errors.Forbidden(
                f'{errors.qualified_resource(rt.plural, rt.group)} "{name}" is forbidden: {refused.message}',
                target=errors.Target(name=name, group=rt.group, kind=rt.plural),
            ) from None

    async def _charge(self, quotas: list[dict[str, Any]], charged: dict[int, quota.Usage]) -> list[str]:
        """Write each charged quota's new ``status.used``; the names of those that lost a race."""
        lost: list[str] = []
        for index, used in charged.items():
            current = quotas[index]
            status = {**(current.get("status") or {}), "used": quota.written_list(used)}
            try:
                await self._objects.update_status(self._rt, {**current, "status": status})
            except errors.Conflict:
                lost.append(current["metadata"]["name"])
            except errors.NotFound:
                continue  # deleted since: it limits nothing any more
        return lost

    async def _quotas(self, namespace: str) -> list[dict[str, Any]]:
        if self._cache is None:
            return await self._live_list(namespace)
        listed = (await self._cache.list(self._rt, namespace=namespace, resource_version="0")).items
        if listed:
            # The cache may be a little behind this replica's own charges: the newest it has seen.
            out = []
            for cached in listed:
                try:
                    out.append(await self._objects.get_latest_seen(
                        self._rt, namespace=namespace, name=cached["metadata"]["name"]
                    ))
                except errors.NotFound:
                    continue
            return out
        now = time.monotonic()
        entry = self._live.get(namespace)
        if entry is None or entry[0] < now:
            entry = (now + LIVE_LOOKUP_SECONDS, await self._live_list(namespace))
            self._live[namespace] = entry
            while len(self._live) > LIVE_LOOKUP_NAMESPACES:
                self._live.popitem(last=False)
        self._live.move_to_end(namespace)
        return entry[1]

    async def _live_list(self, namespace: str) -> list[dict[str, Any]]:
        return (await self._objects.list(self._rt, namespace=namespace)).items
