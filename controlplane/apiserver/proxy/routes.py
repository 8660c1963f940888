"""The cluster proxy's HTTP side on the hub: the agents' tunnel endpoint and the proxy route.

- ``GET /apis/cluster.gpufed.io/v1alpha1/clusters/<name>/tunnel`` (WebSocket): only cluster
  ``<name>``'s agent credential may open it (the authorizer sees ``get clusters/tunnel``, and
  this handler checks the credential's cluster again).
- ``* /apis/cluster.gpufed.io/v1alpha1/clusters/<name>/proxy/<member path>``: the authorizer
  has already checked the caller's right on ``clusters/proxy`` for ``<name>`` (verb from the
  HTTP method, as kube does for ``pods/proxy``; ``create`` for an upgrade, as for
  ``pods/exec``); this handler forwards the request over the tunnel and streams the member's
  answer back, crediting the agent as the client reads. WebSocket upgrades (exec, attach,
  port-forward) are relayed message by message (:mod:`.upgrades`); a SPDY upgrade only gets
  the member's refusal (or the hub's 400).

The hub never opens a connection toward a member: a cluster whose agent has no tunnel open
is answered 503.
"""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import WSMsgType, web

from controlplane.apis import proxyframing as framing
from controlplane.apis.constants import CLUSTER_GROUP, VERSION
from controlplane.apis.proxyframing import FrameKind, ProxyRequest
from controlplane.apiserver import errors
from controlplane.apiserver.app import OBJECT_STORE, USER
from controlplane.apiserver.identity import AUTHENTICATED, UNAUTHENTICATED, Role, UserInfo
from controlplane.apiserver.proxy import upgrades
from controlplane.apiserver.proxy.metrics import ProxyMetrics
from controlplane.apiserver.proxy.tunnels import HubStream, TooManyStreams, TunnelRegistry
from controlplane.apiserver.queryparams import watch_asked
from controlplane.apiserver.requeststate import REQUEST_INFO
from controlplane.apiserver.routing import is_upgrade

logger = logging.getLogger(__name__)

CLUSTERS_PATH = f"/apis/{CLUSTER_GROUP}/{VERSION}/clusters"
#: Largest WebSocket message: a request body (the API's body limit) plus its header.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
HEARTBEAT_SECONDS = 20.0



def user_groups(user: UserInfo) -> list[str]:
    """The groups the member sees for an impersonated hub user: its token role's group
    (``gpufed:admins``, ``gpufed:viewers``, ``gpufed:users``), then a user's own groups, without
    ``system:authenticated`` and ``system:unauthenticated`` (Karmada's ``SkipGroup``: the member's
    impersonation adds the first itself)."""
    own = user.user_groups if user.role is Role.USER else ()
    return [g for g in dict.fromkeys([f"gpufed:{user.role.value}s", *own]) if g not in (AUTHENTICATED, UNAUTHENTICATED)]


def proxy_request(
    method: str, path: str, headers: list[tuple[str, str]], user: UserInfo, *, protocols: list[str] | None = None
) -> ProxyRequest:
    """A request for a member's API as ``user``: its name, groups (:func:`user_groups`), uid and
    extra, which the agent impersonates at the member as Karmada's cluster proxy does."""
    return ProxyRequest(
        method, path, headers, user=user.name, groups=user_groups(user), uid=user.uid,
        extra={key: list(values) for key, values in user.extra}, protocols=protocols or [],
    )


class ProxyEndpoints:
    def __init__(self, registry: TunnelRegistry | None = None, *, metrics: ProxyMetrics | None = None) -> None:
        self.tunnels = registry or TunnelRegistry()
        self.metrics = metrics
        self._sockets: set[web.WebSocketResponse] = set()

    async def close(self) -> None:
        """Close every agent's tunnel (the hub is stopping); their open streams end with an error."""
        self.tunnels.close_all()
        for ws in list(self._sockets):
            await ws.close(message=b"the hub is shutting down")

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get(CLUSTERS_PATH + "/{name}/tunnel", self.tunnel),
            web.route("*", CLUSTERS_PATH + "/{name}/proxy", self.proxy),
            web.route("*", CLUSTERS_PATH + "/{name}/proxy/{tail:.*}", self.proxy),
        ]

    async def tunnel(self, request: web.Request) -> web.StreamResponse:
        cluster = request.match_info["name"]
        user = request[USER]
        if user.role is not Role.AGENT or user.cluster != cluster:
            raise errors.Forbidden(
                f'only cluster {cluster}\'s agent may open its proxy tunnel; User "{user.name}" is not that agent'
            )
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT_SECONDS, max_msg_size=MAX_MESSAGE_BYTES)
        await ws.prepare(request)
        self._sockets.add(ws)
        tunnel = self.tunnels.connect(cluster, ws.send_bytes, close=lambda code, message: ws.close(code=code, message=message))
        if self.metrics is not None:
            self.metrics.connected(cluster, up=True)
        reason = f"cluster {cluster}'s agent disconnected"
        try:
            async for message in ws:
                if message.type is not WSMsgType.BINARY:
                    continue
                try:
                    tunnel.receive(message.data)
                except framing.FrameError as exc:
                    reason = f"cluster {cluster}'s agent broke the tunnel protocol: {exc}"
                    logger.warning("%s", reason)
                    await ws.close(message=b"protocol error")
                    break
        finally:
            self._sockets.discard(ws)
            self.tunnels.disconnect(tunnel, reason)
            if self.metrics is not None and self.tunnels.get(cluster) is None:
                self.metrics.connected(cluster, up=False)
        return ws

    async def proxy(self, request: web.Request) -> web.StreamResponse:
        """The proxied request, counted by cluster, verb and code."""
        code = 500
        # A name that is no cluster is counted without it, so callers cannot grow the label set.
        connected = self.tunnels.get(request.match_info["name"]) is not None
        try:
            response = await self._proxy(request)
            code = response.status
            return response
        except errors.ApiError as exc:
            code = exc.code
            raise
        finally:
            if self.metrics is not None:
                info = request.get(REQUEST_INFO)
                verb = info.verb if info is not None and info.verb else request.method.lower()
                self.metrics.request(request.match_info["name"] if connected or code != 404 else "", verb, code)

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        cluster = request.match_info["name"]
        tunnel = self.tunnels.get(cluster)
        if tunnel is None:
            objects = request.app[OBJECT_STORE]
            # An unknown cluster is a 404, as for any other Cluster subresource.
            await objects.get(objects.registry.require(f"{CLUSTER_GROUP}/{VERSION}", "Cluster"), name=cluster)
            raise errors.ServiceUnavailable(
                f"cluster {cluster}'s agent is not connected: the hub reaches a member only through the "
                "tunnel its agent opens (the agent needs --enable-proxy)",
                retry_after_seconds=5,
            )
        # A SPDY upgrade is sent as a plain request: only the member's refusal is relayed.
        upgrade = is_upgrade(request.headers) and upgrades.is_websocket(request)
        spdy = is_upgrade(request.headers) and not upgrade
        protocols = upgrades.offered_protocols(request) if upgrade else []
        drop = framing.DROPPED_REQUEST_HEADERS | (framing.WEBSOCKET_HANDSHAKE_HEADERS if upgrade else frozenset())
        headers = framing.forwarded_headers(list(request.headers.items()), drop=drop)
        if framing.header_bytes(headers) > tunnel.limits.max_header_bytes:
            error = errors.BadRequest(
                f"the request headers exceed the proxy's limit of {tunnel.limits.max_header_bytes} bytes"
            )
            error.code = 431
            raise error
        body = b"" if upgrade or spdy else await request.read()
        user = request[USER]
        # The member path as the client encoded it (not decoded and re-encoded).
        raw_path = request.rel_url.raw_path
        marker = f"/{cluster}/proxy"
        tail = raw_path[raw_path.index(marker) + len(marker):]
        query = request.rel_url.raw_query_string
        path = (tail if tail.startswith("/") else "/" + tail) + (f"?{query}" if query else "")
        if spdy and not upgrades.asks_member_of_spdy(request.method, path):
            raise upgrades.spdy_refused(request)
        proxied = proxy_request(request.method, path, headers, user, protocols=protocols)
        try:
            stream = tunnel.open_stream(upgraded=upgrade)
        except TooManyStreams as exc:
            raise errors.TooManyRequests(f"{exc}; retry when some finish", retry_after_seconds=1) from None
        finished = False
        if self.metrics is not None:
            self.metrics.open_streams.labels(cluster).inc()
            self.metrics.relayed(cluster, len(body), to_member=True)
        try:
            try:
                kind = FrameKind.UPGRADE if upgrade else FrameKind.OPEN
                await stream.tunnel.send(framing.open_frame(stream.id, proxied, body, kind=kind))
            except ConnectionResetError:
                raise errors.ServiceUnavailable(
                    f"cluster {cluster}'s agent disconnected", retry_after_seconds=5
                ) from None
            try:
                async with asyncio.timeout(tunnel.limits.head_timeout_seconds):
                    first = await stream.next_frame()
            except TimeoutError:
                raise errors.Timeout(
                    f"cluster {cluster}'s agent did not answer within {tunnel.limits.head_timeout_seconds:g}s"
                ) from None
            if first.kind is FrameKind.ERROR:
                code, message = framing.parse_error(first.payload)
                raise _status_error(code, message)
            if first.kind is not FrameKind.HEAD:
                raise errors.ServiceUnavailable(f"cluster {cluster}'s agent sent a response without its head")
            status, head = framing.parse_head(first.payload)
            if upgrade and status == 101:
                response, finished = await upgrades.relay_websocket(request, stream, head)
            elif spdy and status < 400:
                raise upgrades.spdy_refused(request)
            else:
                response, finished = await _relay(request, stream, status, head, self.metrics)
            return response
        finally:
            if self.metrics is not None:
                self.metrics.open_streams.labels(cluster).dec()
            await stream.close(cancel=not finished)


async def _relay(
    request: web.Request, stream: HubStream, status: int, headers: list[tuple[str, str]],
    metrics: ProxyMetrics | None,
) -> tuple[web.StreamResponse, bool]:
    """Copy the member's answer to the client; and whether it was complete."""
    response = web.StreamResponse(status=status)
    for name, value in framing.forwarded_headers(headers, drop=framing.DROPPED_RESPONSE_HEADERS):
        response.headers.add(name, value)
    await response.prepare(request)
    while True:
        frame = await stream.next_frame()
        if frame.kind is FrameKind.DATA:
            try:
                # Waits while the client is slow (backpressure), but not for ever.
                async with asyncio.timeout(stream.tunnel.limits.stall_timeout_seconds):
                    await response.write(frame.payload)
            except TimeoutError:
                logger.info(
                    "proxied stream %s to cluster %s ended: its client took nothing for %gs",
                    request.path, stream.tunnel.cluster, stream.tunnel.limits.stall_timeout_seconds,
                )
                if request.transport is not None:
                    request.transport.close()
                return response, False
            await stream.credit(len(frame.payload))
            if metrics is not None:
                metrics.relayed(stream.tunnel.cluster, len(frame.payload), to_member=False)
        elif frame.kind is FrameKind.END:
            await response.write_eof()
            return response, True
        elif frame.kind is FrameKind.ERROR:
            _, message = framing.parse_error(frame.payload)
            logger.info("proxied stream %s to cluster %s ended: %s", request.path, stream.tunnel.cluster, message)
            if watch_asked(request.query) and "json" in response.content_type:
                status_error = errors.ServiceUnavailable(message)
                event = {"type": "ERROR", "object": status_error.to_status()}
                await response.write(json.dumps(event).encode() + b"\n")
                await response.write_eof()
                return response, True
            # The head is gone already: end the connection without a last chunk, so the
            # client sees an incomplete response rather than a complete one.
            if request.transport is not None:
                request.transport.close()
            return response, True


def _status_error(code: int, message: str) -> errors.ApiError:
    error: errors.ApiError
    if code == 504:
        error = errors.Timeout(message)
    elif code == 502:
        error = errors.ApiError(message)
        error.code = 502
    else:
        error = errors.ServiceUnavailable(message, retry_after_seconds=5)
    return error
