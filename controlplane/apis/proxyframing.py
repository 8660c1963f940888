"""The cluster proxy's wire format between the hub and a member's agent (shared by both). Pure: no I/O.

The agent keeps one WebSocket open to the hub; every proxied HTTP request is a *stream* on it,
named by a 32-bit id the hub picks. Each WebSocket binary message is one frame::

    kind (1 byte) | stream id (4 bytes, big-endian) | payload

=========  ===============  ===========================================================
kind       direction        payload
=========  ===============  ===========================================================
OPEN       hub -> agent     4-byte length, JSON :class:`ProxyRequest`, then the body
CREDIT     hub -> agent     4-byte count: the hub's client took that many more bytes
CANCEL     hub -> agent     empty: the hub's client left; stop the member request
HEAD       agent -> hub     JSON ``{"status": int, "headers": [[name, value], ...]}``
DATA       agent -> hub     response body bytes (at most ``chunk_bytes``)
END        agent -> hub     empty: the response is complete
ERROR      agent -> hub     JSON ``{"code": int, "message": str}``: the stream failed
UPGRADE    hub -> agent     as OPEN (no body): open a WebSocket to the member path offering
                            ``ProxyRequest.protocols``; answered by HEAD (101 and the chosen
                            ``Sec-WebSocket-Protocol``, or the member's refusal, then DATA, END)
MESSAGE    both ways        one WebSocket message: 1 byte (0 binary, 1 text), then its data
CLOSE      both ways        2-byte close code and a UTF-8 reason: that side's WebSocket closed
=========  ===============  ===========================================================

Flow control is credit-based, per stream: the agent may have at most ``window_bytes`` of DATA
unacknowledged; the hub returns CREDIT only once its client has taken the bytes, so neither
side buffers more than a window for a client that reads slowly. An upgraded stream (exec,
attach, port-forward) carries MESSAGE frames both ways with the same window in each direction:
the agent credits the hub (CREDIT agent -> hub) once the member took a message, as the hub
credits the agent once its client did. A message is never split (the channel protocols put
their channel number in its first byte), so it is at most ``max_message_bytes``.
"""

from __future__ import annotations

import asyncio
import enum
import json
import struct
from dataclasses import dataclass, field
from typing import Any, Final

_HEADER: Final = struct.Struct(">BI")
_U32: Final = struct.Struct(">I")
_U16: Final = struct.Struct(">H")
#: A WebSocket close frame's reason holds at most 123 bytes.
MAX_CLOSE_REASON_BYTES: Final = 123
_SENDABLE_CLOSE_CODES: Final = frozenset({1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011})

#: Request headers never forwarded to the member: the hub's credential, any impersonation
#: the caller tried to set itself, and hop-by-hop headers.
DROPPED_REQUEST_HEADERS: Final = frozenset({
    "authorization", "host", "connection", "keep-alive", "proxy-authorization", "proxy-connection",
    "te", "trailer", "transfer-encoding", "upgrade", "content-length", "cookie",
})
#: Request headers of a WebSocket handshake, which the agent makes anew toward the member.
WEBSOCKET_HANDSHAKE_HEADERS: Final = frozenset({
    "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol", "sec-websocket-extensions", "origin",
})
#: Response headers the hub does not copy to its client (it frames the body itself).
DROPPED_RESPONSE_HEADERS: Final = frozenset({
    "connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "date", "server",
})


class FrameKind(enum.IntEnum):
    OPEN = 1
    CREDIT = 2
    CANCEL = 3
    HEAD = 4
    DATA = 5
    END = 6
    ERROR = 7
    UPGRADE = 8
    MESSAGE = 9
    CLOSE = 10


class FrameError(ValueError):
    """A malformed frame: the peer does not speak this protocol; the tunnel is closed."""


@dataclass(frozen=True, slots=True)
class Frame:
    kind: FrameKind
    stream: int
    payload: bytes = b""


@dataclass(frozen=True, slots=True)
class ProxyLimits:
    """What one cluster's tunnel may hold at once."""

    #: Proxied requests open at once per cluster; more are answered 429.
    max_streams: int = 64
    #: Unacknowledged response bytes per stream (the flow-control window).
    window_bytes: int = 256 * 1024
    #: Largest DATA frame.
    chunk_bytes: int = 32 * 1024
    #: Total size of the forwarded request headers.
    max_header_bytes: int = 16 * 1024
    #: Seconds the hub waits for the member's response head.
    head_timeout_seconds: float = 30.0
    #: Seconds a client may take no bytes at all while the hub has some for it; then the stream
    #: ends (and its slot and window are freed).
    stall_timeout_seconds: float = 60.0
    #: Largest WebSocket message of an upgraded stream, either way (kubectl sends stdin in
    #: messages of at most 32 KiB and one channel byte).
    max_message_bytes: int = 64 * 1024
    #: Seconds an upgraded stream may carry no message either way before it is closed.
    idle_timeout_seconds: float = 15 * 60.0
    #: On kube's channel protocols (exec, attach), the member's messages wait up to this long
    #: after the client's handshake, unless the client sends first: kubectl registers its
    #: streams only after the handshake while its reader already runs, and drops what comes
    #: before (the member, reached first, may have answered already).
    stream_setup_seconds: float = 0.1

    def __post_init__(self) -> None:
        if self.max_message_bytes > self.window_bytes:
            raise ValueError("max_message_bytes must fit in window_bytes, or a large message never gets credit")


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """One request to perform against the member's API, as the hub forwards it."""

    method: str
    #: The member API path (``/api/v1/namespaces/ml/pods``), query string included.
    path: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    #: The authenticated hub user (impersonated at the member when the agent is so configured):
    #: its name, groups, uid and extra, as Karmada's cluster proxy impersonates them.
    user: str = ""
    groups: list[str] = field(default_factory=list)
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)
    #: The WebSocket subprotocols the client offered (UPGRADE only), in its order of preference.
    protocols: list[str] = field(default_factory=list)


class Credit:
    """One direction's flow-control window of a stream: ``take`` waits until the peer has
    credited enough; ``add`` is the peer's CREDIT."""

    def __init__(self, window: int) -> None:
        self.credit = window
        self._credited = asyncio.Event()

    def add(self, count: int) -> None:
        self.credit += count
        self._credited.set()

    async def take(self, count: int) -> None:
        while self.credit < count:
            self._credited.clear()
            await self._credited.wait()
        self.credit -= count


def encode(frame: Frame) -> bytes:
    return _HEADER.pack(int(frame.kind), frame.stream) + frame.payload


def decode(message: bytes) -> Frame:
    if len(message) < _HEADER.size:
        raise FrameError(f"a frame of {len(message)} bytes is shorter than its {_HEADER.size}-byte header")
    kind, stream = _HEADER.unpack_from(message)
    try:
        frame_kind = FrameKind(kind)
    except ValueError:
        raise FrameError(f"unknown frame kind {kind}") from None
    return Frame(frame_kind, stream, bytes(message[_HEADER.size:]))


def open_frame(stream: int, request: ProxyRequest, body: bytes, *, kind: FrameKind = FrameKind.OPEN) -> Frame:
    """An OPEN frame, or with ``kind=FrameKind.UPGRADE`` (and no body) an UPGRADE frame."""
    head = json.dumps({
        "method": request.method, "path": request.path, "headers": request.headers,
        "user": request.user, "groups": request.groups, "uid": request.uid, "extra": request.extra,
        "protocols": request.protocols,
    }).encode()
    return Frame(kind, stream, _U32.pack(len(head)) + head + body)


def parse_open(payload: bytes) -> tuple[ProxyRequest, bytes]:
    if len(payload) < _U32.size:
        raise FrameError("an OPEN frame without its header length")
    (size,) = _U32.unpack_from(payload)
    data = _json(payload[_U32.size:_U32.size + size])
    try:
        request = ProxyRequest(
            method=str(data["method"]), path=str(data["path"]),
            headers=[(str(k), str(v)) for k, v in data.get("headers", [])],
            user=str(data.get("user", "")), groups=[str(g) for g in data.get("groups", [])],
            uid=str(data.get("uid", "")),
            extra={str(key): [str(v) for v in values] for key, values in data.get("extra", {}).items()},
            protocols=[str(p) for p in data.get("protocols", [])],
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FrameError(f"a malformed OPEN frame: {exc!r}") from None
    if not request.path.startswith("/"):
        raise FrameError(f"an OPEN frame whose path {request.path!r} does not start with /")
    return request, payload[_U32.size + size:]


def credit_frame(stream: int, count: int) -> Frame:
    return Frame(FrameKind.CREDIT, stream, _U32.pack(count))


def parse_credit(payload: bytes) -> int:
    if len(payload) != _U32.size:
        raise FrameError("a CREDIT frame must carry exactly 4 bytes")
    (count,) = _U32.unpack(payload)
    return int(count)


def head_frame(stream: int, status: int, headers: list[tuple[str, str]]) -> Frame:
    return Frame(FrameKind.HEAD, stream, json.dumps({"status": status, "headers": headers}).encode())


def parse_head(payload: bytes) -> tuple[int, list[tuple[str, str]]]:
    data = _json(payload)
    try:
        return int(data["status"]), [(str(k), str(v)) for k, v in data.get("headers", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise FrameError(f"a malformed HEAD frame: {exc!r}") from None


def error_frame(stream: int, code: int, message: str) -> Frame:
    return Frame(FrameKind.ERROR, stream, json.dumps({"code": code, "message": message}).encode())


def parse_error(payload: bytes) -> tuple[int, str]:
    data = _json(payload)
    try:
        return int(data.get("code", 503)), str(data["message"])
    except (KeyError, TypeError, ValueError) as exc:
        raise FrameError(f"a malformed ERROR frame: {exc!r}") from None


def message_frame(stream: int, data: bytes, *, text: bool = False) -> Frame:
    return Frame(FrameKind.MESSAGE, stream, (b"\x01" if text else b"\x00") + data)


def parse_message(payload: bytes) -> tuple[bytes, bool]:
    """A MESSAGE frame's data, and whether it is a text message."""
    if not payload or payload[0] not in (0, 1):
        raise FrameError("a MESSAGE frame must start with 0 (binary) or 1 (text)")
    return payload[1:], payload[0] == 1


def window_bytes(frame: Frame) -> int:
    """The bytes ``frame`` takes from its stream's flow-control window (DATA and MESSAGE data)."""
    if frame.kind is FrameKind.DATA:
        return len(frame.payload)
    if frame.kind is FrameKind.MESSAGE:
        return max(0, len(frame.payload) - 1)
    return 0


def sendable_close_code(code: int | None) -> int:
    """``code`` if an endpoint may send it in a WebSocket close frame (RFC 6455 7.4), else 1000."""
    if code is not None and (code in _SENDABLE_CLOSE_CODES or 3000 <= code <= 4999):
        return code
    return 1000


def close_frame(stream: int, code: int, reason: str = "") -> Frame:
    return Frame(FrameKind.CLOSE, stream, _U16.pack(code) + reason.encode()[:MAX_CLOSE_REASON_BYTES])


def parse_close(payload: bytes) -> tuple[int, str]:
    if len(payload) < _U16.size:
        raise FrameError("a CLOSE frame without its 2-byte code")
    (code,) = _U16.unpack_from(payload)
    return int(code), payload[_U16.size:].decode(errors="replace")


def forwarded_headers(headers: list[tuple[str, str]], *, drop: frozenset[str]) -> list[tuple[str, str]]:
    """``headers`` without the dropped ones and without any ``Impersonate-*`` header."""
    return [
        (name, value) for name, value in headers
        if name.lower() not in drop and not name.lower().startswith("impersonate-")
    ]


def header_bytes(headers: list[tuple[str, str]]) -> int:
    return sum(len(name) + len(value) + 4 for name, value in headers)


def _json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise FrameError(f"a frame whose JSON does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise FrameError("a frame whose JSON is not an object")
    return data
