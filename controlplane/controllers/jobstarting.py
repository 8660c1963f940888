"""Starting and stopping a queued job at the hub, as Kueue's job reconciler does.

In: a queued job of a kind Kueue suspends (:func:`controlplane.admission.podsets.startable`:
batch/v1 Job, JobSet, the Kubeflow jobs, RayJob, RayCluster, TrainJob) and its Workload. Out, written to
the hub's job: admitted, it is unsuspended with every pod set's template started (its flavor's
node labels and its admission checks' ``podSetUpdates``, :mod:`controlplane.admission.podsets`)
and a partially admitted Job with the admitted ``parallelism``; not admitted, it is suspended
again, then (a Job's ``startTime`` cleared first) its own templates and count are restored. A
``podSetUpdates`` conflict is Kueue's ``FailedToStart``: the Workload finishes and the job stays
suspended. A Pod (Kueue's pod integration) is started by removing its scheduling gate
``kueue.x-k8s.io/admission``, with the same labels merged in (:mod:`controlplane.admission.pods`);
as it cannot be gated again, a started Pod whose Workload is evicted, not admitted or missing is
stopped as Kueue's pod controller stops it: ``TerminationTarget=True`` with Kueue's reason, an
Event ``Stopped``, then deleted, and Kueue's finalizer ``kueue.x-k8s.io/managed`` is removed once
the Pod finishes, is deleted or its Workload finishes. The admission gate lets the job propagate
only once it is started. The job gets Kueue's job reconciler's Events
(:mod:`controlplane.admission.jobevents`): ``Started``, ``Stopped`` with why, ``UpdatedAdmissionCheck``
while its checks are pending, ``FinishedWorkload`` when it fails to start.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Mapping
from typing import Any, Final

from controlplane.admission import checks, jobevents, matching, pods, podsets
from controlplane.admission import objects as adm
from controlplane.apis import kueue_jobs
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.events import EventType
from controlplane.controllers.admissiongate import JOB, Kinds
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.workloads import WorkloadRef, with_condition
from controlplane.objectclient import ResourceType, errors

log = logging.getLogger(__name__)
#: How many conflicts with other writers a job's stop rides out before it gives up (and its
#: sync is retried).
_STOP_CONFLICTS: Final = 5


def _is_job(obj: Mapping[str, Any]) -> bool:
    return (str(obj.get("apiVersion")), str(obj.get("kind"))) == JOB


class JobStarting:
    """Kueue's ``StartJob`` / ``StopJob`` for the hub's queued jobs."""

    def __init__(self, ctx: ControllerContext, kinds: Kinds, wl_rt: ResourceType) -> None:
        self.ctx, self.kinds, self.wl_rt = ctx, kinds, wl_rt
        self._told_checks: dict[tuple[str, str], str] = {}
        """Per Workload and job UID (a pod group's Workload has several Pods), the
        ``UpdatedAdmissionCheck`` message last recorded on the job (so a message is told once, not
        on every sync)."""

    async def follow(self, wl: dict[str, Any], source: dict[str, Any], ref: WorkloadRef) -> None:
        """Start ``source`` once its Workload is admitted, stop it when it no longer is."""
        ctx = self.ctx
        admitted = adm.admission_of(wl) is not None and adm.is_true(wl, kueue.COND_ADMITTED)
        flipping = admitted == podsets.suspended(source)
        if not admitted and podsets.suspended(source):
            await self.tell_checks(wl, source)
        rt = ctx.registry.require(ref.api_version, ref.kind)
        # Kueue's podSetsInfo: admitted, the admitted count (partial admission); suspended again, its own.
        updated = {**source, "spec": dict(source.get("spec") or {})}  # the count is in spec's own fields
        if not adm.set_job_count(updated, adm.pod_count(wl, admitted=admitted) if admitted or flipping else None) and not flipping:
            if not admitted and _is_job(source) and "startTime" in (source.get("status") or {}):
                # kube's Job controller clears a suspended Job's startTime, so that its pod
                # template's scheduling directives may change until it starts again (the next
                # admission's flavor labels); the hub's Job has no Job controller of its own.
                status = {k: v for k, v in source["status"].items() if k != "startTime"}
                await ctx.objects.update_status(rt, {**source, "status": status})
            return
        updated = copy.deepcopy(updated)
        kueue_jobs.set_job_suspend(updated, not admitted)
        if flipping and not admitted:
            return await self._stop(rt, updated, wl)
        if flipping:
            if adm.is_finished(wl):
                return  # it failed to start
            try:  # the flavors' node labels and the checks' podSetUpdates
                updated = podsets.start(updated, wl, self._node_labels(wl))
            except checks.PodSetUpdateConflict as err:  # as Kueue: no point in retrying
                return await self._failed_to_start(wl, source, err)
        written = await ctx.objects.update(rt, updated)
        if flipping:
            await record_event(ctx, written, type=EventType.NORMAL, reason=EventReason.STARTED, message=jobevents.started(wl))
        log.info("%s %s", ("unsuspended" if admitted else "suspended until admitted:") if flipping else "admitted count set:", ref)

    async def ungate(self, wl: dict[str, Any], pod: dict[str, Any], ref: WorkloadRef, *, pod_set: str = "main") -> None:
        """Kueue's ``Run`` of a Pod: once its Workload is admitted, its scheduling gate removed and
        its pod set's (a pod group's Pod: its role's) node labels and checks' ``podSetUpdates``
        merged in. A Pod is never gated again (kube lets gates only be removed): stopped, it is
        held at the hub."""
        admitted = adm.admission_of(wl) is not None and adm.is_true(wl, kueue.COND_ADMITTED)
        if not admitted and pods.gated(pod):
            await self.tell_checks(wl, pod)
        if not admitted or not pods.gated(pod) or adm.is_finished(wl):
            return
        try:
            started = pods.start(pod, self._node_labels(wl).get(pod_set, {}), checks.states_of(wl), pod_set=pod_set)
        except checks.PodSetUpdateConflict as err:
            return await self._failed_to_start(wl, pod, err)
        written = await self.ctx.objects.update(self.ctx.registry.require(ref.api_version, ref.kind), started)
        await record_event(self.ctx, written, type=EventType.NORMAL, reason=EventReason.STARTED, message=jobevents.started(wl))
        log.info("ungated: %s", ref)

    async def stop_without_workload(self, job: dict[str, Any]) -> None:
        """Kueue's stop of a started job it finds no Workload for (``NoMatchingWorkload``):
        suspended, with nothing to restore its templates from; its Workload is made next."""
        suspended = copy.deepcopy(job)
        kueue_jobs.set_job_suspend(suspended, True)
        await self._stop(self.ctx.registry.require(str(job.get("apiVersion")), str(job.get("kind"))), suspended, None)

    async def tell_checks(self, wl: Mapping[str, Any], job: Mapping[str, Any]) -> None:
        """Kueue's ``UpdatedAdmissionCheck`` on a held job (each Pod of a pod group) whose Workload
        holds quota: the pending checks' messages, once per change."""
        uid = (str((wl.get("metadata") or {}).get("uid") or ""), str((job.get("metadata") or {}).get("uid") or ""))
        message = jobevents.admission_checks_message(wl) if adm.admission_of(wl) is not None else ""
        if not message:
            self._told_checks.pop(uid, None)
            return
        if self._told_checks.get(uid) == message:
            return
        self._told_checks[uid] = message
        await record_event(self.ctx, job, type=EventType.NORMAL, reason=EventReason.UPDATED_ADMISSION_CHECK, message=message)

    async def stop_pod(self, pod: dict[str, Any], stop: pods.Stop) -> None:
        """Kueue's ``Stop`` of a Pod: ``TerminationTarget=True`` (the stop's reason and message) in
        its status, the Pod deleted (it stays, ``Terminating``, until its finalizers go), and an
        Event ``Stopped`` with the message."""
        rt = self.ctx.registry.require("v1", "Pod")
        status = copy.deepcopy(pod.get("status") or {})
        status["conditions"] = with_condition(status.get("conditions") or [], pods.termination_target(stop), now=self.ctx.now_text())
        try:
            written = await self.ctx.objects.update_status(rt, {**pod, "status": status})
        except errors.NotFound:
            return
        meta = written["metadata"]
        await self.ctx.delete(rt, meta.get("namespace"), str(meta["name"]))
        await record_event(self.ctx, written, type=EventType.NORMAL, reason=EventReason.STOPPED, message=stop.message)
        log.info("stopped (%s): %s", stop.reason, WorkloadRef.of(written))

    async def finalize_pod(self, pod: dict[str, Any]) -> None:
        """Kueue's ``Finalize``: its finalizer ``kueue.x-k8s.io/managed`` removed."""
        if pods.has_finalizer(pod):
            with contextlib.suppress(errors.NotFound):
                await self.ctx.objects.update(self.ctx.registry.require("v1", "Pod"), pods.without_finalizer(pod))

    def _node_labels(self, wl: Mapping[str, Any]) -> dict[str, dict[str, str]]:
        """Per pod set, its admitted flavors' node labels that select nodes (not clusters)."""
        cluster_keys = {k for c in self.ctx.clusters.items() for k in ((c.get("metadata") or {}).get("labels") or {})}
        return adm.node_labels_by_pod_set(adm.admission_of(wl) or {}, self.kinds.flavors(), cluster_keys)

    async def _failed_to_start(self, wl: dict[str, Any], job: dict[str, Any], err: checks.PodSetUpdateConflict) -> None:
        """Kueue's ``FailedToStart``: the Workload finishes (its quota freed, the job's Event
        ``FinishedWorkload``), the job stays held."""
        failed = {"type": kueue.COND_FINISHED, "status": "True", "reason": checks.REASON_FAILED_TO_START, "message": str(err)}
        status = copy.deepcopy(wl.get("status") or {})
        status["conditions"] = with_condition(status.get("conditions") or [], failed, now=self.ctx.now_text())
        await self.ctx.objects.update_status(self.wl_rt, {**wl, "status": status})
        await record_event(self.ctx, job, type=EventType.NORMAL, reason=EventReason.FINISHED_WORKLOAD, message=jobevents.finished(wl))
        log.warning("%s failed to start: %s", WorkloadRef.of(job), err)

    async def replace_workload(self, wl: dict[str, Any], job: dict[str, Any]) -> None:
        """Kueue's ``ensureOneWorkload`` for a job whose Workload holds quota but no longer matches
        it (:func:`controlplane.admission.matching.equivalent`): a started job is stopped, its
        templates restored from that Workload, then the Workload is deleted, with the Event
        ``DeletedWorkload``; the job's next sync makes another."""
        rt = self.ctx.registry.require(str(job.get("apiVersion")), str(job.get("kind")))
        if not podsets.suspended(job):
            suspended = copy.deepcopy(job)
            kueue_jobs.set_job_suspend(suspended, True)
            await self._stop(rt, suspended, wl, stop=jobevents.Stop("NoMatchingWorkload", matching.NOT_MATCHING))
        meta = wl["metadata"]
        try:
            await self.ctx.objects.delete(self.wl_rt, namespace=meta.get("namespace"), name=str(meta["name"]))
        except errors.NotFound:
            return
        await record_event(self.ctx, job, type=EventType.NORMAL, reason=EventReason.DELETED_WORKLOAD,
                           message=jobevents.deleted(wl))
        log.info("Workload %s deleted: it no longer matches %s", adm.key_of(wl), WorkloadRef.of(job))

    async def _stop(self, rt: ResourceType, job: dict[str, Any], wl: Mapping[str, Any] | None,
                    *, stop: jobevents.Stop | None = None) -> None:
        """Kueue's ``Stop``: suspended (a Job's own count back) with the Event ``Stopped`` saying
        why (``stop``, else what the Workload says), a Job's startTime cleared (kube lets a
        suspended Job's scheduling directives change only until it starts), then its own pod
        templates back (the Workload's pod sets; none without a Workload)."""
        written = await self.ctx.objects.update(rt, job)
        stop = stop or jobevents.stop_of_started(wl) or jobevents.Stop("NotAdmitted", jobevents.NOT_ADMITTED)
        await record_event(self.ctx, written, type=EventType.NORMAL, reason=EventReason.STOPPED, message=stop.message)
        log.info("suspended until admitted: %s", WorkloadRef.of(job))
        step: dict[str, Any] | None = written
        conflicts = 0
        while step is not None:
            try:
                step = await self._restore(rt, step, wl)
            except errors.Conflict:
                # Another writer came in between (the detector's condition, a user's label): the
                # step is taken again on the latest job, for once the job is suspended no later
                # sync takes it, and the waiting Workload would follow the started templates.
                conflicts += 1
                if conflicts > _STOP_CONFLICTS:
                    raise
                step = await self.ctx.objects.get(rt, namespace=str(job["metadata"]["namespace"]), name=str(job["metadata"]["name"]))

    async def _restore(self, rt: ResourceType, job: dict[str, Any], wl: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """One step of a stopped job's way back to its own templates: a Job's startTime cleared,
        then every pod set's template restored from the Workload. The written job, None when there
        was nothing left to do."""
        if _is_job(job) and "startTime" in (job.get("status") or {}):
            status = {k: v for k, v in job["status"].items() if k != "startTime"}
            return await self.ctx.objects.update_status(rt, {**job, "status": status})
        if wl is None:
            return None
        restored = podsets.restore(job, wl)
        if restored == job:
            return None
        return await self.ctx.objects.update(rt, restored)


__all__ = ["JobStarting"]
