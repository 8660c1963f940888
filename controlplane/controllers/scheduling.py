"""The scheduler controller: the I/O side of scheduling (binding -> clusters and replicas).

In: ResourceBindings, Clusters (their spec and the capacity their agents report) and Works
(Applied, and pods a member reports it cannot place). Out, per binding: ``spec.clusters``
(and, where an alternative GPU shape won, the ``scheduler.gpufed.io/gpu-shapes``
annotation the binding controller reads), and in status the ``Scheduled`` condition with
its reason, the per-cluster ``explanation``, ``schedulerObservingAffinityName`` and
``observedGeneration``; Events ``Scheduled``/``FailedScheduling``/``ReplicasMoved`` on the
workload when the decision changes.

The decision itself is the pure ``controlplane.scheduler.core.schedule``. This module
decides *when* to run it, so placed work does not move for nothing:

* the binding's spec changed (``metadata.generation`` != ``status.observedGeneration``);
* it is not fully placed (``Scheduled`` is not True): retried on every capacity report of
  any cluster, and every 30 s in any case;
* a cluster it runs in is gone, or no longer admitted by the placement (affinity term,
  untolerated NoExecute taint);
* a member reported replicas it cannot place (``manifestStatuses[].unschedulable``) for
  the Work's current generation for longer than the grace period: those replicas are
  moved — the cluster keeps the rest and takes no new ones in that decision — but only
  when the move places at least as many replicas as before; a gang moves whole.

Capacity a decision promises is reserved (``Reservations``) after the spec write succeeds,
until the cluster's next report shows it used (``observe_report``), the Work reports
Applied (``mark_applied`` makes that exact) or it ages out. Reservations live in memory: a
new leader starts without them and trusts the next reports.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from controlplane.apis.meta import taints_tolerated
from controlplane.apis.work_v1alpha1 import ConditionType, ResourceBinding, ScheduledReason
from controlplane.apiserver.objects import WatchEventType
from controlplane.controllers.context import (
    INDEX_BINDING,
    INDEX_CLUSTER,
    ControllerContext,
    policy_ref_of_binding,
)
from controlplane.controllers.events import EventReason, EventType, record_event
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workloads import find_condition, is_deleting, with_condition
from controlplane.controllers.works import (
    ANNOTATION_GPU_SHAPES,
    ChosenShape,
    binding_key_of_work,
    cluster_of_namespace,
    encode_shapes,
)
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.scheduling import (
    ScheduledCondition,
    ScheduleResult,
    reserve_decision,
    schedule,
)
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import cluster_matches_affinity

log = logging.getLogger(__name__)

BindingKey = tuple[str, str]
UNPLACED_RETRY_SECONDS = 30.0
MAINTENANCE_SECONDS = 15.0


def _key_text(key: BindingKey) -> str:
    return f"{key[0]}/{key[1]}"


def _placement_facts(obj: Mapping[str, Any] | None) -> Any:
    """What about a Cluster can change where bindings may run (not its capacity)."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    ready = find_condition((obj.get("status") or {}).get("conditions"), "Ready")
    return (obj.get("spec"), meta.get("labels"), (ready or {}).get("status"), meta.get("deletionTimestamp"))


def unschedulable_pods(work: Mapping[str, Any]) -> int:
    """Pods the member reports it cannot place, when the report is about the Work's current generation."""
    generation = (work.get("metadata") or {}).get("generation")
    status = work.get("status") or {}
    applied = find_condition(status.get("conditions"), ConditionType.APPLIED)
    if applied is None or applied.get("observedGeneration") != generation:
        return 0
    return sum(int((m.get("unschedulable") or {}).get("pods") or 0) for m in status.get("manifestStatuses") or ())


def placement_broken(request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot]) -> str | None:
    """Why clusters the binding runs in can no longer hold it (gone, affinity, NoExecute taint), or None."""
    terms = request.placement.affinity_terms()
    term = next((t for t in terms if t.affinity_name == request.previous_affinity_name), terms[0])
    for name in sorted(request.previous):
        snapshot = snapshots.get(name)
        if snapshot is None:
            return f"cluster {name} is gone"
        if not cluster_matches_affinity(snapshot.view, term).fits:
            return f"cluster {name} no longer matches the placement's cluster affinity"
        ok, taint = taints_tolerated(snapshot.view.taints, request.tolerations, effects=("NoExecute",))
        if not ok and taint is not None:
            return f"cluster {name} has taint {taint.key}:NoExecute that the placement does not tolerate"
    return None


def decide_with_moves(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    moves: Mapping[str, int],
    *,
    reservations: Reservations,
    now: datetime,
) -> tuple[BindingRequest, ScheduleResult] | None:
    """Re-decide with ``moves`` (cluster -> pods its member cannot place) taken off those clusters.

    Those clusters keep what they run and take nothing new. None when the move would place
    fewer replicas than the binding has now (the pods then wait where they are).
    """
    capped = [s.with_shapes(()) if s.name in moves else s for s in snapshots]
    if request.gang:
        previous = {k: v for k, v in request.previous.items() if k not in moves}
    else:
        previous = {k: v - min(v, moves.get(k, 0)) for k, v in request.previous.items()}
        previous = {k: v for k, v in previous.items() if v}
    moved = replace(request, previous=previous)
    result = schedule(moved, capped, reservations=reservations, now=now)
    if result.placed < min(request.replicas, sum(request.previous.values())) or not result.condition.status:
        return None
    return moved, result


class SchedulerController:
    """Reconciles bindings (keys: ``(namespace, name)``) into scheduling decisions."""

    name = "scheduler"

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.loop: ReconcileLoop[BindingKey] = ReconcileLoop(self.name, self.reconcile, workers=ctx.settings.workers)
        self.reservations = Reservations()
        self._snapshots: dict[str, ClusterSnapshot] = {}
        self._unplaced: set[BindingKey] = set()
        self._unschedulable_since: dict[BindingKey, dict[tuple[str, int], datetime]] = {}
        # Per binding and cluster, the Work generation whose unschedulable report was acted on:
        # until the binding controller rewrites the Work, that report must not move replicas again.
        self._acted_on: dict[BindingKey, dict[str, int]] = {}
        ctx.bindings.add_handler(self._on_binding)
        ctx.clusters.add_handler(self._on_cluster)
        ctx.works.add_handler(self._on_work)

    # --- event handlers ---------------------------------------------------------------

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")))
        if event is WatchEventType.DELETED:
            self._forget(key)
            return
        scheduled = find_condition((obj.get("status") or {}).get("conditions"), ConditionType.SCHEDULED)
        if scheduled is None or scheduled.get("status") != "True":
            self._unplaced.add(key)
        else:
            self._unplaced.discard(key)
        if (
            event is WatchEventType.MODIFIED
            and old is not None
            and (old.get("metadata") or {}).get("generation") == meta.get("generation")
            and not is_deleting(obj)
        ):
            return
        await self.loop.add(key)

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        if event is WatchEventType.DELETED:
            self._snapshots.pop(name, None)
            await self._requeue_cluster(name)
            await self._requeue_unplaced()
            return
        try:
            snapshot = ClusterSnapshot.from_cluster(obj)
        except (ValueError, TypeError) as exc:
            log.warning("cluster %s has a status the scheduler cannot read: %s", name, exc)
            return
        self._snapshots[name] = snapshot
        if snapshot.report_time is not None:
            self.reservations.observe_report(
                name,
                reported_at=snapshot.report_time,
                settle=timedelta(seconds=self.ctx.settings.reservation_settle_seconds),
            )
        if event is WatchEventType.ADDED or _placement_facts(old) != _placement_facts(obj):
            await self._requeue_cluster(name)
        await self._requeue_unplaced()

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = binding_key_of_work(obj)
        cluster = cluster_of_namespace(str((obj.get("metadata") or {}).get("namespace") or ""))
        if key is None or cluster is None or event is WatchEventType.DELETED:
            return
        applied = find_condition((obj.get("status") or {}).get("conditions"), ConditionType.APPLIED)
        if (
            applied is not None
            and applied.get("status") == "True"
            and applied.get("observedGeneration") == (obj.get("metadata") or {}).get("generation")
        ):
            self.reservations.mark_applied(_key_text(key), cluster, at=self.ctx.now())
        if unschedulable_pods(obj) or (old is not None and unschedulable_pods(old)):
            await self.loop.add(key)

    async def _requeue_cluster(self, cluster: str) -> None:
        for key in self.ctx.bindings.index_keys(INDEX_CLUSTER, cluster):
            await self.loop.add(key)

    async def _requeue_unplaced(self) -> None:
        for key in sorted(self._unplaced):
            await self.loop.add(key)

    def _forget(self, key: BindingKey) -> None:
        self.reservations.release(_key_text(key))
        self._unplaced.discard(key)
        self._unschedulable_since.pop(key, None)
        self._acted_on.pop(key, None)

    async def maintain(self) -> None:
        """Expire reservations whose reports never came; retry unplaced bindings when capacity frees."""
        max_age = timedelta(seconds=self.ctx.settings.reservation_max_age_seconds)
        while True:
            await asyncio.sleep(MAINTENANCE_SECONDS)
            if self.reservations.expire(now=self.ctx.now(), max_age=max_age):
                await self._requeue_unplaced()

    # --- reconcile --------------------------------------------------------------------

    def _moves(self, key: BindingKey) -> tuple[dict[str, int], float | None]:
        """Clusters whose member cannot place some replicas for longer than the grace period, and
        the seconds until the next one will have waited that long."""
        now = self.ctx.now()
        grace = self.ctx.settings.unschedulable_grace_seconds
        seen = self._unschedulable_since.setdefault(key, {})
        acted = self._acted_on.get(key) or {}
        current: dict[tuple[str, int], datetime] = {}
        due: dict[str, int] = {}
        wait: float | None = None
        for work in self.ctx.works.by_index(INDEX_BINDING, key):
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
            pods = unschedulable_pods(work)
            if cluster is None or not pods:
                continue
            mark = (cluster, int(work["metadata"].get("generation") or 0))
            if mark[1] <= acted.get(cluster, -1):
                continue
            since = current[mark] = seen.get(mark, now)
            waited = (now - since).total_seconds()
            if waited >= grace:
                due[cluster] = pods
            else:
                wait = min(wait if wait is not None else math.inf, grace - waited)
        if current:
            self._unschedulable_since[key] = current
        else:
            self._unschedulable_since.pop(key, None)
        return due, wait

    async def reconcile(self, key: BindingKey) -> float | None:
        ctx = self.ctx
        binding = await ctx.get(ctx.binding_rt, key[0], key[1])
        if binding is None or is_deleting(binding):
            self._forget(key)
            return None
        try:
            model = ResourceBinding.model_validate(binding)
        except ValidationError as exc:
            log.warning("binding %s is not valid: %s", _key_text(key), exc)
            return None
        policy_ref = policy_ref_of_binding(binding)
        policy = ctx.propagation_policy(policy_ref) if policy_ref else None
        alternatives = policy.spec.gpu_shapes.alternatives if policy and policy.spec.gpu_shapes else []
        request = BindingRequest.from_binding(model, gpu_shapes=alternatives)
        snapshots = dict(self._snapshots)
        moves, wait = self._moves(key)

        status = binding.get("status") or {}
        scheduled = find_condition(status.get("conditions"), ConditionType.SCHEDULED)
        generation = (binding.get("metadata") or {}).get("generation")
        why: str | None = None
        if status.get("observedGeneration") != generation or scheduled is None:
            why = "spec changed"
        elif scheduled.get("status") != "True":
            why = "not fully placed"
        else:
            why = placement_broken(request, snapshots)
        if why is None and not moves:
            return wait

        now = ctx.now()
        ordered = [snapshots[name] for name in sorted(snapshots)]
        moved: dict[str, int] = {}
        try:
            decided = decide_with_moves(request, ordered, moves, reservations=self.reservations, now=now) if moves else None
            if decided is not None:
                request, result = decided
                moved = dict(moves)
            else:
                result = schedule(request, ordered, reservations=self.reservations, now=now)
        except Exception as exc:  # a bug in the decision must not stop the other bindings
            log.exception("scheduling %s failed", _key_text(key))
            await self._write_error(binding, f"the scheduler failed: {exc}")
            return UNPLACED_RETRY_SECONDS
        if why is None and not moved:
            return wait  # members report unplaceable pods, but nothing else can take them
        log.debug("scheduling %s: %s", _key_text(key), why or "moving unschedulable replicas")
        await self._write_decision(binding, request, result, moved=moved)
        if moved:
            generations = {
                cluster_of_namespace(str(w["metadata"].get("namespace"))): int(w["metadata"].get("generation") or 0)
                for w in ctx.works.by_index(INDEX_BINDING, key)
            }
            acted = self._acted_on.setdefault(key, {})
            for cluster in moved:
                acted[cluster] = generations.get(cluster, 0)
        if not result.condition.status:
            return min(UNPLACED_RETRY_SECONDS, wait) if wait is not None else UNPLACED_RETRY_SECONDS
        return wait

    async def _write_decision(
        self,
        binding: dict[str, Any],
        request: BindingRequest,
        result: ScheduleResult,
        *,
        moved: Mapping[str, int],
    ) -> None:
        ctx = self.ctx
        spec = binding.get("spec") or {}
        meta = binding.get("metadata") or {}
        clusters = result.target_clusters()
        shapes = {
            name: ChosenShape(shape.resource_map, dict(shape.node_selector)) for name, shape in result.chosen_shapes.items()
        }
        annotation = encode_shapes(shapes)
        annotations = dict(meta.get("annotations") or {})
        updated = binding
        previous_clusters = spec.get("clusters")
        if previous_clusters != clusters or annotations.get(ANNOTATION_GPU_SHAPES) != annotation:
            written = copy.deepcopy(binding)
            written["spec"]["clusters"] = clusters
            if annotation is None:
                annotations.pop(ANNOTATION_GPU_SHAPES, None)
            else:
                annotations[ANNOTATION_GPU_SHAPES] = annotation
            if annotations:
                written["metadata"]["annotations"] = annotations
            else:
                written["metadata"].pop("annotations", None)
            updated = await ctx.objects.update(ctx.binding_rt, written)
            reserve_decision(self.reservations, request, result, now=ctx.now())

        explanation = [entry.to_wire() for entry in result.explanation]
        for entry in explanation:
            pods = moved.get(entry["cluster"])
            if pods:
                entry.setdefault("reasons", []).append(
                    f"member reported {pods} replica(s) unschedulable for more than "
                    f"{ctx.settings.unschedulable_grace_seconds:g}s: moved elsewhere"
                )
        status = copy.deepcopy(binding.get("status") or {})
        old_condition = find_condition(status.get("conditions"), ConditionType.SCHEDULED)
        new_condition = result.condition.to_wire()
        status["conditions"] = with_condition(status.get("conditions"), new_condition, now=ctx.now_text())
        status["explanation"] = explanation
        if result.affinity_name:
            status["schedulerObservingAffinityName"] = result.affinity_name
        else:
            status.pop("schedulerObservingAffinityName", None)
        status["observedGeneration"] = (updated.get("metadata") or {}).get("generation")
        if status != (updated.get("status") or {}):
            await ctx.objects.update_status(ctx.binding_rt, {**updated, "status": status})
        await self._record(binding, old_condition, new_condition, previous_clusters, clusters, moved)

    async def _write_error(self, binding: dict[str, Any], message: str) -> None:
        condition = ScheduledCondition(False, ScheduledReason.SCHEDULER_ERROR, message).to_wire()
        status = copy.deepcopy(binding.get("status") or {})
        status["conditions"] = with_condition(status.get("conditions"), condition, now=self.ctx.now_text())
        if status != (binding.get("status") or {}):
            await self.ctx.objects.update_status(self.ctx.binding_rt, {**binding, "status": status})

    async def _record(
        self,
        binding: dict[str, Any],
        old: Mapping[str, Any] | None,
        new: Mapping[str, Any],
        previous_clusters: Any,
        clusters: list[dict[str, Any]],
        moved: Mapping[str, int],
    ) -> None:
        changed = old is None or (old.get("status"), old.get("reason")) != (new.get("status"), new.get("reason"))
        if not changed and previous_clusters == clusters and not moved:
            return
        resource = (binding.get("spec") or {}).get("resource") or {}
        informer = self.ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
        workload = informer.get(resource.get("namespace"), str(resource.get("name"))) if informer else None
        if workload is None:
            return
        placed = ", ".join(f"{c['name']}:{c['replicas']}" for c in clusters) or "no cluster"
        if moved:
            text = ", ".join(f"{n} from {c}" for c, n in sorted(moved.items()))
            await record_event(
                self.ctx, workload, type=EventType.NORMAL, reason=EventReason.REPLICAS_MOVED,
                message=f"moved replicas members could not place ({text}); now {placed}",
            )
        if new.get("status") == "True":
            await record_event(
                self.ctx, workload, type=EventType.NORMAL, reason=EventReason.SCHEDULED,
                message=f"{new.get('message')}: {placed}",
            )
        else:
            await record_event(
                self.ctx, workload, type=EventType.WARNING, reason=EventReason.FAILED_SCHEDULING,
                message=f"{new.get('reason')}: {new.get('message')}",
            )
