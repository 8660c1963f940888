"""The workload controllers and garbage collector of a simulated member, as running loops.

In: the member's ``ObjectClient`` (every kind of :data:`simulator.controllers.registry.CONTROLLERS`
it serves gets a controller), the pod informer of :class:`~simulator.cluster.SimulatedCluster`,
its clock and random source. Out: :class:`WorkloadControllers`: an informer per controlled
kind, one level-based loop per kind (:meth:`WorkloadControllers.controller_loop`) that runs the
kind's pure reconcile function (:mod:`simulator.controllers`) over the owner and the children it
owns and writes the changes, and :meth:`WorkloadControllers.garbage_loop`, which deletes the
children of owners that are gone (background cascading deletion).

A child the API refuses to create (a pod whose ServiceAccount is missing, :mod:`simulator.admitting`)
is reported as kube's controllers report it: a ``FailedCreate`` Warning Event on the owner
(``Error creating: <the API's message>``; a StatefulSet's ``create Pod <pod> in StatefulSet
<name> failed error: <message>``), condition ``ReplicaFailure`` on a ReplicaSet (which the
Deployment copies, :mod:`simulator.controllers.deployment`); the owner's remaining creates wait,
and it is synced again after a backoff that doubles from :data:`RETRY_FIRST_SECONDS` up to
:data:`RETRY_MAX_SECONDS` (simulated time), as kube's rate-limited work queue does.

Until the watch events of the children an owner just created or deleted have arrived, the owner
is not reconciled again (kube's "expectations"), so a stale cache never doubles pods; other
writes are compare-and-swap on the resourceVersion, and a conflict is left to the watch event
that follows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import random
from typing import Any, Final

from controlplane.apis.events import EventType
from controlplane.controllers.informing import Informer
from controlplane.objectclient import ObjectClient, ResourceType, WatchEventType, errors
from simulator.clock import Clock, rfc3339
from simulator.controllers.base import Changes, is_terminating
from simulator.controllers.registry import CONTROLLERS, Controller
from simulator.controllers.replicaset import with_replica_failure
from simulator.events import EventAction, EventReason
from simulator.informers import INDEX_OWNER, Listener, cached, object_key, owned_informer
from simulator.recording import EventRecorder

logger = logging.getLogger(__name__)

#: The first and the longest wait before an owner whose child create was refused is synced again.
RETRY_FIRST_SECONDS: Final = 1.0
RETRY_MAX_SECONDS: Final = 300.0


def failed_create_message(kind: str, owner: str, child: str, error: str) -> str:
    """The message of kube's ``FailedCreate`` Event on ``owner`` (a ``kind``) when the API refused
    its ``child`` with ``error``: the StatefulSet controller's words, or the pod control's."""
    if kind == "StatefulSet":
        return f"create Pod {child} in StatefulSet {owner} failed error: {error}"
    return f"Error creating: {error}"


class _Queue:
    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.wake = asyncio.Event()

    def add(self, key: str) -> None:
        self.keys.add(key)
        self.wake.set()

    async def take(self) -> set[str]:
        await self.wake.wait()
        self.wake.clear()
        keys, self.keys = self.keys, set()
        return keys


class _Expectations:
    """Children an owner created or deleted whose watch events have not arrived yet (kube's
    ControllerExpectations, by child key): the owner is not reconciled until they have."""

    def __init__(self) -> None:
        self._pending: dict[str, set[str]] = {}
        #: child -> (owner, whether its deletion is awaited rather than its creation)
        self._owner_of: dict[str, tuple[str, bool]] = {}

    def expect(self, owner: str, child: str, *, deletion: bool = False) -> None:
        self._pending.setdefault(owner, set()).add(child)
        self._owner_of[child] = (owner, deletion)

    def observed(self, child: str, *, deleted: bool) -> str | None:
        """A child's event arrived; the owner whose expectation it settles, if any (a
        deletion is settled only by the child's DELETED event)."""
        expected = self._owner_of.get(child)
        if expected is None or (expected[1] and not deleted):
            return None
        owner = expected[0]
        del self._owner_of[child]
        pending = self._pending.get(owner)
        if pending is not None:
            pending.discard(child)
            if not pending:
                del self._pending[owner]
        return owner

    def satisfied(self, owner: str) -> bool:
        return owner not in self._pending


class WorkloadControllers:
    """One controller per workload kind the member serves, and the garbage collector."""

    def __init__(
        self,
        objects: ObjectClient,
        *,
        pods: Informer,
        clock: Clock,
        rng: random.Random,
        events: EventRecorder | None = None,
    ) -> None:
        self._objects = objects
        self._events = events
        self._pods = pods
        self._pod_rt = pods.rt
        self._clock = clock
        self._rng = rng
        registry = objects.registry
        #: kind -> (its resource type, its controller), for every controlled kind the store serves.
        self._controlled: dict[str, tuple[ResourceType, Controller]] = {}
        for (api_version, kind), controller in CONTROLLERS.items():
            rt = registry.for_kind(api_version, kind)
            if rt is None:
                continue
            if registry.for_kind(*controller.child) is None:
                raise ValueError(
                    f"{kind} is served but its children ({controller.child[1]}) are not: "
                    "serve simulator.resources.member_registry()"
                )
            self._controlled[kind] = (rt, controller)
        #: kind -> the informer of that kind's objects.
        self.informers = {
            kind: owned_informer(objects, rt, self._workload_listener(kind))
            for kind, (rt, _) in self._controlled.items()
        }
        self._queues = {kind: _Queue() for kind in self._controlled}
        self._expectations = _Expectations()
        #: (kind of the doomed object, its key)
        self._garbage: set[tuple[str, str]] = set()
        self._garbage_wake = asyncio.Event()
        #: (kind, key) -> refused creates in a row; and the heap of (when, kind, key) to sync again.
        self._failures: dict[tuple[str, str], int] = {}
        self._retries: list[tuple[float, str, str]] = []
        self._retry_wake = asyncio.Event()

    def child_changed(self, kind: str, event: WatchEventType, obj: dict[str, Any]) -> None:
        """A pod or ReplicaSet changed: settle its owner's expectations and queue the owner."""
        key = object_key(obj)
        # As kube's controllers, a child marked for deletion counts as deleted.
        gone = event is WatchEventType.DELETED or is_terminating(obj)
        settled = self._expectations.observed(f"{kind}:{key}", deleted=gone)
        namespace = obj["metadata"].get("namespace")
        for ref in obj["metadata"].get("ownerReferences") or []:
            queue = self._queues.get(str(ref.get("kind")))
            if queue is not None and ref.get("controller"):
                queue.add(f"{namespace}/{ref.get('name')}")
        if settled is not None:
            owner_kind, _, owner_key = settled.partition(":")
            queue = self._queues.get(owner_kind)
            if queue is not None:
                queue.add(owner_key)

    def _workload_listener(self, kind: str) -> Listener:
        def listener(event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            obj = new or old
            assert obj is not None
            self.child_changed(kind, event, obj)
            if event is WatchEventType.DELETED:
                self._orphan_children(str(obj["metadata"].get("uid") or ""))
                return
            self._queues[kind].add(object_key(obj))

        return listener

    def _orphan_children(self, uid: str) -> None:
        """An owner is gone: its children are garbage (background cascading deletion)."""
        if not uid:
            return
        for kind, informer in (("Pod", self._pods), *self.informers.items()):
            for child in informer.by_index(INDEX_OWNER, uid):
                self._garbage.add((kind, object_key(child)))
                self._garbage_wake.set()


    def _children(self, controller: Controller) -> tuple[str, Informer, ResourceType]:
        kind = controller.child[1]
        if kind == "Pod":
            return kind, self._pods, self._pod_rt
        return kind, self.informers[kind], self._controlled[kind][0]

    async def controller_loop(self, kind: str) -> None:
        queue = self._queues[kind]
        informer = self.informers[kind]
        rt, controller = self._controlled[kind]
        for existing in informer.items():
            queue.add(object_key(existing))
        _, children, _ = self._children(controller)
        while True:
            for key in sorted(await queue.take()):
                obj = cached(informer, key)
                if obj is None or not self._expectations.satisfied(f"{kind}:{key}"):
                    continue
                uid = str(obj["metadata"].get("uid") or "")
                owned = sorted(children.by_index(INDEX_OWNER, uid), key=lambda c: str(c["metadata"]["name"]))
                extra = await self._reads(controller, obj)
                if extra is None:
                    # What it reads is not there yet (a TrainJob's runtime, sent after it): later.
                    self._note_outcome(kind, key, failed=True)
                    continue
                try:
                    changes = controller.reconcile(obj, owned, now=rfc3339(self._clock.now()), rng=self._rng, **extra)
                except (KeyError, TypeError, ValueError) as exc:
                    logger.warning("cannot reconcile %s %s: %s", kind, key, exc)
                    continue
                await self._apply(kind, rt, controller, obj, changes)

    async def _reads(self, controller: Controller, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The keyword arguments of the objects ``controller`` reads for ``obj``; None when one is missing."""
        if controller.reads is None:
            return {}
        read = controller.reads(obj)
        rt = self._objects.registry.for_kind(read.api_version, read.kind)
        if rt is None or not read.name:
            return None
        try:
            return {read.keyword: await self._objects.get(rt, namespace=read.namespace, name=read.name)}
        except errors.NotFound:
            return None

    async def _apply(
        self, kind: str, rt: ResourceType, controller: Controller, obj: dict[str, Any], changes: Changes
    ) -> None:
        namespace = obj["metadata"].get("namespace")
        owner = f"{kind}:{object_key(obj)}"
        child_kind, children, child_rt = self._children(controller)
        refused: str | None = None
        for child in changes.create:
            child_key = f"{child_kind}:{namespace}/{child['metadata']['name']}"
            self._expectations.expect(owner, child_key)
            try:
                await self._objects.create(child_rt, child)
            except errors.ApiError as exc:
                self._expectations.observed(child_key, deleted=True)
                if isinstance(exc, errors.AlreadyExists):
                    continue
                logger.warning("%s %s: cannot create %s: %s", kind, object_key(obj), child_kind.lower(), exc)
                refused = exc.message
                self._failed_create(kind, obj, str(child["metadata"]["name"]), refused)
                break  # as kube's slow-start batches: the rest wait for the next sync
        self._note_outcome(kind, object_key(obj), failed=refused is not None)
        for child in changes.update:
            # On a conflict the child's watch event requeues the owner.
            with contextlib.suppress(errors.Conflict, errors.NotFound):
                await self._objects.update(child_rt, child)
        for name in changes.delete:
            doomed = children.get(namespace, name)
            if doomed is not None:
                child_key = f"{child_kind}:{namespace}/{name}"
                self._expectations.expect(owner, child_key, deletion=True)
                if not await self._delete(child_rt, doomed):
                    self._expectations.observed(child_key, deleted=True)
        status = changes.status
        if kind == "ReplicaSet":
            base = status if status is not None else obj.get("status") or {}
            with_failure = with_replica_failure(base, refused, now=rfc3339(self._clock.now()))
            if status is not None or with_failure != base:
                status = with_failure
        if status is not None:
            updated = dict(obj)
            updated["status"] = status
            # On a conflict a newer version is on its way through the watch and requeues the key.
            with contextlib.suppress(errors.Conflict, errors.NotFound):
                await self._objects.update_status(rt, updated)

    def _failed_create(self, kind: str, obj: dict[str, Any], child: str, error: str) -> None:
        if self._events is None:
            return
        name = str(obj["metadata"]["name"])
        self._events.record(
            obj,
            type=EventType.WARNING,
            reason=EventReason.FAILED_CREATE,
            message=failed_create_message(kind, name, child, error),
            action=EventAction.CREATING,
            component=f"{kind.lower()}-controller",
        )

    def _note_outcome(self, kind: str, key: str, *, failed: bool) -> None:
        """Count a refused create, and sync the owner again after its backoff; forget the count
        once a sync creates what it meant to."""
        if not failed:
            self._failures.pop((kind, key), None)
            return
        count = self._failures.get((kind, key), 0)
        self._failures[(kind, key)] = count + 1
        delay = min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2**count)
        heapq.heappush(self._retries, (self._clock.now() + delay, kind, key))
        self._retry_wake.set()

    async def retry_loop(self) -> None:
        """Queue owners again once their backoff after a refused create has passed."""
        while True:
            deadline = self._retries[0][0] if self._retries else None
            await self._clock.sleep_until(deadline, self._retry_wake)
            self._retry_wake.clear()
            now = self._clock.now()
            while self._retries and self._retries[0][0] <= now:
                _, kind, key = heapq.heappop(self._retries)
                self._queues[kind].add(key)

    async def _delete(self, rt: ResourceType, obj: dict[str, Any]) -> bool:
        """Delete ``obj``; False when it was already gone."""
        meta = obj["metadata"]
        try:
            await self._objects.delete(
                rt, namespace=meta.get("namespace"), name=meta["name"], propagation_policy="Background"
            )
        except errors.NotFound:
            return False
        return True

    async def garbage_loop(self) -> None:
        """Delete the children of owners that were deleted (background cascading deletion;
        a Deployment's ReplicaSets go first, then, their deletion seen, their pods)."""
        while True:
            await self._garbage_wake.wait()
            self._garbage_wake.clear()
            doomed, self._garbage = self._garbage, set()
            for kind, key in sorted(doomed):
                informer = self._pods if kind == "Pod" else self.informers[kind]
                rt = self._pod_rt if kind == "Pod" else self._controlled[kind][0]
                obj = cached(informer, key)
                if obj is not None:
                    await self._delete(rt, obj)

    def collect_garbage(self) -> None:
        """Queue every child whose controller owner is of a kind we control and no longer
        exists, or does not own children of its kind (pods a Deployment owned directly,
        from a member state written before Deployments had ReplicaSets: their ReplicaSet
        replaces them)."""
        live = {str(obj["metadata"].get("uid")) for inf in self.informers.values() for obj in inf.items()}
        for kind, informer in (("Pod", self._pods), *self.informers.items()):
            for obj in informer.items():
                refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
                owner = self._controlled.get(str(refs[0].get("kind"))) if refs else None
                if owner is None:
                    continue
                if str(refs[0].get("uid")) not in live or owner[1].child[1] != kind:
                    self._garbage.add((kind, object_key(obj)))
                    self._garbage_wake.set()
