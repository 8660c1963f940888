"""The scheduler controller: the I/O side of scheduling (binding -> clusters and replicas).

In: ResourceBindings, Clusters (their spec and the capacity their agents report) and Works
(Applied, and pods a member reports it cannot place). Out, per binding: ``spec.clusters``
(and, where an alternative GPU shape won, the ``scheduler.gpufed.io/gpu-shapes``
annotation the binding controller reads), and in status the ``Scheduled`` condition with
its reason, the per-cluster ``explanation``, ``schedulerObservingAffinityName`` and
``observedGeneration``; Events ``Scheduled``/``FailedScheduling``/``ReplicasMoved``/
``ReplicasEvicted`` on the workload when the decision changes (``EvictionWaiting`` when a due
eviction finds no room elsewhere). Failover adds ``spec.gracefulEvictionTasks`` entries.

The decision itself is the pure ``controlplane.scheduler.core.schedule``. This module
decides *when* to run it, so placed work does not move for nothing:

* the binding's spec changed (``metadata.generation`` != ``status.observedGeneration``);
* it is not fully placed (``Scheduled`` is not True): retried on every capacity report of
  any cluster, and every 30 s in any case;
* a cluster it runs in is gone, or no longer admitted by the placement's affinity term;
* a member reported replicas it cannot place (``manifestStatuses[].unschedulable``) for
  the Work's current generation, and either a capacity report of that cluster taken after
  the Work was Applied (and received after the hub saw the pods unschedulable) confirms
  there is no room for them — the estimator, run on that report with the binding's own
  reservation set aside, fits fewer than are waiting, and the report's pod list does not
  show more of the binding's pods bound than the cluster keeps (a rollout's old pods free
  their GPUs soon; a report without a pod list cannot tell) — or they have waited longer
  than the grace period (the safety net for a report that says there is room: the member
  may just be slow). Those replicas are moved — the
  cluster keeps the rest and takes no new ones in that decision, and its explanation says
  so — but only when the move places at least as many replicas as before; a gang moves whole;
* **failover** (:mod:`controlplane.controllers.failover`): a cluster it runs in has a
  ``NoExecute`` taint whose toleration ran out (the placement's ``clusterTolerations``, plus
  default tolerations of the hub's unreachable/not-ready taints), or the workload has been
  Unhealthy there for ``failover.application.decisionConditions.tolerationSeconds``. The
  binding is requeued for the moment that happens. Its replicas in that cluster (a gang's
  whole) are scheduled elsewhere and a ``gracefulEvictionTasks`` entry records the eviction;
  the cluster's Work stays until the graceful eviction controller ends the task (a new
  leader counts an application's unhealthy time afresh: it is kept in memory). Like the
  move above, an eviction happens only when the replicas find room elsewhere (as many as
  run now): with nowhere to go they stay, and are retried on capacity reports, so a cluster
  that is only cut off is not emptied for nothing. Clusters with an eviction task of the
  binding take none of its replicas while the task lasts (as Karmada's scheduler does).

Capacity a decision promises is reserved (``Reservations``) as the decision is made, before
its spec write (other workers decide while the write is in flight; a failed write gives it
back), until a capacity report shows the binding's pods bound (counted per owner from the
report's pod list, :mod:`controlplane.controllers.pods`), or, for pods a report cannot name,
until a report comes ``reservation_settle_seconds`` after the Work was Applied; pods the
member reports unschedulable stay reserved until they move.

Reservations live in memory, so a new leader (hub restart or fail-over) derives them from
durable state before its first decision (Kubernetes style: derive, don't persist): for every
cluster in a binding's ``spec.clusters``, the replicas assigned there minus the binding's pods
the cluster's latest report shows bound are outstanding and reserved afresh (created, and
applied when the Work is Applied for its generation, at the new leader's clock; then the same
settle, bind-timeout and max-age rules apply). For pods a report cannot name (no per-pod list,
or a kind whose pods hang under other owners) the time rule decides: nothing is reserved when
the report is ``reservation_settle_seconds`` newer than the Work's Applied transition, all the
assigned replicas otherwise. A gang of several roles not fully bound is reserved whole, as a
decision reserves it. Unschedulable-since timers start afresh (at the new leader's clock): the
agent stamps no time on ``manifestStatuses[].unschedulable``, and the Applied condition's
transition can be far older than the pods' trouble; a report that confirms there is no room
moves them without waiting anyway. Unhealthy-since timers (application failover) also start
afresh.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from controlplane.apis.meta import Taint, parse_time
from controlplane.apis.work_v1alpha1 import ConditionType, ResourceBinding, ScheduledReason
from controlplane.apiserver.objects import WatchEventType
from controlplane.controllers.context import (
    INDEX_BINDING,
    INDEX_CLUSTER,
    ControllerContext,
    policy_ref_of_binding,
)
from controlplane.controllers.dependencies import is_attached
from controlplane.controllers.detecting import binding_priority
from controlplane.controllers.events import EventReason, EventType, record_event
from controlplane.controllers.explanations import refreshed_explanation
from controlplane.controllers.failover import (
    EvictionCause,
    EvictionCheck,
    PurgeMode,
    application_evictions,
    effective_tolerations,
    evicting_clusters,
    eviction_task,
    merge_checks,
    purge_mode_of,
    reported_health,
    taint_evictions,
    with_tasks,
)
from controlplane.controllers.finished import finished_phase
from controlplane.controllers.neverfitting import capacity_facts, never_fit_result, set_schedulable
from controlplane.controllers.pods import OwnerKey, bound_pods_by_owner, owner_key
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workloads import find_condition, is_deleting, with_condition
from controlplane.controllers.works import (
    ANNOTATION_GPU_SHAPES,
    ChosenShape,
    binding_key_of_work,
    cluster_of_namespace,
    decode_shapes,
    encode_shapes,
)
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.metrics import observe_scheduling_latency
from controlplane.scheduler.core.estimator import room_without
from controlplane.scheduler.core.framework import BindingRequest, GpuShape
from controlplane.scheduler.core.neverfit import never_fits
from controlplane.scheduler.core.reservations import Demand, Reservations
from controlplane.scheduler.core.scheduling import (
    ScheduledCondition,
    ScheduleResult,
    reserve_decision,
    schedule,
)
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import ClusterView, cluster_matches_affinity
from policies.models import AnyPropagationPolicy

log = logging.getLogger(__name__)

BindingKey = tuple[str, str]
UNPLACED_RETRY_SECONDS = 30.0
MAINTENANCE_SECONDS = 15.0


def _key_text(key: BindingKey) -> str:
    return f"{key[0]}/{key[1]}"


def _binding_key(binding: Mapping[str, Any]) -> BindingKey:
    meta = binding.get("metadata") or {}
    return (str(meta.get("namespace")), str(meta.get("name")))


def _unhealthy_reported(work: Mapping[str, Any]) -> bool:
    return any(m.get("health") == "Unhealthy" for m in (work.get("status") or {}).get("manifestStatuses") or ())


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


def applied_condition(work: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Work's Applied=True condition when it is about the Work's current generation, else None."""
    applied = find_condition((work.get("status") or {}).get("conditions"), ConditionType.APPLIED)
    if (
        applied is None
        or applied.get("status") != "True"
        or applied.get("observedGeneration") != (work.get("metadata") or {}).get("generation")
    ):
        return None
    return applied


def transition_time(condition: Mapping[str, Any] | None) -> datetime | None:
    """A condition's ``lastTransitionTime`` (None when absent or unreadable)."""
    text = (condition or {}).get("lastTransitionTime")
    if not text:
        return None
    try:
        return parse_time(str(text))
    except ValueError:
        return None


def demands_in(request: BindingRequest, shape: ChosenShape | None, *, replicas: int) -> list[Demand]:
    """What ``replicas`` replicas of the binding need in a cluster where ``shape`` (the
    alternative GPU shape the scheduler chose there, if any) applies: one demand, or one per
    role of a gang (a gang runs whole in one cluster)."""
    gpu_shape = (
        GpuShape(
            resources=tuple(sorted(shape.resources.items())),
            node_selector=tuple(sorted(shape.node_selector.items())),
        )
        if shape is not None
        else None
    )

    def applied(requirements: ReplicaRequirements) -> ReplicaRequirements:
        return gpu_shape.apply(requirements) if gpu_shape is not None else requirements

    if request.gang:
        return [Demand(c.replicas, applied(c.requirements)) for c in request.gang_components()]
    return [Demand(replicas, applied(request.requirements))]


def placement_broken(request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot]) -> str | None:
    """Why clusters the binding runs in can no longer hold it (gone, affinity), or None.

    ``NoExecute`` taints are failover's (:func:`decide_with_evictions`): they evict only once
    their toleration runs out.
    """
    terms = request.placement.affinity_terms()
    term = next((t for t in terms if t.affinity_name == request.previous_affinity_name), terms[0])
    for name in sorted(request.previous):
        snapshot = snapshots.get(name)
        if snapshot is None:
            return f"cluster {name} is gone"
        if not cluster_matches_affinity(snapshot.view, term).fits:
            return f"cluster {name} no longer matches the placement's cluster affinity"
    return None


def with_default_tolerations(request: BindingRequest, *, unreachable_seconds: int, not_ready_seconds: int) -> BindingRequest:
    """``request`` whose placement also tolerates the hub's health taints for the default time
    when it does not say otherwise (see :func:`failover.effective_tolerations`)."""
    tolerations = effective_tolerations(
        request.placement.cluster_tolerations,
        unreachable_seconds=unreachable_seconds,
        not_ready_seconds=not_ready_seconds,
    )
    if len(tolerations) == len(request.placement.cluster_tolerations or ()):
        return request
    placement = request.placement.model_copy(update={"cluster_tolerations": tolerations})
    return replace(request, placement=placement)


def decide_with_evictions(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    leaving: Iterable[str],
    *,
    reservations: Reservations,
    now: datetime,
) -> tuple[BindingRequest, ScheduleResult] | None:
    """Re-decide without the clusters in ``leaving`` (a gang leaves all its clusters).

    None when the replicas would not find room elsewhere: fewer would be placed than run now.
    """
    gone = set(leaving) & set(request.previous)
    if not gone:
        return None
    previous = {} if request.gang else {k: v for k, v in request.previous.items() if k not in gone}
    evicting = replace(request, previous=previous)
    result = schedule(evicting, [s for s in snapshots if s.name not in gone], reservations=reservations, now=now)
    if not result.condition.status and result.placed < min(request.replicas, sum(request.previous.values())):
        return None
    return evicting, result


def _sooner(*delays: float | None) -> float | None:
    known = [d for d in delays if d is not None]
    return min(known) if known else None


def _explain_evictions(
    explanation: list[dict[str, Any]],
    *,
    evicted: Mapping[str, EvictionCause],
    tasks: Sequence[Mapping[str, Any]],
) -> None:
    """Add, per cluster, why it lost or takes none of the replicas because of an eviction."""
    by_cluster = {entry["cluster"]: entry for entry in explanation}

    def note(cluster: str, reason: str) -> None:
        entry = by_cluster.get(cluster)
        if entry is None:
            entry = by_cluster[cluster] = {"cluster": cluster, "chosen": False, "replicas": 0}
            explanation.append(entry)
        entry.setdefault("reasons", []).append(reason)

    for name, cause in sorted(evicted.items()):
        how = {
            PurgeMode.DIRECTLY: "its Work is removed now",
            PurgeMode.GRACEFULLY: "its Work stays until the new replicas are Healthy"
            + (f" or {cause.grace_period_seconds}s pass" if cause.grace_period_seconds is not None else ""),
            PurgeMode.NEVER: "its Work stays until the eviction task is removed (purgeMode Never)",
        }[cause.purge_mode]
        note(name, f"{cause.reason}: {cause.message}; {how}")
    for task in tasks:
        name = str(task.get("fromCluster"))
        if name in evicted:
            continue
        note(
            name,
            f"replicas evicted at {task.get('creationTimestamp')} ({task.get('reason')}); "
            "the cluster takes none of them while the graceful eviction lasts",
        )
    explanation.sort(key=lambda entry: str(entry["cluster"]))


def _gpu_pods(demands: Iterable[Demand]) -> int:
    """Pods of ``demands`` that request a GPU (the pods capacity reports list)."""
    return sum(d.replicas for d in demands if d.requirements.gpu_resources)


WAITING_PREFIX = "waiting for room elsewhere: "


def _explain_waiting(explanation: list[dict[str, Any]], waiting: Mapping[str, int], *, grace: float) -> None:
    """Add, per cluster whose unschedulable replicas are due to move but find no room elsewhere,
    that they wait there."""
    by_cluster = {entry["cluster"]: entry for entry in explanation}
    for name, pods in sorted(waiting.items()):
        entry = by_cluster.get(name)
        if entry is None:
            entry = by_cluster[name] = {"cluster": name, "chosen": False, "replicas": 0}
            explanation.append(entry)
        reasons = [r for r in entry.get("reasons") or () if not r.startswith(WAITING_PREFIX)]
        reasons.append(
            f"{WAITING_PREFIX}the member reported {pods} replica(s) unschedulable for more than {grace:g}s "
            "and no other cluster can take them now; they move when capacity appears"
        )
        entry["reasons"] = reasons
    explanation.sort(key=lambda entry: str(entry["cluster"]))


def replicas_moved(previous: Mapping[str, int], decided: Mapping[str, int]) -> dict[str, int]:
    """Per cluster, replicas a decision took away from it while another cluster gained some:
    a move (a scale-down or a scale-up alone moves nothing). Empty when nothing moved."""
    gained = sum(max(0, n - previous.get(c, 0)) for c, n in decided.items())
    if not gained:
        return {}
    lost = {c: n - decided.get(c, 0) for c, n in previous.items() if n > decided.get(c, 0)}
    total = sum(lost.values())
    if total <= gained:
        return lost
    # Partly a scale-down: count as moved only as many as other clusters gained, largest loss first.
    out: dict[str, int] = {}
    left = gained
    for cluster, n in sorted(lost.items(), key=lambda kv: (-kv[1], kv[0])):
        take = min(n, left)
        if take:
            out[cluster] = take
        left -= take
    return out


def decide_with_moves(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    moves: Mapping[str, int],
    *,
    reasons: Mapping[str, str] | None = None,
    reservations: Reservations,
    now: datetime,
) -> tuple[BindingRequest, ScheduleResult] | None:
    """Re-decide with ``moves`` (cluster -> pods its member cannot place) taken off those clusters.

    Those clusters keep what they run and take nothing new (``BindingRequest.keep_only``, with
    ``reasons`` per cluster, or a default one, as their explanation). None when the move would
    place fewer replicas than the binding has now (the pods then wait where they are).
    """
    if request.gang:
        previous = {k: v for k, v in request.previous.items() if k not in moves}
    else:
        previous = {k: v - min(v, moves.get(k, 0)) for k, v in request.previous.items()}
        previous = {k: v for k, v in previous.items() if v}
    why = {
        name: (reasons or {}).get(name) or f"the member reported {pods} replica(s) unschedulable: moved elsewhere"
        for name, pods in moves.items()
    }
    moved = replace(request, previous=previous, keep_only={**request.keep_only, **why})
    result = schedule(moved, snapshots, reservations=reservations, now=now)
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
        # Per binding and (cluster, Work generation) reported unschedulable: since when (hub clock),
        # and the report time of the cluster's latest report then (a confirming report is newer).
        self._unschedulable_since: dict[BindingKey, dict[tuple[str, int], tuple[datetime, datetime | None]]] = {}
        # Per binding and cluster, the Work generation whose unschedulable report was acted on:
        # until the binding controller rewrites the Work, that report must not move replicas again.
        self._acted_on: dict[BindingKey, dict[str, int]] = {}
        # Per binding and cluster, since when (hub clock) the workload reports Unhealthy there.
        self._unhealthy_since: dict[BindingKey, dict[str, datetime]] = {}
        # Bindings with an eviction due that found no room elsewhere: retried on capacity reports.
        self._eviction_blocked: set[BindingKey] = set()
        # Bindings whose unschedulable replicas are due to move but found no room: retried on reports.
        self._move_blocked: set[BindingKey] = set()
        # Bindings no node of the fleet could ever hold: looked at again only when the fleet's
        # capacity changes (a cluster's nodes, their labels, taints or allocatable), not on every report.
        self._never_fit: set[BindingKey] = set()
        self._capacity: dict[str, frozenset[Any]] = {}
        # Per binding (``ns/name``), the member pods' owner: how reports name the binding's pods.
        self._owners: dict[str, OwnerKey | None] = {}
        # Whether the reservations were derived from the informers' state (once, before deciding).
        self._rebuilt = False
        # Bindings whose explanation judged a cluster whose labels, taints or readiness changed since.
        self._stale_explanations: set[BindingKey] = set()
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
        if scheduled is not None and scheduled.get("reason") == ScheduledReason.NEVER_FITS:
            self._never_fit.add(key)
            self._unplaced.discard(key)
        elif scheduled is None or scheduled.get("status") != "True":
            self._never_fit.discard(key)
            self._unplaced.add(key)
        else:
            self._never_fit.discard(key)
            self._unplaced.discard(key)
        if (
            event is WatchEventType.MODIFIED
            and old is not None
            and (old.get("metadata") or {}).get("generation") == meta.get("generation")
            and not is_deleting(obj)
        ):
            return
        await self.loop.add(key, priority=binding_priority(obj))

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        if event is WatchEventType.DELETED:
            self._snapshots.pop(name, None)
            self._capacity.pop(name, None)
            await self._requeue_cluster(name)
            await self._requeue_unplaced()
            return
        try:
            snapshot = ClusterSnapshot.from_cluster(obj, previous=self._snapshots.get(name))
        except (ValueError, TypeError) as exc:
            log.warning("cluster %s has a status the scheduler cannot read: %s", name, exc)
            return
        self._snapshots[name] = snapshot
        facts = capacity_facts(snapshot)
        if self._capacity.get(name) != facts:
            self._capacity[name] = facts
            for key in sorted(self._never_fit):  # the fleet's capacity changed: they may fit now
                await self.loop.add(key, priority=binding_priority(self.ctx.bindings.get(key[0], key[1])))
        if snapshot.report_time is not None:
            self.reservations.observe_report(
                name,
                reported_at=snapshot.report_time,
                settle=timedelta(seconds=self.ctx.settings.reservation_settle_seconds),
                bound=self._bound_by_binding(name, obj, snapshot.report_time),
            )
        if event is WatchEventType.ADDED or _placement_facts(old) != _placement_facts(obj):
            await self._requeue_cluster(name)
            if event is WatchEventType.MODIFIED:
                await self._requeue_stale_explanations(name)
        # Bindings whose pods this member reports unschedulable: the new report may confirm
        # there is no room for them.
        for key, marks in list(self._unschedulable_since.items()):
            if any(cluster == name for cluster, _ in marks):
                await self.loop.add(key, priority=binding_priority(self.ctx.bindings.get(key[0], key[1])))
        await self._requeue_unplaced()

    def _bound_by_binding(self, cluster: str, obj: Mapping[str, Any], reported_at: datetime) -> dict[str, int] | None:
        """Per binding reserved in ``cluster`` whose pods the report can name, how many it shows bound."""
        reservations = self.reservations.for_cluster(cluster)
        if not reservations:
            return None
        counts = bound_pods_by_owner(obj)
        if counts is None:
            return None
        timeout = timedelta(seconds=self.ctx.settings.reservation_bind_timeout_seconds)
        bound: dict[str, int] = {}
        for reservation in reservations:
            owner = self._owners.get(reservation.binding)
            if owner is None:
                continue
            applied = reservation.applied_at
            if applied is not None and applied + timeout < reported_at and not self._unschedulable_in(
                reservation.binding, cluster
            ):
                continue  # long applied, never shown bound: the report may not list their node
            bound[reservation.binding] = counts.get(owner, 0)
        return bound

    def _unschedulable_in(self, binding: str, cluster: str) -> bool:
        """Whether the member reports pods of ``binding`` (``ns/name``) it cannot place."""
        namespace, _, name = binding.partition("/")
        return any(
            unschedulable_pods(work)
            for work in self.ctx.works.by_index(INDEX_BINDING, (namespace, name))
            if cluster_of_namespace(str(work["metadata"].get("namespace") or "")) == cluster
        )

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
            await self.loop.add(key, priority=binding_priority(self.ctx.bindings.get(key[0], key[1])))
        elif (_unhealthy_reported(obj) or (old is not None and _unhealthy_reported(old))) and self._fails_over(key):
            # application failover counts from the first Unhealthy report
            await self.loop.add(key, priority=binding_priority(self.ctx.bindings.get(key[0], key[1])))

    def _fails_over(self, key: BindingKey) -> bool:
        """Whether the binding's policy asks for application failover."""
        ref = policy_ref_of_binding(self.ctx.bindings.get(key[0], key[1]))
        policy = self.ctx.propagation_policy(ref) if ref else None
        return bool(policy and policy.spec.failover and policy.spec.failover.application)

    async def _requeue_cluster(self, cluster: str) -> None:
        for key in self.ctx.bindings.index_keys(INDEX_CLUSTER, cluster):
            await self.loop.add(key, priority=binding_priority(self.ctx.bindings.get(key[0], key[1])))

    async def _requeue_stale_explanations(self, cluster: str) -> None:
        """Bindings whose explanation did not choose ``cluster`` as it was: judged again (explanations.py;
        the entries of clusters a binding runs in stay as decided)."""
        for binding in self.ctx.bindings.items():
            explained = (binding.get("status") or {}).get("explanation") or ()
            if any(entry.get("cluster") == cluster and not entry.get("chosen") for entry in explained):
                key = _binding_key(binding)
                self._stale_explanations.add(key)
                await self.loop.add(key, priority=binding_priority(binding))

    async def _refresh_explanation(
        self, binding: dict[str, Any], request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot], *, now: datetime
    ) -> None:
        """Store the fleet's verdicts as they are now for a binding whose decision stands."""
        self._stale_explanations.discard(_binding_key(binding))
        fresh = schedule(request, [snapshots[name] for name in sorted(snapshots)], reservations=self.reservations, now=now)
        status = copy.deepcopy(binding.get("status") or {})
        explanation = refreshed_explanation(
            status.get("explanation") or (), [entry.to_wire() for entry in fresh.explanation], placed=request.previous
        )
        if explanation != status.get("explanation"):
            status["explanation"] = explanation
            await self.ctx.objects.update_status(self.ctx.binding_rt, {**binding, "status": status})

    async def _requeue_unplaced(self) -> None:
        for key in sorted(self._unplaced | self._eviction_blocked | self._move_blocked):
            await self.loop.add(key, priority=binding_priority(self.ctx.bindings.get(key[0], key[1])))

    def _ensure_rebuilt(self) -> None:
        """Derive the reservations from the informers once they are synced (see the module docstring)."""
        if self._rebuilt:
            return
        ctx = self.ctx
        if not all(informer.synced.is_set() for informer in (ctx.bindings, ctx.works, ctx.clusters)):
            return
        self._rebuilt = True
        count = self.rebuild_reservations()
        if count:
            log.info("derived %d reservation(s) from bindings and capacity reports", count)

    def rebuild_reservations(self) -> int:
        """Reserve, per binding and cluster it is scheduled to, the replicas the cluster's latest
        report does not show bound yet; returns how many reservations that made."""
        ctx = self.ctx
        now = ctx.now()
        settle = timedelta(seconds=ctx.settings.reservation_settle_seconds)
        made = 0
        for binding in ctx.bindings.items():
            if is_deleting(binding):
                continue
            try:
                model = ResourceBinding.model_validate(binding)
            except ValidationError:
                continue
            key = _binding_key(binding)
            text = _key_text(key)
            owner = owner_key((binding.get("spec") or {}).get("resource") or {})
            self._owners[text] = owner
            request = BindingRequest.from_binding(model)
            shapes = decode_shapes(binding)
            works = {
                cluster_of_namespace(str(w["metadata"].get("namespace") or "")): w
                for w in ctx.works.by_index(INDEX_BINDING, key)
            }
            for cluster, replicas in sorted(request.previous.items()):
                if not replicas or self.reservations.get(text, cluster) is not None:
                    continue
                demands = demands_in(request, shapes.get(cluster), replicas=replicas)
                work = works.get(cluster)
                applied = applied_condition(work) if work is not None else None
                outstanding = self._outstanding(cluster, owner, demands, applied=applied, settle=settle)
                if not outstanding:
                    continue
                self.reservations.reserve(text, cluster, outstanding, now=now, target=_gpu_pods(demands) or None)
                if applied is not None:
                    self.reservations.mark_applied(text, cluster, at=now)
                made += 1
        return made

    def _outstanding(
        self,
        cluster: str,
        owner: OwnerKey | None,
        demands: list[Demand],
        *,
        applied: Mapping[str, Any] | None,
        settle: timedelta,
    ) -> list[Demand]:
        """What of ``demands`` (the binding's replicas assigned to ``cluster``) the cluster's latest
        report does not show bound: what a new leader reserves."""
        obj = self.ctx.clusters.get(None, cluster)
        counts = bound_pods_by_owner(obj) if owner is not None and obj is not None else None
        gpu_pods = _gpu_pods(demands)
        if counts is not None and owner is not None and gpu_pods:
            missing = gpu_pods - counts.get(owner, 0)
            if missing <= 0:
                return []
            if len(demands) == 1:
                return [replace(demands[0], replicas=min(missing, demands[0].replicas))]
            return demands  # a gang of several roles not fully bound: reserved whole, as decided
        snapshot = self._snapshots.get(cluster)
        reported = snapshot.report_time if snapshot is not None else None
        applied_at = transition_time(applied)
        if applied_at is not None and reported is not None and applied_at + settle < reported:
            return []  # the time rule: a report this much newer than the apply counts the pods
        return demands

    def _forget(self, key: BindingKey) -> None:
        self.reservations.release(_key_text(key))
        self._unplaced.discard(key)
        self._unschedulable_since.pop(key, None)
        self._acted_on.pop(key, None)
        self._unhealthy_since.pop(key, None)
        self._eviction_blocked.discard(key)
        self._move_blocked.discard(key)
        self._stale_explanations.discard(key)
        self._never_fit.discard(key)
        self._owners.pop(_key_text(key), None)

    async def maintain(self) -> None:
        """Expire reservations whose reports never came; retry unplaced bindings when capacity frees."""
        max_age = timedelta(seconds=self.ctx.settings.reservation_max_age_seconds)
        while True:
            await asyncio.sleep(MAINTENANCE_SECONDS)
            self._ensure_rebuilt()
            if self.reservations.expire(now=self.ctx.now(), max_age=max_age):
                await self._requeue_unplaced()

    # --- reconcile --------------------------------------------------------------------

    def _moves(
        self, key: BindingKey, binding: Mapping[str, Any], request: BindingRequest
    ) -> tuple[dict[str, int], float | None, dict[str, str]]:
        """Clusters whose member cannot place some replicas, due to move now (a fresh report
        confirms there is no room, or they waited longer than the grace period); the seconds
        until the next one will have waited that long; and per due cluster, why it moves."""
        now = self.ctx.now()
        grace = self.ctx.settings.unschedulable_grace_seconds
        seen = self._unschedulable_since.setdefault(key, {})
        acted = self._acted_on.get(key) or {}
        current: dict[tuple[str, int], tuple[datetime, datetime | None]] = {}
        due: dict[str, int] = {}
        reasons: dict[str, str] = {}
        wait: float | None = None
        shapes: dict[str, ChosenShape] | None = None
        for work in self.ctx.works.by_index(INDEX_BINDING, key):
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
            pods = unschedulable_pods(work)
            if cluster is None or not pods:
                continue
            mark = (cluster, int(work["metadata"].get("generation") or 0))
            if mark[1] <= acted.get(cluster, -1):
                continue
            snapshot = self._snapshots.get(cluster)
            first = seen.get(mark)
            if first is None:
                first = (now, snapshot.report_time if snapshot is not None else None)
            current[mark] = first
            since, report_then = first
            waited = (now - since).total_seconds()
            confirmed: str | None = None
            if waited < grace:
                if shapes is None:
                    shapes = decode_shapes(binding)
                confirmed = self._confirms_no_room(
                    key, cluster, work, pods, request, shape=shapes.get(cluster), report_then=report_then
                )
            if confirmed is not None:
                due[cluster] = pods
                reasons[cluster] = confirmed
                log.debug("binding %s: %s", _key_text(key), confirmed, extra={"cluster": cluster})
            elif waited >= grace:
                due[cluster] = pods
                nodes = snapshot.node_count if snapshot is not None else 0
                reasons[cluster] = (
                    f"member reported {pods} replica(s) unschedulable for more than {grace:g}s: moved elsewhere "
                    f"({nodes} Ready node(s) reported)"
                )
            else:
                wait = min(wait if wait is not None else math.inf, grace - waited)
        if current:
            self._unschedulable_since[key] = current
        else:
            self._unschedulable_since.pop(key, None)
        return due, wait, reasons

    def _confirms_no_room(
        self,
        key: BindingKey,
        cluster: str,
        work: Mapping[str, Any],
        pods: int,
        request: BindingRequest,
        *,
        shape: ChosenShape | None,
        report_then: datetime | None,
    ) -> str | None:
        """Why the cluster's latest report confirms there is no room for the ``pods`` replicas its
        member cannot place, or None when it does not (or cannot tell)."""
        snapshot = self._snapshots.get(cluster)
        reported = snapshot.report_time if snapshot is not None else None
        if snapshot is None or reported is None:
            return None
        # Taken after the Work was Applied, and received after the hub saw the pods unschedulable.
        applied_at = transition_time(applied_condition(work))
        if applied_at is None or reported <= applied_at or (report_then is not None and reported <= report_then):
            return None
        text = _key_text(key)
        owner = self._owners.get(text)
        obj = self.ctx.clusters.get(None, cluster)
        counts = bound_pods_by_owner(obj) if owner is not None and obj is not None else None
        if owner is None or counts is None:
            return None  # the report cannot say whether old pods of the binding still hold GPUs
        keeps = request.previous.get(cluster, 0)
        if counts.get(owner, 0) + pods > keeps:
            return None  # more of its pods bound than it keeps: a rollout's old pods free their GPUs soon
        reservation = self.reservations.get(text, cluster)
        demands = (
            list(reservation.demands) if reservation is not None else demands_in(request, shape, replicas=pods)
        )
        room = room_without(snapshot, [d.requirements for d in demands], reserved=self.reservations, binding=text)
        if room >= pods:
            return None  # the report shows room: the member may just be slow, the grace period decides
        nodes = snapshot.node_count
        return (
            f"member reported {pods} replica(s) unschedulable and its report of "
            f"{reported.isoformat().replace('+00:00', 'Z')} confirms it: room for {room} on its {nodes} "
            "Ready node(s) once the other promises are kept; moved elsewhere"
        )

    def _evictions(
        self,
        key: BindingKey,
        request: BindingRequest,
        policy: AnyPropagationPolicy | None,
        snapshots: Mapping[str, ClusterSnapshot],
        resource: Mapping[str, Any],
        *,
        now: datetime,
    ) -> EvictionCheck:
        """The clusters the binding runs in that failover evicts now, and when the next one is due."""
        settings = self.ctx.settings
        failover = policy.spec.failover if policy is not None else None
        cluster_failover = failover.cluster if failover is not None else None
        purge = purge_mode_of(cluster_failover.purge_mode if cluster_failover else None)
        grace = (cluster_failover.grace_period_seconds if cluster_failover else None) or (
            settings.graceful_eviction_timeout_seconds
        )
        taints = taint_evictions(
            request.previous,
            self._taint_views(request.previous, snapshots),
            request.tolerations,
            now=now,
            purge_mode=purge,
            grace_period_seconds=grace if purge is PurgeMode.GRACEFULLY else None,
        )
        application = failover.application if failover is not None else None
        if application is None:
            self._unhealthy_since.pop(key, None)
            return taints
        seen = self._unhealthy_since.get(key) or {}
        unhealthy: dict[str, datetime] = {}
        for work in self.ctx.works.by_index(INDEX_BINDING, key):
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
            if cluster is not None and cluster in request.previous and reported_health(work, resource) == "Unhealthy":
                unhealthy[cluster] = seen.get(cluster, now)
        if unhealthy:
            self._unhealthy_since[key] = unhealthy
        else:
            self._unhealthy_since.pop(key, None)
        app_purge = purge_mode_of(application.purge_mode)
        app_grace = application.grace_period_seconds or settings.graceful_eviction_timeout_seconds
        apps = application_evictions(
            unhealthy,
            toleration_seconds=application.effective_toleration_seconds,
            now=now,
            purge_mode=app_purge,
            grace_period_seconds=app_grace if app_purge is PurgeMode.GRACEFULLY else None,
        )
        return merge_checks(taints, apps)

    def _taint_views(self, names: Iterable[str], snapshots: Mapping[str, ClusterSnapshot]) -> dict[str, ClusterView]:
        """The taints of the clusters ``names``, with their ``timeAdded`` (tolerationSeconds count
        from it; the scheduler's snapshots leave it out)."""
        views: dict[str, ClusterView] = {}
        for name in names:
            obj = self.ctx.clusters.get(None, name)
            if obj is None or name not in snapshots:
                continue
            taints: list[Taint] = []
            for raw in (obj.get("spec") or {}).get("taints") or ():
                try:
                    taints.append(Taint.model_validate(raw))
                except ValidationError:
                    log.warning("cluster %s has an invalid taint %r; ignored", name, raw)
            views[name] = ClusterView(name=name, taints=tuple(taints))
        return views

    async def reconcile(self, key: BindingKey) -> float | None:
        ctx = self.ctx
        self._ensure_rebuilt()
        binding = await ctx.get(ctx.binding_rt, key[0], key[1])
        if binding is None or is_deleting(binding):
            self._forget(key)
            return None
        if is_attached(binding):
            return None  # propagateDeps: placed where the workloads that need it run (dependencies.py)
        phase = finished_phase(ctx, binding)
        if phase is not None:
            # Finished work stays where it ran: no move, re-placement, failover or second run.
            if _key_text(key) in self._owners or self.reservations.of_binding(_key_text(key)):
                log.info("binding %s: the workload %s; its placement is final", _key_text(key), phase.lower())
            self._forget(key)
            return None
        try:
            model = ResourceBinding.model_validate(binding)
        except ValidationError as exc:
            log.warning("binding %s is not valid: %s", _key_text(key), exc)
            return None
        self._owners[_key_text(key)] = owner_key((binding.get("spec") or {}).get("resource") or {})
        policy_ref = policy_ref_of_binding(binding)
        policy = ctx.propagation_policy(policy_ref) if policy_ref else None
        request = with_default_tolerations(
            BindingRequest.from_binding(model),  # GPU shapes as the binding carries them (detector)
            unreachable_seconds=ctx.settings.default_unreachable_toleration_seconds,
            not_ready_seconds=ctx.settings.default_not_ready_toleration_seconds,
        )
        spec = binding.get("spec") or {}
        all_snapshots = dict(self._snapshots)
        evicting = evicting_clusters(spec)
        snapshots = {name: s for name, s in all_snapshots.items() if name not in evicting}
        moves, wait, move_reasons = self._moves(key, binding, request)
        now = ctx.now()
        check = self._evictions(key, request, policy, all_snapshots, spec.get("resource") or {}, now=now)
        wait = _sooner(wait, check.seconds_until_next(now))

        status = binding.get("status") or {}
        scheduled = find_condition(status.get("conditions"), ConditionType.SCHEDULED)
        generation = (binding.get("metadata") or {}).get("generation")
        why: str | None = None
        if status.get("observedGeneration") != generation or scheduled is None:
            why = "spec changed"
        elif scheduled.get("status") != "True":
            why = "not fully placed"
        else:
            why = placement_broken(request, all_snapshots)
        if not moves:
            self._move_blocked.discard(key)
        if why is None and not moves and not check.due:
            self._eviction_blocked.discard(key)
            if key in self._stale_explanations:
                await self._refresh_explanation(binding, request, snapshots, now=now)
            return wait

        ordered = [snapshots[name] for name in sorted(snapshots)]
        previous = dict(request.previous)
        moved: dict[str, int] = {}
        result: ScheduleResult | None = None
        started = time.perf_counter()  # gpufed_scheduling_duration_seconds: one decision's time
        try:
            if check.due:
                evicted_decision = decide_with_evictions(
                    request, ordered, check.due, reservations=self.reservations, now=now
                )
                if evicted_decision is not None:
                    request, result = evicted_decision
                    self._eviction_blocked.discard(key)
                else:
                    if key not in self._eviction_blocked:
                        await self._eviction_waits(binding, check.due)
                    self._eviction_blocked.add(key)
                    wait = _sooner(wait, UNPLACED_RETRY_SECONDS)
            if result is None:
                if why is None and not moves:
                    return wait
                decided = (
                    decide_with_moves(
                        request, ordered, moves, reasons=move_reasons, reservations=self.reservations, now=now
                    )
                    if moves
                    else None
                )
                if decided is not None:
                    request, result = decided
                    moved = dict(moves)
                    self._move_blocked.discard(key)
                else:
                    if moves:
                        self._move_blocked.add(key)  # retried on every capacity report
                    result = schedule(request, ordered, reservations=self.reservations, now=now)
                    if not request.previous and not result.placed:
                        never = never_fits(request, [all_snapshots[name] for name in sorted(all_snapshots)])
                        if never is not None:
                            result = never_fit_result(request, result, never.message)
        except Exception as exc:  # a bug in the decision must not stop the other bindings
            observe_scheduling_latency(time.perf_counter() - started, result=ScheduledReason.SCHEDULER_ERROR)
            log.exception("scheduling %s failed", _key_text(key))
            await self._write_error(binding, f"the scheduler failed: {exc}")
            return UNPLACED_RETRY_SECONDS
        observe_scheduling_latency(time.perf_counter() - started, result=result.condition.reason)
        # Every cluster due for eviction that the decision leaves gets an eviction task.
        evicted = {name: cause for name, cause in check.due.items() if name in previous and name not in result.clusters}
        waiting = {} if moved else moves
        if why is None and not moved and not evicted:
            if waiting:  # members report unplaceable pods, but nothing else can take them yet
                await self._explain_waiting(binding, waiting)
                return _sooner(wait, UNPLACED_RETRY_SECONDS)
            return wait
        log.debug("scheduling %s: %s", _key_text(key), why or ("evicting" if evicted else "moving unschedulable replicas"))
        await self._write_decision(
            binding, request, result, moved=moved, evicted=evicted, previous=previous, waiting=waiting, why=why
        )
        if moved:
            generations = {
                cluster_of_namespace(str(w["metadata"].get("namespace"))): int(w["metadata"].get("generation") or 0)
                for w in ctx.works.by_index(INDEX_BINDING, key)
            }
            acted = self._acted_on.setdefault(key, {})
            for cluster in moved:
                acted[cluster] = generations.get(cluster, 0)
        if evicted:
            unhealthy = self._unhealthy_since.get(key)
            for cluster in evicted:
                self.reservations.release(_key_text(key), cluster=cluster)
                if unhealthy is not None:
                    unhealthy.pop(cluster, None)
        workload = self._workload_of(binding)
        if workload is not None:
            await set_schedulable(ctx, workload, result.condition)
        if result.condition.reason is ScheduledReason.NEVER_FITS:
            return wait  # waits for a change of the fleet's capacity, not for the next retry
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
        evicted: Mapping[str, EvictionCause] | None = None,
        previous: Mapping[str, int] | None = None,
        waiting: Mapping[str, int] | None = None,
        why: str | None = None,
    ) -> None:
        ctx = self.ctx
        spec = binding.get("spec") or {}
        meta = binding.get("metadata") or {}
        evicted = evicted or {}
        clusters = result.target_clusters()
        now = ctx.now()
        added = [
            eviction_task(cause, replicas=(previous or {}).get(name, 0), now=now) for name, cause in sorted(evicted.items())
        ]
        tasks = with_tasks(spec.get("gracefulEvictionTasks"), added) if added else spec.get("gracefulEvictionTasks")
        shapes = {
            name: ChosenShape(shape.resource_map, dict(shape.node_selector)) for name, shape in result.chosen_shapes.items()
        }
        annotation = encode_shapes(shapes)
        annotations = dict(meta.get("annotations") or {})
        updated = binding
        previous_clusters = spec.get("clusters")
        if previous_clusters != clusters or annotations.get(ANNOTATION_GPU_SHAPES) != annotation or added:
            written = copy.deepcopy(binding)
            written["spec"]["clusters"] = clusters
            if tasks:
                written["spec"]["gracefulEvictionTasks"] = tasks
            if annotation is None:
                annotations.pop(ANNOTATION_GPU_SHAPES, None)
            else:
                annotations[ANNOTATION_GPU_SHAPES] = annotation
            if annotations:
                written["metadata"]["annotations"] = annotations
            else:
                written["metadata"].pop("annotations", None)
            # Reserve before the write: while it is in flight the other workers decide too, and
            # must not promise the same capacity again. A write that fails takes it back.
            saved = self.reservations.of_binding(request.key)
            self._reserve(request, result, moved=moved, previous=previous or {}, now=now)
            try:
                updated = await ctx.objects.update(ctx.binding_rt, written)
            except BaseException:
                self.reservations.restore(request.key, saved)
                raise

        explanation = [entry.to_wire() for entry in result.explanation]
        _explain_waiting(explanation, waiting or {}, grace=ctx.settings.unschedulable_grace_seconds)
        _explain_evictions(explanation, evicted=evicted, tasks=(updated.get("spec") or {}).get("gracefulEvictionTasks") or ())
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
        if not moved and not evicted:
            await self._record_rescheduled(binding, previous or {}, result.clusters, clusters, why=why)
        if evicted:
            await self._record_evictions(binding, evicted, clusters)

    async def _explain_waiting(self, binding: dict[str, Any], waiting: Mapping[str, int]) -> None:
        """Say in the binding's explanation that unschedulable replicas wait for room elsewhere."""
        status = copy.deepcopy(binding.get("status") or {})
        explanation = [
            {**entry, "reasons": [r for r in entry.get("reasons") or () if not r.startswith(WAITING_PREFIX)]}
            for entry in status.get("explanation") or ()
        ]
        _explain_waiting(explanation, waiting, grace=self.ctx.settings.unschedulable_grace_seconds)
        status["explanation"] = explanation
        if status != (binding.get("status") or {}):
            await self.ctx.objects.update_status(self.ctx.binding_rt, {**binding, "status": status})

    def _reserve(
        self,
        request: BindingRequest,
        result: ScheduleResult,
        *,
        moved: Mapping[str, int],
        previous: Mapping[str, int],
        now: datetime,
    ) -> None:
        """Record the decision in the reservations. Replicas moved off a cluster whose member could
        not place them also leave that cluster's reservation (the decision's ``request`` no longer
        counts them there, so :func:`reserve_decision` alone would keep them reserved)."""
        reserve_decision(self.reservations, request, result, now=now)
        for cluster in sorted(moved):
            self.reservations.record_decision(
                request.key,
                previous={cluster: previous.get(cluster, 0)},
                decided={cluster: result.clusters.get(cluster, 0)},
                requirements=result.requirements,
                now=now,
            )

    async def _record_evictions(
        self, binding: dict[str, Any], evicted: Mapping[str, EvictionCause], clusters: list[dict[str, Any]]
    ) -> None:
        workload = self._workload_of(binding)
        if workload is None:
            return
        placed = ", ".join(f"{c['name']}:{c['replicas']}" for c in clusters) or "no cluster"
        for name, cause in sorted(evicted.items()):
            log.warning("binding %s: %s", _key_text(_binding_key(binding)), cause.message, extra={"cluster": name})
            await record_event(
                self.ctx, workload, type=EventType.WARNING, reason=EventReason.REPLICAS_EVICTED,
                message=f"{cause.reason}: {cause.message} (purgeMode {cause.purge_mode}); now {placed}",
            )

    async def _record_rescheduled(
        self,
        binding: dict[str, Any],
        previous: Mapping[str, int],
        decided: Mapping[str, int],
        clusters: list[dict[str, Any]],
        *,
        why: str | None,
    ) -> None:
        """A ``ReplicasMoved`` Event for replicas a decision took off a cluster and gave to another
        for any other cause than a member's unschedulable report or an eviction (those record their
        own): every move of running replicas is on the workload's record."""
        left = replicas_moved(previous, decided)
        if not left:
            return
        workload = self._workload_of(binding)
        if workload is None:
            return
        placed = ", ".join(f"{c['name']}:{c['replicas']}" for c in clusters) or "no cluster"
        text = ", ".join(f"{n} from {c}" for c, n in sorted(left.items()))
        await record_event(
            self.ctx, workload, type=EventType.NORMAL, reason=EventReason.REPLICAS_MOVED,
            message=f"rescheduled ({why or 'placement changed'}): moved {text}; now {placed}",
        )

    async def _eviction_waits(self, binding: dict[str, Any], due: Mapping[str, EvictionCause]) -> None:
        """Say (once per hub term) that due evictions wait for room elsewhere."""
        where = ", ".join(sorted(due))
        message = (
            f"replicas in {where} are due for eviction ({'; '.join(c.message for _, c in sorted(due.items()))}) "
            "but the other clusters cannot hold them; they stay until capacity appears"
        )
        log.warning("binding %s: %s", _key_text(_binding_key(binding)), message)
        workload = self._workload_of(binding)
        if workload is not None:
            await record_event(
                self.ctx, workload, type=EventType.WARNING, reason=EventReason.EVICTION_WAITING, message=message
            )

    def _workload_of(self, binding: Mapping[str, Any]) -> dict[str, Any] | None:
        resource = (binding.get("spec") or {}).get("resource") or {}
        informer = self.ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
        return informer.get(resource.get("namespace"), str(resource.get("name"))) if informer else None

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
        workload = self._workload_of(binding)
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
