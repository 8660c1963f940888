"""Deleting a propagated workload: its Works and binding go before the hub object does.

The detector puts the finalizer ``gpufed.io/propagation`` on every workload a policy
claims. ``kubectl delete`` then only marks the workload (``deletionTimestamp``); this
controller:

1. deletes the workload's ResourceBinding (the scheduler releases its reservations);
2. deletes every Work of that binding (found by the ``work.gpufed.io/binding`` and
   ``work.gpufed.io/namespace`` labels);
3. once neither the binding nor any Work remains, removes the finalizer, and the API
   server deletes the workload.

Member objects: each agent watches its Works; when a Work is deleted (or it finds, after a
restart, a Work in its ledger that no longer exists) it deletes the member objects that
carry that Work's ownership labels — unless the Work has ``preserveResourcesOnDeletion``
(the claiming policy's flag, through the binding): then the objects stay, running, and the
agent only removes gpufed's ownership labels from them, so they are the member's own from
then on. The Works are deleted here with their flag as it is; only the binding controller,
removing a cluster from a placement, clears it first. So the hub object is gone once every Work is deleted
from the hub; the member objects follow as soon as each agent has seen the deletion — at
once for a connected member, on reconnection for one that is away. Works carry no
finalizer (the agent would have to remove it, and an unreachable cluster would then block
every deletion until it is removed from the federation).

The binding controller deletes the Works of a missing binding too, so a Work created by a
late reconcile is collected even after the workload is gone.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from controlplane.apis.constants import FINALIZER_WORKLOAD
from controlplane.apis.views import BindingView
from controlplane.controllers.context import INDEX_BINDING, ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import WorkloadRef, is_deleting
from controlplane.objectclient import WatchEventType

log = logging.getLogger(__name__)


class DeletionController(KeyedController[WorkloadRef]):
    """Reconciles deleting workloads (keys: :class:`WorkloadRef`): clean up, then release."""

    name = "deletion"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        ctx.add_workload_handler(self._on_workload)

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED and is_deleting(obj):
            await self.loop.add(WorkloadRef.of(obj))

    async def reconcile(self, ref: WorkloadRef) -> float | None:
        ctx = self.ctx
        rt = ctx.registry.for_kind(ref.api_version, ref.kind)
        if rt is None:
            return None
        workload = await ctx.get(rt, ref.namespace, ref.name)
        if workload is None or not is_deleting(workload):
            return None
        finalizers = list(workload["metadata"].get("finalizers") or [])
        if FINALIZER_WORKLOAD not in finalizers:
            return None
        binding = await ctx.get(ctx.binding_rt, ref.binding_namespace, ref.binding_name)
        resource = BindingView(binding).resource
        if binding is not None and resource.get("kind") == ref.kind:
            await ctx.delete(ctx.binding_rt, ref.binding_namespace, ref.binding_name)
            log.info("binding %s/%s deleted with %s", ref.binding_namespace, ref.binding_name, ref)
        works = ctx.works.by_index(INDEX_BINDING, (ref.binding_namespace, ref.binding_name))
        for work in works:
            meta = work["metadata"]
            await ctx.delete(ctx.work_rt, meta.get("namespace"), meta["name"])
        if works or (binding is not None and resource.get("kind") == ref.kind):
            return ctx.settings.deletion_poll_seconds  # confirm they are gone before letting go
        released = copy.deepcopy(workload)
        released["metadata"]["finalizers"] = [f for f in finalizers if f != FINALIZER_WORKLOAD]
        await ctx.objects.update(rt, released)
        log.info("%s released: its Works are deleted", ref)
        return None
