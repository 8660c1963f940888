"""The agent's end of the cluster proxy: a tunnel it keeps open to the hub.

The agent dials the hub (HTTPS, its own bearer token) and opens a WebSocket on
``/apis/cluster.gpufed.io/v1alpha1/clusters/<name>/tunnel``; the hub never connects to the
member. Each OPEN frame the hub sends is one request to perform against the member's API
with the agent's member client; the answer streams back as HEAD, DATA and END frames
(:mod:`controlplane.apis.proxyframing`). A stream sends DATA only while the hub has credited it,
so a client that reads slowly stalls the member read instead of growing a buffer:
:attr:`AgentTunnel.buffered_bytes` (read from the member, not yet sent) never exceeds one
chunk per stream, and :attr:`AgentTunnel.peak_buffered_bytes` records the most ever held.
An UPGRADE frame (exec, attach, port-forward) opens a WebSocket to the member instead and
relays its messages both ways (:mod:`member_agent.tunnelupgrades`).

With ``identity="impersonate"`` the member sees the hub user (``Impersonate-User``,
``Impersonate-Group``, ``Impersonate-Uid`` and ``Impersonate-Extra-*``, as Karmada's proxy), so the
member's RBAC limits what each user may do through the proxy; the agent's member identity then
needs the ``impersonate`` verb on users, groups, and for users that have them on uids and
userextras. With
``identity="agent"`` requests run with the agent's own member rights.

A lost connection is re-established with exponential backoff (:class:`ReconnectBackoff`: from
``--proxy-reconnect-initial-backoff``, doubling up to ``--proxy-reconnect-max-backoff``, with
jitter; a tunnel that stayed up resets it); streams open at that moment are cancelled (the hub
ends them with an error naming the cluster). A tunnel the hub ends in the ordinary way -- a close
frame saying done, going away or restarting, or the connection ended (the hub restarted, an idle
timeout between the two) -- is one INFO line; one that breaks (no answer to the heartbeat, a
failed read) is the hub's :class:`Reachability` failure, a WARNING once while it lasts; any
other close code a WARNING naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Iterator
from typing import Literal

import aiohttp
from aiohttp import WSCloseCode
from kubernetes_asyncio.client import ApiClient
from multidict import CIMultiDict
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controlplane.apis import proxyframing as framing
from controlplane.apis.impersonation import impersonation_headers
from controlplane.apis.proxyframing import Frame, FrameKind, ProxyLimits, ProxyRequest
from member_agent.reachability import Reachability
from member_agent.tunnelupgrades import AgentStream, serve_upgrade

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
HEARTBEAT_SECONDS = 20.0
CONNECT_TIMEOUT_SECONDS = 10.0
MIN_BACKOFF = 0.5
MAX_BACKOFF = 30.0
#: A tunnel that stayed up this long resets the backoff.
STABLE_SECONDS = 10.0

Identity = Literal["impersonate", "agent"]

#: The close codes of a tunnel ended in the ordinary way: done, going away (the hub shuts down or
#: restarts), restarting, try again later.
NORMAL_CLOSE_CODES: frozenset[int] = frozenset({
    WSCloseCode.OK, WSCloseCode.GOING_AWAY, WSCloseCode.SERVICE_RESTART, WSCloseCode.TRY_AGAIN_LATER,
})


def tunnel_end(ws: aiohttp.ClientWebSocketResponse) -> BaseException | str | None:
    """How the tunnel ``ws`` ended: the error that broke it (the hub stopped answering the
    heartbeat, reading failed), else the close code the hub sent (None: the hub ended the
    connection without one -- a restart, an idle timeout; aiohttp cannot tell a FIN from a reset,
    and fails only its own close frame on the connection already gone)."""
    exc = ws.exception()
    if isinstance(exc, aiohttp.ClientConnectionResetError):
        return None
    if exc is not None:
        return exc
    if ws.close_code == WSCloseCode.ABNORMAL_CLOSURE:
        return aiohttp.ServerDisconnectedError()
    return None if ws.close_code is None else str(int(ws.close_code))


class ReconnectBackoff:
    """The pauses between reconnects: ``initial`` seconds, doubling up to ``maximum``, each
    stretched by up to half again at random (so a hub restart is not met by every agent at once)."""

    def __init__(self, initial: float = MIN_BACKOFF, maximum: float = MAX_BACKOFF) -> None:
        if not 0 < initial <= maximum:
            raise ValueError(f"the reconnect backoff needs 0 < initial ({initial}) <= maximum ({maximum})")
        self.initial = initial
        self.maximum = maximum
        #: The pause before jitter that the next reconnect waits.
        self.base = initial

    def next_delay(self, *, stable: bool) -> float:
        """The pause before the next reconnect; ``stable``: the last connection stayed up long
        enough to start again from ``initial``."""
        if stable:
            self.base = self.initial
        delay = self.base * (1 + random.random() / 2)
        self.base = min(self.base * 2, self.maximum)
        return delay


class AgentTunnel:
    """``await tunnel.run()`` until cancelled."""

    def __init__(
        self,
        *,
        cluster: str,
        hub: ApiClient,
        member: ApiClient,
        identity: Identity = "impersonate",
        limits: ProxyLimits | None = None,
        backoff: ReconnectBackoff | None = None,
        reachability: Reachability | None = None,
    ) -> None:
        self.cluster = cluster
        #: Where a failure to reach the hub is logged once (see :mod:`member_agent.reachability`).
        self.reachability = reachability or Reachability("hub", str(hub.configuration.host))
        self.hub = hub
        self.member = member
        self.identity = identity
        self.limits = limits or ProxyLimits()
        self.backoff = backoff or ReconnectBackoff()
        self.connected = asyncio.Event()
        #: Tunnels opened so far (a reconnect adds one).
        self.connections = 0
        self.buffered_bytes = 0
        self.peak_buffered_bytes = 0
        self._streams: dict[int, AgentStream] = {}
        self._send_lock = asyncio.Lock()
        #: Set by :meth:`fence`: this agent no longer leads its cluster, and serves no stream.
        self.fenced = False

    def stream_credits(self) -> list[int]:
        """The credit left to each open stream (0 or little: it waits for its client)."""
        return [stream.credit for stream in self._streams.values()]

    @property
    def url(self) -> str:
        host = str(self.hub.configuration.host).rstrip("/")
        return f"{host}/apis/cluster.gpufed.io/v1alpha1/clusters/{self.cluster}/tunnel"

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self._connect_once()
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                error = self.reachability.failed(exc)
                logger.debug("the proxy tunnel of cluster %s cannot reach the hub: %s", self.cluster, error)
            await asyncio.sleep(self.backoff.next_delay(stable=loop.time() - started > STABLE_SECONDS))

    async def _connect_once(self) -> None:
        headers: dict[str, str] = {}
        await self.hub.update_params_for_auth(headers, [], ["BearerToken"])
        session: aiohttp.ClientSession = self.hub.rest_client.pool_manager
        async with session.ws_connect(
            self.url, headers=headers, heartbeat=HEARTBEAT_SECONDS, max_msg_size=MAX_MESSAGE_BYTES,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=CONNECT_TIMEOUT_SECONDS),
        ) as ws:
            self.connections += 1
            self.connected.set()
            self.reachability.answered()
            logger.info("cluster %s's proxy tunnel to the hub is open", self.cluster)
            try:
                async for message in ws:
                    if message.type is not aiohttp.WSMsgType.BINARY:
                        continue
                    try:
                        self._receive(ws, message.data)
                    except framing.FrameError as exc:
                        logger.warning("the hub broke the tunnel protocol: %s; reconnecting", exc)
                        return
            finally:
                self.connected.clear()
                await self._cancel_all()
            end = tunnel_end(ws)
            if isinstance(end, BaseException):
                raise end  # the hub's Reachability words it, once while it lasts
            if end is None:
                logger.info("the hub ended the proxy tunnel of cluster %s; reconnecting", self.cluster)
            elif int(end) in NORMAL_CLOSE_CODES:
                logger.info("the hub closed the proxy tunnel of cluster %s (code %s); reconnecting", self.cluster, end)
            else:
                logger.warning("the hub closed the proxy tunnel of cluster %s with code %s; reconnecting", self.cluster, end)

    def fence(self) -> None:
        """Cancel every stream at once and serve no frame from now on: the agent has lost its
        cluster's leadership, and a stream in flight would go on acting on the member."""
        self.fenced = True
        for stream in self._streams.values():
            if stream.task is not None:
                stream.task.cancel()

    def _receive(self, ws: aiohttp.ClientWebSocketResponse, message: bytes) -> None:
        if self.fenced:
            return
        frame = framing.decode(message)
        stream = self._streams.get(frame.stream)
        if frame.kind in (FrameKind.OPEN, FrameKind.UPGRADE):
            request, body = framing.parse_open(frame.payload)
            if stream is not None or len(self._streams) >= self.limits.max_streams:
                raise framing.FrameError(f"stream {frame.stream} cannot be opened (already open or too many)")
            upgraded = frame.kind is FrameKind.UPGRADE
            stream = AgentStream(self.limits.window_bytes, upgraded=upgraded)
            self._streams[frame.stream] = stream
            serve = self._serve_upgrade(ws, frame.stream, stream, request) if upgraded else self._serve(
                ws, frame.stream, stream, request, body
            )
            stream.task = asyncio.create_task(serve)
        elif frame.kind in (FrameKind.MESSAGE, FrameKind.CLOSE):
            if stream is not None:
                stream.accept(frame, self.limits)
        elif frame.kind is FrameKind.CREDIT:
            if stream is not None:
                stream.add(framing.parse_credit(frame.payload))
        elif frame.kind is FrameKind.CANCEL:
            if stream is not None and stream.task is not None:
                stream.task.cancel()
        else:
            raise framing.FrameError(f"the hub may not send {frame.kind.name} frames")

    async def _cancel_all(self) -> None:
        tasks = [s.task for s in self._streams.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._streams.clear()

    async def _send(self, ws: aiohttp.ClientWebSocketResponse, frame: Frame) -> None:
        async with self._send_lock:
            await ws.send_bytes(framing.encode(frame))

    def member_headers(self, request: ProxyRequest) -> CIMultiDict[str]:
        """The headers sent to the member: the caller's, minus credentials, plus the identity."""
        headers: CIMultiDict[str] = CIMultiDict(
            framing.forwarded_headers(request.headers, drop=framing.DROPPED_REQUEST_HEADERS)
        )
        if self.identity == "impersonate":
            for name, value in impersonation_headers(
                request.user, groups=request.groups, uid=request.uid, extra=request.extra
            ):
                headers.add(name, value)
        return headers

    async def _authorized_headers(self, request: ProxyRequest, *, upgrade: bool) -> CIMultiDict[str]:
        headers = self.member_headers(request)
        if upgrade:
            for name in framing.WEBSOCKET_HANDSHAKE_HEADERS:
                headers.popall(name, None)
        auth: dict[str, str] = {}
        await self.member.update_params_for_auth(auth, [], ["BearerToken"])
        headers.update(auth)
        return headers

    async def _guarded(
        self, ws: aiohttp.ClientWebSocketResponse, stream_id: int, work: Awaitable[None], failure: str
    ) -> None:
        """Run one stream's ``work``; a failure to reach the member ends the stream with ERROR."""
        try:
            await work
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                await self._send(ws, framing.error_frame(stream_id, 502, f"cluster {self.cluster}'s API {failure}: {exc}"))
        finally:
            self._streams.pop(stream_id, None)

    async def _serve_upgrade(
        self, ws: aiohttp.ClientWebSocketResponse, stream_id: int, stream: AgentStream, request: ProxyRequest
    ) -> None:
        async def send(frame: Frame) -> None:
            await self._send(ws, frame)

        work = serve_upgrade(
            cluster=self.cluster, session=self.member.rest_client.pool_manager,
            url=str(self.member.configuration.host).rstrip("/") + request.path, request=request,
            headers=await self._authorized_headers(request, upgrade=True), stream_id=stream_id, stream=stream,
            limits=self.limits, send=send, hold=self._hold,
        )
        await self._guarded(ws, stream_id, work, "did not accept the proxied connection")

    async def _serve(
        self, ws: aiohttp.ClientWebSocketResponse, stream_id: int, stream: AgentStream, request: ProxyRequest, body: bytes
    ) -> None:
        headers = await self._authorized_headers(request, upgrade=False)
        work = self._relay(ws, stream_id, stream, request, headers, body)
        await self._guarded(ws, stream_id, work, "did not answer the proxied request")

    async def _relay(
        self, ws: aiohttp.ClientWebSocketResponse, stream_id: int, stream: AgentStream, request: ProxyRequest,
        headers: CIMultiDict[str], body: bytes,
    ) -> None:
        url = str(self.member.configuration.host).rstrip("/") + request.path
        session: aiohttp.ClientSession = self.member.rest_client.pool_manager
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_SECONDS, sock_connect=CONNECT_TIMEOUT_SECONDS)
        async with session.request(
            request.method, url, headers=headers, data=body or None, timeout=timeout, allow_redirects=False
        ) as response:
            await self._send(ws, framing.head_frame(stream_id, response.status, list(response.headers.items())))
            while chunk := await response.content.read(self.limits.chunk_bytes):
                self._hold(len(chunk))
                try:
                    await stream.take(len(chunk))
                    await self._send(ws, Frame(FrameKind.DATA, stream_id, chunk))
                finally:
                    self._hold(-len(chunk))
            await self._send(ws, Frame(FrameKind.END, stream_id))

    def _hold(self, count: int) -> None:
        self.buffered_bytes += count
        self.peak_buffered_bytes = max(self.peak_buffered_bytes, self.buffered_bytes)


class TunnelCollector(Collector):
    """The tunnel's state as Prometheus gauges: connected, connections opened, open streams,
    bytes read from the member and not yet sent (now and at most)."""

    def __init__(self, tunnel: AgentTunnel, *, prefix: str) -> None:
        self._tunnel = tunnel
        self._prefix = prefix

    def collect(self) -> Iterator[Metric]:
        tunnel = self._tunnel
        values = (
            ("proxy_tunnel_connected", "1 while the proxy tunnel to the hub is open.", float(tunnel.connected.is_set())),
            ("proxy_tunnel_connections", "Proxy tunnels opened to the hub (each reconnect adds one).", tunnel.connections),
            ("proxy_streams", "Proxied requests in progress.", len(tunnel.stream_credits())),
            ("proxy_buffered_bytes", "Member response bytes read and not yet sent to the hub.", tunnel.buffered_bytes),
            ("proxy_buffered_bytes_peak", "The most member response bytes ever held at once.", tunnel.peak_buffered_bytes),
        )
        for name, help_text, value in values:
            family = GaugeMetricFamily(f"{self._prefix}_{name}", help_text, labels=["cluster"])
            family.add_metric([tunnel.cluster], float(value))
            yield family
