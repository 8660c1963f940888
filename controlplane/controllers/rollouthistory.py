"""The hub's rollout-history controller: Deployments, StatefulSets and DaemonSets keep their history.

The hub holds each workload's desired template but runs no pods, so nothing else records the
templates a workload had. As kube's deployment controller does, each distinct pod template of a
Deployment gets a ReplicaSet ``<name>-<pod-template-hash>`` (controlled by the Deployment,
numbered by ``deployment.kubernetes.io/revision``, which the Deployment carries too); as kube's
statefulset and daemonset controllers do, each template of a StatefulSet or DaemonSet gets a
ControllerRevision. So ``kubectl rollout history`` lists them and ``kubectl rollout undo`` puts an
old template back on the hub, whence it propagates. What to write is :mod:`controlplane.apis.revisions`.

History starts at a workload's first template change the hub sees (kube's controllers record
revision 1 at creation): the template before it becomes revision 1 and the new one revision 2,
so ``kubectl rollout undo`` has what it needs from the first rollout on, and the many workloads
whose template never changes cost no write (issue 19's budget per workload). Until then
``kubectl rollout history`` finds none, as for a workload the hub has not seen change.

These records are the hub's only: a ReplicaSet a Deployment controls is never propagated (the
detector skips it), ControllerRevisions are a hub-only kind, and the members' controllers write
their own. Deleting the workload deletes them (their controller ownerReference, through the
hub's garbage collector); ``spec.revisionHistoryLimit`` (default 10) bounds how many stay.

In: the three kinds' informers, and the records' (indexed by their controller's uid). Out:
creates, compare-and-swap updates and deletes of the records, and the Deployment's revision
annotation (once the detector has written the Deployment: see :func:`_detected`). Writes happen
only when the template, replicas, history limit or annotations change: the status writes of a
rollout bring no reconcile.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis import revisions
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import KeyedController
from controlplane.objectclient import ResourceType, WatchEventType, errors
from policies.matching import is_reserved_namespace

log = logging.getLogger(__name__)

INDEX_CONTROLLER = "controller-uid"
#: A workload whose history is kept: kind, namespace, name.
HistoryKey = tuple[str, str, str]


def _controller_uid(obj: dict[str, Any]) -> Iterable[Hashable]:
    uid = revisions.controller_uid(obj)
    return (uid,) if uid else ()


def _history_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether a workload changed in what its history records (not a status write)."""
    if old is None:
        return True
    before, after = ObjectView(old), ObjectView(new)
    return (
        before.annotations != after.annotations
        or any(before.spec.get(k) != after.spec.get(k) for k in ("template", "replicas", "revisionHistoryLimit", "paused"))
        or before.status.get("collisionCount") != after.status.get("collisionCount")
        or before.uid != after.uid
        or _detected(old) != _detected(new)
    )


def _detected(workload: dict[str, Any] | None) -> bool:
    """Whether the detector has written the workload once (its claim's finalizer, or its
    Propagated condition), or never will (a reserved namespace's). The Deployment's revision
    annotation waits for that: written before, it would make the detector's compare-and-swap
    lose, and its binding and Works be written twice."""
    view = ObjectView(workload)
    return (
        c.FINALIZER_WORKLOAD in view.finalizers
        or view.condition(c.CONDITION_PROPAGATED) is not None
        or is_reserved_namespace(view.namespace)
    )


def _record_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    if old is None:
        return False  # created: by this controller, or a record it finds when its owner is next looked at
    before, after = ObjectView(old), ObjectView(new)
    return (before.annotations != after.annotations or before.spec != after.spec
            or old.get("revision") != new.get("revision") or before.owner_references != after.owner_references)


#: Workloads whose template before their first change is held until it is recorded (the oldest
#: go first beyond this: their history then starts at the template after the change).
MAX_FIRST_TEMPLATES = 4096


class RolloutHistoryController(KeyedController[HistoryKey]):
    """Keeps the ReplicaSets of Deployments and the ControllerRevisions of StatefulSets and
    DaemonSets (keys: kind, namespace, name)."""

    name = "rollout-history"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.workloads: dict[str, tuple[ResourceType, Informer]] = {}
        self.records: dict[str, tuple[ResourceType, Informer]] = {}
        #: Per workload without history yet, the workload as it was before its template changed.
        self._first: OrderedDict[HistoryKey, dict[str, Any]] = OrderedDict()
        for (group, kind), record_kind in revisions.HISTORY_KINDS.items():
            informer = ctx.workload_informer(f"{group}/v1", kind)
            record_rt = ctx.registry.for_kind(f"{group}/v1", record_kind)
            if informer is None or record_rt is None:
                continue  # the hub serves neither the kind nor where its history goes
            self.workloads[kind] = (informer.rt, informer)
            if record_kind not in self.records:
                records = ctx.informer(record_rt)
                records.add_index(INDEX_CONTROLLER, _controller_uid)
                records.add_handler(self._on_record)
                self.records[record_kind] = (record_rt, records)
            informer.add_handler(self._on_workload)

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = ObjectView(obj)
        key = (view.kind, view.namespace, view.name)
        if event is WatchEventType.DELETED:
            self._first.pop(key, None)
            return
        if not _history_changed(old, obj):
            return
        if not self._has_history(view.kind, view.uid):
            # Recorded from the first change of its template: a workload whose template never
            # changes costs no write (see the module's description).
            if old is None or ObjectView(old).uid != view.uid or revisions.comparable_template(old) == revisions.comparable_template(obj):
                return
            if key not in self._first:
                self._first[key] = old
                while len(self._first) > MAX_FIRST_TEMPLATES:
                    self._first.popitem(last=False)
        await self.loop.add(key)

    def _has_history(self, kind: str, uid: str | None) -> bool:
        found = self.workloads.get(kind)
        if found is None or not uid:
            return False
        _, records = self.records[revisions.HISTORY_KINDS[(found[0].group, kind)]]
        return bool(records.by_index(INDEX_CONTROLLER, uid))

    async def _on_record(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A record deleted or changed by someone else: its workload is looked at again."""
        if event is not WatchEventType.DELETED and not _record_changed(old, obj):
            return
        view = ObjectView(obj)
        for ref in view.owner_references:
            if ref.get("controller") is True and ref.get("kind") in self.workloads and ref.get("name"):
                await self.loop.add((str(ref["kind"]), view.namespace, str(ref["name"])))

    async def reconcile(self, key: HistoryKey) -> float | None:
        kind, namespace, name = key
        found = self.workloads.get(kind)
        if found is None:
            return None
        rt, informer = found
        workload = informer.get(namespace, name)
        if workload is None or ObjectView(workload).is_deleting or not ObjectView(workload).uid:
            return None
        record_kind = revisions.HISTORY_KINDS[(rt.group, kind)]
        record_rt, records = self.records[record_kind]
        owned = list(records.by_index(INDEX_CONTROLLER, ObjectView(workload).uid))
        planner = revisions.plan_replica_sets if record_kind == "ReplicaSet" else revisions.plan_controller_revisions
        if owned:
            self._first.pop(key, None)
        else:
            # Held until a look finds records: a failed write below is retried from it.
            first = self._first.get(key)
            if first is None or ObjectView(first).uid != ObjectView(workload).uid:
                self._first.pop(key, None)
                return None  # its template has not changed since the hub has seen it: nothing to record
            # The template it had before its first change is revision 1 (the workload's uid owns it).
            for body in planner(first, []).create:
                try:
                    owned.append(await self.ctx.objects.create(record_rt, body))
                except errors.AlreadyExists:
                    if _held_by_another(records, body, workload):
                        # Looked at again with the loop's backoff (not every 0.1 s) until the name is free.
                        raise
                    return 0.1  # recorded meanwhile: look again once the informer has it
        plan = planner(workload, owned)
        for body in plan.create:
            try:
                await self.ctx.objects.create(record_rt, body)
            except errors.AlreadyExists:
                if not _held_by_another(records, body, workload):
                    return 0.1  # ours, not seen by the informer yet: look again once it is
                log.warning("%s %s/%s: %s %s exists and is not its own; its history is not recorded",
                            kind, namespace, name, record_kind, ObjectView(body).name)
                return None
            log.info("%s %s/%s: recorded %s %s", kind, namespace, name, record_kind, ObjectView(body).name)
        self._first.pop(key, None)  # its first template is recorded
        for body in plan.update:
            try:
                await self.ctx.objects.update(record_rt, body)
            except errors.NotFound:
                return 0.1  # deleted meanwhile: the next look creates it again
        for record in plan.delete:
            await self.ctx.delete(record_rt, namespace, record)
        if plan.workload_revision is not None and _detected(workload):
            annotations = {**ObjectView(workload).annotations, revisions.ANNOTATION_REVISION: plan.workload_revision}
            body = {**workload, "metadata": {**workload["metadata"], "annotations": annotations}}
            try:  # through the status, as kube's controller writes it: the generation stays
                await self.ctx.objects.update_status(rt, body)
            except errors.NotFound:
                return None
        return None


def _held_by_another(records: Informer, body: dict[str, Any], workload: dict[str, Any]) -> bool:
    """Whether the record ``body`` could not be created because another controller's record holds
    its name (not this workload's own, written but not yet seen by the informer)."""
    held = records.get(ObjectView(body).namespace, ObjectView(body).name)
    return held is not None and revisions.controller_uid(held) != ObjectView(workload).uid
