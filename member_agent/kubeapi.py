"""Plain-JSON access to a Kubernetes-compatible API (the hub, or the member cluster).

kubernetes_asyncio's ``ApiClient`` supplies what is hard to get right — kubeconfig and in-cluster
configuration, bearer tokens and their refresh, TLS — and this module issues the requests
through it but keeps objects as plain dicts: the agent handles arbitrary kinds (whatever a
Work carries), and its reports and caches are dicts anyway, so the typed models would only
cost CPU and memory. Watches are streamed here line by line so the informer can resume from
its last resourceVersion and relist on 410 (``Watch`` in kubernetes_asyncio turns objects into
typed models and retries a 410 only once).

:class:`KubeTransport` holds the verbs over three transport calls; :class:`KubeApi` is the HTTP
transport. In: an ``ApiClient``. Out: dict objects, and :class:`ApiError` subclasses for non-2xx answers
(the Kubernetes ``Status`` message preserved); a server that cannot be reached is an
:class:`~member_agent.reachability.Unreachable` in words, noted in the server's
:class:`~member_agent.reachability.Reachability`. Every request has a timeout.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient

from member_agent.apierrors import AlreadyExists as AlreadyExists
from member_agent.apierrors import ApiError as ApiError
from member_agent.apierrors import Conflict as Conflict
from member_agent.apierrors import Forbidden as Forbidden
from member_agent.apierrors import Gone as Gone
from member_agent.apierrors import NotFound as NotFound
from member_agent.apierrors import Unauthorized as Unauthorized
from member_agent.apierrors import Unavailable as Unavailable
from member_agent.apierrors import error_from_status as error_from_status
from member_agent.apierrors import is_retryable as is_retryable
from member_agent.discovery import DiscoveryCache, discovery_path
from member_agent.discovery import KindNotServed as KindNotServed
from member_agent.discovery import ResourceInfo as ResourceInfo
from member_agent.reachability import Reachability, Unreachable

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True, slots=True)
class Request:
    """One JSON request: what every verb of :class:`KubeTransport` comes down to."""

    method: str
    path: str
    query: Mapping[str, Any] = field(default_factory=dict)
    body: Any = None
    content_type: str = "application/json"
    #: None: the transport's default timeout.
    timeout: float | None = None


class KubeTransport(abc.ABC):
    """The verbs the agent speaks to a Kubernetes-compatible API, over three transport calls.

    A transport answers a JSON request (:meth:`_exchange`), a plain-text GET (:meth:`_text`) and a
    watch stream (:meth:`_events`); CRUD, server-side apply, paginated lists, discovery and the
    server's version are built on them here, once. :class:`KubeApi` sends them over HTTP; a hollow
    member's client (:class:`simulator.hollow.api.HollowKubeApi`) answers them in-process.
    """

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self.discovery = DiscoveryCache()
        #: Set once the agent knows it lost its cluster's leader Lease (:mod:`member_agent.electing`):
        #: from then on a write ends the task making it (``CancelledError``) instead of being sent.
        self.fenced = False

    @abc.abstractmethod
    async def _exchange(self, request: Request) -> dict[str, Any]:
        """The JSON answer to ``request``; an :class:`ApiError` for anything but a 2xx answer."""

    @abc.abstractmethod
    async def _text(self, request: Request) -> tuple[int, str]:
        """The HTTP status and body of a plain-text GET, whatever the status."""

    @abc.abstractmethod
    def _events(self, path: str, query: Mapping[str, Any], *, timeout_seconds: int) -> AsyncIterator[dict[str, Any]]:
        """The events of a watch request (``query`` carries ``watch``, ``resourceVersion`` and the
        rest of the watch parameters) until the server ends the stream."""

    @property
    @abc.abstractmethod
    def server(self) -> str:
        """The API server's address, for messages."""

    async def close(self) -> None:
        return None

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
    ) -> dict[str, Any]:
        if self.fenced and method != "GET":
            raise asyncio.CancelledError(f"{method} {path} not sent: this agent no longer leads its cluster")
        return await self._exchange(
            Request(method, path, query=query or {}, body=body, content_type=content_type, timeout=request_timeout)
        )

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("GET", path, query=query)

    async def get_text(
        self, path: str, *, query: Mapping[str, Any] | None = None, request_timeout: float | None = None
    ) -> tuple[int, str]:
        """GET a plain-text endpoint (``/readyz``, ``/livez``): its HTTP status and body, whatever
        the status; :class:`Unavailable` only when no answer came."""
        return await self._text(Request("GET", path, query=query or {}, timeout=request_timeout))

    async def create(self, collection_path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("POST", collection_path, body=dict(body))

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PUT", path, body=dict(body))

    async def apply(
        self, path: str, body: Mapping[str, Any], *, field_manager: str, force: bool
    ) -> dict[str, Any]:
        """Server-side apply (``PATCH`` as ``application/apply-patch+yaml``; JSON is valid YAML)."""
        query = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return await self.request("PATCH", path, query=query, body=dict(body), content_type=APPLY_PATCH)

    async def delete(self, path: str, *, propagation: str = "Background") -> dict[str, Any]:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        return await self.request("DELETE", path, body=body)

    async def list_all(
        self, path: str, *, query: Mapping[str, Any] | None = None, page: int = 500
    ) -> tuple[list[dict[str, Any]], str]:
        """Every item of a collection (paginated) and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        resource_version = await self.list_each(path, items.append, query=query, page=page)
        return items, resource_version

    async def list_each(
        self,
        path: str,
        each: Callable[[dict[str, Any]], None],
        *,
        query: Mapping[str, Any] | None = None,
        page: int = 500,
    ) -> str:
        """Hand every item of a collection to ``each``, a page at a time (so a caller that keeps
        a trimmed copy never holds more than one page of whole items); the list's resourceVersion."""
        params = dict(query or {})
        params["limit"] = page
        while True:
            answer = await self.get(path, query=params)
            for number, item in enumerate(answer.get("items") or (), 1):
                each(item)
                if number % page == 0:  # a server may ignore ``limit`` (an aggregated API can): take turns
                    await asyncio.sleep(0)
            meta = answer.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return str(meta.get("resourceVersion") or "")
            params["continue"] = token
            del answer

    def watch(
        self,
        path: str,
        *,
        resource_version: str,
        query: Mapping[str, Any] | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events (dicts with type and object) until the server ends the stream.

        An ERROR event is raised as the matching :class:`ApiError` (410 -> :class:`Gone`).
        """
        params = dict(query or {})
        params.update(
            {
                "watch": "true",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": timeout_seconds,
            }
        )
        return self._events(path, params, timeout_seconds=timeout_seconds)

    async def resource_info(self, api_version: str, kind: str) -> ResourceInfo:
        """Plural name and scope of a kind, from the server's discovery document (cached; a kind
        the server does not serve raises :class:`KindNotServed`, answered from memory during its
        back-off, see :mod:`member_agent.discovery`)."""
        known = self.discovery.cached(api_version, kind)
        if known is not None:
            return known
        try:
            document: dict[str, Any] | None = await self.get(discovery_path(api_version))
        except NotFound:
            document = None
        return self.discovery.learn(api_version, document, kind=kind)

    async def version(self) -> str | None:
        try:
            answer = await self.get("/version")
        except ApiError:
            return None
        version = answer.get("gitVersion")
        return str(version) if version else None


#: The read buffer kubernetes_asyncio gives its session: a watch event can hold a large object.
READ_BUFFER_BYTES = 2**21


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``/``HTTP_PROXY``, none for a
    host ``NO_PROXY`` lists), as client-go's ``ProxyFromEnvironment`` takes it."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.hostname is None or urllib.request.proxy_bypass(parsed.netloc):
        return None
    return urllib.request.getproxies_environment().get(parsed.scheme)


def without_netrc(client: ApiClient) -> ApiClient:
    """``client`` with a session that does not read ``~/.netrc``.

    kubernetes_asyncio opens its session trusting the environment, for the proxy variables; aiohttp
    then also looks every request's host up in the netrc file, on a worker thread (a thread hop
    per request), and refuses the request when an entry matches, next to the bearer token's
    ``Authorization`` header. client-go reads no netrc: the session here keeps the connector (TLS,
    pool) and takes the proxy from the environment once, unless the configuration names one."""
    rest = client.rest_client
    trusting: aiohttp.ClientSession = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(connector=trusting.connector, read_bufsize=READ_BUFFER_BYTES)
    trusting.detach()
    proxy = None if rest.proxy else environment_proxy(str(client.configuration.host))
    if proxy is not None:
        rest.proxy = proxy
    return client


class KubeApi(KubeTransport):
    """JSON requests against one API server through a kubernetes_asyncio ``ApiClient`` (its session
    made :func:`without_netrc`)."""

    def __init__(
        self, client: ApiClient, *, timeout: float = DEFAULT_TIMEOUT, reachability: Reachability | None = None
    ) -> None:
        super().__init__(timeout=timeout)
        self.client = without_netrc(client)
        #: Logs, once per change, whether the server answers (see :mod:`member_agent.reachability`).
        self.reachability = reachability if reachability is not None else Reachability("API server", self.server)

    def _unreachable(self, exc: BaseException) -> Unreachable:
        return self.reachability.failed(exc)

    async def close(self) -> None:
        await self.client.close()

    @property
    def server(self) -> str:
        """The API server's URL, as the client configuration names it."""
        return str(self.client.configuration.host)

    async def _send(
        self, request: Request, *, request_timeout: float | aiohttp.ClientTimeout | None = None
    ) -> aiohttp.ClientResponse:
        params = [(k, _query_value(v)) for k, v in request.query.items() if v is not None]
        if request_timeout is None:
            request_timeout = request.timeout if request.timeout is not None else self.timeout
        try:
            response: aiohttp.ClientResponse = await self.client.call_api(
                request.path,
                request.method,
                query_params=params,
                header_params={"Accept": "application/json", "Content-Type": request.content_type},
                body=request.body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=request_timeout,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise self._unreachable(exc) from exc
        self.reachability.answered()
        return response

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        """The whole body of ``response``, which is released; :class:`Unreachable` when it breaks off."""
        try:
            return await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._unreachable(exc) from exc
        finally:
            response.release()

    async def _exchange(self, request: Request) -> dict[str, Any]:
        method, path = request.method, request.path
        response = await self._send(request)
        data = await self._read(response)
        if not 200 <= response.status < 300:
            raise error_from_status(response.status, data)
        if not data:
            return {}
        try:
            parsed = json.loads(data)
        except ValueError as exc:
            raise ApiError(response.status, "BadResponse", f"{method} {path}: answer is not JSON") from exc
        return parsed if isinstance(parsed, dict) else {"items": parsed}

    async def _text(self, request: Request) -> tuple[int, str]:
        response = await self._send(request)
        data = await self._read(response)
        return response.status, data.decode("utf-8", errors="replace")

    async def _events(
        self, path: str, query: Mapping[str, Any], *, timeout_seconds: int
    ) -> AsyncIterator[dict[str, Any]]:
        # The server ends the stream after timeoutSeconds; the read timeout guards against a dead peer.
        client_timeout = aiohttp.ClientTimeout(
            total=None, connect=self.timeout, sock_read=timeout_seconds + 30
        )
        response = await self._send(Request("GET", path, query=query), request_timeout=client_timeout)
        try:
            if not 200 <= response.status < 300:
                raise error_from_status(response.status, await response.read())
            while True:
                try:
                    line = await response.content.readline()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    raise self._unreachable(exc) from exc
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError as exc:
                    raise Unavailable(0, "BadResponse", f"watch {path}: malformed event") from exc
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    code = int(obj.get("code") or 500)
                    raise error_from_status(code, json.dumps(obj).encode())
                yield event
        finally:
            response.release()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


