"""``port-forward`` to a simulated pod (``/api/v1/namespaces/<ns>/pods/<name>/portforward``).

Every port of a running simulated pod is an echo server: the bytes a client sends to it come
back unchanged, until the client closes its side.

Two WebSocket protocols are served, the first the client offers:

- ``SPDY/3.1+portforward.k8s.io`` (kubectl 1.31+): SPDY/3.1 frames (:mod:`simulator.spdy`)
  carried in binary messages. Each forwarded connection is a pair of streams kubectl opens with
  headers ``streamtype`` (``error`` or ``data``), ``port`` and ``requestid``; each is answered
  ``SYN_REPLY``, data is echoed on its stream, and when the client ends its data stream (FIN)
  the pod ends the data stream and the pair's error stream, as kubelet does when the connection
  inside the pod closes. A bad ``port`` header gets its message on the error stream. ``PING``
  is answered; ``SETTINGS``, ``WINDOW_UPDATE`` and ``HEADERS`` are ignored.
- ``v4.channel.k8s.io`` (the ``kubernetes`` Python client): the ports come from ``?ports=``
  (repeated or comma-separated); port number ``i`` has data channel ``2i`` and error channel
  ``2i+1``, and the first message on each is the port, 2 bytes little-endian, as kubelet's
  ``portforward/websocket.go`` writes it. Data on a data channel is echoed on it.

Errors before the upgrade are kube's Status: 404 unknown pod, 400 a pod not running, missing or
bad ``ports``, or a request that is not such a WebSocket upgrade (SPDY upgrades are not served).
Bounded: at most :data:`MAX_STREAMS` open streams per connection (more are refused with
``RST_STREAM``) and frames of at most :data:`simulator.spdy.MAX_FRAME_BYTES`.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from controlplane.objectclient import ObjectClient, errors
from simulator import spdy

log = logging.getLogger(__name__)

TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
CHANNEL_PROTOCOL = "v4.channel.k8s.io"
PROTOCOLS = (TUNNEL_PROTOCOL, CHANNEL_PROTOCOL)
#: The most streams one port-forward connection keeps open (two per forwarded connection).
MAX_STREAMS = 256
#: The largest WebSocket message read.
MAX_MESSAGE_BYTES = 512 * 1024


def parse_ports(values: list[str]) -> list[int]:
    """The ports of ``?ports=`` (repeated, comma-separated); a 400 naming the bad one."""
    if not values:
        raise errors.BadRequest('query parameter "ports" is required')
    ports = []
    for value in values:
        for text in value.split(","):
            if not text.isdigit() or not 0 < int(text) < 65536:
                raise errors.BadRequest(f"unable to parse {text!r} as a port: it must be a number from 1 to 65535")
            ports.append(int(text))
    return ports


def port_error(value: str) -> str | None:
    """Why a stream's ``port`` header is unusable (kubelet's wording), or None."""
    if not value.isdigit() or not 0 < int(value) < 65536:
        return f'invalid port header "{value}": it must be a number from 1 to 65535'
    return None


@dataclass
class EchoSession:
    """One SPDY port-forward connection of a simulated pod (pure: frames in, frames out)."""

    pod: str
    #: stream id -> (streamtype, requestid) of the open streams.
    streams: dict[int, tuple[str, str]] = field(default_factory=dict)
    #: requestid -> the error stream of that forwarded connection.
    error_streams: dict[str, int] = field(default_factory=dict)
    closed: bool = False

    def handle(self, frame: spdy.Frame) -> list[spdy.Frame]:
        """The frames to send in answer to ``frame``."""
        if isinstance(frame, spdy.SynStream):
            return self._open(frame)
        if isinstance(frame, spdy.Data):
            return self._data(frame)
        if isinstance(frame, spdy.RstStream):
            kind, request = self.streams.pop(frame.stream_id, ("", ""))
            if kind == "error":
                self.error_streams.pop(request, None)
            return []
        if isinstance(frame, spdy.Ping):
            return [frame] if frame.id % 2 else []  # the client's (odd) pings come back
        if isinstance(frame, spdy.GoAway):
            self.closed = True
        return []

    def _open(self, frame: spdy.SynStream) -> list[spdy.Frame]:
        kind = spdy.header(frame.headers, "streamtype")
        request = spdy.header(frame.headers, "requestid")
        if frame.stream_id in self.streams:
            return [spdy.RstStream(frame.stream_id, spdy.PROTOCOL_ERROR)]
        if kind not in ("error", "data") or len(self.streams) >= MAX_STREAMS:
            return [spdy.RstStream(frame.stream_id, spdy.REFUSED_STREAM)]
        self.streams[frame.stream_id] = (kind, request)
        answer: list[spdy.Frame] = [spdy.SynReply(frame.stream_id)]
        if kind == "error":
            self.error_streams[request] = frame.stream_id
            return answer
        problem = port_error(spdy.header(frame.headers, "port"))
        if problem is not None:
            return answer + self._end(frame.stream_id, request, problem)
        return answer

    def _data(self, frame: spdy.Data) -> list[spdy.Frame]:
        kind, request = self.streams.get(frame.stream_id, ("", ""))
        if kind != "data":
            return []  # the client writes nothing on error streams (it closes them at once)
        answer: list[spdy.Frame] = [spdy.Data(frame.stream_id, frame.data)] if frame.data else []
        if frame.fin:
            answer += self._end(frame.stream_id, request, "")
        return answer

    def _end(self, data_stream: int, request: str, message: str) -> list[spdy.Frame]:
        """End a forwarded connection: FIN on its data stream, ``message`` and FIN on its error stream."""
        self.streams.pop(data_stream, None)
        answer: list[spdy.Frame] = [spdy.Data(data_stream, b"", fin=True)]
        error_stream = self.error_streams.pop(request, None)
        if error_stream is not None:
            self.streams.pop(error_stream, None)
            answer.append(spdy.Data(error_stream, message.encode(), fin=True))
        return answer


class PodPortForward:
    """``port-forward`` to simulated pods: every port echoes."""

    def __init__(self, objects: ObjectClient, stop: asyncio.Event) -> None:
        self.objects = objects
        self.stop = stop
        self._pods = objects.registry.require("v1", "Pod")

    def routes(self) -> list[web.RouteDef]:
        return [web.route("*", "/api/v1/namespaces/{namespace}/pods/{name}/portforward", self.portforward)]

    async def _running_pod(self, request: web.Request) -> dict[str, Any]:
        name = request.match_info["name"]
        try:
            pod = await self.objects.get(self._pods, namespace=request.match_info["namespace"], name=name)
        except errors.NotFound:
            raise errors.NotFound(f'pods "{name}" not found', target=errors.Target(name=name, kind="pods")) from None
        if not (pod.get("status") or {}).get("startTime"):
            raise errors.BadRequest(f"pod {name} is not running: port-forward needs a running pod")
        return pod

    async def portforward(self, request: web.Request) -> web.StreamResponse:
        pod = await self._running_pod(request)
        ws = web.WebSocketResponse(protocols=PROTOCOLS, max_msg_size=MAX_MESSAGE_BYTES)
        ready = ws.can_prepare(request)
        if not ready.ok or ready.protocol is None:
            raise errors.BadRequest(
                f"port-forward needs a WebSocket upgrade offering {TUNNEL_PROTOCOL} or {CHANNEL_PROTOCOL} "
                "(this simulated member does not serve SPDY upgrades)"
            )
        ports = parse_ports(request.query.getall("ports", [])) if ready.protocol == CHANNEL_PROTOCOL else []
        await ws.prepare(request)
        try:
            if ready.protocol == TUNNEL_PROTOCOL:
                await _serve_spdy(ws, EchoSession(pod["metadata"]["name"]))
            else:
                await _serve_channels(ws, ports)
        finally:
            await ws.close()
        return ws


async def _serve_spdy(ws: web.WebSocketResponse, session: EchoSession) -> None:
    decoder, encoder = spdy.Decoder(), spdy.Encoder()
    async for message in ws:
        if message.type is not WSMsgType.BINARY:
            continue
        try:
            frames = decoder.feed(message.data)
        except spdy.SpdyError as error:
            log.info("port-forward to pod %s: %s", session.pod, error)
            await ws.send_bytes(encoder.encode(spdy.GoAway(0, 1)))
            return
        out = b"".join(encoder.encode(answer) for frame in frames for answer in session.handle(frame))
        if out:
            await ws.send_bytes(out)
        if session.closed:
            return


async def _serve_channels(ws: web.WebSocketResponse, ports: list[int]) -> None:
    for index, port in enumerate(ports):
        prefix = struct.pack("<H", port)
        await ws.send_bytes(bytes([2 * index]) + prefix)
        await ws.send_bytes(bytes([2 * index + 1]) + prefix)
    async for message in ws:
        if message.type is not WSMsgType.BINARY or len(message.data) < 2:
            continue
        channel = message.data[0]
        if channel % 2 == 0 and channel < 2 * len(ports):
            await ws.send_bytes(bytes(message.data))
