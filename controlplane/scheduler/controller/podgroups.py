"""Kueue pod groups at the scheduler: a group's Pods land whole in one cluster, or none does.

Kueue admits a pod group (Pods labelled ``kueue.x-k8s.io/pod-group-name``, counted by the
annotation ``kueue.x-k8s.io/pod-group-total-count``) as one Workload, which MultiKueue runs in one
worker cluster, whole. Each Pod is its own binding; this module decides them as one.

In: a binding of a Pod Kueue manages that belongs to a group, the group's Pods (the admission
gate's index) and their bindings. Out:

* :meth:`PodGroupPlacement.group_of`: the binding's group, or None for any other binding;
* :meth:`PodGroupPlacement.home`: the clusters the group's other Pods are placed in, the only
  ones a Pod of a placed group may go to (so a later Pod of the group follows them, and a Pod of
  the group neither moves nor fails over apart from the rest);
* :meth:`PodGroupPlacement.place`: the decision for a binding of the group not placed yet. Once
  the bindings of all ``n`` Pods exist, they are decided together as one gang
  (:mod:`controlplane.scheduler.core.podgroups`) and the decision is written into each: the one
  cluster that holds them all, or none, each with why. Until then the binding says it waits;
* :meth:`PodGroupPlacement.evict`: failover of a group whose cluster is due for eviction: the
  whole group to one other cluster that holds it all, each binding with its eviction task, or
  none moves (the bindings then wait as any eviction with no room elsewhere does).

Decisions of group bindings run one at a time (:attr:`PodGroupPlacement.lock`), so two Pods of one
group popped together do not both decide for the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from controlplane.admission import podgroups, pods
from controlplane.apis.views import BindingView
from controlplane.apis.work_v1alpha1 import BindingKey, ScheduledReason, binding_name
from controlplane.controllers.admissiongate import Kinds
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.failover import EvictionCause
from controlplane.controllers.workloads import binding_namespace, is_deleting
from controlplane.objectclient import errors
from controlplane.scheduler.controller.quotas import QuotaEnforcement
from controlplane.scheduler.controller.reading import binding_key, key_text, workload_of
from controlplane.scheduler.controller.reserving import ReservationKeeper
from controlplane.scheduler.controller.writing import set_schedulable, write_condition, write_decision
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduledCondition, ScheduleResult
from controlplane.scheduler.core.podgroups import follower_result, group_request, member_result
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)

POD: Final = ("v1", "Pod")
WHY: Final = "pod group"
#: A binding of the group changed or went while the group's decision was written.
CHANGED: Final = (errors.Conflict, errors.NotFound)

#: A binding's scheduler request (None when the binding is not valid).
RequestOf = Callable[[dict[str, Any]], BindingRequest | None]


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A Kueue pod group: its namespace, name and total count of Pods."""

    namespace: str
    name: str
    count: int


def _placed(binding: dict[str, Any]) -> list[str]:
    return [str(c.get("name")) for c in BindingView(binding).spec.get("clusters") or () if isinstance(c, dict)]


class PodGroupPlacement:
    """Finds a binding's pod group and decides the group's bindings together."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        keeper: ReservationKeeper,
        quotas: QuotaEnforcement,
        cache: SchedulerCache,
        request_of: RequestOf,
        requeue: Callable[[BindingKey], Awaitable[None]],
    ) -> None:
        self.ctx = ctx
        self.kinds = Kinds(ctx)
        self.keeper = keeper
        self.quotas = quotas
        self.cache = cache
        self.request_of = request_of
        self.requeue = requeue
        self.lock = asyncio.Lock()

    def group_of(self, binding: dict[str, Any]) -> PodGroup | None:
        """The pod group of the Pod ``binding`` is for (a Pod Kueue manages), or None."""
        resource = BindingView(binding).resource
        if (resource.get("apiVersion"), resource.get("kind")) != POD:
            return None
        pod = workload_of(self.ctx, binding)
        if pod is None or not pods.managed(pod):
            return None
        name, count = podgroups.group_name(pod), podgroups.total_count(pod)
        if name is None or not isinstance(count, int):
            return None
        return PodGroup(str(resource.get("namespace") or ""), name, count)

    def _bindings(self, group: PodGroup) -> list[dict[str, Any]]:
        """The bindings of the group's Pods (the informer's copies), in name order."""
        found = []
        namespace = binding_namespace(group.namespace)
        for pod in self.kinds.members(group.namespace, group.name):
            name = str((pod.get("metadata") or {}).get("name") or "")
            binding = self.ctx.bindings.get(namespace, binding_name(name, POD[1]))
            if binding is not None and not is_deleting(binding):
                found.append(binding)
        return sorted(found, key=lambda b: binding_key(b))

    def home(self, group: PodGroup, key: BindingKey) -> set[str]:
        """The clusters the group's other Pods are placed in."""
        return {name for b in self._bindings(group) if binding_key(b) != key for name in _placed(b)}

    async def place(
        self,
        group: PodGroup,
        binding: dict[str, Any],
        request: BindingRequest,
        snapshots: Sequence[ClusterSnapshot],
        *,
        home: set[str],
        reservations: Reservations,
        now: datetime,
    ) -> bool:
        """Decide a binding of ``group`` that is not placed; True when it is placed now.

        With ``home`` (the clusters its other Pods run in, the only ``snapshots`` given), it follows
        them; otherwise the whole group is decided once all its Pods have bindings."""
        if home:
            decided = schedule(request, snapshots, reservations=reservations, now=now, cache=self.cache)
            return await self._write(binding, request, follower_result(decided, group=group.name, home=sorted(home)))
        members = [(b, m) for b, m in await self._members(group, binding, request) if not m.previous]
        if len(members) < group.count:
            waiting = (
                f"pod group {group.name}: waiting for the bindings of its {group.count} pods "
                f"({len(members)} so far)"
            )
            for member_binding, _ in members:  # every binding of the group says how many there are now
                with contextlib.suppress(*CHANGED):  # its write's event, or the retry, tells it again
                    await write_condition(
                        self.ctx, member_binding, ScheduledCondition(False, ScheduledReason.UNSCHEDULABLE, waiting)
                    )
            return False
        gang = group_request(f"{group.namespace}/{group.name}", [m for _, m in members])
        result = schedule(gang, snapshots, reservations=reservations, now=now, cache=self.cache)
        shares = [(b, m, member_result(result, m, group=group.name, pods=len(members))) for b, m in members]
        refusals = [(b, why) for b, _, share in shares if (why := self.quotas.refusal(b, share.clusters)) is not None]
        if refusals:  # FederatedQuotaEnforcement refuses one of them: none is placed
            for refused, why in refusals:
                await self.quotas.refuse(refused, why)
            return False
        placed = False
        for member_binding, member, share in shares:
            try:
                placed = await self._write(member_binding, member, share) or placed
            except CHANGED:
                # Changed meanwhile: decided again, following the pods of its group placed already.
                log.info("binding %s changed while its pod group was placed; it is decided again", member.key)
                await self.requeue(binding_key(member_binding))
        log.debug("pod group %s/%s: %s", group.namespace, group.name, result.condition.message)
        return placed

    async def _write(self, binding: dict[str, Any], request: BindingRequest, result: ScheduleResult) -> bool:
        await write_decision(self.ctx, self.keeper, binding, request, result, moved={}, previous={}, why=WHY)
        workload = workload_of(self.ctx, binding)
        if workload is not None:
            await set_schedulable(self.ctx, workload, result.condition)
        log.debug("binding %s: %s", key_text(binding_key(binding)), result.condition.message)
        return bool(result.clusters)

    async def _members(self, group: PodGroup, binding: dict[str, Any], request: BindingRequest) -> list[
        tuple[dict[str, Any], BindingRequest]
    ]:
        """The group's bindings as the hub last saw them, with their requests (Pods that finished,
        and bindings being deleted or not valid, left out)."""
        members: list[tuple[dict[str, Any], BindingRequest]] = []
        own = binding_key(binding)
        for cached in self._bindings(group):
            key = binding_key(cached)
            latest = binding if key == own else await self.ctx.latest_seen(self.ctx.binding_rt, *key)
            if latest is None or is_deleting(latest) or pods.finished(workload_of(self.ctx, latest) or {}):
                continue
            member = request if key == own else self.request_of(latest)
            if member is not None:
                members.append((latest, member))
        return members

    async def evict(
        self,
        group: PodGroup,
        binding: dict[str, Any],
        request: BindingRequest,
        due: Mapping[str, EvictionCause],
        snapshots: Sequence[ClusterSnapshot],
        *,
        reservations: Reservations,
        now: datetime,
    ) -> list[tuple[BindingKey, list[str]]] | None:
        """Move the whole group out of the clusters ``due`` for eviction, into one cluster that holds
        it all; per binding moved, the clusters it left. None when it does not move: some Pod of
        the group runs elsewhere or is not placed, or no other cluster holds the group."""
        members = await self._members(group, binding, request)
        if not members or any(not m.previous or not set(m.previous) <= set(due) for _, m in members):
            return None
        gang = group_request(f"{group.namespace}/{group.name}", [m for _, m in members])
        result = schedule(gang, [s for s in snapshots if s.name not in due], reservations=reservations, now=now, cache=self.cache)
        if not result.clusters:
            return None
        shares = [(b, m, member_result(result, m, group=group.name, pods=len(members))) for b, m in members]
        if any(self.quotas.refusal(b, share.clusters) is not None for b, _, share in shares):
            return None  # FederatedQuotaEnforcement would refuse a Pod there: the group stays whole
        moved: list[tuple[BindingKey, list[str]]] = []
        for member_binding, member, share in shares:
            leaving = {name: due[name] for name in member.previous}
            try:
                await write_decision(
                    self.ctx, self.keeper, member_binding, replace(member, previous={}), share,
                    moved={}, evicted=leaving, previous=dict(member.previous), why=WHY,
                )
            except CHANGED:
                log.info("binding %s changed while its pod group was moved; it is decided again", member.key)
                await self.requeue(binding_key(member_binding))
                continue
            moved.append((binding_key(member_binding), sorted(leaving)))
        return moved
