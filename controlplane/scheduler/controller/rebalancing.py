"""Moving replicas back to what their policy prefers: the two-phase move, driven through the binding.

For a placed, settled Deployment, ReplicaSet or StatefulSet whose placement falls short of its
policy's preference (tiered overflow: replicas outside the cheapest cluster; ordered
``clusterAffinities``: a later term than the first; static weights: a division a full cluster
cut short; see ``core/preferring.py``), the scheduler controller asks :meth:`TierReturns.step`
on every look at the binding (a capacity report showing more free GPUs than the cluster's last
one requeues those bindings, and the controller's 15 s maintenance does too). Only a settled
binding starts a move: every member reports all its replicas ready and none it cannot place
(so replicas just moved off a member that could not place them are not sent straight back).

1. **Surge.** The pure :func:`~controlplane.scheduler.core.returning.propose_return` picks the
   move (source, target, how many within ``maxSurge``, the saving, the minimum interval since
   the last move). The binding is written with the target's replicas raised by the move's,
   every other cluster keeping what it runs (:func:`~controlplane.scheduler.core.preferring.pinned_decision`
   judges the target's room); the target's Work then carries the extra replicas. The move is
   recorded in the binding's ``scheduler.gpufed.io/rebalance`` annotation in the same write,
   and logged once that write succeeded.
2. **Shrink.** Once the target member reports at least that many replicas ready (its Work's
   manifest status), the source loses as many (a pinned decision again; under
   ``clusterAffinities`` the binding observes the first term again once no replica is left
   outside it). The annotation goes, the move is appended to ``scheduler.gpufed.io/moves``
   (which the minimum interval reads, ``gpufed explain`` prints and the waste report counts),
   and a ``ReplicasMoved`` Event names the saving. A move whose added replicas are not ready
   within the policy's ``surgeTimeoutSeconds`` is abandoned instead: the added replicas are
   removed from the target, every other cluster keeps what it runs, and a ``MoveAbandoned``
   Warning Event says so.

Both phases live in the binding itself, so a hub restart mid-move resumes it: no replica is
lost or doubled. A change of the binding's replicas abandons the move (the annotation goes;
the ordinary decision judges the new count).

A gang moves whole and in one step, and only between runs (every member it is placed in reports
it not started or restarting, as its interpreter reads the status: ``between_runs``): nothing of
it runs, so there are no ready replicas to keep. Finished work never gets here (controller.py).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from controlplane.apis.constants import ANNOTATION_ABANDONED, ANNOTATION_MOVES, ANNOTATION_REBALANCE
from controlplane.apis.events import EventType
from controlplane.apis.timestamps import format_time, parse_time, parse_time_or_none
from controlplane.apis.work_v1alpha1 import BindingKey
from controlplane.controllers.context import INDEX_BINDING, ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.works import cluster_of_namespace, main_manifest
from controlplane.interpreter import interpreter_for
from controlplane.scheduler.controller.reading import binding_key, unschedulable_pods, workload_of
from controlplane.scheduler.controller.reserving import ReservationKeeper
from controlplane.scheduler.controller.writing import write_decision
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.preferring import (
    fell_back,
    pinned_decision,
    preference_unmet,
    states_preference,
)
from controlplane.scheduler.core.returning import (
    MOVES_KEPT,
    Move,
    gpus_per_replica,
    propose_return,
    return_order,
    return_settings,
    returnable,
    surge_time_left,
)
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import DivisionStrategy

log = logging.getLogger(__name__)

MOVABLE_KINDS: Final = frozenset({("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")})
READY_POLL_SECONDS: Final = 5.0


def in_progress(binding: Mapping[str, Any]) -> Move | None:
    """The move recorded in the binding's annotation, or None."""
    raw = ((binding.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_REBALANCE)
    try:
        data = json.loads(raw) if raw else {}
        return Move(
            str(data["source"]), str(data["target"]), int(data["replicas"]), float(data["savingPerHour"]),
            why=str(data.get("why") or ""),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def moves_done(binding: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The binding's latest finished moves, oldest first (its moves annotation)."""
    raw = ((binding.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_MOVES)
    try:
        moves = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [m for m in moves if isinstance(m, dict)] if isinstance(moves, list) else []


def last_move(binding: Mapping[str, Any]) -> datetime | None:
    """When the binding last finished or abandoned a move."""
    done = moves_done(binding)
    try:
        finished = parse_time(str(done[-1]["time"])) if done else None
    except (ValueError, KeyError):
        finished = None
    abandoned = parse_time_or_none(((binding.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_ABANDONED))
    return max((t for t in (finished, abandoned) if t is not None), default=None)


def last_scheduled(binding: Mapping[str, Any]) -> datetime | None:
    """When the scheduler last changed the binding's placement (``status.lastScheduledTime``)."""
    return parse_time_or_none((binding.get("status") or {}).get("lastScheduledTime"))


def _applied(work: Mapping[str, Any]) -> bool:
    """Whether the member applied the Work as it is now (its ``Applied`` condition, current)."""
    generation = (work.get("metadata") or {}).get("generation")
    for condition in (work.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Applied":
            observed = condition.get("observedGeneration")
            return condition.get("status") == "True" and (observed is None or observed == generation)
    return False


def _with_annotations(binding: Mapping[str, Any], **changes: str | None) -> dict[str, Any]:
    """A copy of ``binding`` with annotations set (a value) or removed (None)."""
    out = copy.deepcopy(dict(binding))
    annotations = dict(out["metadata"].get("annotations") or {})
    names = {"rebalance": ANNOTATION_REBALANCE, "moves": ANNOTATION_MOVES, "abandoned": ANNOTATION_ABANDONED}
    for key, value in changes.items():
        name = names[key]
        if value is None:
            annotations.pop(name, None)
        else:
            annotations[name] = value
    out["metadata"]["annotations"] = annotations
    return out


class TierReturns:
    """Starts and finishes moves of a binding's replicas toward what its policy prefers (cheaper
    tiers, the first affinity term, the static weights), and moves gangs whole between runs."""

    def __init__(self, ctx: ControllerContext, *, keeper: ReservationKeeper, cache: SchedulerCache) -> None:
        self.ctx = ctx
        self.keeper = keeper
        self.cache = cache
        # Bindings whose placement falls short of their policy's preference and no move under
        # way: any capacity report may show room for them where the policy prefers.
        self.candidates: set[BindingKey] = set()
        # Bindings divided by static weights: their preference counts only clusters that could
        # ever run a replica, so a cluster whose nodes change may make it unmet (controller.py
        # requeues them then).
        self.weighted: set[BindingKey] = set()

    def watch(self, key: BindingKey, request: BindingRequest, *, unmet: bool) -> None:
        """Remember a decided binding: a candidate when ``unmet``, weighted when it is."""
        if unmet:
            self.candidates.add(key)
        if request.strategy is DivisionStrategy.STATIC_WEIGHT and not request.gang:
            self.weighted.add(key)

    def forget(self, key: BindingKey) -> None:
        self.candidates.discard(key)
        self.weighted.discard(key)

    def eligible(self, binding: Mapping[str, Any], request: BindingRequest) -> bool:
        """Whether the binding may move on its own: a Deployment, ReplicaSet or StatefulSet divided by
        tiered overflow or by a policy that states a preference (``preferring.py``), or a gang whose
        interpreter tells when it is between runs (it moves whole, then only)."""
        resource = (binding.get("spec") or {}).get("resource") or {}
        kind = (str(resource.get("apiVersion")), str(resource.get("kind")))
        if request.gang:
            # A kind that can tell calls a gang with no status yet "not started"; the others
            # (RayJob, JobSet, LeaderWorkerSet...) never can, so they are not watched at all.
            interpreter = interpreter_for(*kind)
            return interpreter is not None and interpreter.between_runs(None)
        return kind in MOVABLE_KINDS and (
            request.strategy is DivisionStrategy.TIERED_OVERFLOW or states_preference(request)
        )

    def has_burst(
        self, request: BindingRequest, result: ScheduleResult, snapshots: Mapping[str, ClusterSnapshot]
    ) -> bool:
        """Whether the decision runs replicas outside the placement the policy prefers: outside the
        cheapest cluster it ranks, under a later affinity term, or off the static weights (a
        placement that runs nothing, such as a request that never fits, has none to bring back)."""
        placed = {str(c["name"]): int(c["replicas"]) for c in result.target_clusters()}
        return self._unmet(request, placed, snapshots, affinity_name=result.affinity_name)

    def _unmet(
        self,
        request: BindingRequest,
        placed: Mapping[str, int],
        snapshots: Mapping[str, ClusterSnapshot],
        *,
        affinity_name: str | None,
    ) -> bool:
        ranked = request.strategy is DivisionStrategy.TIERED_OVERFLOW or request.gang
        if ranked and returnable(placed, self._order(request, snapshots)) > 0:
            return True
        if request.gang:
            return fell_back(replace(request, previous_affinity_name=affinity_name))
        return preference_unmet(request, placed, list(snapshots.values()), affinity_name=affinity_name)

    async def step(
        self, binding: dict[str, Any], request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot]
    ) -> float | None:
        """Start a move or carry one on; the seconds until the binding should be looked at again."""
        meta = binding.get("metadata") or {}
        key: BindingKey = (str(meta.get("namespace")), str(meta.get("name")))
        self.candidates.discard(key)
        move = in_progress(binding)
        if move is not None:
            return await self._finish(binding, request, snapshots, move)
        unmet = self._unmet(request, request.previous, snapshots, affinity_name=request.previous_affinity_name)
        self.watch(key, request, unmet=unmet)
        if not unmet:
            return None
        if request.gang:
            return await self._move_gang(binding, request, snapshots)
        return await self._start(binding, request, snapshots)

    def _order(self, request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot]) -> dict[str, tuple[int, float]]:
        return return_order(request, snapshots.values())

    async def _start(
        self, binding: dict[str, Any], request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot]
    ) -> float | None:
        previous = dict(request.previous)
        if not return_settings(request.placement).enabled or sum(previous.values()) != request.replicas:
            return None
        ready = self.ready_by_cluster(binding)
        if any(ready.get(name, 0) < n for name, n in previous.items()):
            return None  # only a settled workload moves: every replica ready, none its member cannot place
        ordered = [snapshots[name] for name in sorted(snapshots)]
        now = self.ctx.now()
        plan = propose_return(
            request, ordered, last_move=last_move(binding), now=now, reservations=self.keeper.reservations, cache=self.cache
        )
        if plan.move is None:
            log.debug("binding %s: no move toward the policy's preference: %s", request.key, plan.reason)
            return plan.wait_seconds
        move = plan.move
        wanted = {**previous, move.target: previous.get(move.target, 0) + move.replicas}
        result = pinned_decision(
            request, ordered, wanted, why=f"keeps its replicas while {move.replicas} move to {move.target}",
            reservations=self.keeper.reservations, now=now, cache=self.cache,
        )
        if result is None:
            log.info("binding %s: the move %s no longer fits; not started", request.key, move.describe())
            return None
        surged = replace(request, replicas=request.replicas + move.replicas)
        record = {
            "source": move.source,
            "target": move.target,
            "replicas": move.replicas,
            "savingPerHour": move.saving_per_hour,
            "targetReady": wanted[move.target],
            "replicasBefore": request.replicas,
            "started": format_time(now),
            **({"why": move.why} if move.why else {}),
        }
        marked = _with_annotations(binding, rebalance=json.dumps(record, sort_keys=True))
        await write_decision(
            self.ctx, self.keeper, marked, surged, result, moved={}, previous=previous,
            why=f"adding {move.replicas} replica(s) in {move.target} before removing as many from {move.source}",
        )
        log.info("binding %s: started: %s", request.key, move.describe())  # once the surge is stored
        return READY_POLL_SECONDS

    async def _abandon(
        self,
        binding: dict[str, Any],
        request: BindingRequest,
        ordered: list[ClusterSnapshot],
        move: Move,
        previous: Mapping[str, int],
        *,
        why: str,
        now: datetime,
    ) -> None:
        """The move's added replicas will not get ready (``why``): remove them from the target,
        every other cluster keeping what it runs, and say so in an Event."""
        wanted = {**previous, move.target: previous.get(move.target, 0) - move.replicas}
        wanted = {name: n for name, n in wanted.items() if n > 0}
        text = (
            f"abandoned moving {move.replicas} replica(s) {move.source} \u2192 {move.target}: {why}; "
            "the added replicas were removed"
        )
        result = pinned_decision(
            request, ordered, wanted, why=f"keeps its replicas: {text}",
            reservations=self.keeper.reservations, now=now, cache=self.cache,
        )
        cleared = _with_annotations(binding, rebalance=None, abandoned=format_time(now))
        if result is None:  # removing replicas needs no room: not expected
            await self.ctx.objects.update(self.ctx.binding_rt, cleared)
        else:
            await write_decision(self.ctx, self.keeper, cleared, request, result, moved={}, previous=dict(previous), why=text)
        log.info("binding %s: %s", request.key, text)
        workload = workload_of(self.ctx, binding)
        if workload is not None:
            await record_event(self.ctx, workload, type=EventType.WARNING, reason=EventReason.MOVE_ABANDONED, message=text)

    def between_runs(self, binding: Mapping[str, Any]) -> bool:
        """Whether every member the gang is placed in reports it between runs (no status yet: not
        started), as the kind's interpreter reads the member's status (``between_runs``)."""
        resource = (binding.get("spec") or {}).get("resource") or {}
        interpreter = interpreter_for(str(resource.get("apiVersion")), str(resource.get("kind")))
        if interpreter is None:
            return False
        works = {
            cluster: work
            for work in self.ctx.works.by_index(INDEX_BINDING, binding_key(binding))
            if (cluster := cluster_of_namespace(str(work["metadata"].get("namespace") or ""))) is not None
        }
        placed = [str(c.get("name")) for c in (binding.get("spec") or {}).get("clusters") or ()]
        # A placement whose Work is not applied yet is a move still in flight (the gang just moved,
        # say because its member could not place it), not a gang between runs.
        return bool(placed) and all(
            name in works and _applied(works[name])
            and interpreter.between_runs((main_manifest(works[name], resource) or {}).get("status"))
            for name in placed
        )

    async def _move_gang(
        self, binding: dict[str, Any], request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot]
    ) -> float | None:
        """Move a gang whole, in one step, while it is between runs (nothing of it runs, so there
        are no ready replicas to keep); never mid-run."""
        if not self.between_runs(binding):
            return None
        ordered = [snapshots[name] for name in sorted(snapshots)]
        now = self.ctx.now()
        # The interval counts from the gang's last placement too, whatever moved it (its member
        # could not place it, a failover): a gang is not sent back where it just left.
        since = max((t for t in (last_move(binding), last_scheduled(binding)) if t is not None), default=None)
        plan = propose_return(
            request, ordered, last_move=since, now=now, reservations=self.keeper.reservations, cache=self.cache
        )
        move = plan.move
        if move is None:
            log.debug("binding %s: the gang stays: %s", request.key, plan.reason)
            return plan.wait_seconds
        text = move.describe()
        result = pinned_decision(
            request, ordered, {move.target: request.replicas}, why=text,
            reservations=self.keeper.reservations, now=now, cache=self.cache,
        )
        if result is None:
            return None
        await self._record_move(binding, request, result, move, now=now)
        return None

    def ready_by_cluster(self, binding: Mapping[str, Any]) -> dict[str, int]:
        """Per cluster, the ready replicas its member reports for the binding's workload (-1 while
        it reports pods it cannot place)."""
        resource = (binding.get("spec") or {}).get("resource") or {}
        meta = binding.get("metadata") or {}
        key: BindingKey = (str(meta.get("namespace")), str(meta.get("name")))
        out: dict[str, int] = {}
        for work in self.ctx.works.by_index(INDEX_BINDING, key):
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
            if cluster is None:
                continue
            manifest = main_manifest(work, resource) or {}
            ready = (manifest.get("status") or {}).get("readyReplicas")
            out[cluster] = -1 if unschedulable_pods(work) else int(ready) if isinstance(ready, int) else 0
        return out

    async def _finish(
        self, binding: dict[str, Any], request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot], move: Move
    ) -> float | None:
        raw = json.loads(((binding.get("metadata") or {}).get("annotations") or {})[ANNOTATION_REBALANCE])
        previous = dict(request.previous)
        expected_total = int(raw.get("replicasBefore", -1)) + move.replicas
        if request.replicas != int(raw.get("replicasBefore", -1)) or sum(previous.values()) != expected_total:
            log.info("binding %s: replicas changed during the move %s; abandoned", request.key, move.describe())
            await self.ctx.objects.update(self.ctx.binding_rt, _with_annotations(binding, rebalance=None))
            return None
        ready = self.ready_by_cluster(binding).get(move.target, 0)
        ordered = [snapshots[name] for name in sorted(snapshots)]
        now = self.ctx.now()
        if ready < int(raw.get("targetReady", 0)):
            settings = return_settings(request.placement)
            left = surge_time_left(parse_time_or_none(raw.get("started")), now, settings)
            if ready >= 0 and left > 0:
                return min(READY_POLL_SECONDS, left)
            why = (
                f"{move.target} cannot place them"
                if ready < 0
                else f"they were not ready in {move.target} within {settings.surge_timeout_seconds:g}s"
            )
            await self._abandon(binding, request, ordered, move, previous, why=why, now=now)
            return None
        wanted = {**previous, move.source: previous.get(move.source, 0) - move.replicas}
        wanted = {name: n for name, n in wanted.items() if n > 0}
        text = move.describe()
        result = pinned_decision(
            request, ordered, wanted, why=text, reservations=self.keeper.reservations, now=now, cache=self.cache
        )
        if result is None:  # removing replicas needs no room: not expected
            await self.ctx.objects.update(self.ctx.binding_rt, _with_annotations(binding, rebalance=None))
            return None
        await self._record_move(binding, request, result, move, now=now)
        return None

    async def _record_move(
        self, binding: dict[str, Any], request: BindingRequest, result: ScheduleResult, move: Move, *, now: datetime
    ) -> None:
        """Write the decision that ends ``move``, append it to the binding's moves and say so in an Event."""
        text = move.describe()
        record = {
            "time": format_time(now),
            "message": text,
            "source": move.source,
            "target": move.target,
            "replicas": move.replicas,
            "gpusPerReplica": gpus_per_replica(request),
            "savingPerHour": move.saving_per_hour,
        }
        history = json.dumps([*moves_done(binding), record][-MOVES_KEPT:], sort_keys=True)
        done = _with_annotations(binding, rebalance=None, moves=history)
        await write_decision(
            self.ctx, self.keeper, done, request, result, moved={}, previous=dict(request.previous), why=text,
            announced=True,
        )
        log.info("binding %s: %s", request.key, text)
        workload = workload_of(self.ctx, binding)
        if workload is not None:
            await record_event(self.ctx, workload, type=EventType.NORMAL, reason=EventReason.REPLICAS_MOVED, message=text)
