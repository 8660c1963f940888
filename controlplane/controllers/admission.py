"""Fleet admission with Kueue's API: quota decides *when* a queued workload may be placed.

In: hub workloads with the label ``kueue.x-k8s.io/queue-name`` (any kind the interpreter reads:
Job, Deployment, PyTorchJob ...), and Kueue's ``kueue.x-k8s.io/v1beta1`` ResourceFlavors,
ClusterQueues, LocalQueues, WorkloadPriorityClasses and Workloads (informers). Out:

* per queued workload a Workload in its namespace, named as Kueue names it
  (:func:`controlplane.admission.objects.workload_name`; owner: the workload, by which it is found) with
  one pod set per role the interpreter reads (a TrainJob's: its runtime's replicated Jobs, read
  with the runtimes the detector reads, :mod:`controlplane.controllers.trainingruntimes`),
  ``spec.queueName`` and the priority of its
  WorkloadPriorityClass (label ``kueue.x-k8s.io/priority-class``); a job of a kind Kueue suspends
  (batch/v1 Job, JobSet, the Kubeflow jobs, RayJob, RayCluster, TrainJob) is kept suspended at the hub until
  admitted (as Kueue does) and started then, with each pod set's admitted flavor's node labels in
  its pod template's nodeSelector and its admission checks' ``podSetUpdates`` merged in (a
  partially admitted Job with the admitted ``parallelism``; its own templates and count back when
  suspended again: :mod:`controlplane.controllers.jobstarting`);
* the admission cycle (:func:`controlplane.admission.core.decide`) over every ClusterQueue: an
  admitted Workload gets ``status.admission`` (ClusterQueue and flavor per resource) and the
  conditions QuotaReserved and Admitted; a waiting one QuotaReserved=False with Kueue's reason
  (Pending, Inadmissible) and message;
* preemption (the ClusterQueues' ``preemption`` policies): a target Workload is evicted
  (:mod:`controlplane.controllers.workloadevicting`: Evicted and Preempted, back in the queue at
  once, an Event naming the preemptor; its Job suspended again, its binding deleted); the
  preemptor is admitted by a later cycle, decided before any other workload, so none takes what
  its evictions freed;
* Kueue's ``stopPolicy`` of ClusterQueues and LocalQueues (:mod:`controlplane.admission.stopping`):
  a stopped queue admits nothing, ``HoldAndDrain`` evicts what it admitted the same way, and a
  drained Workload is requeued once its queue runs again;
* with ``--kueue-wait-for-pods-ready-timeout``, Kueue's waitForPodsReady: an admitted Workload
  whose pods are not ready in time, or not ready again within ``--kueue-wait-for-pods-ready-recovery-timeout``
  once they were (each kind's rule, as Kueue's integration of it reads its
  status: :mod:`controlplane.admission.podsready`), is evicted and requeued after a backoff, or
  deactivated past the limit (the writes in :mod:`controlplane.controllers.requeuing`, the rules in
  :mod:`controlplane.admission.requeuing`); the cycle returns when a deadline or a backoff ends;
* a Workload made inactive (``spec.active: false``, by hand too) is evicted as Kueue does it
  (``Evicted``/``Requeued=False`` with reason ``Deactivated``, its quota released and its job
  stopped), and queued again once active (``Requeued=True``, ``Reactivated``);
* with ``--kueue-fair-sharing`` the cycle runs with Kueue's fair sharing over the tree of cohorts
  (Kueue's Cohorts: parents, quota, weights), and ClusterQueues and Cohorts
  get ``status.fairSharing.weightedShare``;
* with ``--kueue-admission-fair-sharing``, Kueue's admission fair sharing: a ClusterQueue whose
  ``admissionScope.admissionMode`` is ``UsageBasedAdmissionFairSharing`` takes its workloads by
  their LocalQueue's recent usage, which its LocalQueues keep in ``status.fairSharing`` (sampled
  every ``usageSamplingInterval``: the cycle returns then);
* Kueue's admission checks (:mod:`controlplane.controllers.admissionchecks`): a Workload whose
  ClusterQueue names checks gets QuotaReserved and its checks ``Pending``, and Admitted only once
  every check is Ready; a ClusterQueue naming a missing or inactive check admits nothing;
* ClusterQueue and LocalQueue status (:mod:`controlplane.controllers.queuestatuses`):
  pending/reserving/admitted counts, usage per flavor, the condition ``Active``; a ClusterQueue being deleted (kept by Kueue's finalizer,
  :mod:`controlplane.controllers.resourceinuse`) admits nothing and gives up the reservations
  still waiting for admission checks;
* Kueue's pod groups (:mod:`controlplane.controllers.podgroups`): the Pods of one group share
  one Workload named for the group, made once the group's total count of Pods is there, and are
  ungated together once it is admitted;
* a Workload holding quota that no longer matches its job (:mod:`controlplane.admission.matching`)
  is deleted (``DeletedWorkload``; a started job stopped first) and made anew;
* a finished workload's Workload gets Finished=True, and its quota is free again; a deleted
  workload's Workload is deleted; a running Job's, JobSet's or TrainJob's Pods that will not run again (its
  succeeded ones, as the members report them) become its Workload's ``reclaimablePods``, and
  their quota is free again (:mod:`controlplane.admission.reclaimable`);
* Kueue's job reconciler's Events on the queued workload: ``CreatedWorkload``, ``UpdatedWorkload``
  (a held job's pod sets changed), ``FinishedWorkload``, and those of
  :mod:`controlplane.controllers.jobstarting`.

The detector holds a queued workload (no binding, so the scheduler never sees it) until its
Workload is admitted (:class:`~controlplane.controllers.admissiongate.AdmissionGate`), and adds the admitted flavor's cluster labels
to its placement.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from controlplane.admission import (
    checks,
    jobevents,
    matching,
    podgroups,
    pods,
    podsets,
    podsready,
    reclaimable,
    requeuing,
    stopping,
)
from controlplane.admission import objects as adm
from controlplane.admission import pending as pending_order
from controlplane.admission.core import Pending, Target, Usage, Waiting, decide
from controlplane.admission.core.preemption import HUMAN_REASONS
from controlplane.admission.metrics import QueueMetrics, local_queue_figures, queue_figures
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.events import EventType
from controlplane.apis.kueue_views import LocalQueueView, WorkloadView
from controlplane.apis.timestamps import parse_time
from controlplane.apis.views import ObjectView
from controlplane.controllers.admissionchecks import AdmissionChecking
from controlplane.controllers.admissiongate import API, Kinds, owner_of
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.informing import AssumedWrites, spec_unchanged
from controlplane.controllers.jobstarting import JobStarting
from controlplane.controllers.podgroups import PodGroups
from controlplane.controllers.queuestatuses import QueueStatuses
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.requeuing import Requeuing
from controlplane.controllers.trainingruntimes import TrainingRuntimes
from controlplane.controllers.workloadevicting import evict, unreserve
from controlplane.controllers.workloads import WorkloadRef, is_deleting, with_condition
from controlplane.interpreter import interpreter_for
from controlplane.objectclient import ResourceType, WatchEventType, errors

log = logging.getLogger(__name__)
CYCLE: Final = ("cycle",)

Key = tuple[str, ...]


class AdmissionController(KeyedController[Key]):
    """Keeps a Workload per queued workload and runs the admission cycle (keys: ``("cycle",)``
    or ``("workload", apiVersion, kind, namespace, name)``)."""

    name = "admission"

    def __init__(self, ctx: ControllerContext, *, metrics: QueueMetrics | None = None) -> None:
        super().__init__(ctx, workers=1)
        self.kinds = Kinds(ctx)
        self.metrics = metrics
        """Kueue's metrics (the hub's /metrics), fed from each cycle; None: not exported."""
        self._claims: set[str] = set()
        """Workloads whose preemptions the last cycle issued (Kueue's preemptions in progress)."""
        self.statuses = QueueStatuses(ctx, self.kinds)
        self._assumed = AssumedWrites()
        """The cycles' own Workload writes until the informer delivers them: a cycle that ran
        between the events of the last one's evictions would evict again for the same preemptor."""
        if self.kinds.workload is None:
            return
        self.requeuing = Requeuing(ctx, self.kinds.workload, metrics=metrics)
        self.starting = JobStarting(ctx, self.kinds, self.kinds.workload)
        self.checking = AdmissionChecking(ctx, self.kinds.workload, assume=self._assume, waited=self._waited, metrics=metrics)
        self.groups = PodGroups(ctx, self.kinds, self.starting, self._new_workload, self.requeuing.record_pods_ready)
        self.runtimes = TrainingRuntimes(ctx, self._on_source_changed)
        """A TrainJob's pod sets are its runtime's: a runtime's change is its TrainJobs' too."""
        ctx.add_workload_handler(self._on_source)
        kinds = self.kinds
        for rt in (kinds.cluster_queue, kinds.local_queue, kinds.flavor, kinds.workload, kinds.cohort, kinds.admission_check):
            if rt is not None:
                ctx.informer(rt).add_handler(self._on_queue_object)
        ctx.informer(self.kinds.workload).add_handler(self._on_workload)

    async def _on_source(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if adm.queue_name(obj) is None and (old is None or adm.queue_name(old) is None) and not pods.has_finalizer(obj):
            return
        ref = WorkloadRef.of(obj)
        if pods.is_pod(obj) and (group := podgroups.group_name(obj)) is not None:
            return await self.loop.add(("group", ref.namespace, group))  # Kueue's pod group: one key
        await self.loop.add(("workload", ref.api_version, ref.kind, ref.namespace, ref.name))

    async def _on_source_changed(self, obj: dict[str, Any]) -> None:
        await self._on_source(WatchEventType.MODIFIED, obj, obj)

    async def _on_queue_object(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if spec_unchanged(old, obj, event) and is_deleting(old) == is_deleting(obj) and (
            obj.get("kind") not in ("Workload", "AdmissionCheck")
            or (obj.get("kind") == "Workload" and adm.is_finished(old) == adm.is_finished(obj)
                and adm.admission_of(old) == adm.admission_of(obj) and checks.states_of(old) == checks.states_of(obj)
                and adm.reclaimable_pods(old) == adm.reclaimable_pods(obj)
                and requeuing.recovering_since(old) == requeuing.recovering_since(obj)  # a recovery clock to set
                and adm.is_true(old, kueue.COND_DEACTIVATION_TARGET) == adm.is_true(obj, kueue.COND_DEACTIVATION_TARGET))
        ):
            return
        await self.loop.add(CYCLE)

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        owner = owner_of(obj)
        if owner is None and podgroups.is_group_workload(obj):
            view = ObjectView(obj)
            return await self.loop.add(("group", view.namespace, view.name))
        if owner is not None and (
            old is None or event is WatchEventType.DELETED or adm.admission_of(old) != adm.admission_of(obj)
            or adm.is_true(old, kueue.COND_ADMITTED) != adm.is_true(obj, kueue.COND_ADMITTED)
            or adm.is_finished(old) != adm.is_finished(obj) or is_deleting(old) != is_deleting(obj)
            or checks.states_of(old) != checks.states_of(obj)  # its job's UpdatedAdmissionCheck
        ):
            await self.loop.add(("workload", owner.api_version, owner.kind, owner.namespace, owner.name))

    async def reconcile(self, key: Key) -> float | None:
        try:
            if key == CYCLE:
                return await self.cycle()
            elif key[0] == "group":
                if await self.groups.sync(key[1], key[2]):
                    await self.loop.add(CYCLE)
            else:
                await self.sync(WorkloadRef(*key[1:]))
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS
        return None

    # --- one queued workload ------------------------------------------------------------

    async def sync(self, ref: WorkloadRef) -> None:
        ctx, wl_rt = self.ctx, self.kinds.workload
        rt = ctx.registry.for_kind(ref.api_version, ref.kind)
        if rt is None or wl_rt is None:
            return
        source = ctx.cached(rt, ref.namespace, ref.name)
        if source is not None and pods.is_pod(source) and (group := podgroups.group_name(source)) is not None:
            return await self.loop.add(("group", ref.namespace, group))
        wl = self.kinds.workload_of(ref) if source is None else self.kinds.workload_for(source)
        queue = adm.queue_name(source) if source is not None else None
        if source is None or is_deleting(source) or queue is None:
            if wl is not None:
                await ctx.delete(wl_rt, ref.namespace, str(wl["metadata"]["name"]))
                await self.loop.add(CYCLE)
            if source is not None and is_deleting(source) and pods.is_pod(source):
                await self.starting.finalize_pod(source)
            return
        if pods.is_pod(source) and pods.managed(source):  # Kueue's pod controller (Kueue skips the others)
            if (stop := pods.stop_of(source, wl)) is not None:
                return await self.starting.stop_pod(source, stop)
            if pods.finished(source) or (wl is not None and adm.is_finished(wl)):
                await self.starting.finalize_pod(source)
        pod_sets = adm.pod_sets(self.runtimes.resolved(source))
        if pod_sets is None:
            return
        if wl is None:
            if podsets.startable(source) and not podsets.suspended(source) and not self._finished(source, ref):
                # As Kueue: a started job without a Workload is stopped first; it is made next sync.
                return await self.starting.stop_without_workload(source)
            created = await ctx.objects.create(wl_rt, self._new_workload(source, queue, pod_sets))
            log.info("Workload %s created for %s in queue %s", adm.key_of(created), ref, queue)
            await record_event(ctx, source, type=EventType.NORMAL, reason=EventReason.CREATED_WORKLOAD,
                               message=jobevents.created(created))
        elif (podsets.startable(source) and adm.admission_of(wl) is not None
              and not matching.equivalent(pod_sets, wl, suspended=podsets.suspended(source))):
            # As Kueue: quota held for pods the job no longer has is given back, and it queues anew.
            await self.starting.replace_workload(wl, source)
            await self.loop.add(CYCLE)
        elif adm.admission_of(wl) is None and not adm.is_finished(wl):
            if podsets.startable(source) and not podsets.suspended(source):
                # Stopped first (its count restored): the Workload never takes a partial admission's count.
                return await self._follow_source(wl_rt, wl, source, ref)
            # Still waiting: the Workload follows the workload's pods, queue and priority (as Kueue
            # does for a suspended job).
            wanted = self._new_workload(source, queue, pod_sets, defaults=wl_rt.defaults)["spec"]
            spec = WorkloadView(wl).spec
            if isinstance(active := spec.get("active"), bool):
                wanted["active"] = active  # Kueue's switch: set by hand, or past the requeuing limit
            if spec != wanted:
                written = await ctx.objects.update(wl_rt, {**wl, "spec": wanted})
                if spec.get("podSets") != wanted.get("podSets"):  # not a queue or priority alone
                    await record_event(ctx, source, type=EventType.NORMAL, reason=EventReason.UPDATED_WORKLOAD,
                                       message=jobevents.updated(written))
                return
            await self._follow_source(wl_rt, wl, source, ref)
        else:
            await self._follow_source(wl_rt, wl, source, ref)

    def _priority(self, source: Mapping[str, Any]) -> tuple[str | None, int]:
        name = ((source.get("metadata") or {}).get("labels") or {}).get(kueue.LABEL_PRIORITY_CLASS)
        for pc in self.kinds.items(self.kinds.priority_class):
            if name and (pc.get("metadata") or {}).get("name") == name and isinstance(pc.get("value"), int):
                return name, int(pc["value"])
        return None, 0

    def _new_workload(
        self, source: Mapping[str, Any], queue: str, pod_sets: list[dict[str, Any]],
        *, defaults: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """The Workload of ``source``; with the kind's ``defaults``, as the API server stores it
        (Kueue's CRD defaults), so that a stored Workload is compared with what it would become."""
        meta = source.get("metadata") or {}
        priority_class, priority = self._priority(source)
        spec: dict[str, Any] = {"queueName": queue, "podSets": pod_sets, "priority": priority}
        if priority_class:
            spec["priorityClassName"] = priority_class
            spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
        owner = {
            "apiVersion": source.get("apiVersion"), "kind": source.get("kind"), "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True,
        }
        workload = {
            "apiVersion": API, "kind": "Workload",
            "metadata": {
                "name": adm.workload_name_of(source), "namespace": meta.get("namespace"),
                "labels": adm.workload_labels(source), "ownerReferences": [owner],
            },
            "spec": spec,
        }
        if defaults is not None:
            defaults(workload)
        return workload

    async def _follow_source(self, wl_rt: ResourceType, wl: dict[str, Any], source: dict[str, Any], ref: WorkloadRef) -> None:
        """Finished → Finished=True (quota freed); a running Job's, JobSet's or TrainJob's Pods that
        will not run again → the Workload's ``reclaimablePods`` (their quota freed,
        :mod:`controlplane.admission.reclaimable`); a job of a kind Kueue suspends is suspended
        until admitted, then started (:class:`~controlplane.controllers.jobstarting.JobStarting`)."""
        ctx = self.ctx
        phase = self._finished(source, ref)
        if phase is not None and not adm.is_finished(wl):
            finished = {"type": kueue.COND_FINISHED, "status": "True", "reason": str(phase), "message": f"Job finished: {phase}"}
            updated = copy.deepcopy(wl)
            status = updated.setdefault("status", {})
            status["conditions"] = with_condition(status.get("conditions") or [], finished, now=ctx.now_text())
            written = await ctx.objects.update_status(wl_rt, updated)
            await record_event(ctx, source, type=EventType.NORMAL, reason=EventReason.FINISHED_WORKLOAD,
                               message=jobevents.finished(written))
            return
        if phase is None and (status := reclaimable.status_with(wl, self.runtimes.resolved(source))) is not None:
            wl = await ctx.objects.update_status(wl_rt, {**wl, "status": status})  # the cycle frees their quota
        await self.requeuing.record_pods_ready(wl, podsready.pods_ready(self.runtimes.resolved(source)))
        if phase is None and podsets.startable(source):
            await self.starting.follow(wl, source, ref)
        elif phase is None and pods.is_pod(source):
            await self.starting.ungate(wl, source, ref)

    @staticmethod
    def _finished(source: Mapping[str, Any], ref: WorkloadRef) -> str | None:
        """The phase a finished workload ended in (the interpreter's word), None while it runs."""
        interpreter = interpreter_for(ref.api_version, ref.kind)
        phase = interpreter.finished(source.get("status")) if interpreter is not None else None
        return None if phase is None else str(phase)

    # --- the admission cycle -----------------------------------------------------------------

    async def cycle(self) -> float | None:
        """One admission cycle; returns when to run again (a PodsReady deadline or the end of a
        requeuing backoff), None when nothing waits on time."""
        started = time.perf_counter()
        kinds = self.kinds
        now = self.ctx.now()
        wake: list[float] = []
        flavors = kinds.flavors()
        cq_objs = {str(o["metadata"]["name"]): o for o in kinds.items(kinds.cluster_queue)}
        cohort_objs = {str(o["metadata"]["name"]): o for o in kinds.items(kinds.cohort)}
        cohorts = {name: adm.cohort(o) for name, o in cohort_objs.items()}
        queues = {name: adm.cluster_queue(o, flavors) for name, o in cq_objs.items()}
        usage = Usage(queues, cohorts)  # the quota tree, built once per cycle
        queues = adm.deactivate_cycles(queues, usage.cycles)
        unusable = {name: checks.unusable_checks(o, kinds.admission_checks()) for name, o in cq_objs.items()}
        queues = adm.deactivate_unusable_checks(queues, unusable)
        fair_sharing = self.ctx.settings.kueue_fair_sharing
        lqs = self.statuses.local_queues()
        namespaces = {str(o["metadata"]["name"]): (o["metadata"].get("labels") or {}) for o in self.ctx.informer(self.ctx.namespace_rt).items()}
        workloads = self._assumed.overlay({adm.key_of(w): w for w in kinds.items(kinds.workload)})
        pending: list[Pending] = []
        unqueued: dict[str, Waiting] = {}
        admitted = []
        timed_out: list[dict[str, Any]] = []
        drained: list[tuple[dict[str, Any], stopping.Drain]] = []
        backing_off: list[Waiting] = []
        # Only a HoldAndDrain queue makes the cycle look at each admitted Workload's queues.
        draining = any(stopping.stop_policy(o) == stopping.HOLD_AND_DRAIN for o in (*cq_objs.values(), *lqs.values()))
        for key, wl in list(workloads.items()):
            if adm.is_finished(wl) or is_deleting(wl):
                continue
            if requeuing.is_active(wl) and adm.is_true(wl, kueue.COND_DEACTIVATION_TARGET):
                wl = workloads[key] = self._assume(await self.requeuing.make_inactive(wl))  # any controller's
            if not requeuing.is_active(wl):
                if not adm.is_true(wl, kueue.COND_EVICTED):  # as Kueue: evicted (its quota free for this cycle)
                    workloads[key] = self._assume(await self.requeuing.deactivate(wl))
                continue
            held = adm.admitted_of(wl)
            if held is not None:
                going = (cq := cq_objs.get(held.queue)) is None or is_deleting(cq)
                if going and not adm.is_true(wl, kueue.COND_ADMITTED):
                    # As Kueue: a reservation (checks pending) in a queue being deleted is given up.
                    message = f"ClusterQueue {held.queue} is terminating or missing"
                    wl = workloads[key] = self._assume(await unreserve(
                        self.ctx, self.checking.rt, wl, reason=kueue.REASON_INADMISSIBLE, message=message))
                    continue
                if draining and (why := stopping.drain(lqs.get(adm.local_queue_of(wl)), cq_objs.get(held.queue))):
                    drained.append((wl, why))  # evicted below: its quota is free for this cycle
                    continue
                deadline = self._pods_ready_deadline(wl)
                if deadline is not None and deadline <= now:
                    timed_out.append(wl)  # evicted below: its quota is free for this cycle
                    continue
                if deadline is not None:
                    wake.append((deadline - now).total_seconds())
                if await self.checking.follow(wl, cq_objs.get(held.queue)):
                    continue  # evicted by a check: its quota is free for this cycle
                admitted.append(held)
                continue
            namespace, queue_name = adm.local_queue_of(wl)
            lq = lqs.get((namespace, queue_name))
            cq_name = LocalQueueView(lq).cluster_queue
            if (until := requeuing.requeue_at(wl)) is not None:
                if until > now:  # its requeuing backoff: pending, not a candidate yet
                    wake.append((until - now).total_seconds())
                    backing_off.append(Waiting(key, cq_name, kueue.REASON_INADMISSIBLE, "", 0))
                    continue
                wl = workloads[key] = self._assume(await self.requeuing.release(wl))
            if (restarted := stopping.restarted(wl, lq, cq_objs.get(cq_name))) is not None:
                wl = workloads[key] = self._assume(await self.requeuing.release(wl, restarted=restarted))
            if lq is None:
                unqueued[key] = Waiting(key, "", "Inadmissible", f"LocalQueue {queue_name} doesn't exist", 0)
            elif (stopped := stopping.waiting_in_stopped(lq, queue_name)) is not None:
                unqueued[key] = Waiting(key, "", kueue.REASON_INADMISSIBLE, stopped, 0)  # out of line, as in Kueue
            elif cq_name in cq_objs and not adm.namespace_allowed(cq_objs[cq_name], namespaces.get(namespace, {})):
                unqueued[key] = Waiting(key, cq_name, "Inadmissible", "Workload namespace doesn't match ClusterQueue selector", 0)
            else:
                pending.append(pending_order.queued(wl, cq_name, timestamp=self.ctx.settings.wait_for_pods_ready.timestamp))
        for wl in timed_out:
            self._assume(await self.requeuing.time_out(wl))
        for wl, why in drained:
            await self._drain(wl, why)
        decisions = decide(
            queues, pending, admitted, flavors, fair_sharing=fair_sharing, cohorts=cohorts, usage=usage, claims=self._claims,
            preemption_strategies=self.ctx.settings.kueue_fair_sharing_preemption_strategies,
            fair_usage=self.statuses.fair_usage(cq_objs, lqs),
        )
        # Those preempting now are decided first next cycle, before anyone takes what their evictions free.
        self._claims = {p.key for p in decisions.preempting}
        for preempting in decisions.preempting:
            for target in preempting.targets:
                await self._evict(workloads[target.key], workloads[preempting.key], target, preempting.queue)
        for decision in decisions.admitted:  # ``usage`` holds them now, with the admitted ones
            await self._admit(workloads[decision.key], adm.admission_status(decision), decision.queue)
        for waiting in (*decisions.waiting, *unqueued.values()):
            await self._wait(workloads[waiting.key], waiting)
        holders = {a.key: a.queue for a in admitted} | {d.key: d.queue for d in decisions.admitted}
        # Of them, those admitted (the others wait for admission checks), as written this cycle.
        seen = self._assumed.overlay({adm.key_of(w): w for w in kinds.items(kinds.workload)})
        admitted_keys = {key for key in holders if key in seen and adm.is_true(seen[key], kueue.COND_ADMITTED)}
        queued = (*decisions.waiting, *backing_off)  # backing off: pending, though no candidate yet
        active = {
            name: stopping.cluster_queue_active(o, adm.missing_flavors(o, flavors), queues[name].inactive_reason, *unusable[name])
            for name, o in cq_objs.items()
        }
        holdings = {a.key: a.usage for a in admitted} | {d.key: d.usage() for d in decisions.admitted}
        if self.metrics is not None:
            self.metrics.attempt(time.perf_counter() - started, admitted=bool(decisions.admitted))
            in_line = (*queued, *(u for u in unqueued.values() if u.queue))
            shares = {name: usage.share(usage.cohorts[name]) for name in cohort_objs} if fair_sharing else None
            figures = queue_figures(queues, cq_objs, usage, in_line, holders, fair_sharing=fair_sharing, admitted=admitted_keys)
            self.metrics.record_queues(figures, cohort_shares=shares)
            self.metrics.local_queues.record(local_queue_figures(lqs, active, workloads, in_line, holdings, admitted_keys))
        sample_in = await self.statuses.write(
            queues, cq_objs, lqs, workloads, queued, holders, admitted_keys, usage, active, holdings)
        if sample_in is not None:  # admission fair sharing: the next sample of a LocalQueue's usage
            wake.append(sample_in)
        for name, obj in cohort_objs.items():
            current = ObjectView(obj).status
            status = {k: v for k, v in current.items() if k != "fairSharing"}
            if fair_sharing:
                status["fairSharing"] = {"weightedShare": usage.share(usage.cohorts[name])}
            if status != current:
                await self.statuses.write_status(kinds.cohort, obj, status)
        return max(0.0, min(wake)) if wake else None

    def _assume(self, written: dict[str, Any]) -> dict[str, Any]:
        self._assumed.assume(adm.key_of(written), written)
        return written

    def _pods_ready_deadline(self, wl: Mapping[str, Any]) -> datetime | None:
        """When an admitted Workload times out waiting for its pods (None: not counting, or its
        workload's status says they are ready, though PodsReady is not written yet)."""
        deadline = requeuing.ready_deadline(wl, self.ctx.settings.wait_for_pods_ready)
        if deadline is None:
            return None
        owner = owner_of(wl)
        if owner is None and podgroups.is_group_workload(wl):
            view = ObjectView(wl)
            group = self.groups.members(view.namespace, view.name)
            return deadline if group and not podsready.pod_group(group) else None
        if owner is None:
            return None
        rt = self.ctx.registry.for_kind(owner.api_version, owner.kind)
        source = self.ctx.cached(rt, owner.namespace, owner.name) if rt is not None else None
        return deadline if source is not None and podsready.pods_ready(self.runtimes.resolved(source)) is False else None

    async def _admit(self, wl: dict[str, Any], admission: dict[str, Any], queue: str) -> None:
        rt = self.kinds.workload
        assert rt is not None
        now = self.ctx.now_text()
        updated = copy.deepcopy(wl)
        status = updated.setdefault("status", {})
        status["admission"] = admission
        cq = next((o for o in self.kinds.items(self.kinds.cluster_queue) if o["metadata"]["name"] == queue), None)
        states = checks.synced_states(checks.states_of(wl), checks.check_names(cq, admission) if cq else (), now=now)
        if states:
            status["admissionChecks"] = states
        admitted = checks.all_ready(states)
        conditions = status.get("conditions") or []
        for ctype in (kueue.COND_EVICTED, kueue.COND_PREEMPTED):
            # As Kueue does on readmission: the eviction is history.
            if (before := adm.condition(wl, ctype)) is not None and before.get("status") == "True":
                conditions = with_condition(conditions, {
                    "type": ctype, "status": "False", "reason": kueue.REASON_QUOTA_RESERVED,
                    "message": f"Previously: {before.get('message', '')}",
                }, now=now)
        for cond in (
            {"type": kueue.COND_QUOTA_RESERVED, "status": "True", "reason": kueue.REASON_QUOTA_RESERVED,
             "message": f"Quota reserved in ClusterQueue {queue}"},
            # With admission checks, Admitted waits for them (:mod:`controlplane.controllers.admissionchecks`).
            *([{"type": kueue.COND_ADMITTED, "status": "True", "reason": kueue.REASON_ADMITTED,
                "message": "The workload is admitted"}] if admitted else []),
            # Admitted with its job suspended: the PodsReady timeout counts from now.
            *([requeuing.pods_ready_condition(False)] if admitted and self.ctx.settings.wait_for_pods_ready.enabled else []),
        ):
            conditions = with_condition(conditions, cond, now=now)
        status["conditions"] = conditions
        written = self._assume(await self.ctx.objects.update_status(rt, updated))
        log.info("Workload %s admitted by ClusterQueue %s", adm.key_of(wl), queue)
        if self.metrics is not None:
            self.metrics.admitted(queue, waited_seconds=self._waited(wl), local_queue=adm.local_queue_of(wl), admitted=admitted)
        await record_event(self.ctx, written, type=EventType.NORMAL, reason=EventReason.QUOTA_RESERVED,
                           message=f"Quota reserved in ClusterQueue {queue}")
        if admitted:
            await record_event(self.ctx, written, type=EventType.NORMAL, reason=EventReason.ADMITTED,
                               message=f"Admitted by ClusterQueue {queue}")

    def _waited(self, wl: Mapping[str, Any]) -> float:
        """Seconds since the Workload was created or, evicted, requeued (Kueue's admission wait)."""
        since = WorkloadView(wl).creation_timestamp
        evicted = adm.condition(wl, kueue.COND_EVICTED) or {}
        if evicted.get("status") == "True" and evicted.get("lastTransitionTime"):
            since = str(evicted["lastTransitionTime"])
        try:
            return (self.ctx.now() - parse_time(since)).total_seconds()
        except ValueError:
            return 0.0

    async def _evict(self, wl: dict[str, Any], preemptor: Mapping[str, Any], target: Target, preempting_queue: str) -> None:
        """Kueue's eviction by preemption, in one write (:func:`evict`): Evicted and Preempted, the
        quota released (back to the queue), and an Event naming the preemptor."""
        rt = self.kinds.workload
        assert rt is not None
        if adm.is_true(wl, kueue.COND_EVICTED):
            return  # already on its way out
        uid = (preemptor.get("metadata") or {}).get("uid")
        message = (
            f"Preempted to accommodate a workload (UID: {uid}, Workload: {adm.key_of(preemptor)}) "
            f"due to {HUMAN_REASONS[target.reason]}"
        )
        preempted = {"type": kueue.COND_PREEMPTED, "status": "True", "reason": str(target.reason), "message": message}
        # As Kueue: a preempted workload is queued again at once (no backoff).
        self._assume(await evict(self.ctx, rt, wl, reason=kueue.REASON_PREEMPTED, message=message,
                                 event=EventReason.PREEMPTED, requeued=True, also=[preempted]))
        log.info("Workload %s preempted by %s (%s)", adm.key_of(wl), adm.key_of(preemptor), target.reason)
        if self.metrics is not None:
            self.metrics.evicted(target.queue, reason=kueue.REASON_PREEMPTED, local_queue=adm.local_queue_of(wl),
                                 preempting_cluster_queue=preempting_queue, preemption_reason=str(target.reason))

    async def _drain(self, wl: dict[str, Any], why: stopping.Drain) -> None:
        """Kueue's eviction of an admitted Workload whose queue is ``HoldAndDrain``: held out of
        line (``Requeued=False``) until the queue runs again."""
        rt = self.kinds.workload
        assert rt is not None
        queue = str((adm.admission_of(wl) or {}).get("clusterQueue") or "")
        self._assume(await evict(self.ctx, rt, wl, reason=why.reason, message=why.message))
        if self.metrics is not None:
            self.metrics.evicted(queue, reason=why.reason, local_queue=adm.local_queue_of(wl))

    async def _wait(self, wl: dict[str, Any], waiting: Waiting) -> None:
        rt = self.kinds.workload
        assert rt is not None
        cond = {"type": kueue.COND_QUOTA_RESERVED, "status": "False", "reason": waiting.reason, "message": waiting.message}
        current = adm.condition(wl, kueue.COND_QUOTA_RESERVED)
        if current is not None and all(current.get(k) == v for k, v in cond.items()):
            return
        updated = copy.deepcopy(wl)
        status = updated.setdefault("status", {})
        status["conditions"] = with_condition(status.get("conditions") or [], cond, now=self.ctx.now_text())
        written = self._assume(await self.ctx.objects.update_status(rt, updated))
        await record_event(self.ctx, written, type=EventType.NORMAL, reason=EventReason.PENDING, message=waiting.message)


__all__ = ["AdmissionController"]
