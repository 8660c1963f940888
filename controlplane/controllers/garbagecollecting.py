"""The hub's garbage collector: dependents follow their owners, as kube-controller-manager's does.

An object names its owners in ``metadata.ownerReferences`` (apiVersion, kind, name, uid;
``blockOwnerDeletion``). kube's garbage collector, which Karmada's control plane runs and
operators on the hub (``kopf.adopt``, ``SetControllerReference``) count on, makes three
promises, kept here for every kind the hub serves, custom resources included:

* **Background**: an object whose owners are all gone is deleted. An owner reference is
  dangling when no object of that kind and name exists where the dependent would find it (in
  the dependent's namespace, or cluster-wide for a cluster-scoped kind) or the one there has
  another uid (a live read, as kube checks a "virtual" node). A dependent that keeps one
  owner loses the dangling references instead. It is deleted with the propagation its own
  finalizers ask for (``orphan``, ``foregroundDeletion``), else Background.
* **Foreground**: an owner marked with the finalizer ``foregroundDeletion`` (``kubectl delete
  --cascade=foreground``) has its dependents deleted; those with ``blockOwnerDeletion`` hold it
  until they are gone, then the finalizer is removed and the API server deletes the owner. A
  dependent with dependents of its own is deleted in the foreground too; if one of those waits in
  the foreground as well (a cycle), its references stop blocking first, as kube breaks the cycle.
* **Orphan**: an owner marked with the finalizer ``orphan`` (``--cascade=orphan``, the default
  of a batch/v1 Job deleted through the API) is taken out of every dependent's
  ownerReferences, then the finalizer is removed.

A cluster-scoped object cannot be owned by a namespaced one: such a reference gets a Warning
Event ``OwnerRefInvalidNamespace`` on the dependent, which is left alone, as kube does.

Cost: kube keeps a graph of every object. This collector watches every kind: the kinds the
other controllers watch through their informers (handlers and an index added), the others
through informers of its own (from the watch cache, which decodes each event once for all its
watchers) that cache only the objects carrying ownerReferences. Objects are indexed by their
owners' uids; an event costs a dictionary look-up or two (has it owners? is its uid someone's
owner? is it deleting with a garbage-collection finalizer?). Owners are read, live, only when a dependent is checked or an
owner is being deleted, and an owner reference found dangling is remembered (:class:`AbsentOwners`,
kube's ``absentOwnerCache``), so the many dependents of one deleted owner cost one read. A new dependent whose owners are all cached, alive and of the referenced uid is not
checked (kube's graph does not look up an observed owner): its owner's deletion event checks it.
Level-based and restart-safe: a new leader lists every kind, checks
every other dependent once and finishes every deletion its predecessor left marked; keys are
reconciled only after every kind is listed (an owner must not be released on an incomplete
list of its dependents).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.kube.garbagecollection import FINALIZER_FOREGROUND, FINALIZER_ORPHAN, GC_FINALIZERS
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import KeyedController
from controlplane.objectclient import DynamicRegistry, Preconditions, ResourceType, WatchEventType, errors

log = logging.getLogger(__name__)

INDEX_OWNER_UID = "owner-uid"
#: Seconds before a dependent whose owner's kind is not served is looked at again.
UNKNOWN_KIND_RETRY_SECONDS = 60.0


#: Owner references remembered as dangling, as many as kube's garbage collector remembers.
ABSENT_OWNER_CACHE_SIZE = 500


@dataclass(frozen=True, slots=True)
class OwnerCoordinates:
    """An owner reference where the collector looks it up: the owner's namespace is the
    dependent's for a namespaced kind, empty for a cluster-scoped one."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


class AbsentOwners:
    """kube's ``absentOwnerCache``: the owner references a live read found dangling (no object
    of that name, or one with another uid), the least recently used dropped past ``size``.

    Keyed by uid too, so it cannot make a live owner look gone: a uid is never reused, and an
    owner created again under the same name has a new one, which is looked up afresh."""

    def __init__(self, size: int = ABSENT_OWNER_CACHE_SIZE) -> None:
        self._size = size
        self._absent: OrderedDict[OwnerCoordinates, None] = OrderedDict()

    def add(self, owner: OwnerCoordinates) -> None:
        self._absent[owner] = None
        self._absent.move_to_end(owner)
        while len(self._absent) > self._size:
            self._absent.popitem(last=False)

    def has(self, owner: OwnerCoordinates) -> bool:
        if owner not in self._absent:
            return False
        self._absent.move_to_end(owner)  # a hit keeps it, as a look-up in kube's LRU does
        return True

    def __len__(self) -> int:
        return len(self._absent)


class Role(StrEnum):
    """What a key asks: is this dependent still owned (kube's attemptToDelete), or does this
    owner, being deleted, wait on its dependents (its ``foregroundDeletion`` or ``orphan``)."""

    DEPENDENT = "dependent"
    OWNER = "owner"


@dataclass(frozen=True, slots=True)
class Node:
    role: Role
    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, role: Role, obj: Mapping[str, Any]) -> Node:
        view = ObjectView(obj)
        return cls(role, str(obj.get("apiVersion")), str(obj.get("kind")), view.namespace, view.name)


def _owner_uids(obj: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(ref.get("uid")) for ref in ObjectView(obj).owner_references if ref.get("uid"))


def _has_owners(obj: dict[str, Any]) -> bool:
    return bool(ObjectView(obj).owner_references)


def _gc_finalizing(meta: Mapping[str, Any]) -> bool:
    return bool(meta.get("deletionTimestamp")) and not GC_FINALIZERS.isdisjoint(meta.get("finalizers") or ())


def _blocks(ref: Mapping[str, Any]) -> bool:
    return ref.get("blockOwnerDeletion") is True


def monitored_types(registry: Iterable[ResourceType]) -> list[ResourceType]:
    """Every kind the hub stores, once (aliases of another group's type and versions stored as
    another version left out)."""
    return [rt for rt in registry if rt.stored_as is None and not rt.stored_in_version]


class Verdict(StrEnum):
    SOLID = "solid"
    DANGLING = "dangling"
    WAITING = "waiting"  # the owner is deleting its dependents in the foreground
    INVALID = "invalid"  # a cluster-scoped dependent of a namespaced owner
    UNKNOWN = "unknown"  # the owner's kind is not served


class GarbageCollector(KeyedController[Node]):
    name = "garbage-collector"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self._monitors: dict[tuple[str, str, str], Informer] = {}
        self._tasks: dict[tuple[str, str, str], asyncio.Task[None]] = {}
        #: uid -> how many cached objects name it as an owner: a deleted object that is nobody's
        #: owner (nearly all) costs one look-up, not one per kind.
        self._owned: Counter[str] = Counter()
        self.absent_owners = AbsentOwners()

    # --- monitors ------------------------------------------------------------------------

    async def _attach(self, informer: Informer, rt: ResourceType) -> None:
        informer.add_index(INDEX_OWNER_UID, _owner_uids)
        for obj in informer.items():  # a shared informer may have listed already
            await self._on_change(WatchEventType.ADDED, obj, None)

        async def changed(event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            await self._on_change(event, obj, old)

        async def relisted() -> None:
            await self._on_relist(rt)

        informer.add_handler(changed)
        informer.add_relist_handler(relisted)

    async def _follow(self, group: asyncio.TaskGroup) -> None:
        """Watch every kind served: through the controllers' informer of the kind where there is
        one (its events are already delivered), else through one of its own that keeps only
        objects with owners."""
        wanted = {(rt.group, rt.version, rt.plural): rt for rt in monitored_types(self.ctx.registry)}
        for key in [key for key in self._monitors if key not in wanted]:
            del self._monitors[key]
            task = self._tasks.pop(key, None)
            if task is not None:
                task.cancel()
        for key, rt in wanted.items():
            if key in self._monitors:
                continue
            shared = self.ctx.informer_if_any(rt)
            informer = shared if shared is not None else Informer(self.ctx.objects, rt, keep=_has_owners)
            self._monitors[key] = informer
            await self._attach(informer, rt)
            if shared is None:
                self._tasks[key] = group.create_task(informer.run(), name=f"gc-monitor-{rt.plural}.{rt.group}")

    async def run(self) -> None:
        """Watch every kind the hub serves (following CRDs as they come and go); reconcile once
        every kind has been listed."""
        changed = asyncio.Event()
        registry = self.ctx.registry
        async with asyncio.TaskGroup() as group:
            if isinstance(registry, DynamicRegistry):
                registry.add_listener(changed.set)
            try:
                await self._follow(group)
                for informer in list(self._monitors.values()):
                    await informer.synced.wait()
                group.create_task(self.loop.run(), name="controller-garbage-collector")
                while True:
                    await changed.wait()
                    changed.clear()
                    await self._follow(group)
            finally:
                if isinstance(registry, DynamicRegistry):
                    registry.remove_listener(changed.set)

    def dependents(self, uid: str) -> list[dict[str, Any]]:
        """The cached objects that name ``uid`` among their owners."""
        out: list[dict[str, Any]] = []
        if uid not in self._owned:
            return out
        for informer in self._monitors.values():
            out.extend(informer.by_index(INDEX_OWNER_UID, uid))
        return out

    def _count(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Follow the owner uids of the cached objects (``old``: the cached one replaced, if any)."""
        if old is not None:
            self._owned.subtract(_owner_uids(old))
        if event is not WatchEventType.DELETED and _has_owners(obj):
            self._owned.update(_owner_uids(obj))
        if old is not None:
            for uid in _owner_uids(old):
                if self._owned[uid] <= 0:
                    del self._owned[uid]

    async def _on_change(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._count(event, obj, old)
        view = ObjectView(obj)
        refs = view.owner_references
        if event is WatchEventType.DELETED:
            uid = view.uid
            for dependent in self.dependents(uid) if uid else ():
                await self.loop.add(Node.of(Role.DEPENDENT, dependent))
            await self._wake_owners(obj, refs)
            return
        old_refs = ObjectView(old).owner_references
        if refs and (old is None or refs != old_refs) and not self._owners_seen(obj, refs):
            await self.loop.add(Node.of(Role.DEPENDENT, obj))
        if old_refs and refs != old_refs:
            await self._wake_owners(obj, old_refs)  # a blocking reference may have gone
        if _gc_finalizing(view.metadata):
            await self.loop.add(Node.of(Role.OWNER, obj))

    def _owners_seen(self, dependent: Mapping[str, Any], refs: Iterable[Mapping[str, Any]]) -> bool:
        """Whether every owner is in a cache, with the referenced uid and not being deleted: as
        kube's graph holds an observed owner, the dependent needs no live check now (the owner's
        deletion event checks its dependents, this one included, should it go)."""
        namespace = str((dependent.get("metadata") or {}).get("namespace") or "")
        for ref in refs:
            rt = self.ctx.registry.for_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
            informer = self._monitors.get((rt.group, rt.version, rt.plural)) if rt is not None else None
            owner = informer.get(namespace if rt is not None and rt.namespaced else None, str(ref.get("name"))) if informer else None
            seen = ObjectView(owner)
            if owner is None or seen.metadata.get("uid") != ref.get("uid") or seen.is_deleting:
                return False
        return True

    async def _wake_owners(self, dependent: Mapping[str, Any], refs: Iterable[Mapping[str, Any]]) -> None:
        """Queue the owners a blocking dependent may be holding in the foreground."""
        namespace = str((dependent.get("metadata") or {}).get("namespace") or "")
        for ref in refs:
            if _blocks(ref):
                rt = self.ctx.registry.for_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
                if rt is not None:
                    owner_namespace = namespace if rt.namespaced else ""
                    await self.loop.add(Node(Role.OWNER, rt.api_version, rt.kind, owner_namespace, str(ref.get("name"))))

    async def _on_relist(self, rt: ResourceType) -> None:
        """A watch of ``rt`` expired: the deletions of its objects were missed, so every dependent
        of an object of that kind is checked again."""
        for informer in self._monitors.values():
            for obj in informer.items():
                if any(ref.get("kind") == rt.kind for ref in ObjectView(obj).owner_references):
                    await self.loop.add(Node.of(Role.DEPENDENT, obj))

    # --- reconcile ------------------------------------------------------------------------

    async def reconcile(self, node: Node) -> float | None:
        rt = self.ctx.registry.for_kind(node.api_version, node.kind)
        if rt is None:
            return None
        obj = await self.ctx.get(rt, node.namespace or None, node.name)
        if obj is None:
            return None
        if node.role is Role.OWNER:
            return await self._finish_owner(rt, obj)
        return await self._attempt_to_delete(rt, obj)

    async def _attempt_to_delete(self, rt: ResourceType, obj: dict[str, Any]) -> float | None:
        """kube's attemptToDeleteItem: delete a dependent none of whose owners remains."""
        view = ObjectView(obj)
        meta, finalizers = obj["metadata"], view.finalizers
        if view.is_deleting:
            if FINALIZER_FOREGROUND in finalizers:
                await self.loop.add(Node.of(Role.OWNER, obj))
            return None
        refs = view.owner_references
        if not refs:
            return None
        verdicts = [await self._classify(rt, obj, ref) for ref in refs]
        if Verdict.UNKNOWN in verdicts:
            return UNKNOWN_KIND_RETRY_SECONDS
        if Verdict.INVALID in verdicts:
            return None
        gone = {str(ref.get("uid")) for ref, v in zip(refs, verdicts, strict=True) if v is not Verdict.SOLID}
        if Verdict.SOLID in verdicts:
            if gone:
                await self._remove_references(rt, obj, gone)
            return None
        own = self.dependents(str(meta.get("uid"))) if Verdict.WAITING in verdicts else []
        if own:
            policy = "Foreground"  # its own dependents go first
            if any(_gc_finalizing(d["metadata"]) and FINALIZER_FOREGROUND in d["metadata"]["finalizers"] for d in own):
                # A dependent of it waits in the foreground too: a cycle. As kube, its references
                # stop blocking, so that neither waits for the other for ever.
                obj = await self._unblock(rt, obj)
                meta = obj["metadata"]
        elif FINALIZER_ORPHAN in finalizers:
            policy = "Orphan"
        elif FINALIZER_FOREGROUND in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        log.info("deleting %s %s/%s: its owners are gone or being deleted (%s)", rt.kind,
                 meta.get("namespace") or "", meta["name"], policy)
        with contextlib.suppress(errors.NotFound):
            await self.ctx.objects.delete(
                rt, namespace=meta.get("namespace"), name=meta["name"], propagation_policy=policy,
                preconditions=Preconditions(uid=meta.get("uid"), resource_version=meta.get("resourceVersion")),
            )
        return None

    async def _classify(self, rt: ResourceType, dependent: dict[str, Any], ref: Mapping[str, Any]) -> Verdict:
        owner_rt = self.ctx.registry.for_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        if owner_rt is None:
            log.info("%s %s: owner kind %s in %s is not served; checking again later", rt.kind,
                     dependent["metadata"]["name"], ref.get("kind"), ref.get("apiVersion"))
            return Verdict.UNKNOWN
        namespace = dependent["metadata"].get("namespace") or ""
        if owner_rt.namespaced and not rt.namespaced:
            await self._invalid_namespace(dependent, ref, namespace)
            return Verdict.INVALID
        coordinates = OwnerCoordinates(
            str(ref.get("apiVersion")), str(ref.get("kind")), namespace if owner_rt.namespaced else "",
            str(ref.get("name")), str(ref.get("uid")),
        )
        if self.absent_owners.has(coordinates):
            return Verdict.DANGLING
        owner = await self.ctx.get(owner_rt, coordinates.namespace or None, coordinates.name)
        if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
            self.absent_owners.add(coordinates)
            if owner_rt.namespaced and self._elsewhere(owner_rt, str(ref.get("uid")), namespace):
                # The owner's uid is an object in another namespace: as kube's graph sees it.
                await self._invalid_namespace(dependent, ref, namespace)
            return Verdict.DANGLING
        found = ObjectView(owner)
        if found.is_deleting and FINALIZER_FOREGROUND in found.finalizers:
            return Verdict.WAITING
        return Verdict.SOLID

    def _elsewhere(self, owner_rt: ResourceType, uid: str, namespace: str) -> bool:
        """Whether the cache of ``owner_rt`` holds an object of ``uid`` outside ``namespace``
        (looked for only when a namespaced dependent's owner is found dangling)."""
        informer = self._monitors.get((owner_rt.group, owner_rt.version, owner_rt.plural))
        return informer is not None and any(
            (view := ObjectView(o)).metadata.get("uid") == uid and view.metadata.get("namespace") != namespace
            for o in informer.items()
        )

    async def _invalid_namespace(self, dependent: dict[str, Any], ref: Mapping[str, Any], namespace: str) -> None:
        """kube's Warning ``OwnerRefInvalidNamespace`` on ``dependent``, whose owner reference
        ``ref`` cannot resolve in its ``namespace`` (a cluster-scoped dependent's, "")."""
        identity = (f"[{ref.get('apiVersion')}/{ref.get('kind')}, namespace: {namespace}, "
                    f"name: {ref.get('name')}, uid: {ref.get('uid')}]")
        await record_event(
            self.ctx, dependent, type=EventType.WARNING, reason=EventReason.OWNER_REF_INVALID_NAMESPACE,
            message=f'ownerRef {identity} does not exist in namespace "{namespace}"',
        )

    async def _finish_owner(self, rt: ResourceType, owner: dict[str, Any]) -> float | None:
        """An owner being deleted with ``orphan`` or ``foregroundDeletion``: orphan its
        dependents, or wait for its blocking ones to go; then remove the finalizer."""
        meta, finalizers = owner["metadata"], ObjectView(owner).finalizers
        if not meta.get("deletionTimestamp"):
            return None
        uid = str(meta.get("uid"))
        dependents = self.dependents(uid)
        if FINALIZER_ORPHAN in finalizers:
            for dependent in dependents:
                dependent_rt = self._type_of(dependent)
                if dependent_rt is not None:
                    await self._remove_references(dependent_rt, dependent, {uid})
            await self._remove_finalizer(rt, owner, FINALIZER_ORPHAN)
            log.info("%s %s/%s: dependents orphaned (%d)", rt.kind, meta.get("namespace") or "", meta["name"],
                     len(dependents))
            return None
        if FINALIZER_FOREGROUND not in finalizers:
            return None
        blocking = [
            d for d in dependents
            if any(ref.get("uid") == uid and _blocks(ref) for ref in ObjectView(d).owner_references)
        ]
        if not blocking:
            await self._remove_finalizer(rt, owner, FINALIZER_FOREGROUND)
            return None
        for dependent in dependents:
            await self.loop.add(Node.of(Role.DEPENDENT, dependent))
        return None  # each blocking dependent's deletion (or change of references) queues the owner again

    # --- writes ---------------------------------------------------------------------------

    def _type_of(self, obj: Mapping[str, Any]) -> ResourceType | None:
        return self.ctx.registry.for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))

    async def _remove_references(self, rt: ResourceType, obj: dict[str, Any], uids: set[str]) -> None:
        """Take the owners ``uids`` out of ``obj``'s ownerReferences (read again: a cached copy
        may be behind; a compare-and-swap, whose lost race queues the key again)."""
        fresh = await self.ctx.get(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if fresh is None or fresh["metadata"].get("uid") != obj["metadata"].get("uid"):
            return
        refs = ObjectView(fresh).owner_references
        kept = [ref for ref in refs if str(ref.get("uid")) not in uids]
        if len(kept) == len(refs):
            return
        updated = copy.deepcopy(fresh)
        if kept:
            updated["metadata"]["ownerReferences"] = kept
        else:
            updated["metadata"].pop("ownerReferences", None)
        try:
            await self.ctx.objects.update(rt, updated)
        except errors.NotFound:
            return

    async def _unblock(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` with ``blockOwnerDeletion`` false on each of its blocking references (written)."""
        updated = copy.deepcopy(obj)
        for ref in updated["metadata"].get("ownerReferences") or ():
            if _blocks(ref):
                ref["blockOwnerDeletion"] = False
        written = await self.ctx.objects.update(rt, updated)
        return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), **written}

    async def _remove_finalizer(self, rt: ResourceType, obj: dict[str, Any], finalizer: str) -> None:
        updated = copy.deepcopy(obj)
        updated["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or () if f != finalizer]
        try:
            await self.ctx.objects.update(rt, updated)
        except errors.NotFound:
            return
