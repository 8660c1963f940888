"""Karmada's ``FederatedQuotaEnforcement``: a decision that would take a namespace past a
FederatedResourceQuota's ``spec.overall`` is not written.

With ``--federated-quota-enforcement`` (off by default, as Karmada's alpha feature gate), the
scheduler checks each decision before it writes it, as Karmada's ResourceBinding webhook checks
the scheduler's write: what the binding takes (its per-replica ``replicaRequirements.resourceRequest``
times the replicas the decision places) beyond what it takes now, added to what the namespace's
other bindings take, must stay within the ``overall`` of every FederatedResourceQuota of the
namespace, for each resource ``overall`` names. A decision that does not fit leaves the binding
where it is (a new one unplaced) with ``Scheduled=False``, reason ``QuotaExceeded`` and Karmada's
message (``FederatedResourceQuota(ns/name) exceeded for resource cpu: requested sum 120, limit
100.``), and a ``FailedScheduling`` Event on the workload; it is decided again on the scheduler's
retry, so it goes through once room is made (a binding deleted, ``overall`` raised). Usage is
read from the controllers' binding cache, not charged to the quota's status.

In: the controllers' context (its bindings and the FederatedResourceQuotas, informers). Out:
:meth:`QuotaEnforcement.refusal` and :meth:`QuotaEnforcement.refuse`.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from controlplane.apis.events import EventType
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
        if self.quotas is not None:
            self.quotas.add_handler(self._on_quota)
            ctx.bindings.add_handler(self._on_binding)

    async def _held(self, namespace: str) -> None:
        """Decide again the bindings of ``namespace`` a quota holds back: room may have been made."""
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
        if self.quotas is None:
            return None
        view = BindingView(binding)
        namespace = str(view.metadata.get("namespace") or "")
        quotas = [q for q in self.quotas.items() if (q.get("metadata") or {}).get("namespace") == namespace]
        if not quotas:
            return None
        now = binding_usage(view.spec)
        growth = usage_growth(binding_usage(view.spec, clusters), now)
        if not growth:
            return None
        name = view.metadata.get("name")
        others = (
            BindingView(b).spec for b in self.ctx.bindings.by_index(INDEX_NAMESPACE, namespace)
            if (b.get("metadata") or {}).get("name") != name
        )
        used = namespace_usage([*others, view.spec])
        for frq in sorted(quotas, key=lambda q: str((q.get("metadata") or {}).get("name"))):
            refused = quota_refusal(frq, used, growth)
            if refused is not None:
                return refused
        return None

    async def refuse(self, binding: dict[str, Any], message: str) -> None:
        """Record the refusal: the binding's ``Scheduled`` condition and, when it is news, an Event."""
        ctx = self.ctx
        condition = {"type": "Scheduled", "status": "False", "reason": QUOTA_EXCEEDED, "message": message}
        status = copy.deepcopy(dict(BindingView(binding).status))
        current = next((c for c in status.get("conditions") or () if c.get("type") == "Scheduled"), None)
        if current is not None and all(current.get(k) == v for k, v in condition.items()):
            return
        status["conditions"] = with_condition(status.get("conditions"), condition, now=ctx.now_text())
        await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})
        workload = workload_of(ctx, binding)
        if workload is not None:
            await record_event(ctx, workload, type=EventType.WARNING, reason=EventReason.FAILED_SCHEDULING, message=message)
