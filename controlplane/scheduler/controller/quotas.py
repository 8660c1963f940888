"""Karmada's ``FederatedQuotaEnforcement``: a decision that would take a namespace past a
FederatedResourceQuota's ``spec.overall`` is not written.

With ``--federated-quota-enforcement`` (off by default, as Karmada's alpha feature gate), the
scheduler checks each decision before it writes it, as Karmada's ResourceBinding webhook checks
the scheduler's write: what the binding takes (its per-replica ``replicaRequirements.resourceRequest``
times the replicas the decision places, and its ``sharedResourceRequest``, the devices of the DRA
claims its pods share, once per cluster given a replica: :func:`policies.federated_quota.binding_usage`)
beyond what it takes now, added to what the namespace's
other bindings take, must stay within the ``overall`` of every FederatedResourceQuota of the
namespace, for each resource ``overall`` names. A decision that does not fit leaves the binding
where it is (a new one unplaced) with ``Scheduled=False``, reason ``QuotaExceeded`` and Karmada's
message (``FederatedResourceQuota(ns/name) exceeded for resource cpu: requested sum 120, limit
100.``), and a ``FailedScheduling`` Event on the workload; it is decided again on the scheduler's
retry, so it goes through once room is made (a binding deleted, ``overall`` raised): such a change
decides again at once the namespace's bindings it holds back (a binding or a pod group refused
while it came, not yet saying so, is queued again once its refusal is written:
:meth:`QuotaEnforcement.room_version`). Usage is
read from the controllers' binding cache, not charged to the quota's status. The bindings of a pod
group, placed whole, are checked together (:meth:`QuotaEnforcement.refusal_together`).

In: the controllers' context (its bindings and the FederatedResourceQuotas, informers). Out:
:meth:`QuotaEnforcement.refusal` (and ``refusal_together``) and :meth:`QuotaEnforcement.refuse`.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from controlplane.apis.events import EventType
from controlplane.apis.kube import quota
from controlplane.apis.views import BindingView
from controlplane.controllers.context import INDEX_NAMESPACE, ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.workloads import with_condition
from controlplane.objectclient import WatchEventType
from controlplane.scheduler.controller.reading import workload_of
from policies.federated_quota import (
    API_VERSION,
    KIND,
    binding_usage,
    namespace_usage,
    quota_refusal,
    usage_growth,
)

#: The binding's ``Scheduled`` reason while a FederatedResourceQuota holds it back.
QUOTA_EXCEEDED: Final = "QuotaExceeded"


class QuotaEnforcement:
    """Checks decisions against the namespace's FederatedResourceQuotas when enforcement is on."""

    def __init__(self, ctx: ControllerContext, requeue: Callable[[tuple[str, str]], Awaitable[None]]) -> None:
        self.ctx = ctx
        self._requeue = requeue
        rt = ctx.registry.for_kind(API_VERSION, KIND)
        self.quotas = ctx.informer(rt) if rt is not None and ctx.settings.federated_quota_enforcement else None
        #: Per namespace, how many times room may have been made (a quota changed, usage freed).
        self._room: dict[str, int] = {}
        if self.quotas is not None:
            self.quotas.add_handler(self._on_quota)
            ctx.bindings.add_handler(self._on_binding)

    def room_version(self, namespace: str) -> int:
        """A count that changes whenever room may have been made in ``namespace``: a decision
        refused before it changed may fit now."""
        return self._room.get(namespace, 0)

    async def _held(self, namespace: str) -> None:
        """Decide again the bindings of ``namespace`` a quota holds back: room may have been made."""
        self._room[namespace] = self.room_version(namespace) + 1
        for binding in self.ctx.bindings.by_index(INDEX_NAMESPACE, namespace):
            scheduled = BindingView(binding).condition("Scheduled")
            if scheduled is not None and scheduled.get("reason") == QUOTA_EXCEEDED:
                await self._requeue((namespace, str(binding["metadata"]["name"])))

    async def _on_quota(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is None or (old.get("spec") or {}).get("overall") != (obj.get("spec") or {}).get("overall"):
            await self._held(str((obj.get("metadata") or {}).get("namespace") or ""))

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        spec, before = BindingView(obj).spec, BindingView(old).spec if old is not None else None
        if event is WatchEventType.DELETED or (before is not None and binding_usage(before) != binding_usage(spec)):
            await self._held(str((obj.get("metadata") or {}).get("namespace") or ""))

    def refusal(self, binding: Mapping[str, Any], clusters: Mapping[str, int]) -> str | None:
        """Why placing ``clusters`` replicas of ``binding`` is refused, or None when it fits."""
        return self.refusal_together([(binding, clusters)])

    def refusal_together(self, decisions: Sequence[tuple[Mapping[str, Any], Mapping[str, int]]]) -> str | None:
        """Why placing each binding of ``decisions`` (bindings of one namespace) as its clusters
        say, all of them at once, is refused, or None when they fit: a pod group is placed whole,
        so what all its Pods take counts together."""
        if self.quotas is None or not decisions:
            return None
        namespace = str(BindingView(decisions[0][0]).metadata.get("namespace") or "")
        quotas = [q for q in self.quotas.items() if (q.get("metadata") or {}).get("namespace") == namespace]
        if not quotas:
            return None
        growth: quota.Usage = {}
        for binding, clusters in decisions:
            spec = BindingView(binding).spec
            growth = quota.add(growth, usage_growth(binding_usage(spec, clusters), binding_usage(spec)))
        if not growth:
            return None
        names = {BindingView(binding).metadata.get("name") for binding, _ in decisions}
        others = (
            BindingView(b).spec for b in self.ctx.bindings.by_index(INDEX_NAMESPACE, namespace)
            if (b.get("metadata") or {}).get("name") not in names
        )
        used = namespace_usage([*others, *(BindingView(binding).spec for binding, _ in decisions)])
        for frq in sorted(quotas, key=lambda q: str((q.get("metadata") or {}).get("name"))):
            refused = quota_refusal(frq, used, growth)
            if refused is not None:
                return refused
        return None

    async def refuse(self, binding: dict[str, Any], message: str) -> Mapping[str, Any]:
        """Record the refusal: the binding's ``Scheduled`` condition and, when it is news, an Event.
        The binding as stored (as given when its condition says so already)."""
        ctx = self.ctx
        condition = {"type": "Scheduled", "status": "False", "reason": QUOTA_EXCEEDED, "message": message}
        status = copy.deepcopy(dict(BindingView(binding).status))
        current = next((c for c in status.get("conditions") or () if c.get("type") == "Scheduled"), None)
        if current is not None and all(current.get(k) == v for k, v in condition.items()):
            return binding
        status["conditions"] = with_condition(status.get("conditions"), condition, now=ctx.now_text())
        stored = await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})
        workload = workload_of(ctx, binding)
        if workload is not None:
            await record_event(ctx, workload, type=EventType.WARNING, reason=EventReason.FAILED_SCHEDULING, message=message)
        return stored
