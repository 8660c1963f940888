"""Moving replicas a member reports it cannot place: when they are due to move.

A member reports replicas it cannot place in ``manifestStatuses[].unschedulable`` of the Work.
For the Work's current generation, they are due to move when either a capacity report of that
cluster taken after the Work was Applied and after the pods became unschedulable (received
after the hub saw them so, or listing them in ``unschedulableWorkloads``: the report the
agent sends a second after the pods' change can arrive before the Work status naming them)
confirms there is no room for them — the estimator, run on that report with the
binding's own reservation set aside, fits fewer than are waiting, and the report's pod list does
not show more of the binding's pods bound than the cluster keeps (a rollout's old pods free
their GPUs soon; a report without a pod list cannot tell) — or they have waited longer than the
grace period (the safety net for a report that says there is room: the member may just be
slow). The decision that moves them is the pure
:func:`~controlplane.scheduler.core.rescheduling.decide_with_moves`; once acted on, the same
report (the same Work generation) does not move replicas again.

Unschedulable-since timers live in memory and start afresh at a new leader's clock: the agent
stamps no time on ``manifestStatuses[].unschedulable``, and the Applied condition's transition
can be far older than the pods' trouble; a report that confirms there is no room moves them
without waiting anyway.

In: the binding's Works (informer), the controller's cluster snapshots and reservations. Out:
per binding, the clusters due to move now with their pod counts and reasons, and the seconds
until the next one is due.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controlplane.apis.work_v1alpha1 import BindingKey
from controlplane.controllers.context import INDEX_BINDING, ControllerContext
from controlplane.controllers.pods import bound_pods_by_owner, unschedulable_pods_by_owner
from controlplane.controllers.works import ChosenShape, cluster_of_namespace, decode_shapes
from controlplane.scheduler.controller.reading import (
    applied_condition,
    key_text,
    transition_time,
    unschedulable_pods,
)
from controlplane.scheduler.controller.reserving import ReservationKeeper, demands_in
from controlplane.scheduler.core.estimator import room_without
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)


class UnschedulableMoves:
    """Per binding, the replicas its members cannot place: since when, and which were moved.

    ``snapshots`` is the controller's map of cluster snapshots (read, never written here).
    """

    def __init__(
        self, ctx: ControllerContext, *, snapshots: Mapping[str, ClusterSnapshot], keeper: ReservationKeeper
    ) -> None:
        self.ctx = ctx
        self.snapshots = snapshots
        self.keeper = keeper
        # Per binding and (cluster, Work generation) reported unschedulable: since when (hub clock),
        # and the report time of the cluster's latest report then (a confirming report is newer).
        self._unschedulable_since: dict[BindingKey, dict[tuple[str, int], tuple[datetime, datetime | None]]] = {}
        # Per binding and cluster, the Work generation whose unschedulable report was acted on:
        # until the binding controller rewrites the Work, that report must not move replicas again.
        self._acted_on: dict[BindingKey, dict[str, int]] = {}
        # Bindings whose unschedulable replicas are due to move but found no room: retried on reports.
        self.blocked: set[BindingKey] = set()

    def waiting_in(self, cluster: str) -> list[BindingKey]:
        """Bindings whose pods the member of ``cluster`` reports unschedulable: its new report may
        confirm there is no room for them."""
        return [key for key, marks in list(self._unschedulable_since.items()) if any(c == cluster for c, _ in marks)]

    def due(
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
            snapshot = self.snapshots.get(cluster)
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
                log.debug("binding %s: %s", key_text(key), confirmed, extra={"cluster": cluster})
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
        snapshot = self.snapshots.get(cluster)
        reported = snapshot.report_time if snapshot is not None else None
        if snapshot is None or reported is None:
            return None
        # Taken after the Work was Applied, and after the pods became unschedulable: received
        # after the hub saw them so, or listing them itself (the agent's report after the pods'
        # change may reach the hub before the Work status that names them).
        # Both times are whole seconds: a report that lists the pods may share the apply's second.
        applied_at = transition_time(applied_condition(work))
        if applied_at is None or reported < applied_at:
            return None
        text = key_text(key)
        owner = self.keeper.owners.get(text)
        obj = self.ctx.clusters.get(None, cluster)
        if owner is None or obj is None:
            return None  # the report cannot say whether old pods of the binding still hold GPUs
        if unschedulable_pods_by_owner(obj)[owner] < pods and (
            reported == applied_at or (report_then is not None and reported <= report_then)
        ):
            return None
        counts = bound_pods_by_owner(obj)
        if counts is None:
            return None
        keeps = request.previous.get(cluster, 0)
        if counts.get(owner, 0) + pods > keeps:
            return None  # more of its pods bound than it keeps: a rollout's old pods free their GPUs soon
        reservations = self.keeper.reservations
        reservation = reservations.get(text, cluster)
        demands = (
            list(reservation.demands) if reservation is not None else demands_in(request, shape, replicas=pods)
        )
        room = room_without(snapshot, [d.requirements for d in demands], reserved=reservations, binding=text)
        if room >= pods:
            return None  # the report shows room: the member may just be slow, the grace period decides
        nodes = snapshot.node_count
        return (
            f"member reported {pods} replica(s) unschedulable and its report of "
            f"{reported.isoformat().replace('+00:00', 'Z')} confirms it: room for {room} on its {nodes} "
            "Ready node(s) once the other promises are kept; moved elsewhere"
        )

    def acted(self, key: BindingKey, moved: Mapping[str, int]) -> None:
        """Remember the Work generations whose reports a decision acted on by moving ``moved``."""
        generations = {
            cluster_of_namespace(str(w["metadata"].get("namespace"))): int(w["metadata"].get("generation") or 0)
            for w in self.ctx.works.by_index(INDEX_BINDING, key)
        }
        acted = self._acted_on.setdefault(key, {})
        for cluster in moved:
            acted[cluster] = generations.get(cluster, 0)

    def forget(self, key: BindingKey) -> None:
        self._unschedulable_since.pop(key, None)
        self._acted_on.pop(key, None)
        self.blocked.discard(key)
