"""The scheduler controller: the I/O side of scheduling (binding -> clusters and replicas).

In: ResourceBindings, Clusters (their spec and the capacity their agents report) and Works
(Applied, and pods a member reports it cannot place). Out, per binding: the decision written
by :mod:`~controlplane.scheduler.controller.writing` (``spec.clusters``, the ``Scheduled``
condition, the per-cluster explanation, Events on the workload, failover's
``spec.gracefulEvictionTasks`` entries).

The decision itself is the pure ``controlplane.scheduler.core.schedule`` (and, for a placed
binding, :mod:`controlplane.scheduler.core.rescheduling`). This module holds the watch
handlers, the queue and the reconcile loop, and decides *when* to run it, so placed work does
not move for nothing:

* the binding's spec changed (``metadata.generation`` != ``status.observedGeneration``);
* it is not fully placed (``Scheduled`` is not True): retried on every capacity report of
  any cluster, and every 30 s in any case;
* a cluster it runs in is gone, or no longer admitted by the placement's affinity term;
* for a kind without replicas or a Duplicated workload (it goes to every feasible cluster): a
  cluster it does not run in (or may not yet: its first decision under way) joined or changed
  (labels, taints, readiness, or its nodes' labels, taints and allocatable resources), a cluster
  it was left out of for want of room reports more of it free (:mod:`.roomwaits`), and once
  whenever this scheduler first sees the binding (a new leader), as Karmada schedules such
  objects every time and reschedules a Duplicated workload when the fleet changes;
* a member reported replicas it cannot place, and a report confirms there is no room for them
  or they waited longer than the grace period (:mod:`~controlplane.scheduler.controller.moves`).
  Those replicas are moved — the cluster keeps the rest and takes no new ones in that
  decision, and its explanation says so — but only when the move places at least as many
  replicas as before; a gang moves whole;
* **failover** (:mod:`~controlplane.scheduler.controller.evictions`): a cluster it runs in has
  a ``NoExecute`` taint whose toleration ran out, or the workload has been Unhealthy there for
  the policy's toleration. Like the move above, an eviction happens only when the replicas find
  room elsewhere. Clusters with an eviction task of the binding take none of its replicas while
  the task lasts (as Karmada's scheduler does).

The Pods of a Kueue pod group are placed, fail over and move off a member that cannot place (or
lost to a spot reclaim) one of them together: whole in one cluster
(:mod:`~controlplane.scheduler.controller.podgroups`).

A binding that can never fit (:mod:`controlplane.scheduler.core.neverfit`) is looked at again
only when the fleet's capacity facts change; a binding whose workload finished
(:mod:`~controlplane.scheduler.controller.finished`) keeps its placement for good. Capacity a
decision promises is reserved until reports account for it, and a new leader derives the
reservations from durable state before its first decision
(:mod:`~controlplane.scheduler.controller.reserving`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from controlplane.apis.apps_karmada_v1alpha1 import requested_after_last_decision
from controlplane.apis.views import BindingView, ClusterObjectView, WorkView
from controlplane.apis.work_v1alpha1 import BindingKey, ConditionType, ScheduledReason
from controlplane.controllers.attachments import is_attached
from controlplane.controllers.context import INDEX_CLUSTER, ControllerContext, policy_ref_of_binding
from controlplane.controllers.detecting import binding_priority
from controlplane.controllers.failover import evicting_clusters
from controlplane.controllers.pods import owner_key
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting
from controlplane.controllers.works import binding_key_of_work, cluster_of_namespace
from controlplane.metrics import observe_scheduling_latency
from controlplane.objectclient import WatchEventType
from controlplane.scheduler.controller.evictions import FailoverEvictions, binding_request
from controlplane.scheduler.controller.finished import finished_phase
from controlplane.scheduler.controller.moves import UnschedulableMoves
from controlplane.scheduler.controller.ownwrites import OwnPlacements
from controlplane.scheduler.controller.podgroups import GroupOutcome, PodGroupPlacement
from controlplane.scheduler.controller.quotas import QuotaEnforcement
from controlplane.scheduler.controller.reading import (
    applied_condition,
    binding_key,
    goes_everywhere,
    goes_everywhere_but,
    key_text,
    placement_facts,
    unhealthy_reported,
    unschedulable_pods,
    workload_of,
)
from controlplane.scheduler.controller.rebalancing import TierReturns, in_progress
from controlplane.scheduler.controller.reclaims import ReclaimReplacements, reclaimed_of
from controlplane.scheduler.controller.recording import placement_text, record_eviction_waits
from controlplane.scheduler.controller.reserving import ReservationKeeper
from controlplane.scheduler.controller.roomwaits import RoomWaits
from controlplane.scheduler.controller.writing import (
    set_schedulable,
    write_decision,
    write_error,
    write_refreshed_explanation,
    write_waiting,
)
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.neverfit import capacity_facts, never_fit_result, never_fits, waits_for_room
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.rescheduling import (
    decide_with_evictions,
    decide_with_moves,
    placement_broken,
)
from controlplane.scheduler.core.reservations import Reservation
from controlplane.scheduler.core.returning import room_grew
from controlplane.scheduler.core.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)

UNPLACED_RETRY_SECONDS = 30.0
#: Why a binding that goes to every feasible cluster (a kind without replicas, a Duplicated workload) is
#: scheduled again: a cluster it does not run in joined or changed.
FLEET_CHANGED = "a cluster joined or changed (the binding goes to every feasible cluster)"
MAINTENANCE_SECONDS = 15.0
FRESH_PLACEMENT = "a fresh placement was requested (WorkloadRebalancer)"


def _sooner(*delays: float | None) -> float | None:
    known = [d for d in delays if d is not None]
    return min(known) if known else None


class SchedulerController(KeyedController[BindingKey]):
    """Reconciles bindings (keys: ``(namespace, name)``) into scheduling decisions."""

    name = "scheduler"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self._snapshots: dict[str, ClusterSnapshot] = {}
        # Memos shared by this scheduler's decisions (and its snapshots' node memos).
        self.cache = SchedulerCache()
        self.reserving = ReservationKeeper(ctx, snapshots=self._snapshots)
        self.reservations = self.reserving.reservations
        self.moves = UnschedulableMoves(ctx, snapshots=self._snapshots, keeper=self.reserving)
        self.evictions = FailoverEvictions(ctx)
        self.reclaims = ReclaimReplacements(ctx)
        self.returns = TierReturns(ctx, keeper=self.reserving, cache=self.cache)
        self.quota_enforcement = QuotaEnforcement(ctx, self._requeue)
        self.pod_groups = PodGroupPlacement(
            ctx, keeper=self.reserving, quotas=self.quota_enforcement, evictions=self.evictions, moves=self.moves,
            reclaims=self.reclaims, cache=self.cache, request_of=self._request_of, requeue=self._requeue,
        )
        self._unplaced: set[BindingKey] = set()
        # Bindings no node of the fleet could ever hold: looked at again only when the fleet's
        # capacity changes (a cluster's nodes, their labels, taints or allocatable), not on every report.
        self._never_fit: set[BindingKey] = set()
        self._capacity: dict[str, frozenset[Any]] = {}
        # Whether the reservations were derived from the informers' state (once, before deciding).
        self._rebuilt = False
        # Bindings whose explanation judged a cluster whose labels, taints or readiness changed since.
        self._stale_explanations: set[BindingKey] = set()
        #: Bindings going to every feasible cluster that a cluster they do not run in may now admit.
        self._fleet_changed: set[BindingKey] = set()
        self.room_waits = RoomWaits()  # and those a cluster left out for want of room (roomwaits.py)
        #: The placements this scheduler writes, whose own watch events need no reconcile.
        self._own = OwnPlacements()
        ctx.bindings.add_handler(self._on_binding)
        ctx.clusters.add_handler(self._on_cluster)
        ctx.works.add_handler(self._on_work)

    # --- event handlers ---------------------------------------------------------------

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = BindingView(obj)
        key = (str(view.metadata.get("namespace")), str(view.metadata.get("name")))
        if event is WatchEventType.DELETED:
            await self._forget(key)
            return
        if event is WatchEventType.ADDED and goes_everywhere(obj):
            # New to this scheduler (a new leader's first list among them): judged against the fleet
            # once, since clusters may have joined or changed unseen (Karmada's scheduler schedules
            # every Duplicated binding it is given).
            self._fleet_changed.add(key)
        scheduled = view.condition(ConditionType.SCHEDULED)
        if scheduled is not None and scheduled.get("reason") == ScheduledReason.NEVER_FITS:
            self._never_fit.add(key)
            self._unplaced.discard(key)
        elif waits_for_room(scheduled):
            self._never_fit.discard(key)
            self._unplaced.add(key)
        else:
            self._never_fit.discard(key)
            self._unplaced.discard(key)
        if (
            event is WatchEventType.MODIFIED
            and old is not None
            and BindingView(old).generation == view.generation
            and not view.is_deleting
        ):
            return
        if event is WatchEventType.MODIFIED and self._own.is_own(key, view.metadata.get("resourceVersion")):
            return  # this scheduler's own placement write: decided already (ownwrites.py)
        await self.loop.add(key, priority=view.priority)

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = str(ClusterObjectView(obj).metadata.get("name"))
        if event is WatchEventType.DELETED:
            self._snapshots.pop(name, None)
            self._capacity.pop(name, None)
            self.room_waits.forget_cluster(name)
            await self._requeue_cluster(name)
            await self._requeue_unplaced()
            return
        before = self._snapshots.get(name)
        try:
            snapshot = ClusterSnapshot.from_cluster(obj, previous=before, cache=self.cache)
        except (ValueError, TypeError) as exc:
            log.warning("cluster %s has a status the scheduler cannot read: %s", name, exc)
            return
        self._snapshots[name] = snapshot
        facts = capacity_facts(snapshot)
        nodes_changed = self._capacity.get(name) != facts
        if nodes_changed:
            self._capacity[name] = facts
            for key in sorted(self._never_fit):  # the fleet's capacity changed: they may fit now
                await self._requeue(key)
            for key in sorted(self.returns.weighted):  # the clusters their weights count may change
                await self._requeue(key)
        self.reserving.observe_report(name, obj, snapshot)
        for key in self.room_waits.freed(name, before, snapshot):  # it may hold them now: decided again
            self._fleet_changed.add(key)
            await self._requeue(key)
        if event is WatchEventType.ADDED or placement_facts(old) != placement_facts(obj):
            await self._requeue_cluster(name)
            await self._requeue_everywhere_kinds(name)
            if event is WatchEventType.MODIFIED:
                await self._requeue_stale_explanations(name)
        elif nodes_changed:  # e.g. its GPUs reported once the device plugin runs: it may hold them now
            await self._requeue_everywhere_kinds(name)
        # Bindings whose pods this member reports unschedulable: the new report may confirm
        # there is no room for them.
        for key in self.moves.waiting_in(name):
            await self._requeue(key)
        if room_grew(before, snapshot):  # burst replicas may fit in this cluster now
            for key in sorted(self.returns.candidates):
                await self._requeue(key)
        await self._requeue_unplaced()

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = binding_key_of_work(obj)
        cluster = cluster_of_namespace(WorkView(obj).namespace)
        if key is None or cluster is None or event is WatchEventType.DELETED:
            return
        if applied_condition(obj) is not None:
            self.reservations.mark_applied(key_text(key), cluster, at=self.ctx.now())
        if unschedulable_pods(obj) or (old is not None and unschedulable_pods(old)) or reclaimed_of(obj):
            await self._requeue(key)
        elif (unhealthy_reported(obj) or (old is not None and unhealthy_reported(old))) and self._fails_over(key):
            # application failover counts from the first Unhealthy report
            await self._requeue(key)
        elif in_progress(self.ctx.bindings.get(key[0], key[1]) or {}) is not None:
            await self._requeue(key)  # a move back to a cheaper tier waits for its replicas to be ready

    def _fails_over(self, key: BindingKey) -> bool:
        """Whether the binding's policy asks for application failover."""
        ref = policy_ref_of_binding(self.ctx.bindings.get(key[0], key[1]))
        policy = self.ctx.propagation_policy(ref) if ref else None
        return bool(policy and policy.spec.failover and policy.spec.failover.application)

    async def _requeue(self, key: BindingKey) -> None:
        await self.loop.add(key, priority=binding_priority(self.ctx.bindings.get(key[0], key[1])))

    async def _requeue_cluster(self, cluster: str) -> None:
        for key in self.ctx.bindings.index_keys(INDEX_CLUSTER, cluster):
            await self._requeue(key)

    async def _requeue_everywhere_kinds(self, cluster: str) -> None:
        """Bindings that go to every feasible cluster, not (or not yet) placed in ``cluster``: it may admit them now.

        One whose first decision is under way is marked too: that decision may have judged the fleet
        before ``cluster`` joined or changed, and the mark has it decided again."""
        for binding in self.ctx.bindings.items():
            if goes_everywhere_but(binding, cluster):
                key = binding_key(binding)
                self._fleet_changed.add(key)
                await self.loop.add(key, priority=binding_priority(binding))

    async def _requeue_stale_explanations(self, cluster: str) -> None:
        """Bindings whose explanation did not choose ``cluster`` as it was: judged again (explaining.py;
        the entries of clusters a binding runs in stay as decided).

        The cache may not hold a binding's newest status yet (its explanation written a moment
        ago, its event still on the way): a binding counts unless its cached explanation chose
        ``cluster``, and the reconcile reads it afresh."""
        stale = 0
        for binding in self.ctx.bindings.items():
            explained = BindingView(binding).explanation
            if not any(entry.get("cluster") == cluster and entry.get("chosen") for entry in explained):
                key = binding_key(binding)
                self._stale_explanations.add(key)
                await self.loop.add(key, priority=binding_priority(binding))
                stale += 1
        log.debug("cluster %s changed: the explanations of %d binding(s) are judged again", cluster, stale)

    async def _requeue_unplaced(self) -> None:
        for key in sorted(self._unplaced | self.evictions.blocked | self.moves.blocked):
            await self._requeue(key)

    def _ensure_rebuilt(self) -> None:
        """Derive the reservations from the informers once they are synced (reserving.py)."""
        if self._rebuilt:
            return
        ctx = self.ctx
        if not all(informer.synced.is_set() for informer in (ctx.bindings, ctx.works, ctx.clusters)):
            return
        self._rebuilt = True
        count = self.reserving.rebuild_reservations()
        if count:
            log.info("derived %d reservation(s) from bindings and capacity reports", count)

    async def _forget(self, key: BindingKey) -> None:
        held = self.reservations.of_binding(key_text(key))
        self.reserving.forget(key_text(key))
        self._unplaced.discard(key)
        self.moves.forget(key)
        self.evictions.forget(key)
        self.reclaims.forget(key)
        self._stale_explanations.discard(key)
        self._fleet_changed.discard(key)
        self.room_waits.forget(key)
        self._never_fit.discard(key)
        self.returns.forget(key)
        self._own.forget(key)
        self.pod_groups.forget(key)
        await self._requeue_room_freed(held.values())

    async def _requeue_room_freed(self, dropped: Iterable[Reservation]) -> None:
        """Reservations dropped on the hub alone (no report will show the room they held freed):
        the bindings left out of their clusters for want of that room are decided again (roomwaits.py)."""
        for reservation in dropped:
            for key in self.room_waits.released(reservation):
                self._fleet_changed.add(key)
                await self._requeue(key)

    async def maintain(self) -> None:
        """Expire reservations whose reports never came; retry unplaced bindings when capacity frees."""
        max_age = timedelta(seconds=self.ctx.settings.reservation_max_age_seconds)
        while True:
            await asyncio.sleep(MAINTENANCE_SECONDS)
            self._ensure_rebuilt()
            if expired := self.reservations.expire(now=self.ctx.now(), max_age=max_age):
                await self._requeue_unplaced()
                await self._requeue_room_freed(expired)
            for key in sorted(self.returns.candidates):  # those that were not settled when room appeared
                await self._requeue(key)

    # --- reconcile --------------------------------------------------------------------

    def _request_of(self, binding: dict[str, Any]) -> BindingRequest | None:
        return binding_request(self.ctx, binding)

    async def reconcile(self, key: BindingKey) -> float | None:
        cached = self.ctx.bindings.get(key[0], key[1])
        if cached is not None and self.pod_groups.group_of(cached) is not None:
            async with self.pod_groups.lock:  # one decision for a group at a time (podgroups.py)
                return await self._reconcile(key)
        return await self._reconcile(key)

    async def _reconcile(self, key: BindingKey) -> float | None:
        ctx = self.ctx
        self._ensure_rebuilt()
        # Its latest version as the hub saw it: the scheduler's and the status controller's own
        # writes before their events reach the informer; a stale copy loses the decision's
        # compare-and-swap.
        binding = await ctx.latest_seen(ctx.binding_rt, key[0], key[1])
        if binding is None or is_deleting(binding):
            await self._forget(key)
            return None
        if is_attached(binding):
            return None  # propagateDeps: placed where the workloads that need it run (dependencies.py)
        phase = finished_phase(ctx, binding)
        if phase is not None:
            # Finished work stays where it ran: no move, re-placement, failover or second run.
            if key_text(key) in self.reserving.owners or self.reservations.of_binding(key_text(key)):
                log.info("binding %s: the workload %s; its placement is final", key_text(key), phase.lower())
            await self._forget(key)
            return None
        request = self._request_of(binding)
        if request is None:
            return None
        view = BindingView(binding)
        self.reserving.owners[key_text(key)] = owner_key(view.resource)
        policy_ref = policy_ref_of_binding(binding)
        policy = ctx.propagation_policy(policy_ref) if policy_ref else None
        spec = view.spec
        all_snapshots = dict(self._snapshots)
        evicting = evicting_clusters(spec)
        snapshots = {name: s for name, s in all_snapshots.items() if name not in evicting}
        group = self.pod_groups.group_of(binding)
        home = self.pod_groups.home(group, key) if group is not None else set()
        # A pod group's failover looks at every cluster; its Pods' other decisions at its own (podgroups.py).
        fleet = [snapshots[name] for name in sorted(snapshots)] if group is not None else []
        if home:  # a Pod of a placed group goes, and stays, where the rest of its group runs
            snapshots = {name: s for name, s in snapshots.items() if name in home or name in request.previous}
        moves, wait, move_reasons = self.moves.due(key, binding, request)
        underway = in_progress(binding)
        if underway is not None and underway.target in moves and self.returns.eligible(binding, request):
            moves.pop(underway.target)  # the move's own replicas the target cannot place: the move abandons them
        # Replicas spot reclaims took move at once; the member may report them unschedulable too.
        reclaimed, reclaim_reasons = self.reclaims.due(key, binding)
        for cluster, pods in reclaimed.items():
            moves[cluster] = max(moves.get(cluster, 0), pods)
            move_reasons[cluster] = reclaim_reasons[cluster]
        now = ctx.now()
        check = self.evictions.check(key, request, policy, all_snapshots, view.resource, now=now)
        wait = _sooner(wait, check.seconds_until_next(now))

        status = view.status
        scheduled = view.condition(ConditionType.SCHEDULED)
        generation = view.generation
        why: str | None = None
        previous = dict(request.previous)
        if requested_after_last_decision(spec, status):
            # A WorkloadRebalancer asked for a fresh placement: decided as if it ran nowhere
            # (a running gang stays whole where it runs: it moves only between runs).
            why = FRESH_PLACEMENT
            if not request.gang or self.returns.between_runs(binding):
                request = replace(request, previous={})
        elif status.get("observedGeneration") != generation or scheduled is None:
            why = "spec changed"
        elif scheduled.get("status") != "True":
            why = "not fully placed"
        else:
            why = placement_broken(request, all_snapshots)
        if key in self._fleet_changed:
            self._fleet_changed.discard(key)
            if why is None and request.goes_everywhere:
                why = FLEET_CHANGED
        if not moves:
            self.moves.blocked.discard(key)
        if why == "spec changed" and in_progress(binding) is not None and self.returns.eligible(binding, request):
            why = None  # a move under way judges its binding's changes itself (rebalancing.py)
        if why is None and not moves and not check.due:
            self.evictions.blocked.discard(key)
            if key in self._stale_explanations:
                await self._refresh_explanation(binding, request, snapshots, now=now)
            if self.returns.eligible(binding, request):  # burst replicas back to a cheaper tier (rebalancing.py)
                wait = _sooner(wait, await self.returns.step(binding, request, snapshots))
            return wait

        ordered = [snapshots[name] for name in sorted(snapshots)]
        if group is not None and not previous and why is not None and not moves and not check.due:
            outcome = await self.pod_groups.place(
                group, binding, request, ordered, home=home, reservations=self.reservations, now=now
            )
            # One that never fits waits for a change of the fleet's capacity, not for the next retry.
            return _sooner(wait, UNPLACED_RETRY_SECONDS) if outcome is GroupOutcome.UNPLACED else wait
        moved: dict[str, int] = {}
        result: ScheduleResult | None = None
        plain: ScheduleResult | None = None  # the decision of ``request`` over ``ordered`` as they are
        started = time.perf_counter()  # gpufed_scheduling_duration_seconds: one decision's time
        try:
            # A pod group fails over, or moves off a member that cannot place (or lost) one of its Pods, whole.
            if group is not None and (check.due or moves) and await self.pod_groups.relocate(
                group, binding, request, fleet, due=check.due, unplaceable=moves,
                policy=policy.spec if policy else None, now=now,
            ):
                return wait
            if check.due:
                evicted_decision = decide_with_evictions(
                    request, ordered, check.due, reservations=self.reservations, now=now, cache=self.cache
                )
                if evicted_decision is not None:
                    request, result = evicted_decision
                    self.evictions.blocked.discard(key)
                else:
                    if key not in self.evictions.blocked:
                        await record_eviction_waits(ctx, binding, check.due)
                    self.evictions.blocked.add(key)
                    wait = _sooner(wait, UNPLACED_RETRY_SECONDS)
            if result is None:
                if why is None and not moves:
                    return wait
                decided = None
                non_spot = False
                # After repeated reclaims, non-spot clusters are tried first (reclaims.py).
                candidate_sets = self.reclaims.candidate_sets(
                    binding, policy.spec if policy else None, ordered,
                    previous=request.previous, reclaimed=bool(reclaimed),
                )
                for candidates, non_spot_only in candidate_sets if moves else ():
                    decided = decide_with_moves(
                        request, candidates, moves, reasons=move_reasons, reservations=self.reservations,
                        now=now, cache=self.cache,
                    )
                    if decided is not None:
                        non_spot = non_spot_only
                        break
                if decided is not None:
                    request, result = decided
                    moved = dict(moves)
                    self.moves.blocked.discard(key)
                else:
                    if moves:
                        self.moves.blocked.add(key)  # retried on every capacity report
                    result = plain = schedule(request, ordered, reservations=self.reservations, now=now, cache=self.cache)
                    if not request.previous and not result.placed:
                        never = never_fits(request, [all_snapshots[name] for name in sorted(all_snapshots)])
                        if never is not None:
                            result = never_fit_result(request, result, never.message)
        except Exception as exc:  # a bug in the decision must not stop the other bindings
            observe_scheduling_latency(time.perf_counter() - started, result=ScheduledReason.SCHEDULER_ERROR)
            log.exception("scheduling %s failed", key_text(key))
            await write_error(ctx, binding, f"the scheduler failed: {exc}")
            return UNPLACED_RETRY_SECONDS
        observe_scheduling_latency(time.perf_counter() - started, result=result.condition.reason)
        self.room_waits.record(key, request, result)
        room = self.quota_enforcement.room_version(key[0])
        refused = self.quota_enforcement.refusal(binding, result.clusters)
        if refused is not None:  # FederatedQuotaEnforcement: the decision is not written (quotas.py)
            await self.quota_enforcement.refuse(binding, refused)
            if self.quota_enforcement.room_version(key[0]) != room:
                await self._requeue(key)  # room made while the refusal was written: decided again
            return UNPLACED_RETRY_SECONDS
        # Every cluster due for eviction that the decision leaves gets an eviction task.
        evicted = {name: cause for name, cause in check.due.items() if name in previous and name not in result.clusters}
        waiting = {} if moved else moves
        if why == FLEET_CHANGED and not set(result.clusters) > set(previous):
            why = None  # the fleet changed, but adds no cluster to this binding (nor takes one away)
            if key in self._stale_explanations and not moved and not evicted and not waiting:
                await self._refresh_explanation(binding, request, snapshots, now=now, decided=plain)  # a gang, whole
        if why is None and not moved and not evicted:
            if waiting:  # members report unplaceable pods, but nothing else can take them yet
                await write_waiting(ctx, binding, waiting)
                return _sooner(wait, UNPLACED_RETRY_SECONDS)
            return wait
        log.debug("scheduling %s: %s", key_text(key), why or ("evicting" if evicted else "moving unschedulable replicas"))
        if why == FRESH_PLACEMENT:
            request = replace(request, previous=previous)  # reserved against what runs now
        # A plain decision's own write needs no second reconcile (a fresh read and a decision that
        # would change nothing); when the new placement is next due (a toleration running out) is
        # known now. Moves, evictions and tier returns look at their binding again.
        follow_up = None
        if not moved and not evicted and in_progress(binding) is None:
            as_placed = replace(request, previous=dict(result.clusters))
            follow_up = self.evictions.check(key, as_placed, policy, all_snapshots, view.resource, now=now)
        own = follow_up is not None and not follow_up.due
        stored: list[Mapping[str, Any]] = []
        if own:
            self._own.begin(key)
        try:
            await write_decision(
                ctx, self.reserving, binding, request, result,
                moved=moved, evicted=evicted, previous=previous, waiting=waiting, why=why,
                placement_written=stored.append if own else None,
            )
        finally:
            someone_else = own and self._own.end(key, stored[0] if stored else None)
        if own and follow_up is not None:
            wait = _sooner(wait, follow_up.seconds_until_next(now))
            current = self._snapshots
            if someone_else or len(current) != len(all_snapshots) or any(
                current.get(name) is not snapshot for name, snapshot in all_snapshots.items()
            ):
                await self._requeue(key)  # the binding or a cluster changed meanwhile: judged again
        self._stale_explanations.discard(key)  # the decision judged the fleet as it is now
        if moved:
            self.moves.acted(key, moved)
            await self.reclaims.acted(
                key, binding, moved, placed=placement_text(result.target_clusters()), non_spot=non_spot
            )
        if self.returns.eligible(binding, request):  # looked at again when room appears where the policy prefers
            self.returns.watch(key, request, unmet=self.returns.has_burst(request, result, snapshots))
        if evicted:
            for cluster in evicted:
                self.reservations.release(key_text(key), cluster=cluster)
            self.evictions.evicted(key, evicted)
        workload = workload_of(ctx, binding)
        if workload is not None:
            await set_schedulable(ctx, workload, result.condition)
        if result.condition.reason is ScheduledReason.NEVER_FITS:
            return wait  # waits for a change of the fleet's capacity, not for the next retry
        if not result.condition.status:
            return min(UNPLACED_RETRY_SECONDS, wait) if wait is not None else UNPLACED_RETRY_SECONDS
        return wait

    async def _refresh_explanation(
        self, binding: dict[str, Any], request: BindingRequest, snapshots: dict[str, ClusterSnapshot], *, now: datetime,
        decided: ScheduleResult | None = None,
    ) -> None:
        """Store the fleet's verdicts as they are now for a binding whose decision stands (``decided``:
        the decision just made with these inputs, so that none is made again for its explanation).

        The binding stays stale until the write went through: a write that loses a race (a
        Conflict with the status controller) is retried with the reconcile, not forgotten."""
        await write_refreshed_explanation(
            self.ctx, binding, request, snapshots, reservations=self.reservations, now=now, cache=self.cache, decided=decided
        )
        self._stale_explanations.discard(binding_key(binding))
