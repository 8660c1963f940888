"""Tells each policy whether its resource selectors name kinds the hub can propagate.

A PropagationPolicy, ClusterPropagationPolicy, OverridePolicy or ClusterOverridePolicy (one set,
served under both policy groups) whose ``resourceSelectors`` name a kind the hub does not serve
is accepted with a warning; this controller then keeps its ``ResourceSelectorsServed`` condition
(:func:`policies.served.selectors_served_condition`): False while such a selector matches nothing,
True once every kind is served — a CRD applied later flips it, a CRD deleted flips it back. A
change of the condition's status is also an Event on the policy (Warning when it turns False).

In: the policies' informers and the hub's registry (its changes requeue every policy). Out: the
policies' status, written as a compare-and-swap on the cached copy.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.informing import spec_unchanged
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import find_condition, kind_status, with_condition
from controlplane.objectclient import DynamicRegistry, ResourceType, WatchEventType
from policies.served import SELECTORS_SERVED, selectors_served_condition

log = logging.getLogger(__name__)

#: (kind, namespace or "", name) of one policy.
PolicyKey = tuple[str, str, str]


class PolicySelectorsController(KeyedController[PolicyKey]):
    """Keeps every policy's ``ResourceSelectorsServed`` condition current (see the module docstring)."""

    name = "policy-selectors"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self._types: dict[str, ResourceType] = {rt.kind: rt for rt in (*ctx.propagation_types, *ctx.override_types)}
        self._served_changed = asyncio.Event()
        for rt in self._types.values():
            ctx.informer(rt).add_handler(self._on_policy)

    async def _on_policy(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED:
            return
        if spec_unchanged(old, obj, event) and (
            ObjectView(obj).condition(SELECTORS_SERVED) is not None
        ):
            return  # a status write (this controller's own included) that kept the condition
        meta = ObjectView(obj).metadata
        await self.loop.add((str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))))

    async def follow_served_kinds(self) -> None:
        """Requeue every policy whenever the hub's served kinds change, until cancelled."""
        registry = self.ctx.registry
        if not isinstance(registry, DynamicRegistry):
            return
        registry.add_listener(self._served_changed.set)
        self._served_changed.set()  # whatever changed before the listener was in place
        try:
            while True:
                await self._served_changed.wait()
                self._served_changed.clear()
                for kind, rt in self._types.items():
                    for obj in self.ctx.informer(rt).items():
                        meta = ObjectView(obj).metadata
                        await self.loop.add((kind, str(meta.get("namespace") or ""), str(meta.get("name"))))
        finally:
            registry.remove_listener(self._served_changed.set)

    async def reconcile(self, key: PolicyKey) -> float | None:
        kind, namespace, name = key
        rt = self._types.get(kind)
        obj = self.ctx.cached(rt, namespace or None, name) if rt is not None else None
        if rt is None or obj is None or ObjectView(obj).is_deleting:
            return None
        wanted = selectors_served_condition(obj, lambda api_version, k: kind_status(self.ctx.registry, api_version, k))
        status = copy.deepcopy(obj.get("status") or {})
        current = find_condition(status.get("conditions"), SELECTORS_SERVED)
        if current is not None and all(current.get(f) == wanted[f] for f in ("status", "reason", "message")):
            return None
        status["conditions"] = with_condition(status.get("conditions"), wanted, now=self.ctx.now_text())
        written, requeue_after = await self.ctx.write_status(rt, {**obj, "status": status})
        if written is None:
            return requeue_after  # a lost race is redone on the newer copy the informer brings
        turned = current is None or current.get("status") != wanted["status"]
        if turned and (wanted["status"] == "False" or current is not None):
            failing = wanted["status"] == "False"
            await record_event(
                self.ctx, written,
                type=EventType.WARNING if failing else EventType.NORMAL,
                reason=EventReason.SELECTORS_NOT_SERVED if failing else EventReason.SELECTORS_SERVED,
                message=wanted["message"],
            )
        return None
