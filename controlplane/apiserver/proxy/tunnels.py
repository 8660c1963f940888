"""The hub's end of the agents' tunnels: which cluster's agent is connected, and its streams.

An agent's WebSocket becomes a :class:`Tunnel` in the :class:`TunnelRegistry` under its cluster
name. A newer connection of the same cluster replaces the older one, whose WebSocket the hub
closes (1012, service restart) so that its agent reconnects instead of holding a socket the hub no
longer uses; the older tunnel's end never removes the newer one. A proxied request opens
a :class:`HubStream` on it: the OPEN frame goes out, and the tunnel's reader delivers the
agent's HEAD, DATA, END and ERROR frames to the stream's queue. The queue never holds more
than the flow-control window: the agent only sends what the hub has credited, and the hub
credits only what its client has taken. When the tunnel drops, every open stream ends with an
error naming the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable

from controlplane.apis import proxyframing as framing
from controlplane.apis.proxyframing import Frame, FrameKind, ProxyLimits

logger = logging.getLogger(__name__)

Send = Callable[[bytes], Awaitable[None]]
#: Closes the agent's WebSocket with a close code and a message.
Close = Callable[[int, bytes], Awaitable[object]]

#: The close code of a replaced tunnel: RFC 6455's 1012, "service restart" (the agent reconnects).
REPLACED_CLOSE_CODE = 1012
#: Its close message (at most 123 bytes, so without the cluster's name).
REPLACED_MESSAGE = b"a newer tunnel of this cluster replaced it; reconnect"


_FROM_AGENT = frozenset({
    FrameKind.HEAD, FrameKind.DATA, FrameKind.END, FrameKind.ERROR, FrameKind.MESSAGE, FrameKind.CLOSE, FrameKind.CREDIT,
})
_UPGRADED_ONLY = frozenset({FrameKind.MESSAGE, FrameKind.CLOSE, FrameKind.CREDIT})


class TooManyStreams(Exception):
    """The cluster's tunnel already carries ``max_streams`` proxied requests."""


class HubStream:
    """One proxied request as the hub sees it: the agent's frames, in order."""

    def __init__(self, tunnel: Tunnel, stream_id: int, *, upgraded: bool = False) -> None:
        self.tunnel = tunnel
        self.id = stream_id
        #: An upgraded connection (exec, attach, port-forward): MESSAGE frames both ways.
        self.upgraded = upgraded
        #: What the agent lets the hub send it (MESSAGE bytes), credited as the member takes them.
        self.send_credit = framing.Credit(tunnel.limits.window_bytes)
        self._frames: asyncio.Queue[Frame] = asyncio.Queue()
        #: DATA bytes received and not yet taken by the client; and the most ever held.
        self.queued_bytes = 0
        self.peak_queued_bytes = 0
        self.closed = False

    def deliver(self, frame: Frame) -> None:
        self.queued_bytes += framing.window_bytes(frame)
        self.peak_queued_bytes = max(self.peak_queued_bytes, self.queued_bytes)
        self._frames.put_nowait(frame)

    async def next_frame(self) -> Frame:
        frame = await self._frames.get()
        self.queued_bytes -= framing.window_bytes(frame)
        return frame

    async def credit(self, count: int) -> None:
        """Give the agent ``count`` bytes of window back. Once the tunnel is gone there is no one
        to credit: the stream's ERROR frame is already queued behind the data just relayed, and
        ends the client's response with a Status."""
        if count > 0 and not self.closed and self.tunnel.connected:
            with contextlib.suppress(ConnectionError):
                await self.tunnel.send(framing.credit_frame(self.id, count))

    async def close(self, *, cancel: bool) -> None:
        """Forget the stream; ``cancel`` tells the agent to stop the member request."""
        if self.closed:
            return
        self.closed = True
        self.tunnel.forget(self.id)
        if cancel and self.tunnel.connected:
            with contextlib.suppress(ConnectionError):
                await self.tunnel.send(Frame(FrameKind.CANCEL, self.id))


class Tunnel:
    """One agent's connection: sends frames, routes the agent's frames to their streams."""

    def __init__(self, cluster: str, send: Send, limits: ProxyLimits, *, close: Close | None = None) -> None:
        self.cluster = cluster
        self.limits = limits
        self._send = send
        self._close = close
        self._send_lock = asyncio.Lock()
        self._streams: dict[int, HubStream] = {}
        self._ids = itertools.count(1)
        self.connected = True

    def streams(self) -> list[HubStream]:
        """The open streams (their ``queued_bytes`` counters show what the hub holds)."""
        return list(self._streams.values())

    async def send(self, frame: Frame) -> None:
        if not self.connected:
            raise ConnectionResetError(f"cluster {self.cluster}'s agent disconnected")
        async with self._send_lock:
            await self._send(framing.encode(frame))

    def open_stream(self, *, upgraded: bool = False) -> HubStream:
        if len(self._streams) >= self.limits.max_streams:
            raise TooManyStreams(
                f"cluster {self.cluster}'s tunnel already carries {self.limits.max_streams} proxied requests"
            )
        stream = HubStream(self, next(self._ids) & 0xFFFFFFFF, upgraded=upgraded)
        self._streams[stream.id] = stream
        return stream

    def forget(self, stream_id: int) -> None:
        self._streams.pop(stream_id, None)

    def receive(self, message: bytes) -> None:
        """Route one frame from the agent; raises :class:`framing.FrameError` on garbage."""
        frame = framing.decode(message)
        if frame.kind not in _FROM_AGENT:
            raise framing.FrameError(f"an agent may not send {frame.kind.name} frames")
        stream = self._streams.get(frame.stream)
        if stream is None:
            return  # the client left; the CANCEL crossed this frame
        if frame.kind in _UPGRADED_ONLY and not stream.upgraded:
            raise framing.FrameError(f"{frame.kind.name} on stream {frame.stream}, which is not an upgraded connection")
        if frame.kind is FrameKind.CREDIT:
            stream.send_credit.add(framing.parse_credit(frame.payload))
            return
        if frame.kind is FrameKind.MESSAGE and len(frame.payload) > self.limits.max_message_bytes + 1:
            raise framing.FrameError(f"a message of {len(frame.payload)} bytes on stream {frame.stream}")
        if stream.queued_bytes + framing.window_bytes(frame) > self.limits.window_bytes:
            raise framing.FrameError(
                f"cluster {self.cluster}'s agent sent past the flow-control window on stream {frame.stream}"
            )
        stream.deliver(frame)

    def disconnect(self, reason: str) -> None:
        """The connection is gone: every open stream ends with ``reason``."""
        self.connected = False
        for stream in list(self._streams.values()):
            stream.deliver(framing.error_frame(stream.id, 503, reason))
        self._streams.clear()

    async def close(self, code: int, message: bytes) -> None:
        """Close the agent's WebSocket (its reader then ends and calls :meth:`TunnelRegistry.disconnect`)."""
        if self._close is not None:
            with contextlib.suppress(ConnectionError):
                await self._close(code, message)


class TunnelRegistry:
    """The connected agents' tunnels, by cluster name."""

    def __init__(self, limits: ProxyLimits | None = None) -> None:
        self.limits = limits or ProxyLimits()
        self._tunnels: dict[str, Tunnel] = {}
        #: The replaced tunnels' closes in progress (held so that they are not collected).
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, cluster: str) -> Tunnel | None:
        tunnel = self._tunnels.get(cluster)
        return tunnel if tunnel is not None and tunnel.connected else None

    def connect(self, cluster: str, send: Send, *, close: Close | None = None) -> Tunnel:
        """Register the cluster's new tunnel; an older one's streams end and its WebSocket is
        closed with :data:`REPLACED_CLOSE_CODE` (in the background: the new tunnel serves meanwhile)."""
        old = self._tunnels.get(cluster)
        tunnel = Tunnel(cluster, send, self.limits, close=close)
        self._tunnels[cluster] = tunnel
        if old is not None:
            old.disconnect(f"cluster {cluster}'s agent opened a new tunnel; this request was cut")
            task = asyncio.get_running_loop().create_task(old.close(REPLACED_CLOSE_CODE, REPLACED_MESSAGE))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            logger.info("cluster %s's agent opened a new proxy tunnel; closing the one it replaces", cluster)
        else:
            logger.info("cluster %s's agent connected its proxy tunnel", cluster)
        return tunnel

    def disconnect(self, tunnel: Tunnel, reason: str) -> None:
        """``tunnel`` is gone: its streams end, and it leaves the registry unless a newer tunnel
        of its cluster replaced it already (that one stays)."""
        tunnel.disconnect(reason)
        if self._tunnels.get(tunnel.cluster) is tunnel:
            del self._tunnels[tunnel.cluster]
            logger.info("cluster %s's agent proxy tunnel closed", tunnel.cluster)

    def close_all(self) -> None:
        for tunnel in list(self._tunnels.values()):
            self.disconnect(tunnel, f"cluster {tunnel.cluster}'s tunnel closed: the hub is shutting down")
