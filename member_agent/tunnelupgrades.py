"""The agent's side of upgraded connections through the cluster proxy (exec, attach, port-forward).

For an UPGRADE frame the agent opens a WebSocket to the member path, offering the client's
subprotocols, with the same identity as any proxied request (``Impersonate-*`` headers). The
member's answer goes back as HEAD: 101 with its chosen subprotocol, or its refusal (status,
headers and Status body, as DATA and END; :mod:`controlplane.wsdial` keeps that body). Then messages flow both ways as MESSAGE frames: the
member's to the hub while the hub has credit for them, the hub's to the member, each credited
back (CREDIT agent -> hub) once the member took it. A CLOSE from the hub closes the member's
WebSocket with its code; the member closing sends CLOSE to the hub.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import aiohttp
from multidict import CIMultiDict

from controlplane.apis import proxyframing as framing
from controlplane.apis.proxyframing import Credit, Frame, FrameKind, ProxyLimits, ProxyRequest
from controlplane.wsdial import HandshakeRefused, dial

Send = Callable[[Frame], Awaitable[None]]
Hold = Callable[[int], None]


class AgentStream(Credit):
    """One proxied request at the agent: its credit toward the hub, its task, and (upgraded
    streams) the hub's messages not yet given to the member."""

    def __init__(self, window: int, *, upgraded: bool = False) -> None:
        super().__init__(window)
        self.task: asyncio.Task[None] | None = None
        self.inbound: asyncio.Queue[Frame] | None = asyncio.Queue() if upgraded else None
        self.inbound_bytes = 0

    def accept(self, frame: Frame, limits: ProxyLimits) -> None:
        """Queue a MESSAGE or CLOSE from the hub; a FrameError past the window or message size."""
        if self.inbound is None:
            raise framing.FrameError(f"{frame.kind.name} on a stream that is not an upgraded connection")
        size = framing.window_bytes(frame)
        if size > limits.max_message_bytes or self.inbound_bytes + size > limits.window_bytes:
            raise framing.FrameError("the hub sent past an upgraded stream's flow-control window")
        self.inbound_bytes += size
        self.inbound.put_nowait(frame)

    async def next_inbound(self) -> Frame:
        assert self.inbound is not None
        frame = await self.inbound.get()
        self.inbound_bytes -= framing.window_bytes(frame)
        return frame


async def serve_upgrade(
    *,
    cluster: str,
    session: aiohttp.ClientSession,
    url: str,
    request: ProxyRequest,
    headers: CIMultiDict[str],
    stream_id: int,
    stream: AgentStream,
    limits: ProxyLimits,
    send: Send,
    hold: Hold,
) -> None:
    """Dial the member's WebSocket and relay until either side closes."""
    try:
        async with dial(
            session, url, method=request.method, protocols=request.protocols, headers=headers,
            max_msg_size=limits.max_message_bytes, autoping=True,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=10.0),
        ) as ws:
            chosen = [("Sec-WebSocket-Protocol", ws.protocol)] if ws.protocol else []
            await send(framing.head_frame(stream_id, 101, chosen))
            feeder = asyncio.create_task(_hub_to_member(ws, stream_id, stream, send))
            try:
                await _member_to_hub(ws, stream_id, stream, send, hold)
            finally:
                feeder.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await feeder
            await send(framing.close_frame(stream_id, framing.sendable_close_code(ws.close_code)))
    except aiohttp.WSServerHandshakeError as exc:
        await send(framing.error_frame(
            stream_id, 502, f"cluster {cluster}'s API did not upgrade {request.path}: {exc.status} {exc.message}"
        ))
    except HandshakeRefused as refused:
        # The member's own answer (e.g. its RBAC's 403 for the impersonated user) goes back as is.
        await send(framing.head_frame(stream_id, refused.status, refused.headers))
        for start in range(0, len(refused.body), limits.chunk_bytes):
            chunk = refused.body[start:start + limits.chunk_bytes]
            await stream.take(len(chunk))
            await send(Frame(FrameKind.DATA, stream_id, chunk))
        await send(Frame(FrameKind.END, stream_id))


async def _member_to_hub(
    ws: aiohttp.ClientWebSocketResponse, stream_id: int, credit: Credit, send: Send, hold: Hold
) -> None:
    async for message in ws:
        if message.type is aiohttp.WSMsgType.BINARY:
            data, text = bytes(message.data), False
        elif message.type is aiohttp.WSMsgType.TEXT:
            data, text = str(message.data).encode(), True
        else:
            continue
        hold(len(data))
        try:
            await credit.take(len(data))
            await send(framing.message_frame(stream_id, data, text=text))
        finally:
            hold(-len(data))


async def _hub_to_member(ws: aiohttp.ClientWebSocketResponse, stream_id: int, stream: AgentStream, send: Send) -> None:
    while True:
        frame = await stream.next_inbound()
        if frame.kind is FrameKind.CLOSE:
            code, reason = framing.parse_close(frame.payload)
            await ws.close(code=framing.sendable_close_code(code), message=reason.encode())
            return
        data, text = framing.parse_message(frame.payload)
        await (ws.send_str(data.decode(errors="replace")) if text else ws.send_bytes(data))
        await send(framing.credit_frame(stream_id, len(data)))
