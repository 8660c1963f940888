"""The scheduler controller's reservations: made with each decision, settled by capacity reports,
derived afresh by a new leader.

Capacity a decision promises is reserved (:class:`~controlplane.scheduler.core.reservations.Reservations`)
as the decision is made, before its spec write (other workers decide while the write is in
flight; a failed write gives it back), until a capacity report shows the binding's pods bound
(counted per owner from the report's pod list, :mod:`controlplane.controllers.pods`), or, for
pods a report cannot name, until a report comes ``reservation_settle_seconds`` after the Work
was Applied; pods the member reports unschedulable stay reserved until they move.

Reservations live in memory, so a new leader (hub restart or fail-over) derives them from
durable state before its first decision (Kubernetes style: derive, don't persist): for every
cluster in a binding's ``spec.clusters``, the replicas assigned there minus the binding's pods
the cluster's latest report shows bound are outstanding and reserved afresh (created, and
applied when the Work is Applied for its generation, at the new leader's clock; then the same
settle, bind-timeout and max-age rules apply). For pods a report cannot name (no per-pod list,
or a kind whose pods hang under other owners) the time rule decides: nothing is reserved when
the report is ``reservation_settle_seconds`` newer than the Work's Applied transition, all the
assigned replicas otherwise. A gang of several roles not fully bound is reserved whole, as a
decision reserves it.

In: the informers' bindings, Works and Clusters, the controller's cluster snapshots, each
decision. Out: the :class:`ReservationKeeper`'s reservations, and per binding the member pods'
owner (how reports name the binding's pods).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from controlplane.apis.views import BindingView
from controlplane.apis.work_v1alpha1 import ResourceBinding
from controlplane.controllers.context import INDEX_BINDING, ControllerContext
from controlplane.controllers.pods import OwnerKey, bound_pods_by_owner, owner_key
from controlplane.controllers.workloads import is_deleting
from controlplane.controllers.works import ChosenShape, cluster_of_namespace, decode_shapes
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.controller.reading import (
    applied_condition,
    binding_key,
    key_text,
    transition_time,
    unschedulable_pods,
)
from controlplane.scheduler.core.deciding import reserve_decision
from controlplane.scheduler.core.framework import BindingRequest, GpuShape
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.reservations import Demand, Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot


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


def gpu_pods(demands: Iterable[Demand]) -> int:
    """Pods of ``demands`` that request a GPU (the pods capacity reports list)."""
    return sum(d.replicas for d in demands if d.requirements.gpu_resources)


class ReservationKeeper:
    """The reservations of the scheduler's decisions and the member pods' owner per binding.

    ``snapshots`` is the controller's map of cluster snapshots (read, never written here).
    """

    def __init__(self, ctx: ControllerContext, *, snapshots: Mapping[str, ClusterSnapshot]) -> None:
        self.ctx = ctx
        self.snapshots = snapshots
        self.reservations = Reservations()
        # Per binding (``ns/name``), the member pods' owner: how reports name the binding's pods.
        self.owners: dict[str, OwnerKey | None] = {}

    def observe_report(self, cluster: str, obj: Mapping[str, Any], snapshot: ClusterSnapshot) -> None:
        """Settle the reservations in ``cluster`` that its new capacity report accounts for."""
        if snapshot.report_time is not None:
            self.reservations.observe_report(
                cluster,
                reported_at=snapshot.report_time,
                settle=timedelta(seconds=self.ctx.settings.reservation_settle_seconds),
                bound=self._bound_by_binding(cluster, obj, snapshot.report_time),
            )

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
            owner = self.owners.get(reservation.binding)
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
            key = binding_key(binding)
            text = key_text(key)
            owner = owner_key(BindingView(binding).resource)
            self.owners[text] = owner
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
                self.reservations.reserve(text, cluster, outstanding, now=now, target=gpu_pods(demands) or None)
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
        pods = gpu_pods(demands)
        if counts is not None and owner is not None and pods:
            missing = pods - counts.get(owner, 0)
            if missing <= 0:
                return []
            if len(demands) == 1:
                return [replace(demands[0], replicas=min(missing, demands[0].replicas))]
            return demands  # a gang of several roles not fully bound: reserved whole, as decided
        snapshot = self.snapshots.get(cluster)
        reported = snapshot.report_time if snapshot is not None else None
        applied_at = transition_time(applied)
        if applied_at is not None and reported is not None and applied_at + settle < reported:
            return []  # the time rule: a report this much newer than the apply counts the pods
        return demands

    def reserve(
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

    def forget(self, text: str) -> None:
        """Drop what is kept for the binding ``ns/name``."""
        self.reservations.release(text)
        self.owners.pop(text, None)
