"""Upgraded connections through the cluster proxy: ``kubectl exec``, ``attach`` and ``port-forward``.

The client's WebSocket handshake on the proxy path becomes an UPGRADE frame offering the
client's subprotocols (``v5.channel.k8s.io``, ``v4.channel.k8s.io``, ``v2.portforward.k8s.io``
...). The agent opens a WebSocket to the member with the same offer; only when the member
accepted (HEAD 101 with its chosen subprotocol) does the hub accept the client's handshake with
that subprotocol, so both ends speak what the member chose. A member's refusal (403, 404, 400)
reaches the client as the member's own Status.

On kube's channel protocols (exec, attach) the member's first messages then wait until the
client sent one (kubectl does once its streams exist: stdin, a terminal size) or for
``stream_setup_seconds``: the member was reached before the client's handshake was answered, so
a quick command's output, exit status and close are already there, and kubectl (client-go's
WebSocket executor) starts reading before it registers its streams; what it reads first is
dropped ("Unknown stream id 1, discarding message") and a close before the last stream fails
the exec ("closed all streams"). Through kube-apiserver the kubelet is reached only after the
client's handshake, which leaves kubectl that time.

Then every WebSocket message is one MESSAGE frame, each direction under its own credit window:
the hub forwards a client message only while the agent has credit for it, and credits the agent
only once the client took a message. The stream ends when either side closes (the close code
is passed on), when nothing moved either way for ``idle_timeout_seconds``, or when the tunnel
drops: the client then gets, on the channel protocols (not for a port-forward, whose channel 3
is a port's), a Status on the error channel (3) naming the cluster, as kube reports a failed
stream, and a close with code 1011.

SPDY upgrades are not carried. kubectl falls back to one whenever its WebSocket upgrade is
refused, and shows what the SPDY attempt gets: so the hub sends a SPDY upgrade of a pod's
``exec``, ``attach`` or ``portforward`` to the member without its upgrade headers (no body),
and a member's refusal (its Status: ``403``, ``404``, ``400`` ...) reaches the client as
kube-apiserver would give it; any other answer, or any other SPDY upgrade, is the hub's ``400``
saying SPDY is not carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable

from aiohttp import WSMsgType, web

from controlplane.apis import proxyframing as framing
from controlplane.apis.proxyframing import FrameKind
from controlplane.apiserver import errors
from controlplane.apiserver.proxy.tunnels import HubStream
from controlplane.apiserver.routing import parse_request

logger = logging.getLogger(__name__)

#: Subprotocols whose error channel (3) carries a Status (kube's v4 and v5 channel protocols).
STATUS_CHANNEL_PROTOCOLS = frozenset({"v4.channel.k8s.io", "v5.channel.k8s.io"})
ERROR_CHANNEL = 3
STREAMING_SUBRESOURCES = frozenset({"exec", "attach", "portforward"})


def is_websocket(request: web.BaseRequest) -> bool:
    """Whether an upgrade asks for a WebSocket (rather than SPDY)."""
    return request.headers.get("Upgrade", "").lower() == "websocket"


def offered_protocols(request: web.BaseRequest) -> list[str]:
    """The subprotocols a WebSocket upgrade offers."""
    return [
        protocol.strip()
        for value in request.headers.getall("Sec-WebSocket-Protocol", [])
        for protocol in value.split(",") if protocol.strip()
    ]


def asks_member_of_spdy(method: str, member_path: str) -> bool:
    """Whether a SPDY upgrade is sent on to the member (for its refusal): only kubectl's
    ``POST`` (or ``GET``) of a pod's ``exec``, ``attach`` or ``portforward``, which a member
    refuses without an upgrade and never performs."""
    info = parse_request(method, member_path.split("?", 1)[0], {}, upgrade=True)
    return method in ("GET", "POST") and info.resource == "pods" and info.subresource in STREAMING_SUBRESOURCES


def spdy_refused(request: web.BaseRequest) -> errors.ApiError:
    """The hub's answer to an upgrade it does not carry (SPDY) that the member did not refuse."""
    return errors.BadRequest(
        f"the cluster proxy carries WebSocket upgrades only, not {request.headers.get('Upgrade', '')!r}: use a "
        "client that speaks WebSockets (kubectl 1.30 or newer does for exec, attach and port-forward)"
    )


def _header(headers: list[tuple[str, str]], name: str) -> str:
    return next((value for key, value in headers if key.lower() == name.lower()), "")


async def cancel_relays(tasks: set[asyncio.Task[bool]] | set[asyncio.Task[None]]) -> None:
    """Cancel the relaying ``tasks`` still running and wait for them to end."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await task


async def relay_websocket(
    request: web.Request, stream: HubStream, head: list[tuple[str, str]]
) -> tuple[web.StreamResponse, bool]:
    """Accept the client's handshake with the member's subprotocol and relay messages both ways
    until one side closes; returns the response and whether the stream ended cleanly."""
    limits = stream.tunnel.limits
    protocol = _header(head, "Sec-WebSocket-Protocol")
    ws = web.WebSocketResponse(protocols=(protocol,) if protocol else (), max_msg_size=limits.max_message_bytes)
    await ws.prepare(request)
    if request.path.endswith("/portforward"):
        protocol = ""  # a port-forward's channels are per port: no error channel for a Status
    loop = asyncio.get_running_loop()
    # Set once the member's messages may go to the client (see the module docstring).
    client_ready = asyncio.Event()
    setup = loop.call_later(limits.stream_setup_seconds if protocol in STATUS_CHANNEL_PROTOCOLS else 0, client_ready.set)
    pending: set[asyncio.Task[bool]] = set()
    finished = False
    try:
        async with asyncio.timeout(limits.idle_timeout_seconds) as idle:

            def touch() -> None:
                idle.reschedule(loop.time() + limits.idle_timeout_seconds)

            pending = {
                asyncio.create_task(_client_to_agent(ws, stream, touch, client_ready)),
                asyncio.create_task(_agent_to_client(ws, stream, protocol, touch, client_ready)),
            }
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            finished = all(not task.exception() and task.result() for task in done)
    except TimeoutError:
        logger.info("upgraded stream %s to cluster %s closed: idle for %gs", request.path,
                    stream.tunnel.cluster, limits.idle_timeout_seconds)
        await _fail(ws, protocol, f"the connection was idle for {limits.idle_timeout_seconds:g}s")
    finally:
        setup.cancel()
        await cancel_relays(pending)
        if not ws.closed:
            await ws.close()
    return ws, finished


async def _client_to_agent(
    ws: web.WebSocketResponse, stream: HubStream, touch: Callable[[], None], client_ready: asyncio.Event
) -> bool:
    """The client's messages to the agent, within the agent's credit; True once the client closed."""
    async for message in ws:
        client_ready.set()
        if message.type is WSMsgType.BINARY:
            data, text = bytes(message.data), False
        elif message.type is WSMsgType.TEXT:
            data, text = str(message.data).encode(), True
        else:
            continue
        await stream.send_credit.take(len(data))
        await stream.tunnel.send(framing.message_frame(stream.id, data, text=text))
        touch()
    code = ws.close_code or 1000
    with contextlib.suppress(ConnectionError):
        await stream.tunnel.send(framing.close_frame(stream.id, code))
    return True


async def _agent_to_client(
    ws: web.WebSocketResponse, stream: HubStream, protocol: str, touch: Callable[[], None], client_ready: asyncio.Event
) -> bool:
    """The member's messages to the client once it is ready for them, crediting the agent as the
    client takes them; True once the member closed, False when the stream failed (the client is
    told why)."""
    limits = stream.tunnel.limits
    while True:
        frame = await stream.next_frame()
        await client_ready.wait()
        if frame.kind is FrameKind.MESSAGE:
            data, text = framing.parse_message(frame.payload)
            try:
                async with asyncio.timeout(limits.stall_timeout_seconds):
                    await (ws.send_str(data.decode(errors="replace")) if text else ws.send_bytes(data))
            except TimeoutError:
                await _fail(ws, protocol, f"the client took nothing for {limits.stall_timeout_seconds:g}s")
                return False
            await stream.credit(len(data))
            touch()
        elif frame.kind is FrameKind.CLOSE:
            code, reason = framing.parse_close(frame.payload)
            await ws.close(code=framing.sendable_close_code(code), message=reason.encode()[:framing.MAX_CLOSE_REASON_BYTES])
            return True
        else:
            message = (
                framing.parse_error(frame.payload)[1] if frame.kind is FrameKind.ERROR
                else f"cluster {stream.tunnel.cluster}'s agent sent {frame.kind.name} on an upgraded stream"
            )
            logger.info("upgraded stream to cluster %s ended: %s", stream.tunnel.cluster, message)
            await _fail(ws, protocol, message)
            return False


async def _fail(ws: web.WebSocketResponse, protocol: str, message: str) -> None:
    """End the client's connection with ``message``: on kube's channel protocols as a Status on
    the error channel first (kubectl prints it), then as the close reason (code 1011)."""
    with contextlib.suppress(ConnectionError, RuntimeError):
        if protocol in STATUS_CHANNEL_PROTOCOLS:
            status = errors.ServiceUnavailable(message).to_status()
            await ws.send_bytes(bytes([ERROR_CHANNEL]) + json.dumps(status).encode())
        await ws.close(code=1011, message=message.encode()[:framing.MAX_CLOSE_REASON_BYTES])
