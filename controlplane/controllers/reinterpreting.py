"""Requeues what a changed interpretation of a kind concerns, so existing objects follow it at once.

A kind's interpretation changes when a ResourceInterpreterCustomization is installed, changed or
removed (:mod:`.customizations`), when a custom kind's scale subresource comes or goes
(:mod:`.scaling`): :meth:`Reinterpreting.kind_changed`; and when the resource interpreter webhooks
change (a ResourceInterpreterWebhookConfiguration created, edited or deleted):
:meth:`Reinterpreting.follow_webhooks` hears of the webhooks that went or came and takes the kinds
their rules match, old rules and new. The workloads of those kinds are requeued in the detector
(replicas and requirements, InterpretReplica) and their bindings in the binding controller (the
rendered Works, ReviseReplica), the status controller (InterpretStatus, InterpretHealth,
AggregateStatus) and, for a binding that can propagate dependencies, the dependencies controller
(InterpretDependency). Each goes through the controller's own work queue, which holds a key once
however often it is added; nothing is written here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from controlplane.apis.views import BindingView
from controlplane.controllers.attachments import is_parent_candidate
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workloads import WorkloadRef
from controlplane.interpreter.registry import group_of
from controlplane.interpreter.webhook_context import InterpreterHook

__all__ = ["Reinterpreting"]

BindingKey = tuple[str, str]
#: Whether the change concerns a kind: (apiVersion, kind) → bool.
Concerns = Callable[[str, str], bool]


class Reinterpreting:
    """Requeues the workloads and bindings of the kinds whose interpretation changed."""

    def __init__(
        self, ctx: ControllerContext, *, detector: ReconcileLoop[WorkloadRef], bindings: list[ReconcileLoop[BindingKey]],
        parents: ReconcileLoop[BindingKey],
    ) -> None:
        """``bindings``: the loops every binding of the kind goes to; ``parents``: the dependencies
        controller's, which gets those that can propagate dependencies."""
        self.ctx = ctx
        self._detector = detector
        self._bindings = bindings
        self._parents = parents

    async def kind_changed(self, api_version: str, kind: str) -> None:
        """The kind's interpreter changed (any version of its group)."""
        group = group_of(api_version)
        await self.requeue(lambda v, k: k == kind and group_of(v) == group)

    async def follow_webhooks(self) -> None:
        """Until cancelled: requeue what the rules of the interpreter webhooks that go or come match."""
        webhooks = self.ctx.interpreter_webhooks
        if webhooks is None:
            return
        heard: list[InterpreterHook] = []
        pending = asyncio.Event()

        def changed(hooks: tuple[InterpreterHook, ...]) -> None:
            heard.extend(hooks)
            pending.set()

        stop = webhooks.follow(changed)
        try:
            while True:
                await pending.wait()
                pending.clear()
                hooks = tuple(heard)
                heard.clear()
                await self.requeue(_matched_by(hooks))
        finally:
            stop()

    async def requeue(self, concerns: Concerns) -> None:
        """Requeue the workloads and bindings of every kind ``concerns`` says is concerned."""
        for rt in list(self.ctx.workload_types):
            informer = self.ctx.informer_if_any(rt)
            if informer is None or not concerns(rt.api_version, rt.kind):
                continue
            for obj in informer.items():
                await self._detector.add(WorkloadRef.of(obj))
        for binding in self.ctx.bindings.items():
            resource = BindingView(binding).resource
            if not concerns(str(resource.get("apiVersion")), str(resource.get("kind"))):
                continue
            key = (str(binding["metadata"].get("namespace") or ""), str(binding["metadata"]["name"]))
            for loop in self._bindings:
                await loop.add(key)
            if is_parent_candidate(binding):
                await self._parents.add(key)


def _matched_by(hooks: tuple[InterpreterHook, ...]) -> Concerns:
    """A kind is concerned when a rule of one of ``hooks`` matches it, for any operation."""
    return lambda api_version, kind: any(hook.matches(api_version, kind) for hook in hooks)
