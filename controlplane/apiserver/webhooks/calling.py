"""Posting a review (an AdmissionReview, a CRD's ConversionReview) to a webhook over HTTPS, as
kube's webhook client does.

In: a webhook's :class:`Endpoint` (an admission :class:`~.matching.Webhook`, a CRD's
:class:`~controlplane.apis.apiextensions.kind.ConversionWebhook`) and the review's bytes. Out: the
answer's bytes, or :class:`CallFailed` with kube's reason (``Post "https://...?timeout=10s":
context deadline exceeded``), which the failure policy then decides on.

Only what an admin configured is called: the configuration's ``url``, or the addresses of the
Service its ``service`` names, taken from that Service's Endpoints (or EndpointSlices) — on a hub
without pods, a selector-less Service whose endpoints the admin wrote. With a watch cache these are
read from memory, as kube's service resolver reads its listers (the store is read only when memory
has no such Service, or no address for it: one written an instant ago). TLS is verified against the
``caBundle`` (the system roots without one; a service is verified as ``<name>.<namespace>.svc``).
The call ends after the webhook's ``timeoutSeconds``, redirects are not followed, and an answer
is read up to :data:`MAX_RESPONSE_BYTES`. The CA bundle is never logged.
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from controlplane.apis.kube.endpointslices import LABEL_SERVICE_NAME
from controlplane.apis.kube.webhookclient import CA_BUNDLE_UNPARSABLE, ca_bundle_pem
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.watchcache import WatchCache

#: An answer larger than this is not read: 3 MiB, the most kube-apiserver takes in a request body.
MAX_RESPONSE_BYTES = 3 * 1024 * 1024
_SSL_CONTEXTS = 64


class Endpoint(Protocol):
    """Where a webhook is called and how long it is waited for."""

    @property
    def url(self) -> str | None: ...
    @property
    def service(self) -> Mapping[str, Any] | None: ...
    @property
    def ca_bundle(self) -> str | None: ...
    @property
    def timeout_seconds(self) -> int: ...


class CallFailed(Exception):
    """The webhook could not be called, or answered with an error (kube's ``ErrCallingWebhook`` reason).
    ``code``: the answer's HTTP status, 503 when there was none (kube's client reports such a failure
    as ``ServiceUnavailable``), 0 for an answer that is not a valid review."""

    def __init__(self, message: str, code: int = 503) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class _Target:
    url: str  # where the request goes
    shown: str  # the URL as kube names it in an error
    server_hostname: str | None = None  # the name the certificate is verified for


class WebhookClient:
    """One HTTP client for every webhook call of a hub replica."""

    def __init__(self, objects: ObjectStore, cache: WatchCache | None = None) -> None:
        self._objects = objects
        self._cache = cache
        self._session: aiohttp.ClientSession | None = None
        self._contexts: OrderedDict[str | None, ssl.SSLContext] = OrderedDict()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post(self, hook: Endpoint, body: bytes) -> bytes:
        timeout = f"?timeout={hook.timeout_seconds}s"
        target = await self._target(hook, timeout)
        context = self._ssl_context(hook.ca_bundle)
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        try:
            async with asyncio.timeout(hook.timeout_seconds):
                async with self._session.post(
                    target.url, data=body, headers=headers, ssl=context, server_hostname=target.server_hostname,
                    allow_redirects=False,
                ) as response:
                    raw = await _bounded_body(response)
                    if not 200 <= response.status < 300:
                        raise CallFailed(_status_failure(response.status, raw), response.status)
                    return raw
        except (TimeoutError, aiohttp.ClientError, ssl.SSLError, OSError) as exc:
            raise CallFailed(go_client_error("Post", target.shown, exc)) from None

    async def _target(self, hook: Endpoint, query: str) -> _Target:
        if hook.url is not None:
            return _Target(hook.url + query, hook.url + query)
        service = hook.service or {}
        name, namespace = str(service.get("name") or ""), str(service.get("namespace") or "")
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "")
        host = f"{name}.{namespace}.svc"
        shown = f"https://{host}:{port}{path}{query}"
        try:
            address, target_port = await self._endpoint(name, namespace, port)
        except (errors.ApiError, NoEndpoint) as exc:
            raise CallFailed(f'Post "{shown}": {exc}') from None
        return _Target(f"https://{_join_host(address, target_port)}{path}{query}", shown, host)

    async def _endpoint(self, name: str, namespace: str, port: int) -> tuple[str, int]:
        return await resolve_service(self._objects, self._cache, namespace=namespace, name=name, port=port)

    def _ssl_context(self, ca_bundle: str | None) -> ssl.SSLContext:
        context = self._contexts.get(ca_bundle)
        if context is None:
            if ca_bundle is None:
                context = ssl.create_default_context()
            else:
                pem = ca_bundle_pem(ca_bundle)
                try:
                    if pem is None:
                        raise ValueError(ca_bundle)
                    context = ssl.create_default_context(cadata=pem)
                except (ssl.SSLError, ValueError):
                    raise CallFailed(f"could not get REST client: {CA_BUNDLE_UNPARSABLE}") from None
            self._contexts[ca_bundle] = context
            while len(self._contexts) > _SSL_CONTEXTS:
                self._contexts.popitem(last=False)
        self._contexts.move_to_end(ca_bundle)
        return context


class NoEndpoint(Exception):
    """The service cannot be reached: kube's resolver's words (``service "x" not found``…)."""


async def resolve_service(
    objects: ObjectStore, cache: WatchCache | None, *, namespace: str, name: str, port: int,
    external_names: bool = False,
) -> tuple[str, int]:
    """kube's ``ResolveEndpoint``: a random ready address of the service port ``port`` (with
    ``external_names``, an ``ExternalName`` Service's name and ``port``, as ``ResolveCluster``).
    Read from ``cache`` when it has the objects, else from the store."""
    registry = objects.registry
    reads = objects if cache is None else cache
    try:
        service = await reads.get(registry.require("v1", "Service"), namespace=namespace, name=name)
    except errors.NotFound:
        raise NoEndpoint(f'service "{name}" not found') from None  # kube's service lister's words
    spec = service.get("spec") or {}
    if external_names and spec.get("type") == "ExternalName":
        return str(spec.get("externalName") or ""), port
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict) and p.get("port") == port]
    if not ports:
        raise NoEndpoint(f'no service port {port} found for service "{name}"')
    port_name = str(ports[0].get("name") or "")
    candidates = [] if cache is None else await _addresses(objects, cache, name, namespace, port_name)
    if not candidates:  # none in memory: maybe written an instant ago
        candidates = await _addresses(objects, None, name, namespace, port_name)
    if not candidates:
        raise NoEndpoint(f'no endpoints available for service "{name}"')
    return random.choice(candidates)


async def _bounded_body(response: aiohttp.ClientResponse) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise CallFailed(f"the response is larger than {MAX_RESPONSE_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _status_failure(status: int, raw: bytes) -> str:
    """A non-2xx answer as kube's REST client words it."""
    if status >= 500:
        text = raw[:256].decode("utf-8", "replace").strip()
        return f'an error on the server ("{text}") has prevented the request from succeeding'
    return f"the server responded with the status code {status} but did not return more information"


def go_client_error(method: str, url: str, exc: BaseException) -> str:
    """A failed call as Go's HTTP client words it (``Get "https://...": dial tcp 10.0.0.1:443:
    connect: connection refused``, ``... context deadline exceeded``)."""
    if isinstance(exc, TimeoutError):
        return f'{method} "{url}": context deadline exceeded'
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f'{method} "{url}": {_tls_reason(exc.certificate_error)}'
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f'{method} "{url}": dial tcp {exc.host}:{exc.port}: {_os_reason(exc.os_error)}'
    return f'{method} "{url}": {exc}'


def _tls_reason(error: Any) -> str:
    reason = str(getattr(error, "verify_message", "") or error)
    if "issuer" in reason or "self-signed" in reason or "self signed" in reason:
        reason = "certificate signed by unknown authority"
    return f"tls: failed to verify certificate: x509: {reason}"


def _os_reason(error: OSError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connect: connection refused"
    return str(error.strerror or error)


def _join_host(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


async def _addresses(
    objects: ObjectStore, cache: WatchCache | None, name: str, namespace: str, port_name: str
) -> list[tuple[str, int]]:
    """The ready addresses of the service's port ``port_name``: from its Endpoints, else its
    EndpointSlices, as ``cache`` holds them in memory (without one: as the store holds them)."""
    endpoints_rt = objects.registry.require("v1", "Endpoints")
    slices_rt = objects.registry.require("discovery.k8s.io/v1", "EndpointSlice")
    selector = f"{LABEL_SERVICE_NAME}={name}"
    if cache is not None:
        endpoints = cache.cached(endpoints_rt, namespace=namespace, name=name) or {}
    else:
        try:
            endpoints = await objects.get(endpoints_rt, namespace=namespace, name=name)
        except errors.NotFound:
            endpoints = {}
    out: list[tuple[str, int]] = []
    for subset in endpoints.get("subsets") or []:
        for entry in subset.get("ports") or []:
            if str(entry.get("name") or "") == port_name:
                out += [(str(a.get("ip")), int(entry["port"])) for a in subset.get("addresses") or [] if a.get("ip")]
    if out:
        return out
    if cache is not None:
        slices = await cache.list(slices_rt, namespace=namespace, label_selector=selector, resource_version="0")
    else:
        slices = await objects.list(slices_rt, namespace=namespace, label_selector=selector)
    for endpoint_slice in slices.items:
        for entry in endpoint_slice.get("ports") or []:
            if str(entry.get("name") or "") != port_name or entry.get("port") is None:
                continue
            for endpoint in endpoint_slice.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                out += [(str(address), int(entry["port"])) for address in endpoint.get("addresses") or []]
    return out
