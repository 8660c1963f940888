"""The API server's non-resource endpoints: health (``/livez``, ``/readyz``, ``/healthz`` with
their checks, their results on ``/metrics/slis``), ``/version``, discovery (``/api``, ``/apis``, plain and aggregated), OpenAPI, and the
route of ``/api/...`` and ``/apis/...`` to discovery documents or the resource handlers.

In: the object store (the ``etcd`` check), the registry and the computed resources (discovery), the
resource handlers. Out: :class:`Endpoints`, whose methods :func:`~controlplane.apiserver.app.create_app`
routes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from aiohttp import web

from controlplane.apiserver import discovery, errors
from controlplane.apiserver.computed import ComputedResource
from controlplane.apiserver.handlers import ResourceHandlers, json_response
from controlplane.apiserver.health import HealthEndpoints
from controlplane.apiserver.healthslis import HealthcheckSLIs
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.openapi.serving import OpenApiEndpoints
from controlplane.apiserver.requeststate import REQUEST_INFO
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.routing import RequestInfo

logger = logging.getLogger(__name__)

READY_TIMEOUT_SECONDS = 2.0
#: The hub's health endpoints and their checks (kube-apiserver's, less etcd in ``/livez``).
HUB_HEALTH_CHECKS: Mapping[str, tuple[str, ...]] = {
    "livez": ("ping", "log"),
    "readyz": ("ping", "log", "etcd", "shutdown"),
    "healthz": ("ping", "log", "etcd"),
}


class Endpoints:
    """The non-resource endpoints: health, version, discovery, OpenAPI."""

    def __init__(
        self, objects: ObjectStore, registry: Registry, resources: ResourceHandlers,
        computed: Sequence[ComputedResource] = (),
    ) -> None:
        self._objects = objects
        self._registry = registry
        self._resources = resources
        self._computed = computed
        self.openapi = OpenApiEndpoints(registry, computed=computed)
        #: The last readiness verdict, so that a failing store is logged once, not per probe.
        self._ready = True

    def health(self, stop: asyncio.Event, slis: HealthcheckSLIs | None = None) -> HealthEndpoints:
        """``/livez``, ``/readyz`` and ``/healthz`` in kube's format: etcd answers (not for
        ``/livez``: a hub cannot mend its store by restarting), and ``/readyz`` fails from the
        moment the server begins to shut down (``stop``), so a load balancer stops sending to it.
        Their checks' results are recorded in ``slis`` (``/metrics/slis``)."""

        async def not_stopping() -> None:
            if stop.is_set():
                raise RuntimeError("the server is shutting down")

        return HealthEndpoints(
            {"ping": _passes, "log": _passes, "etcd": self._store_answers, "shutdown": not_stopping},
            HUB_HEALTH_CHECKS,
            slis,
        )

    async def _store_answers(self) -> None:
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                await self._objects.store.current_revision()
        except Exception as exc:  # any failure of the store means "not ready"
            # Logged when readiness changes, not on every probe (a load balancer probes often).
            log_change = logger.warning if self._ready else logger.debug
            log_change("readiness check failed: the store is unreachable (%s)", exc)
            self._ready = False
            raise RuntimeError("the store is unreachable") from exc
        if not self._ready:
            logger.info("readiness check passes again: the store answers")
            self._ready = True

    async def version(self, _request: web.Request) -> web.StreamResponse:
        return json_response(discovery.version_info())

    async def api(self, request: web.Request) -> web.StreamResponse:
        return self._aggregated(request, core=True) or json_response(discovery.api_versions())

    async def apis(self, request: web.Request) -> web.StreamResponse:
        return self._aggregated(request, core=False) or json_response(
            discovery.api_group_list(self._registry, self._computed)
        )

    def _aggregated(self, request: web.Request, *, core: bool) -> web.StreamResponse | None:
        """Aggregated discovery when the client asks for it (kubectl does), else None."""
        version = discovery.wanted_aggregated_version(request.headers.get("Accept"))
        if version is None:
            return None
        document = discovery.aggregated(self._registry, self._computed, core=core, version=version)
        response = json_response(document, content_type=discovery.aggregated_content_type(version))
        response.headers["Vary"] = "Accept"
        return response

    async def resource_path(self, request: web.Request) -> web.StreamResponse:
        """/api/... and /apis/...: discovery documents or resources."""
        info: RequestInfo = request[REQUEST_INFO]
        if info.is_resource:
            return await self._resources.handle(request)
        if request.method != "GET":
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        parts = [p for p in request.path.split("/") if p]
        document = None
        if parts == ["api", "v1"]:
            document = discovery.api_resource_list(self._registry, "", "v1", self._computed)
        elif parts[0] == "apis" and len(parts) == 2:
            document = discovery.api_group(self._registry, parts[1], self._computed)
        elif parts[0] == "apis" and len(parts) == 3:
            document = discovery.api_resource_list(self._registry, parts[1], parts[2], self._computed)
        if document is None:
            raise errors.NotFound("the server could not find the requested resource")
        return json_response(document)


async def _passes() -> None:
    """A check that passes while the server can answer at all (kube's ``ping`` and ``log``)."""
