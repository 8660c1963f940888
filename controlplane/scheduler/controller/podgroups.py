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
* :meth:`PodGroupPlacement.relocate`: failover of a group whose cluster is due for eviction, or a
  group one of whose Pods its member cannot place (reported unschedulable, due to move as
  :mod:`~controlplane.scheduler.controller.moves` says) or lost with reclaimed spot nodes
  (:mod:`~controlplane.scheduler.controller.reclaims`): the whole group to one other cluster that
  holds it all (each binding with its eviction task, for failover), or none moves (the bindings then
  wait as any eviction with no room elsewhere does; the Pod waits with the rest of its group).

Decisions of group bindings run one at a time (:attr:`PodGroupPlacement.lock`), so two Pods of one
group popped together do not both decide for the group. A group that is not placed is decided once
per trigger, not once per Pod: a capacity report (or the retry) queues all ``n`` bindings, the first
decides for the group and the others reuse that decision while its inputs are unchanged (the
clusters' snapshots, the reservations, the group's bindings' resourceVersions as the decision left
them). So is a group ``FederatedQuotaEnforcement`` refuses (what all its Pods take counts
together): none is placed, and each binding gets the one refusal, until room is made in its
namespace (a quota's ``overall`` changed, a binding freed or shrunk): the quota's change queues
the bindings that say ``QuotaExceeded``, and one that comes while the refusal is being written
(before they say so) queues them once it is written; the binding that decided is not one that
reuses the refusal, so the group is decided again at once. A group that can never fit
(:mod:`controlplane.scheduler.core.neverfit`, its Pods as one gang) gets NeverFits in every binding
and waits for the fleet's capacity facts, as a single binding does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from controlplane.admission import podgroups, pods
from controlplane.apis.views import BindingView
from controlplane.apis.work_v1alpha1 import BindingKey, ScheduledReason, binding_name
from controlplane.controllers.admissiongate import Kinds
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.failover import EvictionCause
from controlplane.controllers.workloads import binding_namespace, is_deleting
from controlplane.metrics import observe_scheduling_latency
from controlplane.objectclient import errors
from controlplane.scheduler.controller.evictions import FailoverEvictions
from controlplane.scheduler.controller.moves import UnschedulableMoves
from controlplane.scheduler.controller.quotas import QuotaEnforcement
from controlplane.scheduler.controller.reading import binding_key, key_text, workload_of
from controlplane.scheduler.controller.reclaims import ReclaimReplacements
from controlplane.scheduler.controller.recording import placement_text
from controlplane.scheduler.controller.reserving import ReservationKeeper
from controlplane.scheduler.controller.writing import set_schedulable, write_condition, write_decision
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.neverfit import never_fit_result, never_fits
from controlplane.scheduler.core.outcome import ScheduledCondition, ScheduleResult
from controlplane.scheduler.core.podgroups import follower_result, group_request, member_result, pod_name
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import PropagationSpec

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


class GroupOutcome(StrEnum):
    """What deciding a binding of a group that is not placed came to."""

    PLACED = "placed"
    UNPLACED = "unplaced"
    """Not placed now (no room, a quota refused it, its bindings not all there): retried."""
    NEVER_FITS = "never fits"
    """No cluster could ever hold the group: looked at again when the fleet's capacity changes."""


@dataclass(slots=True)
class GroupDecision:
    """The last decision for a group that is not placed, with what it was made of."""

    inputs: tuple[Any, ...]
    outcome: GroupOutcome
    members: frozenset[BindingKey]
    covered: set[BindingKey] = field(default_factory=set)
    """Bindings of the group queued by the trigger that made it, not yet popped: they reuse it."""


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
        evictions: FailoverEvictions,
        moves: UnschedulableMoves,
        reclaims: ReclaimReplacements,
        cache: SchedulerCache,
        request_of: RequestOf,
        requeue: Callable[[BindingKey], Awaitable[None]],
    ) -> None:
        self.ctx = ctx
        self.kinds = Kinds(ctx)
        self.keeper = keeper
        self.quotas = quotas
        self.evictions = evictions
        self.moves = moves
        self.reclaims = reclaims
        self.cache = cache
        self.request_of = request_of
        self.requeue = requeue
        self.lock = asyncio.Lock()
        self._decisions: dict[tuple[str, str], GroupDecision] = {}

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
    ) -> GroupOutcome:
        """Decide a binding of ``group`` that is not placed.

        With ``home`` (the clusters its other Pods run in, the only ``snapshots`` given), it follows
        them; otherwise the whole group is decided once all its Pods have bindings."""
        if home:
            decided = schedule(request, snapshots, reservations=reservations, now=now, cache=self.cache)
            follows = follower_result(decided, group=group.name, home=sorted(home))
            if (refused := self.quotas.refusal(binding, follows.clusters)) is not None:
                await self.quotas.refuse(binding, refused)
                return GroupOutcome.UNPLACED
            await self._write(binding, request, follows)
            return GroupOutcome.PLACED if follows.clusters else GroupOutcome.UNPLACED
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
            return GroupOutcome.UNPLACED
        name, own = (group.namespace, group.name), binding_key(binding)
        room = self.quotas.room_version(group.namespace)
        last = self._decisions.get(name)
        if last is not None and own in last.covered and last.inputs == _inputs(snapshots, reservations, members):
            last.covered.discard(own)  # decided for it in this round, from the same inputs
            return last.outcome
        self._decisions.pop(name, None)
        gang = group_request(f"{group.namespace}/{group.name}", [m for _, m in members])
        started = time.perf_counter()
        result = schedule(gang, snapshots, reservations=reservations, now=now, cache=self.cache)
        if not result.clusters and (never := never_fits(gang, snapshots)) is not None:
            result = never_fit_result(gang, result, never.message)
        observe_scheduling_latency(time.perf_counter() - started, result=result.condition.reason)
        shares = [(b, m, member_result(result, m, group=group.name, pods=len(members))) for b, m in members]
        # FederatedQuotaEnforcement counts what all its Pods take: refused, none is placed and each binding says why.
        refused = self.quotas.refusal_together([(b, share.clusters) for b, _, share in shares])
        stored: list[tuple[Mapping[str, Any], BindingRequest]] = []
        for member_binding, member, share in shares:
            try:
                written = (
                    await self._write(member_binding, member, share) if refused is None
                    else await self.quotas.refuse(member_binding, refused)
                )
            except CHANGED:
                # Changed meanwhile: decided again, following the pods of its group placed already.
                log.info("binding %s changed while its pod group was decided; it is decided again", member.key)
                await self.requeue(binding_key(member_binding))
                continue
            stored.append((written, member))
        log.debug("pod group %s/%s: %s", group.namespace, group.name, refused or result.condition.message)
        if refused is None and result.clusters:
            return GroupOutcome.PLACED
        if refused is not None and self.quotas.room_version(group.namespace) != room:
            # Room was made while the refusal was written (its bindings may not have said so when
            # the change came): the group is decided again, not left for the retry.
            for member_binding, _ in members:
                await self.requeue(binding_key(member_binding))
        never_fit = refused is None and result.condition.reason is ScheduledReason.NEVER_FITS
        outcome = GroupOutcome.NEVER_FITS if never_fit else GroupOutcome.UNPLACED
        if len(stored) == len(members):  # the others of this round reuse it (a binding that changed decides anew)
            keys = frozenset(binding_key(b) for b, _ in members)
            self._decisions[name] = GroupDecision(
                _inputs(snapshots, reservations, stored), outcome, keys, covered=set(keys - {own})
            )
        return outcome

    def forget(self, key: BindingKey) -> None:
        """A binding went: the decision of its group is not reused."""
        for name, decision in list(self._decisions.items()):
            if key in decision.members:
                del self._decisions[name]

    async def _write(
        self, binding: dict[str, Any], request: BindingRequest, result: ScheduleResult
    ) -> Mapping[str, Any]:
        """Write one binding's share of the decision; the binding as stored."""
        stored = await write_decision(self.ctx, self.keeper, binding, request, result, moved={}, previous={}, why=WHY)
        workload = workload_of(self.ctx, binding)
        if workload is not None:
            await set_schedulable(self.ctx, workload, result.condition)
        log.debug("binding %s: %s", key_text(binding_key(binding)), result.condition.message)
        return stored

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

    async def relocate(
        self,
        group: PodGroup,
        binding: dict[str, Any],
        request: BindingRequest,
        fleet: Sequence[ClusterSnapshot],
        *,
        due: Mapping[str, EvictionCause],
        unplaceable: Mapping[str, int],
        policy: PropagationSpec | None,
        now: datetime,
    ) -> bool:
        """Fail the group over whole, or move it whole off a member that cannot place ``binding``'s
        Pod or lost it to a spot reclaim (after repeated reclaims, to non-spot clusters first, as
        :meth:`ReclaimReplacements.candidate_sets` orders them), as :meth:`_move_whole` says; then
        the moved bindings' reservations there go, their evictions and moves are recorded, and so
        is the reclaim (the ``SpotReclaimed`` Event, the binding's reclaim count). False when it stays."""
        key = binding_key(binding)
        leaving, pod = set(due or unplaceable), pod_name(request)
        lost = {} if due else {name: nodes for name, nodes in self.reclaims.nodes(key).items() if name in leaving}
        if due:
            why = WHY
        elif lost:
            nodes = ", ".join(node for name in sorted(lost) for node in lost[name]) or "?"
            why = f"{WHY} {group.name}: moved whole, spot node(s) {nodes} of {', '.join(sorted(lost))} reclaimed its pod {pod}"
        else:
            why = f"{WHY} {group.name}: moved whole, {', '.join(sorted(leaving))} cannot place its pod {pod}"
        relocation: Relocation | None = None
        non_spot = False
        for candidates, non_spot_only in self.reclaims.candidate_sets(
            binding, policy, fleet, previous=request.previous, reclaimed=bool(lost)
        ):
            relocation = await self._move_whole(
                group, binding, request, candidates, due=due, leaving=leaving, why=why, now=now
            )
            if relocation is not None:
                non_spot = non_spot_only
                break
        if relocation is None:
            return False
        for member, left in relocation.moved:
            for cluster in left:
                self.keeper.reservations.release(key_text(member), cluster=cluster)
            self.evictions.evicted(member, left)
            self.moves.acted(member, dict.fromkeys(left, 1))  # their members' reports there are acted on
        if lost and relocation.placed:
            reclaimed = {name: pods for name, pods in unplaceable.items() if name in lost}
            await self.reclaims.acted(
                key, binding, reclaimed, placed=placement_text(relocation.placed), non_spot=non_spot
            )
        return True

    async def _move_whole(
        self, group: PodGroup, binding: dict[str, Any], request: BindingRequest, snapshots: Sequence[ClusterSnapshot],
        *, due: Mapping[str, EvictionCause], leaving: set[str], why: str, now: datetime,
    ) -> Relocation | None:
        """Move the whole group into one other cluster of ``snapshots`` that holds it all, out of
        the clusters it is ``leaving``: those ``due`` for eviction, each binding with its eviction
        task (failover); else those whose member cannot place ``binding``'s Pod, or whose spot
        nodes were reclaimed with it, as Kueue's ``waitForPodsReady`` evicts a group's whole
        Workload when its Pods do not all start. None when it does not move: some Pod of the group
        runs elsewhere or is not placed, or no other cluster holds the group (the bindings then wait
        as any eviction with no room elsewhere does, or the Pod waits with the rest of its group)."""
        members = await self._members(group, binding, request)
        if not members or any(not m.previous or not set(m.previous) <= leaving for _, m in members):
            return None
        gang = group_request(f"{group.namespace}/{group.name}", [m for _, m in members])
        result = schedule(
            gang, [s for s in snapshots if s.name not in leaving], reservations=self.keeper.reservations, now=now,
            cache=self.cache,
        )
        if not result.clusters:
            return None
        shares = [(b, m, member_result(result, m, group=group.name, pods=len(members))) for b, m in members]
        if self.quotas.refusal_together([(b, share.clusters) for b, _, share in shares]) is not None:
            return None  # FederatedQuotaEnforcement would refuse a Pod there: the group stays whole
        own = binding_key(binding)
        relocation = Relocation()
        for member_binding, member, share in shares:
            key = binding_key(member_binding)
            evicted = {name: due[name] for name in member.previous if name in due}
            try:
                await write_decision(
                    self.ctx, self.keeper, member_binding, replace(member, previous={}), share,
                    moved=dict(member.previous) if key == own and not evicted else {}, evicted=evicted,
                    previous=dict(member.previous), why=why,
                )
            except CHANGED:
                log.info("binding %s changed while its pod group was moved; it is decided again", member.key)
                await self.requeue(key)
                continue
            relocation.moved.append((key, sorted(member.previous)))
            if key == own:
                relocation.placed = share.target_clusters()
        return relocation


@dataclass(slots=True)
class Relocation:
    """A group moved whole: per binding moved, the clusters it left; and ``binding``'s new placement."""

    moved: list[tuple[BindingKey, list[str]]] = field(default_factory=list)
    placed: list[dict[str, Any]] = field(default_factory=list)


def _inputs(
    snapshots: Sequence[ClusterSnapshot],
    reservations: Reservations,
    members: Sequence[tuple[Mapping[str, Any], BindingRequest]],
) -> tuple[Any, ...]:
    """What a group's decision is made of: the clusters' snapshots (a report makes a new one), the
    reservations' versions and the group's bindings as they were (their resourceVersions)."""
    versions = tuple(
        (binding_key(b), (b.get("metadata") or {}).get("resourceVersion")) for b, _ in members
    )
    return (tuple(snapshots), tuple(sorted(reservations.versions().items())), tuple(sorted(versions)))
