"""This replica's view of the APIServices: which group-versions an extension API server serves,
whether it is available, and what its discovery says.

Every replica keeps the APIServices from a watch (:class:`AggregatedApis`), as kube-aggregator's
proxy and discovery read their listers. An aggregated APIService's discovery (its
``/apis/<group>/<version>`` APIResourceList) is fetched when it appears or changes and every
:data:`DISCOVERY_PERIOD` seconds, through the same front-proxy client as the proxied requests
(identity ``system:kube-aggregator``, group ``system:masters``, as kube checks); one that fails
keeps its last answer marked ``Stale``, and one never answered is left out, as kube's aggregated
discovery does. At most one fetch runs at a time, each bounded by :data:`DISCOVERY_TIMEOUT`, and an
answer is read up to :data:`~controlplane.apiserver.webhooks.calling.MAX_RESPONSE_BYTES`. After a
discovery answer, the server's OpenAPI v2 and v3 documents are fetched the same way into
:attr:`AggregatedApis.specs` (:mod:`.openapi`).

In: the object store (APIServices, and the Services and endpoints the calls resolve), the front
proxy. Out: :meth:`AggregatedApis.target`, the discovery entries, and :meth:`AggregatedApis.session`
for the proxy (:mod:`.proxying`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from controlplane.apis.kube import apiregistration
from controlplane.apis.kube.apiregistration import APIServiceView
from controlplane.apis.kube.webhookclient import ca_bundle_pem
from controlplane.apiserver import errors
from controlplane.apiserver.aggregator.frontproxy import FrontProxy, identity_headers
from controlplane.apiserver.aggregator.openapi import AggregatedSpecs
from controlplane.apiserver.computed import ComputedResource, served_group_versions
from controlplane.apiserver.identity import Role, UserInfo
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.watchcache import WatchCache
from controlplane.apiserver.webhooks.calling import (
    MAX_RESPONSE_BYTES,
    NoEndpoint,
    go_client_error,
    resolve_service,
)
from controlplane.controllers.informing import Informer

log = logging.getLogger(__name__)

DISCOVERY_PERIOD = 30.0
DISCOVERY_TIMEOUT = 5.0
_SSL_CONTEXTS = 64
#: Who the discovery checks are made as (kube's availability and discovery checks' identity).
AGGREGATOR_USER = UserInfo(name="system:kube-aggregator", role=Role.USER, user_groups=("system:masters",))


def builtin_group_versions(registry: Registry, computed: Sequence[ComputedResource]) -> list[tuple[str, str]]:
    """The group-versions the hub serves itself, CustomResourceDefinitions' aside: each gets a
    local APIService (:mod:`controlplane.controllers.apiservices`)."""
    return [
        (group, version)
        for group, versions in served_group_versions(registry, computed).items()
        for version in versions
        if any(rt.custom is None for rt in registry.in_group_version(group, version))
        or any((r.group, r.version) == (group, version) for r in computed)
    ]


class Unreachable(Exception):
    """The extension server could not be asked: kube's words for why."""


@dataclass(frozen=True, slots=True)
class Discovered:
    """An aggregated group-version's last discovery answer, and whether it is the current one."""

    resources: dict[str, Any]
    fresh: bool


class AggregatedApis:
    """The APIServices as this replica sees them, with their extension servers' discovery."""

    def __init__(self, objects: ObjectStore, *, cache: WatchCache | None, front_proxy: FrontProxy) -> None:
        self._objects = objects
        self._cache = cache
        self.front_proxy = front_proxy
        self.informer = Informer(objects, objects.registry.require(f"{apiregistration.GROUP}/v1", "APIService"))
        self.informer.add_handler(self._changed)
        self._views: dict[tuple[str, str], APIServiceView] = {}
        self.discovered: dict[str, Discovered] = {}
        self.specs = AggregatedSpecs()
        self._refresh = asyncio.Event()
        self._contexts: OrderedDict[tuple[str | None, bool], ssl.SSLContext] = OrderedDict()
        self._session: aiohttp.ClientSession | None = None

    async def _changed(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = apiregistration.view(obj)
        key = (view.group, view.version)
        if event is WatchEventType.DELETED or view.local:
            if self._views.get(key, view).name == view.name:
                self._views.pop(key, None)
            self.discovered.pop(view.name, None)
            self.specs.forget(view.name)
            return
        previous = self._views.get(key)
        self._views[key] = view
        if previous is None or previous.service != view.service or previous.ca_bundle != view.ca_bundle \
                or previous.insecure_skip_tls_verify != view.insecure_skip_tls_verify or previous.available != view.available:
            self._refresh.set()

    def target(self, group: str, version: str) -> APIServiceView | None:
        """The aggregated APIService of ``group``/``version``, or None when it is served here."""
        return self._views.get((group, version))

    def aggregated(self) -> list[APIServiceView]:
        """The aggregated APIServices, by group priority (highest first), then version priority."""
        return sorted(self._views.values(), key=lambda v: (-v.group_priority_minimum, v.group, -v.version_priority, v.version))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.informer.run())
            await self.informer.synced.wait()
            group.create_task(self._discover_forever())

    async def wait_synced(self) -> None:
        await self.informer.synced.wait()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- calls to extension servers ---------------------------------------------------------

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=DISCOVERY_TIMEOUT), auto_decompress=False,
            )
        return self._session

    def ssl_context(self, view: APIServiceView) -> ssl.SSLContext:
        """The TLS client context of ``view``'s server: its ``caBundle`` or no verification, and the
        front-proxy certificate. Raises :class:`Unreachable` for a caBundle with no certificate."""
        key = (view.ca_bundle, view.insecure_skip_tls_verify)
        context = self._contexts.get(key)
        if context is None:
            pem = ca_bundle_pem(view.ca_bundle) if view.ca_bundle else None
            if view.ca_bundle and pem is None:
                raise Unreachable("unable to load root certificates: unable to parse bytes as PEM block")
            context = self.front_proxy.client_context(ca_bundle_pem=pem, insecure=view.insecure_skip_tls_verify)
            self._contexts[key] = context
            while len(self._contexts) > _SSL_CONTEXTS:
                self._contexts.popitem(last=False)
        self._contexts.move_to_end(key)
        return context

    async def location(self, view: APIServiceView) -> tuple[str, str]:
        """``(base URL, server name)`` of ``view``'s server: an address of its Service (its endpoints,
        as kube's ``--enable-aggregator-routing``, or an ExternalName), verified as
        ``<service>.<namespace>.svc``. Raises :class:`Unreachable`."""
        service = view.service
        assert service is not None
        try:
            host, port = await resolve_service(
                self._objects, self._cache, namespace=service.namespace, name=service.name, port=service.port,
                external_names=True,
            )
        except NoEndpoint as exc:
            raise Unreachable(str(exc)) from None
        except errors.ApiError as exc:  # the store did not answer
            raise Unreachable(f"service/{service.name} in {service.namespace!r} cannot be read: {exc}") from None
        shown = f"[{host}]" if ":" in host else host
        return f"https://{shown}:{port}", f"{service.name}.{service.namespace}.svc"

    async def check(self, view: APIServiceView) -> dict[str, Any]:
        """GET ``/apis/<group>/<version>`` from ``view``'s server as kube's checks do; its JSON.
        Raises :class:`Unreachable` with kube's wording."""
        path = f"/api/{view.version}" if not view.group else f"/apis/{view.group}/{view.version}"
        document = orjson.loads(await self.fetch(view, path))
        if not isinstance(document, dict):
            raise Unreachable(f"failing or missing response from {path}: the answer is not an APIResourceList")
        return document

    async def fetch(self, view: APIServiceView, path: str) -> bytes:
        """GET ``path`` (JSON) from ``view``'s server as the aggregator: within
        :data:`DISCOVERY_TIMEOUT`, at most :data:`MAX_RESPONSE_BYTES`, and JSON. Raises
        :class:`Unreachable` with kube's wording."""
        base, server_name = await self.location(view)
        url = base + path
        headers = [*identity_headers(AGGREGATOR_USER), ("Accept", "application/json"), ("Accept-Encoding", "identity")]
        try:
            async with asyncio.timeout(DISCOVERY_TIMEOUT):
                async with self.session().get(
                    url, headers=headers, ssl=self.ssl_context(view), server_hostname=server_name, allow_redirects=False,
                ) as response:
                    if not 200 <= response.status < 300:
                        raise Unreachable(f"failing or missing response from {url}: bad status from {url}: {response.status}")
                    body = await response.content.read(MAX_RESPONSE_BYTES + 1)
        except (TimeoutError, aiohttp.ClientError, ssl.SSLError, OSError) as exc:
            raise Unreachable(f"failing or missing response from {url}: {go_client_error('Get', url, exc)}") from None
        if len(body) > MAX_RESPONSE_BYTES:
            raise Unreachable(f"failing or missing response from {url}: the response is larger than {MAX_RESPONSE_BYTES} bytes")
        try:
            orjson.loads(body)
        except orjson.JSONDecodeError:
            raise Unreachable(f"failing or missing response from {url}: the answer is not JSON") from None
        return body

    async def _discover_forever(self) -> None:
        while True:
            for view in list(self._views.values()):
                await self._discover(view)
            self._refresh.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DISCOVERY_PERIOD):
                    await self._refresh.wait()

    async def _discover(self, view: APIServiceView) -> None:
        try:
            document = await self.check(view)
            resources = document.get("resources")
            if not isinstance(resources, list):
                raise Unreachable("the answer is not an APIResourceList")
        except Unreachable as exc:
            log.debug("discovery of %s failed: %s", view.name, exc)
            last = self.discovered.get(view.name)
            if last is not None:
                self.discovered[view.name] = Discovered(last.resources, fresh=False)
            return
        self.discovered[view.name] = Discovered(document, fresh=True)
        await self._fetch_openapi(view)

    async def _fetch_openapi(self, view: APIServiceView) -> None:
        """The server's ``/openapi/v2`` and ``/openapi/v3/apis/<group>/<version>`` into
        :attr:`specs`; one that fails keeps the last good one (kube's openapi controllers)."""
        key = f"apis/{view.group}/{view.version}" if view.group else f"api/{view.version}"
        try:
            spec = orjson.loads(await self.fetch(view, "/openapi/v2"))
            if isinstance(spec, dict) and isinstance(spec.get("paths"), dict):
                self.specs.set_v2(view.name, spec)
        except Unreachable as exc:
            log.debug("OpenAPI v2 of %s not fetched: %s", view.name, exc)
        try:
            body = await self.fetch(view, f"/openapi/v3/{key}")
            if isinstance(orjson.loads(body), dict):
                self.specs.set_v3(view.name, key, body)
        except Unreachable as exc:
            log.debug("OpenAPI v3 of %s not fetched: %s", view.name, exc)
