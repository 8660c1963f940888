"""Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer on ClusterQueues, ResourceFlavors and
AdmissionChecks, as Kueue's ClusterQueue, ResourceFlavor and AdmissionCheck controllers keep it.

In: the three kinds and the Workloads (informers). Out: their ``metadata.finalizers``:

* every one of them not being deleted gets the finalizer (Kueue's webhook adds it to new
  ClusterQueues and ResourceFlavors, its controllers to anything without it, so objects written
  before the hub kept it get it on their next reconcile, as after a Kueue upgrade);
* a ClusterQueue being deleted keeps it while any Workload holds quota in it (reserved or
  admitted, not finished): it stays ``Terminating``, admits nothing new (its ``Active`` condition
  is ``Terminating``, :func:`controlplane.admission.stopping.cluster_queue_active`), and goes
  once the last such Workload is finished, evicted or deleted;
* a ResourceFlavor or AdmissionCheck being deleted keeps it while any ClusterQueue (one being
  deleted too) names it.

Kueue records no Event for any of this. The state is the objects' own, so a restarted hub picks
it up from its informers' first list.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from controlplane.admission import checks
from controlplane.admission import objects as adm
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.views import ObjectView
from controlplane.controllers.admissiongate import Kinds
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting
from controlplane.objectclient import ResourceType, WatchEventType, errors

log = logging.getLogger(__name__)

FINALIZER: Final = kueue.RESOURCE_IN_USE_FINALIZER
CLUSTER_QUEUE: Final = "ClusterQueue"
FLAVOR: Final = "ResourceFlavor"
CHECK: Final = "AdmissionCheck"

Key = tuple[str, str]
"""(kind, name) of a cluster-scoped Kueue object."""


class ResourceInUseController(KeyedController[Key]):
    """Adds and removes Kueue's ``resource-in-use`` finalizer (see the module docstring)."""

    name = "kueue-resource-in-use"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.kinds = Kinds(ctx)
        self._types: dict[str, ResourceType] = {
            kind: rt for kind, rt in (
                (CLUSTER_QUEUE, self.kinds.cluster_queue), (FLAVOR, self.kinds.flavor), (CHECK, self.kinds.admission_check),
            ) if rt is not None
        }
        for rt in self._types.values():
            ctx.informer(rt).add_handler(self._on_object)
        if self.kinds.workload is not None and CLUSTER_QUEUE in self._types:
            ctx.informer(self.kinds.workload).add_handler(self._on_workload)

    async def _on_object(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        kind = str(obj.get("kind") or "")
        await self.loop.add((kind, str(obj["metadata"]["name"])))
        if kind == CLUSTER_QUEUE:
            # A queue changed or went: the flavors and checks it named (or names) may be free now.
            for queue in (old, obj):
                for flavor in adm.named_flavors(queue or {}):
                    await self.loop.add((FLAVOR, flavor))
                for check in checks.named_checks(queue or {}):
                    await self.loop.add((CHECK, check))

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        # Its quota taken or released (evicted, finished, deleted): a queue being deleted may be free now.
        for wl in (old, obj):
            admission = ObjectView(wl).status.get("admission")
            name = admission.get("clusterQueue") if isinstance(admission, dict) else None
            if isinstance(name, str) and name:
                await self.loop.add((CLUSTER_QUEUE, name))

    async def reconcile(self, key: Key) -> float | None:
        kind, name = key
        rt = self._types.get(kind)
        obj = self.ctx.informer(rt).get(None, name) if rt is not None else None
        if rt is None or obj is None:
            return None
        finalizers = list(ObjectView(obj).finalizers)
        if not is_deleting(obj):
            if FINALIZER in finalizers:
                return None
            wanted = [*finalizers, FINALIZER]
        elif FINALIZER not in finalizers or self._in_use(kind, name):
            return None  # kept; the events of what holds it bring it back here
        else:
            wanted = [f for f in finalizers if f != FINALIZER]
        try:
            await self.ctx.objects.update(rt, {**obj, "metadata": {**obj["metadata"], "finalizers": wanted}})
        except errors.NotFound:
            return None
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS  # the informer's copy was stale: again with the next one
        log.info("%s %s: finalizer %s %s", kind, name, FINALIZER, "added" if FINALIZER in wanted else "removed")
        return None

    def _in_use(self, kind: str, name: str) -> bool:
        kinds = self.kinds
        if kind == CLUSTER_QUEUE:
            return any((adm.admission_of(wl) or {}).get("clusterQueue") == name for wl in kinds.items(kinds.workload))
        queues: Iterable[Mapping[str, Any]] = kinds.items(kinds.cluster_queue)
        named = adm.named_flavors if kind == FLAVOR else checks.named_checks
        return any(name in named(queue) for queue in queues)


__all__ = ["FINALIZER", "ResourceInUseController"]
