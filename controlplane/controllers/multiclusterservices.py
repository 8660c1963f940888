"""Karmada's MultiClusterServices at the hub: what was not done for them, said in their status.

In: ``networking.karmada.io/v1alpha1`` MultiClusterServices and the hub's Services (informers).
Out: each MultiClusterService's ``status.conditions`` as
:func:`~controlplane.apis.multicluster_services.mcs_conditions` makes them: Karmada's
``ServiceApplied`` and an ``EndpointSliceDispatched``, both ``False`` with the reason, since the
hub neither propagates the Service for a MultiClusterService nor moves EndpointSlices between
members (the simulated members run no EndpointSlice controller). Written only when they change; a
MultiClusterService is looked at again when it changes and when its Service comes or goes.
"""

from __future__ import annotations

import logging
from typing import Any

from controlplane.apis.multicluster_services import MULTI_CLUSTER_SERVICE_KIND, mcs_conditions
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting, with_condition
from controlplane.objectclient import WatchEventType, errors

log = logging.getLogger(__name__)

API_VERSION = "networking.karmada.io/v1alpha1"
CONFLICT_RETRY_SECONDS = 0.2
Key = tuple[str, str]


class MultiClusterServiceController(KeyedController[Key]):
    """Keeps each MultiClusterService's conditions (keys: ``(namespace, name)``)."""

    name = "multi-cluster-services"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.rt = ctx.watch_kind(API_VERSION, MULTI_CLUSTER_SERVICE_KIND, self._on_object)
        self.service_rt = ctx.watch_kind("v1", "Service", self._on_service)

    async def _on_object(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec"):
            return  # its own status write
        view = ObjectView(obj)
        await self.loop.add((view.namespace, view.name))

    async def _on_service(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED or self.rt is None:
            return
        view = ObjectView(obj)
        if self.ctx.cached(self.rt, view.namespace, view.name) is not None:
            await self.loop.add((view.namespace, view.name))

    async def reconcile(self, key: Key) -> float | None:
        if self.rt is None or self.service_rt is None:
            return None
        namespace, name = key
        obj = self.ctx.cached(self.rt, namespace, name)
        if obj is None or is_deleting(obj):
            return None
        found = self.ctx.cached(self.service_rt, namespace, name) is not None
        status = dict(ObjectView(obj).status)
        conditions = status.get("conditions") or []
        for condition in mcs_conditions(obj, service_found=found):
            conditions = with_condition(conditions, condition, now=self.ctx.now_text())
        if conditions == status.get("conditions"):
            return None
        try:
            await self.ctx.objects.update_status(self.rt, {**obj, "status": {**status, "conditions": conditions}})
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS
        except errors.NotFound:
            return None
        log.info("MultiClusterService %s/%s: conditions written", namespace, name)
        return None
