"""SPDY/3.1 framing, as kubectl's port-forward speaks it (pure: bytes in, frames out).

kubectl 1.31+ tunnels SPDY/3.1 inside binary WebSocket messages (subprotocol
``SPDY/3.1+portforward.k8s.io``); the message boundaries mean nothing, so :class:`Decoder`
takes the byte stream in pieces and returns the whole frames it holds. The frames kube's
``spdystream`` uses are read and written: ``SYN_STREAM``, ``SYN_REPLY``, ``RST_STREAM``,
``SETTINGS``, ``PING``, ``GOAWAY``, ``HEADERS``, ``WINDOW_UPDATE`` and ``DATA``.

Header blocks (``SYN_STREAM``, ``SYN_REPLY``, ``HEADERS``) are a count, then length-prefixed
lowercase names and NUL-separated values (all lengths 32-bit big-endian), zlib-compressed with
SPDY/3's preset dictionary in one compression context per direction for the whole connection
(each block ends with a sync flush).

Bounded: a frame longer than :data:`MAX_FRAME_BYTES` or a header block that inflates past
:data:`MAX_HEADER_BYTES` is a :class:`SpdyError` (the connection is then given up).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
#: RST_STREAM status codes used here.
PROTOCOL_ERROR, REFUSED_STREAM, CANCEL = 1, 3, 5
#: The largest frame accepted (kubectl writes data frames of at most 32 KiB).
MAX_FRAME_BYTES = 256 * 1024
#: The most a header block may inflate to.
MAX_HEADER_BYTES = 16 * 1024

_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset",
    "accept-encoding", "accept-language", "accept-ranges", "age", "allow", "authorization",
    "cache-control", "connection", "content-base", "content-encoding", "content-language",
    "content-length", "content-location", "content-md5", "content-range", "content-type", "date",
    "etag", "expect", "expires", "from", "host", "if-match", "if-modified-since", "if-none-match",
    "if-range", "if-unmodified-since", "last-modified", "location", "max-forwards", "pragma",
    "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after", "server", "te",
    "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url",
    "public", "set-cookie", "keep-alive", "origin",
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
#: SPDY/3's zlib dictionary for header blocks (draft 3, section 2.6.10.1).
DICTIONARY = b"".join(struct.pack(">I", len(word)) + word.encode() for word in _WORDS) + _TAIL.encode()

Headers = Mapping[str, Sequence[str]]


class SpdyError(Exception):
    """The peer broke the protocol (or a bound); the connection cannot go on."""


@dataclass(frozen=True)
class Data:
    stream_id: int
    data: bytes
    fin: bool = False


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: Headers
    fin: bool = False
    associated_to: int = 0
    priority: int = 0


@dataclass(frozen=True)
class SynReply:
    stream_id: int
    headers: Headers = field(default_factory=dict)
    fin: bool = False


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True)
class Settings:
    entries: tuple[tuple[int, int, int], ...] = ()  # (flags, id, value)


@dataclass(frozen=True)
class Ping:
    id: int


@dataclass(frozen=True)
class GoAway:
    last_good_stream_id: int
    status: int = 0


@dataclass(frozen=True)
class HeadersFrame(SynReply):
    """More headers on an open stream (the fields of a ``SYN_REPLY``)."""


@dataclass(frozen=True)
class WindowUpdate:
    stream_id: int
    delta: int


Frame = Data | SynStream | SynReply | RstStream | Settings | Ping | GoAway | HeadersFrame | WindowUpdate


def header(headers: Headers, name: str) -> str:
    """The first value of header ``name`` (names are lowercase in SPDY/3), or ``""``."""
    values = headers.get(name.lower()) or ()
    return values[0] if values else ""


class Decoder:
    """Frames out of a SPDY byte stream fed in arbitrary pieces (one connection's one direction)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        """The frames completed by ``data`` (a partial frame waits for the next piece)."""
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            first, flags_length = struct.unpack_from(">II", self._buffer)
            flags, length = flags_length >> 24, flags_length & 0xFFFFFF
            if length > MAX_FRAME_BYTES:
                raise SpdyError(f"a frame of {length} bytes is longer than the {MAX_FRAME_BYTES} accepted")
            if len(self._buffer) < 8 + length:
                break
            body = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            if first & 0x80000000:
                frames.append(self._control((first >> 16) & 0x7FFF, first & 0xFFFF, flags, body))
            else:
                frames.append(Data(_stream_id(first), body, fin=bool(flags & FLAG_FIN)))
        return frames

    def _control(self, version: int, kind: int, flags: int, body: bytes) -> Frame:
        if version != VERSION:
            raise SpdyError(f"SPDY version {version} is not supported (only {VERSION})")
        fin = bool(flags & FLAG_FIN)
        try:
            if kind == SYN_STREAM:
                stream, associated, priority = struct.unpack_from(">IIB", body)
                return SynStream(_stream_id(stream), self._headers(body[10:]), fin, _stream_id(associated), priority >> 5)
            if kind in (SYN_REPLY, HEADERS):
                stream_id = _stream_id(struct.unpack_from(">I", body)[0])
                headers = self._headers(body[4:])
                return SynReply(stream_id, headers, fin) if kind == SYN_REPLY else HeadersFrame(stream_id, headers, fin)
            if kind == RST_STREAM:
                stream, status = struct.unpack_from(">II", body)
                return RstStream(_stream_id(stream), status)
            if kind == SETTINGS:
                (count,) = struct.unpack_from(">I", body)
                entries = tuple(
                    (flags_id >> 24, flags_id & 0xFFFFFF, value)
                    for flags_id, value in (struct.unpack_from(">II", body, 4 + 8 * i) for i in range(count))
                )
                return Settings(entries)
            if kind == PING:
                return Ping(struct.unpack_from(">I", body)[0])
            if kind == GOAWAY:
                last, status = struct.unpack_from(">II", body)
                return GoAway(_stream_id(last), status)
            if kind == WINDOW_UPDATE:
                stream, delta = struct.unpack_from(">II", body)
                return WindowUpdate(_stream_id(stream), delta & 0x7FFFFFFF)
        except struct.error as error:
            raise SpdyError(f"a control frame of type {kind} is too short ({len(body)} bytes)") from error
        raise SpdyError(f"unknown control frame type {kind}")

    def _headers(self, compressed: bytes) -> dict[str, list[str]]:
        try:
            raw = self._inflate.decompress(compressed, MAX_HEADER_BYTES + 1)
        except zlib.error as error:
            raise SpdyError(f"a header block does not inflate: {error}") from error
        if len(raw) > MAX_HEADER_BYTES or self._inflate.unconsumed_tail:
            raise SpdyError(f"a header block inflates past {MAX_HEADER_BYTES} bytes")
        try:
            (count,) = struct.unpack_from(">I", raw)
            offset = 4
            headers: dict[str, list[str]] = {}
            for _ in range(count):
                name, offset = _string(raw, offset)
                value, offset = _string(raw, offset)
                headers.setdefault(name.decode().lower(), []).extend(value.decode().split("\x00"))
        except (struct.error, UnicodeDecodeError) as error:
            raise SpdyError(f"a header block is malformed: {error}") from error
        return headers


class Encoder:
    """Frames into bytes (one connection's one direction: it holds the header compression)."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, zdict=DICTIONARY)

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, Data):
            if len(frame.data) > 0xFFFFFF:
                raise ValueError("a DATA frame holds at most 16 MiB")
            return struct.pack(">II", frame.stream_id & 0x7FFFFFFF, (FLAG_FIN if frame.fin else 0) << 24 | len(frame.data)) + frame.data
        if isinstance(frame, SynStream):
            body = struct.pack(">IIBB", frame.stream_id, frame.associated_to, (frame.priority & 7) << 5, 0)
            return _control(SYN_STREAM, frame.fin, body + self._headers(frame.headers))
        if isinstance(frame, SynReply):  # or its HeadersFrame
            kind = HEADERS if isinstance(frame, HeadersFrame) else SYN_REPLY
            return _control(kind, frame.fin, struct.pack(">I", frame.stream_id) + self._headers(frame.headers))
        if isinstance(frame, RstStream):
            return _control(RST_STREAM, False, struct.pack(">II", frame.stream_id, frame.status))
        if isinstance(frame, Settings):
            body = struct.pack(">I", len(frame.entries)) + b"".join(
                struct.pack(">II", flags << 24 | key, value) for flags, key, value in frame.entries
            )
            return _control(SETTINGS, False, body)
        if isinstance(frame, Ping):
            return _control(PING, False, struct.pack(">I", frame.id))
        if isinstance(frame, GoAway):
            return _control(GOAWAY, False, struct.pack(">II", frame.last_good_stream_id, frame.status))
        return _control(WINDOW_UPDATE, False, struct.pack(">II", frame.stream_id, frame.delta))

    def _headers(self, headers: Headers) -> bytes:
        raw = struct.pack(">I", len(headers)) + b"".join(
            _pack(name.lower().encode()) + _pack("\x00".join(values).encode()) for name, values in headers.items()
        )
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)


def _control(kind: int, fin: bool, body: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (FLAG_FIN if fin else 0) << 24 | len(body)) + body


def _stream_id(word: int) -> int:
    return word & 0x7FFFFFFF


def _pack(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value


def _string(raw: bytes, offset: int) -> tuple[bytes, int]:
    (length,) = struct.unpack_from(">I", raw, offset)
    end = offset + 4 + length
    if end > len(raw):
        raise struct.error(f"a header string of {length} bytes runs past the block")
    return raw[offset + 4:end], end
