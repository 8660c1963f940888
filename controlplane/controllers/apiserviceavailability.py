"""kube-aggregator's AvailableConditionController: the Available condition of every APIService.

A local APIService is Available (reason ``Local``). An aggregated one is checked as kube checks
it, in order, each failure with kube's reason and message: its Service exists (``ServiceNotFound``;
``ServiceAccessError`` when it cannot be read); a ClusterIP Service listens on the APIService's port
(``ServicePortError``); that Service has endpoints (``EndpointsNotFound``, its Endpoints or
EndpointSlices) with a ready address for the port's name (``MissingEndpoints``); and the server
answers ``GET /apis/<group>/<version>`` (``FailedDiscoveryCheck``, the reason kube's check gives).
All passing: ``True``, ``Passed``, ``all checks passed``. The condition is written through the
status subresource, only when it changes (its transition time moves with its status).

Level-based: an APIService's event queues its name; an aggregated APIService is checked again
every ``recheck_seconds`` (:data:`RECHECK_SECONDS` by default; a failing one every
:data:`RETRY_SECONDS`), which is how a server
that stops, or a Service or endpoints that change, are noticed.

In: an ObjectClient, a :class:`Checker` (the replica's discovery client). Out: status writes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any, Final, Protocol

from controlplane.apis.kube import apiregistration
from controlplane.apis.kube.apiregistration import APIServiceView
from controlplane.apis.kube.endpointslices import LABEL_SERVICE_NAME
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, WatchEventType, errors

log = logging.getLogger(__name__)

RECHECK_SECONDS: Final = 10.0
RETRY_SECONDS: Final = 5.0


class Checker(Protocol):
    async def check(self, view: APIServiceView) -> dict[str, Any]:
        """Ask the server for its discovery; raise with kube's message when it does not answer."""
        ...


def _verdict(status: str, reason: str, message: str) -> tuple[str, str, str]:
    return status, reason, message


class AvailabilityController:
    """Writes every APIService's Available condition."""

    def __init__(
        self, objects: ObjectClient, checker: Checker, *, workqueue_metrics: WorkqueueMetrics | None = None,
        recheck_seconds: float = RECHECK_SECONDS,
    ) -> None:
        self._objects = objects
        self._recheck_seconds = recheck_seconds
        self._checker = checker
        self._rt = objects.registry.require(f"{apiregistration.GROUP}/{apiregistration.VERSION}", "APIService")
        self.api_services = Informer(objects, self._rt)
        self._loop: ReconcileLoop[str] = ReconcileLoop("apiservice-availability", self.reconcile, workers=2,
                                                       metrics=workqueue_metrics)
        self.api_services.add_handler(self._on_api_service)

    async def _on_api_service(self, _event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        await self._loop.add(str(obj["metadata"]["name"]))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.api_services.run())
            await self.api_services.synced.wait()
            group.create_task(self._loop.run())

    async def reconcile(self, name: str) -> float | None:
        current = self.api_services.get(None, name)
        if current is None:
            return None
        view = apiregistration.view(current)
        if view.local:
            status, reason, message = "True", apiregistration.LOCAL_REASON, apiregistration.LOCAL_MESSAGE
        else:
            status, reason, message = await self._checked(view)
        updated = {**current, "status": dict(current.get("status") or {})}
        now = dt.datetime.now(dt.UTC)
        if apiregistration.set_available(updated, status=status, reason=reason, message=message, now=now):
            previous = apiregistration.available_condition(current) or {}
            if previous.get("status") != status:
                log.info("APIService %s: Available %s (%s: %s)", name, status, reason, message)
            try:
                await self._objects.update_status(self._rt, updated)
            except errors.NotFound:
                return None
        if view.local:
            return None
        return self._recheck_seconds if status == "True" else RETRY_SECONDS

    async def _checked(self, view: APIServiceView) -> tuple[str, str, str]:
        service = view.service
        assert service is not None
        where = f'service/{service.name} in "{service.namespace}"'
        registry = self._objects.registry
        try:
            found = await self._objects.get(registry.require("v1", "Service"), namespace=service.namespace, name=service.name)
        except errors.NotFound:
            return _verdict("False", "ServiceNotFound", f"{where} is not present")
        except errors.ApiError as exc:
            return _verdict("Unknown", "ServiceAccessError", f"{where} cannot be checked due to: {exc}")
        spec = found.get("spec") or {}
        if spec.get("type", "ClusterIP") == "ClusterIP":
            ports = [p for p in spec.get("ports") or [] if isinstance(p, dict) and p.get("port") == service.port]
            if not ports:
                return _verdict("False", "ServicePortError", f"{where} is not listening on port {service.port}")
            port_name = str(ports[0].get("name") or "")
            missing = await self._endpoints_problem(service.namespace, service.name, port_name)
            if missing is not None:
                return missing
        try:
            await self._checker.check(view)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the checker's own error carries kube's words
            return _verdict("False", "FailedDiscoveryCheck", str(exc))
        return _verdict("True", "Passed", "all checks passed")

    async def _endpoints_problem(self, namespace: str, name: str, port_name: str) -> tuple[str, str, str] | None:
        """kube's endpoints checks, on the Service's Endpoints or, without one, its EndpointSlices."""
        registry = self._objects.registry
        where = f'service/{name} in "{namespace}"'
        try:
            endpoints = await self._objects.get(registry.require("v1", "Endpoints"), namespace=namespace, name=name)
        except errors.NotFound:
            endpoints = None
        except errors.ApiError as exc:
            return _verdict("Unknown", "EndpointsAccessError", f"{where} cannot be checked due to: {exc}")
        if endpoints is not None:
            ready = any(
                subset.get("addresses") and any(str(p.get("name") or "") == port_name for p in subset.get("ports") or [])
                for subset in endpoints.get("subsets") or []
            )
        else:
            slices = await self._objects.list(
                registry.require("discovery.k8s.io/v1", "EndpointSlice"), namespace=namespace,
                label_selector=f"{LABEL_SERVICE_NAME}={name}",
            )
            if not slices.items:
                return _verdict("False", "EndpointsNotFound", f"cannot find endpoints for {where}")
            ready = any(
                any(str(p.get("name") or "") == port_name for p in s.get("ports") or [])
                and any((e.get("conditions") or {}).get("ready") is not False and e.get("addresses")
                        for e in s.get("endpoints") or [])
                for s in slices.items
            )
        if not ready:
            return _verdict("False", "MissingEndpoints",
                            f'endpoints for {where} have no addresses with port name "{port_name}"')
        return None
