"""The member agent's Works: apply what the hub's Works hold in the member, and write their status.

The Work worker applies changed Works, removes deleted ones, applies again at once a Work one of
whose objects was deleted or edited in the member (:mod:`member_agent.drift`, with a back-off per
Work), reapplies everything every ``resync_interval`` (a safety net for drift) and recomputes every Work's status every
``status_resync_interval``; both intervals vary by a tenth either way (:class:`Resync`), so agents
started together do not resync together. The resync takes :data:`RESYNC_BATCH` Works per
pass, after the Works that events made dirty: a new Work never waits behind a pass over thousands. Work status follows the member: informers on
the kinds the Works applied (label-selected by the ownership labels the agent sets) and the pod
informer mark the owning Work, whose status is recomputed ``status_debounce`` seconds later and
written only when it changed (held up to ``status_hold`` seconds while replicas start:
:mod:`member_agent.holding`). The watch on a kind stops once no Work holds it any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import random
from collections.abc import Mapping
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.timestamps import format_time
from member_agent.agentbase import MAX_BACKOFF, WORK_API, AgentBase, Kind, KindWatch
from member_agent.applying import WorkApplier, status_changed, status_fields
from member_agent.config import AgentConfig
from member_agent.drift import drifted
from member_agent.informing import Informer
from member_agent.kubeapi import ApiError, Conflict, NotFound
from member_agent.ledger import Ledger
from member_agent.manifests import Identifier, desired_manifests, preserves_on_deletion, work_key
from member_agent.reachability import failure_level
from member_agent.unserved import carries_crd

logger = logging.getLogger(__name__)

#: Works the periodic resync applies again per pass of the Work worker.
RESYNC_BATCH = 8
#: How much a resync interval varies either way (a share of it).
RESYNC_JITTER = 0.1


def resync_batch(due: set[str], size: int = RESYNC_BATCH) -> list[str]:
    """Take up to ``size`` of the Works the resync has yet to apply (from ``due``)."""
    taken = list(itertools.islice(due, size))
    due.difference_update(taken)
    return taken


class Resync:
    """A pass due every ``interval`` seconds, each time a tenth more or less at random (``rng``)."""

    __slots__ = ("_interval", "_rng", "at")

    def __init__(self, interval: float, *, now: float, rng: random.Random) -> None:
        self._interval = interval
        self._rng = rng
        #: When the pass is next due (the clock of ``now``).
        self.at = now + self._delay()

    def _delay(self) -> float:
        return self._interval * self._rng.uniform(1 - RESYNC_JITTER, 1 + RESYNC_JITTER)

    def due(self, now: float) -> bool:
        """Whether the pass is due at ``now``; when it is, the next one is drawn from ``now``."""
        if now < self.at:
            return False
        self.at = now + self._delay()
        return True


def work_resyncs(config: AgentConfig, *, now: float, rng: random.Random | None = None) -> tuple[Resync, Resync]:
    """The Work worker's periodic passes from ``now``: applying every Work again, and recomputing
    every Work's status."""
    rng = rng or random.Random()
    return (Resync(config.resync_interval, now=now, rng=rng),
            Resync(config.status_resync_interval, now=now, rng=rng))


class WorkSyncing(AgentBase):
    """The Work informer's handlers, the watches on the kinds Works hold, and the Work worker."""

    def _on_work_change(self, key: str) -> None:
        work = self.works.objects.get(key) if self.works is not None else None
        if work is not None:
            self._preserve_on_deletion[key] = preserves_on_deletion(work)
        if self.endpoint_slices is not None:
            self.endpoint_slices.work_changed(key, work, self._group)
        self._index_work(key)
        self._dirty_works.add(key)
        self._work_due.set()

    def _on_customization_change(self, key: str) -> None:
        """Put the customizations in force; every Work's status is due (its interpretation may
        have changed), and the Works carrying a kind whose retention changed are applied again
        (so the member objects are as the retention now in force keeps them)."""
        if self.customizations is None:
            return
        retention_changed = self.interpreters.update(self.customizations.objects.values())
        if self.works is not None:
            self._status_dirty.update(self.works.objects)
            for work in works_carrying(self.works.objects, retention_changed):
                self._applied_generation.pop(work, None)
                self._dirty_works.add(work)
            self._work_due.set()

    def _index_work(self, key: str) -> None:
        """Keep :attr:`_work_objects` in step with the Work's manifests."""
        for ref in self._work_index.pop(key, ()):
            if self._work_objects.get(ref) == key:
                del self._work_objects[ref]
        work = self.works.objects.get(key) if self.works is not None else None
        if work is None:
            return
        refs = [
            (ident.namespace or "default", ident.kind, ident.name) for ident, _ in desired_manifests(work)
        ]
        self._work_index[key] = refs
        for ref in refs:
            self._work_objects[ref] = key

    def _mark_status(self, member_key: str, work: str | None) -> None:
        """A member object changed: its Work's status is due (the last known Work on deletion)."""
        if work is None:
            work = self._owner_of.pop(member_key, None)
        else:
            self._owner_of[member_key] = work
        if work is not None:
            self._status_dirty.add(work)
            self._work_due.set()

    def _collected_due(self, work: str) -> None:
        """A slice of a Service whose slices ``work`` collects changed: its status is due."""
        self._status_dirty.add(work)
        self._work_due.set()

    def _reclaims_touched(self, touched: set[tuple[str, str, str]]) -> None:
        for ref in touched:
            work = self._work_objects.get(ref)
            if work is not None:
                self._status_dirty.add(work)
                self._work_due.set()

    def _on_workload_change(self, informer: Informer, key: str, group: str, kind: str) -> None:
        live = informer.objects.get(key)
        member_key = f"{informer.name}:{key}"
        work = None
        if live is not None:
            labels = (live.get("metadata") or {}).get("labels") or {}
            work = f"{labels.get(c.LABEL_WORK_NAMESPACE)}/{labels.get(c.LABEL_WORK_NAME)}"
        owner = work if work is not None else self._owner_of.get(member_key)
        self._mark_status(member_key, work)
        namespace, _, name = key.rpartition("/")
        recorded = self.applied_versions.get((group, kind, namespace, name))
        if owner is not None and recorded is not None and (live is None or drifted(recorded, live)):
            self._drifted(owner)

    def _drifted(self, key: str) -> None:
        """An object ``key`` applied was deleted or changed in the member: apply it again, at
        once or after the Work's drift back-off (:mod:`member_agent.drift`)."""
        if key in self._drift_timers:
            return  # a repair is due already
        loop = asyncio.get_running_loop()
        delay = self._drift_backoff.delay(key, now=loop.time())
        logger.info("work %s: an object it applied changed in the member; applying it again in %.0f s", key, delay)
        self._drift_timers[key] = loop.call_later(delay, self._repair_drift, key)

    def _repair_drift(self, key: str) -> None:
        self._drift_timers.pop(key, None)
        self._applied_generation.pop(key, None)
        self._dirty_works.add(key)
        self._work_due.set()

    async def _watch_kinds(self, work: Mapping[str, Any]) -> None:
        """Start an informer on each kind the Work holds that none watches yet, selecting the
        objects this agent's Works own (by the ownership labels every apply sets)."""
        assert self.member is not None
        namespace = (work.get("metadata") or {}).get("namespace")
        selector = f"{c.LABEL_WORK_NAMESPACE}={namespace}"
        for ident, _ in desired_manifests(work):
            kind = (ident.api_version, ident.kind)
            if kind in self._watched_kinds or self._group is None:
                continue
            try:
                info = await self.member.resource_info(ident.api_version, ident.kind)
            except ApiError as exc:
                logger.info("not watching %s %s: %s", ident.api_version, ident.kind, exc.message)
                continue
            prefix = (
                f"/api/{info.api_version}" if "/" not in info.api_version else f"/apis/{info.api_version}"
            )
            informer = Informer(
                self.member,
                f"{prefix}/{info.plural}",
                name=f"{info.plural}.{info.api_version}",
                transform=functools.partial(status_fields, api_version=info.api_version, kind=info.kind),
                query={"labelSelector": selector},
            )
            informer.on_change = lambda key, informer=informer, ident=ident: self._on_workload_change(
                informer, key, ident.group, ident.kind
            )
            task = self._group.create_task(informer.run(), name=f"watch-{informer.name}")
            self._watched_kinds[kind] = KindWatch(informer=informer, task=task)
            logger.info("watching %s %s owned by works in %s", ident.api_version, ident.kind, namespace)

    def _hold_kinds(self, key: str, work: Mapping[str, Any] | None) -> None:
        """Record the kinds the Work holds now (none once it is gone; its objects are pruned by
        then) and stop watching the kinds no Work holds any more."""
        before = self._kinds_of_work.pop(key, frozenset())
        now: frozenset[Kind] = frozenset()
        if work is not None:
            now = frozenset((ident.api_version, ident.kind) for ident, _ in desired_manifests(work))
            self._kinds_of_work[key] = now
        for kind in before - now:
            holders = self._holders.get(kind, set())
            holders.discard(key)
            if not holders:
                self._holders.pop(kind, None)
        for kind in now - before:
            self._holders.setdefault(kind, set()).add(key)
        # Every watch without a holder, not only this Work's: a Work that failed to apply after
        # its watches started, and then went, leaves watches nobody holds.
        for kind in [kind for kind in self._watched_kinds if kind not in self._holders]:
            watch = self._watched_kinds.pop(kind)
            watch.task.cancel()
            # Forget which Work the kind's objects belonged to: no event of theirs will come.
            prefix = f"{watch.informer.name}:"
            for member_key in [k for k in self._owner_of if k.startswith(prefix)]:
                del self._owner_of[member_key]
            logger.info("stopped watching %s %s: no work holds it any more", *kind)

    @property
    def held_works(self) -> frozenset[str]:
        """The Works whose status is held back right now (:mod:`member_agent.holding`)."""
        return frozenset(self._hold_timers)

    @property
    def watched_kinds(self) -> frozenset[Kind]:
        """The member kinds watched right now: those some Work holds."""
        return frozenset(self._watched_kinds)

    def cached_object(self, ident: Identifier) -> Mapping[str, Any] | None:
        """The member object ``ident`` names as its kind's synced watch last saw it; None when no
        watch covers it (see :data:`member_agent.applying.CachedObject`)."""
        watch = self._watched_kinds.get((ident.api_version, ident.kind))
        if watch is None or not watch.informer.synced.is_set():
            return None
        key = f"{ident.namespace}/{ident.name}" if ident.namespace else ident.name
        return watch.informer.objects.get(key)

    async def _work_loop(self) -> None:
        assert self.works is not None and self.member is not None and self.hub is not None
        cfg = self.config
        applier = WorkApplier(
            member=self.member, ledger=Ledger(cfg.state_dir), pending_pods=self.pending_pods, cached=self.cached_object,
            interpreters=self.interpreters, versions=self.applied_versions,
        )
        self.claims = applier.claims
        await self.works.synced.wait()
        if self.customizations is not None:
            # Retention must be in force before the first update; a hub that serves no
            # customizations (an older one) delays the start by one request timeout only.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(cfg.request_timeout):
                    await self.customizations.synced.wait()
        for key in list(self.works.objects):
            self._index_work(key)
        loop = asyncio.get_running_loop()
        # Works deleted while the agent was not running (due now, even when no Work is left to
        # announce itself).
        self._dirty_works.update(k for k in applier.ledger if k not in self.works.objects)
        if self._dirty_works:
            self._work_due.set()
        resync, status_resync = work_resyncs(cfg, now=loop.time())
        failures = 0
        while True:
            timeout = max(0.0, min(status_resync.at, resync.at) - loop.time())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._work_due.wait()
            if self._status_dirty and not self._dirty_works and not self._hold_over:
                await asyncio.sleep(cfg.status_debounce)  # let a burst of member events settle
            self._work_due.clear()
            self._hold_over = False
            now = loop.time()
            if resync.due(now):
                self._resync_due.update(self.works.objects)
            if status_resync.due(now):
                self._status_dirty.update(self.works.objects)
            resynced = resync_batch(self._resync_due)
            for key in resynced:
                self._applied_generation.pop(key, None)  # applied again, whatever its generation
            keys = sorted(self._dirty_works) + [key for key in resynced if key not in self._dirty_works]
            self._dirty_works.clear()
            if self._resync_due:
                self._work_due.set()  # the next batch once this pass is done
            status_keys = set(self._status_dirty)
            self._status_dirty.clear()
            try:
                for key in keys:
                    if await self._reconcile_work(applier, key):
                        status_keys.discard(key)
                for key in sorted(status_keys):
                    await self._refresh_work_status(applier, key)
                failures = 0
            except ApiError as exc:
                failures += 1
                logger.log(failure_level(exc), "applying works failed: %s; retrying", exc)
                self._dirty_works.update(keys)
                self._status_dirty.update(status_keys)
                await asyncio.sleep(min(MAX_BACKOFF, 0.2 * 2**failures))
                self._work_due.set()

    async def _refresh_work_status(self, applier: WorkApplier, key: str) -> None:
        assert self.works is not None
        work = self.works.objects.get(key)
        if work is None or _suspended(work) or (work.get("metadata") or {}).get("deletionTimestamp"):
            return
        self.status_passes += 1
        await self._write_work_status(work, await applier.refresh_status(work, now=format_time(self.clock())))

    async def _reconcile_work(self, applier: WorkApplier, key: str) -> bool:
        """Apply (or remove) the Work; True when its status was computed and written."""
        assert self.works is not None
        work = self.works.objects.get(key)
        if work is None or (work.get("metadata") or {}).get("deletionTimestamp"):
            self._applied_generation.pop(key, None)
            if key in applier.ledger:
                # As last seen; after a restart, as the ledger recorded it when last applied.
                await applier.remove_work(key, preserve=self._preserve_on_deletion.get(key))
            self._preserve_on_deletion.pop(key, None)
            self._hold.forget(key)
            self._end_hold(key)
            self._hold_kinds(key, None)
            self._unserved.forget(key)
            self._drift_backoff.forget(key)
            timer = self._drift_timers.pop(key, None)
            if timer is not None:
                timer.cancel()
            return False
        if _suspended(work):
            # Not applied, but the flag it carries now decides its objects' fate on deletion,
            # after a restart too.
            applier.record_preserve(key, preserves_on_deletion(work))
            return False
        generation = int((work.get("metadata") or {}).get("generation") or 0)
        if self._applied_generation.get(key) == generation:
            return False  # a status write of ours, or a no-op update
        await self._watch_kinds(work)
        status = await applier.reconcile(work, now=format_time(self.clock()))
        self._hold_kinds(key, work)
        self._applied_generation[key] = generation
        await self._write_work_status(work, status)
        self._retry_unserved(key, work, status)
        return True

    def _retry_unserved(self, key: str, work: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """Apply ``key`` again after a back-off while a kind it needs is not served; apply the
        Works waiting so at once when ``work`` brought a CRD."""
        loop = asyncio.get_running_loop()
        timer = self._unserved_timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        delay = self._unserved.after(key, status)
        if delay is not None:
            self._unserved_timers[key] = loop.call_later(delay, self._apply_again, key)
        elif carries_crd(work):
            for waiting in self._unserved.waiting():
                self._apply_again(waiting)
        if carries_crd(work):
            self._api_enablements_due.set()  # the member may serve a new kind: list its APIs again

    def _apply_again(self, key: str) -> None:
        self._unserved_timers.pop(key, None)
        self._applied_generation.pop(key, None)
        self._dirty_works.add(key)
        self._work_due.set()

    def _end_hold(self, key: str) -> None:
        timer = self._hold_timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _hold_ended(self, key: str) -> None:
        """The hold on ``key`` ran out: its status is written as it is now, without a debounce."""
        self._hold_timers.pop(key, None)
        self._hold.expire(key)
        self._status_dirty.add(key)
        self._hold_over = True
        self._work_due.set()

    async def _write_work_status(self, work: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        assert self.hub is not None
        status = self.reclaims.annotate(status, now=self.clock())
        if self.endpoint_slices is not None:
            status = self.endpoint_slices.annotate(work, status)
        loop, held_key = asyncio.get_running_loop(), work_key(work)
        status = self._hold.carry_transitions(held_key, status)
        held = self._hold.delay(held_key, status, now=loop.time())
        if held is None:
            self._end_hold(held_key)
        if not status_changed(work.get("status"), status):
            if held is None:
                self._hold.written(held_key)  # stored as it is, times included
            return
        if held is not None:
            if held_key not in self._hold_timers:
                self._hold_timers[held_key] = loop.call_later(held, self._hold_ended, held_key)
            return
        meta = work.get("metadata") or {}
        path = f"{WORK_API}/namespaces/{meta.get('namespace')}/works/{meta.get('name')}/status"
        current = dict(work)
        for _ in range(3):
            try:
                updated = await self.hub.replace(path, {**current, "status": dict(status)})
                self._hold.written(held_key)
                key = work_key(updated)
                if self.works is not None and key in self.works.objects:
                    # Keep the cache current so the next comparison sees what was written; a spec
                    # change picked up by a conflict re-read must still be applied.
                    self.works.objects[key] = updated
                    generation = int((updated.get("metadata") or {}).get("generation") or 0)
                    if self._applied_generation.get(key) != generation:
                        self._on_work_change(key)
                return
            except NotFound:
                self._hold.written(held_key)
                return  # the Work was deleted meanwhile; its DELETED event follows
            except Conflict:
                current = await self.hub.get(path.removesuffix("/status"))
        logger.warning("work %s kept changing; its status will be written on the next pass", work_key(work))



def _suspended(work: Mapping[str, Any]) -> bool:
    return bool((work.get("spec") or {}).get("suspendDispatching"))


def works_carrying(works: Mapping[str, Mapping[str, Any]], kinds: set[tuple[str, str]]) -> list[str]:
    """The keys of the Works with a manifest of one of ``kinds`` (API group, kind)."""
    if not kinds:
        return []
    return [
        key
        for key, work in works.items()
        if any((ident.group, ident.kind) in kinds for ident, _ in desired_manifests(work))
    ]
