"""Kueue's pod groups at the hub: the Pods of one group share one Workload, admitted whole.

In: the Pods of one group (label ``kueue.x-k8s.io/pod-group-name``, Kueue's mark of a managed Pod)
and the group's Workload (named for the group). Out, as Kueue's pod controller does it
(``pod_controller.go`` with ``jobframework/reconciler.go``):

* no Workload until the group's runnable Pods reach its total count (until then a Warning Event
  ``ErrWorkloadCompose`` on the group's oldest Pod says why); then one Workload named for the
  group, annotated ``kueue.x-k8s.io/is-group-workload: "true"``, owned by every Pod (not as
  controller), one pod set per role (:mod:`controlplane.admission.podgroups`), the queue and
  priority of the oldest Pod, and the Event ``CreatedWorkload``; Pods beyond the total count are
  deleted (``ExcessPodDeleted``), a later Pod of the group is added to the Workload's owners
  (``OwnerReferencesAdded``), a failed one replaced by another loses its finalizer;
* admitted, every gated Pod of the group is ungated in the same sync, each with its role's
  flavor and checks (``Started`` on each);
* a started Pod whose Workload is evicted, not admitted or missing is stopped, as a single Pod;
* its Workload's ``status.reclaimablePods`` counts each role's succeeded Pods (none in a serving
  group), and ``WaitingForReplacementPods`` says whether a failed Pod waits for its replacement;
  with ``waitForPodsReady``, its ``PodsReady`` says whether every Pod of the group is ready
  (:func:`controlplane.admission.podsready.pod_group`);
* finished once the total count of Pods has succeeded (``Finished=True``, reason ``Succeeded``,
  ``Pods succeeded: 3/3.``; ``FinishedWorkload``), or once none runs in a group with a Pod not
  retriable in it, never when serving; then, or when the Workload finishes otherwise, every Pod
  of the group loses Kueue's finalizer ``kueue.x-k8s.io/managed``;
* a Workload that no longer matches the group (none of its roles' Pods left) is deleted
  (``DeletedWorkload``) and the group queues anew.

Placement: each Pod of a group is its own binding, and the scheduler decides a group's bindings
together, whole in one cluster (:mod:`controlplane.scheduler.controller.podgroups`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from controlplane.admission import jobevents, matching, podgroups, pods, podsready
from controlplane.admission import objects as adm
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.events import EventType
from controlplane.apis.kueue_views import WorkloadView
from controlplane.controllers.admissiongate import Kinds
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.jobstarting import JobStarting
from controlplane.controllers.workloads import WorkloadRef, is_deleting, with_condition
from controlplane.objectclient import errors

log = logging.getLogger(__name__)

#: Makes a Workload for a queued workload: (source, queue name, pod sets) -> Workload.
NewWorkload = Callable[[Mapping[str, Any], str, list[dict[str, Any]]], dict[str, Any]]
#: Keeps an admitted Workload's ``PodsReady`` condition: (Workload, its pods ready) -> as written.
RecordReady = Callable[[dict[str, Any], bool | None], Awaitable[dict[str, Any]]]


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _owner(pod: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's ``SetOwnerReference`` of a Pod on its group's Workload (not a controller)."""
    return {"apiVersion": "v1", "kind": "Pod", "name": _name(pod), "uid": (pod.get("metadata") or {}).get("uid")}


class PodGroups:
    """Keeps each pod group's Workload and starts, stops and finalizes its Pods."""

    def __init__(
        self, ctx: ControllerContext, kinds: Kinds, starting: JobStarting, new_workload: NewWorkload, record_ready: RecordReady,
    ) -> None:
        self.ctx, self.kinds, self.starting, self._new_workload = ctx, kinds, starting, new_workload
        self._record_ready = record_ready

    def members(self, namespace: str, group: str) -> list[dict[str, Any]]:
        """The Pods of a group that carry Kueue's mark (Kueue leaves the others alone)."""
        return [p for p in self.kinds.members(namespace, group) if pods.managed(p)]

    async def sync(self, namespace: str, group: str) -> bool:
        """One group's reconcile; whether quota may have been freed (a Workload deleted or finished)."""
        wl_rt, pod_rt = self.kinds.workload, self.kinds.pod
        if wl_rt is None or pod_rt is None:
            return False
        members = every = self.members(namespace, group)
        wl = self.kinds.group_workload(namespace, group)
        for pod in members:
            if is_deleting(pod):  # as for a single Pod: deleting a Pod of a group is not held up
                await self.starting.finalize_pod(pod)
        if not members:
            if wl is not None:
                await self.ctx.delete(wl_rt, namespace, _name(wl))
                return True
            return False
        first = podgroups.first(members)
        queue = adm.queue_name(first)
        if queue is None:
            return False
        absent = 0
        if wl is not None and not adm.is_finished(wl):
            matched = await self._matching(wl, members)
            if matched is None:
                return await self._replace(wl, members, first)
            members, absent = matched
        if wl is not None and adm.is_finished(wl):
            await self._finalize(members)
            return False
        if (message := podgroups.finished_message(members)) is not None:
            await self._finish(wl, members, first, message)
            return True
        if wl is not None:
            wl = await self._record_ready(await self._status(wl, members, absent), podsready.pod_group(every))
        for pod in members:
            if (stop := pods.stop_of(pod, wl)) is not None:
                await self.starting.stop_pod(pod, stop)
        if wl is None:
            await self._compose(namespace, group, members, first, queue)
            return False
        if adm.admission_of(wl) is not None and adm.is_true(wl, kueue.COND_ADMITTED):
            for pod in members:  # Kueue's Run of a group: every gated Pod, with its role's admission
                if pods.gated(pod) and not is_deleting(pod):
                    await self.starting.ungate(wl, pod, WorkloadRef.of(pod), pod_set=podgroups.role_hash(pod))
            return False
        for pod in members:
            if pods.gated(pod):
                await self.starting.tell_checks(wl, pod)
        view = WorkloadView(wl)
        if adm.admission_of(wl) is None and view.queue_name != queue:
            await self.ctx.objects.update(wl_rt, {**wl, "spec": {**view.spec, "queueName": queue}})
        return False

    async def _status(self, wl: dict[str, Any], members: Sequence[Mapping[str, Any]], absent: int) -> dict[str, Any]:
        """Kueue's ``ReclaimablePods`` and ``WaitingForReplacementPods`` of the group written to
        its Workload's status when they change (the quota of its reclaimable Pods is released
        as the admission cycle sees the Workload change)."""
        status = copy.deepcopy(wl.get("status") or {})
        old = status.get("reclaimablePods") or []
        new = podgroups.reclaimable_pods(members, is_serving=podgroups.serving(members))
        changed = sorted(old, key=lambda r: str(r.get("name"))) != new
        if changed and new:
            status["reclaimablePods"] = new
        elif changed:
            del status["reclaimablePods"]
        if (cond := podgroups.replacement_condition(wl, absent)) is not None:
            status["conditions"] = with_condition(status.get("conditions") or [], cond, now=self.ctx.now_text())
        if not changed and cond is None:
            return wl
        assert self.kinds.workload is not None
        return await self.ctx.objects.update_status(self.kinds.workload, {**wl, "status": status})

    async def _matching(self, wl: dict[str, Any], members: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int] | None:
        """Kueue's ``FindMatchingWorkloads`` of a group: per role of the Workload, the Pods kept
        (as many runnable ones as it counts, and failed ones not yet replaced); the runnable
        ones beyond are deleted, the replaced failed ones finalized, and the Workload gets the
        kept Pods as owners. Also how many Pods its roles miss (failed, not yet replaced).
        None: the Workload no longer matches the group."""
        absent = 0
        kept: list[dict[str, Any]] = []
        extra: list[dict[str, Any]] = []
        replaced: list[dict[str, Any]] = []
        for ps in WorkloadView(wl).pod_sets:
            count = int(ps.get("count", 1))
            role = [p for p in members if podgroups.role_hash(p) == ps.get("name")]
            running = [p for p in role if podgroups.runnable_or_succeeded(p)]
            inactive = [p for p in role if not podgroups.runnable_or_succeeded(p)]
            absent += max(0, count - len(running))
            over = podgroups.excess(running, count)
            extra += over
            kept += [p for p in running if p not in over]
            finalizeable = min(len(inactive), len(inactive) + len(running) - count)
            replaced += inactive[len(inactive) - finalizeable:] if finalizeable > 0 else []
            kept += inactive[:len(inactive) - finalizeable] if finalizeable > 0 else inactive
        if not kept or not matching.group_equivalent(podgroups.pod_sets(kept), wl):
            return None
        await self._own(wl, kept)
        await self._delete_excess(extra)
        await self._finalize(replaced)
        return kept, absent

    async def _own(self, wl: dict[str, Any], kept: Sequence[Mapping[str, Any]]) -> None:
        """Kueue's ``ensureWorkloadOwnedByAllMembers``: every kept Pod an owner of the Workload."""
        refs = list(WorkloadView(wl).owner_references)
        uids = {r.get("uid") for r in refs}
        added = [_owner(p) for p in kept if (p.get("metadata") or {}).get("uid") not in uids]
        if not added or self.kinds.workload is None:
            return
        written = await self.ctx.objects.update(self.kinds.workload, {**wl, "metadata": {**wl["metadata"], "ownerReferences": refs + added}})
        await record_event(self.ctx, written, type=EventType.NORMAL, reason=EventReason.OWNER_REFERENCES_ADDED,
                           message=f"Added {len(added)} owner reference(s)")

    async def _delete_excess(self, extra: Sequence[dict[str, Any]]) -> None:
        """Kueue's ``removeExcessPods``: finalized, deleted, and the Event ``ExcessPodDeleted``."""
        assert self.kinds.pod is not None
        for pod in extra:
            await self.starting.finalize_pod(pod)
            if is_deleting(pod):
                continue
            try:  # once: a later sync may still see it in the cache
                await self.ctx.objects.delete(self.kinds.pod, namespace=(pod.get("metadata") or {}).get("namespace"), name=_name(pod))
            except errors.NotFound:
                continue
            await record_event(self.ctx, pod, type=EventType.NORMAL, reason=EventReason.EXCESS_POD_DELETED,
                               message="Excess pod deleted")

    async def _finalize(self, members: Sequence[dict[str, Any]]) -> None:
        for pod in members:
            await self.starting.finalize_pod(pod)

    async def _replace(self, wl: dict[str, Any], members: Sequence[dict[str, Any]], first: Mapping[str, Any]) -> bool:
        """A Workload that no longer matches its group: its started Pods stopped, then it is
        deleted with the Event ``DeletedWorkload`` on the group's oldest Pod."""
        stop = jobevents.Stop("NoMatchingWorkload", matching.NOT_MATCHING)
        for pod in members:
            if not (pods.gated(pod) or pods.finished(pod) or is_deleting(pod)):
                await self.starting.stop_pod(pod, stop)
        assert self.kinds.workload is not None
        try:
            await self.ctx.objects.delete(self.kinds.workload, namespace=wl["metadata"].get("namespace"), name=_name(wl))
        except errors.NotFound:
            return False
        await record_event(self.ctx, first, type=EventType.NORMAL, reason=EventReason.DELETED_WORKLOAD,
                           message=jobevents.deleted(wl))
        return True

    async def _finish(self, wl: dict[str, Any] | None, members: Sequence[dict[str, Any]], first: Mapping[str, Any], message: str) -> None:
        """Kueue's finish of a group: ``Finished=True`` (``Succeeded``) with its message, the
        Event ``FinishedWorkload``, and every Pod's finalizer removed."""
        if wl is not None and self.kinds.workload is not None:
            done = {"type": kueue.COND_FINISHED, "status": "True", "reason": "Succeeded", "message": message}
            status = copy.deepcopy(wl.get("status") or {})
            status["conditions"] = with_condition(status.get("conditions") or [], done, now=self.ctx.now_text())
            written = await self.ctx.objects.update_status(self.kinds.workload, {**wl, "status": status})
            await record_event(self.ctx, first, type=EventType.NORMAL, reason=EventReason.FINISHED_WORKLOAD,
                               message=jobevents.finished(written))
        await self._finalize(members)

    async def _compose(self, namespace: str, group: str, members: Sequence[dict[str, Any]],
                       first: Mapping[str, Any], queue: str) -> None:
        """Kueue's ``ConstructComposableWorkload`` of a group, once no Pod of it runs."""
        if podgroups.active(members):
            return
        await self._finalize([p for p in members if not podgroups.runnable_or_succeeded(p)])
        why = podgroups.not_composable(group, members)
        count = podgroups.total_count(first)
        sets: list[dict[str, Any]] = []
        if why is None and isinstance(count, int):
            extra = podgroups.excess(members, count)
            await self._delete_excess([p for p in members if p in extra])
            members = [p for p in members if p not in extra]
            sets = podgroups.pod_sets_fast(members, count) if podgroups.fast_admission(first) else podgroups.pod_sets(members)
            why = podgroups.TOO_MANY_ROLES if len(sets) > podgroups.MAX_ROLES else None
        if why is not None:
            await record_event(self.ctx, first, type=EventType.WARNING, reason=EventReason.ERR_WORKLOAD_COMPOSE, message=why)
            return
        workload = self._new_workload(first, queue, sets)
        workload["metadata"] = {
            "name": group, "namespace": namespace,
            "annotations": {kueue.ANNOTATION_IS_GROUP_WORKLOAD: "true"},
            "ownerReferences": [_owner(p) for p in members],
        }
        assert self.kinds.workload is not None
        with contextlib.suppress(errors.AlreadyExists):  # made by a sync whose write the cache has not shown yet
            created = await self.ctx.objects.create(self.kinds.workload, workload)
            log.info("Workload %s created for pod group %s/%s in queue %s", adm.key_of(created), namespace, group, queue)
            await record_event(self.ctx, first, type=EventType.NORMAL, reason=EventReason.CREATED_WORKLOAD,
                               message=jobevents.created(created))


__all__ = ["PodGroups"]
