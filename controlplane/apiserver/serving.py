"""Bounds on what a client can hold of the server before it has been authenticated.

In: the aiohttp runner of an API server application and :class:`ServingLimits`. Out: a
listening site whose connections are guarded (:class:`GuardedTCPSite`), and the
configuration of the API's priority and fairness (:meth:`ServingLimits.flow_control`).

- **Header timeout** (``--request-header-timeout``, as Go's ``ReadHeaderTimeout`` in
  kube-apiserver): a connection must deliver its first request's headers (TLS handshake
  included) within this many seconds, else it is closed. A keep-alive connection idle
  (or still sending its next request's headers) for :data:`IDLE_TIMEOUT` seconds is closed
  (kube-apiserver's ``IdleTimeout``; aiohttp's own default is an hour).
- **Request head** (:data:`MAX_HEADER_BYTES`): a request's line and headers together may be as
  long as kube-apiserver reads (Go's net/http reads ``MaxHeaderBytes``, 1 MiB, plus its 4 KiB
  buffer), one line of them as long as the whole (a long label selector, an OIDC bearer token
  of many groups); a request carries at most 128 header lines. aiohttp bounds each line and
  the count; :class:`_HeadBytes` bounds the total, counting what arrives while a head is
  incomplete. A request past any of these bounds is answered as Go's net/http answers a head
  past its ``MaxHeaderBytes``: ``431 Request Header Fields Too Large`` in plain text, and the
  connection is closed (:class:`ApiRequestHandler`).
- **Pending connections** (``--max-pending-connections``): connections that have not yet
  sent a complete request header (so nobody is authenticated on them yet), counted from their
  accept, a TLS handshake included (:class:`_ServedTLS`). A connection
  beyond the limit is closed at once; together with the header timeout this caps what a
  slow client ("slowloris") can hold.
- **Request timeout** (``--request-timeout``, kube's): a request's body must have arrived within
  this many seconds of the request (:mod:`controlplane.apiserver.requestdeadline`).
- **Requests in flight** (``--max-requests-inflight`` plus ``--max-mutating-requests-inflight``,
  kube's flags): requests being served at once, watches and health checks excluded (kube counts
  long-running requests apart too), shared by priority levels
  (:mod:`controlplane.apiserver.flowcontrol`). Beyond a level's seats and queues a request
  is answered 429 TooManyRequests with ``Retry-After: 1`` and a client retries.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from asyncio.sslproto import SSLProtocol
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler

from controlplane.apiserver.flowcontrol import (
    DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
    DEFAULT_MAX_REQUESTS_INFLIGHT,
    FlowControlConfig,
)
from controlplane.apiserver.flowcontrol.maxinflight import MaxInFlightConfig
from controlplane.apiserver.requestdeadline import DEFAULT_REQUEST_TIMEOUT

logger = logging.getLogger(__name__)

DEFAULT_REQUEST_HEADER_TIMEOUT = 10.0
DEFAULT_MAX_PENDING_CONNECTIONS = 512
#: Seconds a keep-alive connection may sit between requests (pass to ``web.AppRunner``).
IDLE_TIMEOUT = 90.0
#: The most read of a request's head (its request line and headers, line ends included): what
#: Go's net/http reads before it answers 431, the ``MaxHeaderBytes`` kube-apiserver sets (1 MiB,
#: Go's ``DefaultMaxHeaderBytes``) plus the 4096 bytes of its read buffer. aiohttp's own bound is
#: 8190 bytes per line; here one line (the request line, a header's name or value) may take it all.
MAX_HEADER_BYTES = (1 << 20) + 4096
#: The most header lines one request carries (aiohttp's bound; Go's is the bytes alone).
MAX_HEADERS = 128
#: What separates a request's headers from its body (bare LFs are tolerated by the parser).
_HEADER_ENDS = (b"\r\n\r\n", b"\n\n")
#: Plaintext asked of a connection's TLS object per read, and the size of its receive buffer
#: (:class:`_ServedTLS`). asyncio asks for 256 KiB, a new
#: bytes buffer every read (two per batch of records received, the last one finding nothing),
#: which the hub's allocator setting (:mod:`controlplane.allocator`: 64 KiB and up is mapped
#: on its own) turns into an mmap, page faults and an munmap per read: about 25 us of CPU for a
#: 1 KiB request. A TLS record holds at most 16 KiB, and one read returns one record's worth,
#: so reads of this size take as many calls and stay in the heap.
TLS_READ_SIZE = 16 * 1024

@dataclass(frozen=True, slots=True)
class ServingLimits:
    request_header_timeout: float = DEFAULT_REQUEST_HEADER_TIMEOUT
    #: kube's ``--request-timeout``: what a request's body may take (:mod:`.requestdeadline`).
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    max_pending_connections: int = DEFAULT_MAX_PENDING_CONNECTIONS
    #: 0: no limit.
    max_requests_inflight: int = DEFAULT_MAX_REQUESTS_INFLIGHT
    #: kube's: API Priority and Fairness shares the sum of both among the priority levels.
    max_mutating_requests_inflight: int = DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT
    #: False: kube's max-in-flight filter (each flag its own limit, no levels) instead.
    enable_priority_and_fairness: bool = True

    def flow_control(self) -> FlowControlConfig | MaxInFlightConfig:
        if not self.enable_priority_and_fairness:
            return MaxInFlightConfig(self.max_requests_inflight, self.max_mutating_requests_inflight)
        total = self.max_requests_inflight + self.max_mutating_requests_inflight if self.max_requests_inflight else 0
        return FlowControlConfig(total_concurrency=total)


class _ConnectionGuard:
    """Counts the connections that have not sent a whole request header yet."""

    def __init__(self, limits: ServingLimits) -> None:
        self.limits = limits
        self.pending = 0
        self.refused = 0
        self.timed_out = 0


class _GuardedProtocol(asyncio.Protocol):
    """Stands between the transport and aiohttp's request handler: forwards everything, and
    closes the connection when its first request header is late or too many are pending."""

    def __init__(self, inner: asyncio.Protocol, guard: _ConnectionGuard) -> None:
        self._inner = inner
        self._guard = guard
        self._transport: asyncio.BaseTransport | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._pending = False
        self._tail = b""

    def admit(self, transport: asyncio.BaseTransport) -> bool:
        """At accept (before a TLS handshake): count the connection as pending and start its
        header deadline; or, too many pending, close ``transport`` and False."""
        self._transport = transport
        guard = self._guard
        if guard.pending >= guard.limits.max_pending_connections:
            guard.refused += 1
            if guard.refused == 1 or guard.refused % 1000 == 0:
                logger.warning(
                    "closing new connections: %d connections have not sent a request yet "
                    "(--max-pending-connections); %d closed so far", guard.pending, guard.refused,
                )
            transport.close()
            return False
        guard.pending += 1
        self._pending = True
        self._deadline = asyncio.get_running_loop().call_later(
            guard.limits.request_header_timeout, self._header_timed_out
        )
        return True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Plain TCP: the accept. TLS: the handshake done, the connection admitted at accept.
        admitted = self._transport is not None
        self._transport = transport
        self._inner.connection_made(transport)
        if not admitted:
            self.admit(transport)

    def _header_timed_out(self) -> None:
        self._deadline = None
        self._guard.timed_out += 1
        logger.debug("closing a connection that sent no complete request header in time")
        if self._transport is not None:
            self._transport.close()

    def no_longer_pending(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._pending:
            self._pending = False
            self._guard.pending -= 1
        self._tail = b""

    def data_received(self, data: bytes) -> None:
        if self._pending:
            window = self._tail + data
            if any(end in window for end in _HEADER_ENDS):
                self.no_longer_pending()
            else:
                self._tail = data[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.no_longer_pending()
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


#: Go's net/http answer to a request head past ``MaxHeaderBytes``: status line and body alike.
HEAD_TOO_LARGE = "431 Request Header Fields Too Large"
#: What aiohttp's parser says of a request with more header lines than it reads.
_TOO_MANY_HEADERS = "Too many headers received"


def head_too_large(exc: BaseException | None) -> bool:
    """Whether aiohttp refused a request because its request line, a header line or the
    number of header lines is past what the hub reads (rather than because it is malformed)."""
    return isinstance(exc, LineTooLong) or (isinstance(exc, BadHttpMessage) and exc.message == _TOO_MANY_HEADERS)


class _HeadBytes:
    """aiohttp's request parser of one connection, with a bound on the bytes of a request head,
    which aiohttp bounds per line only: while no request body is being read, what arrives up to
    the end of a head counts, and past :data:`MAX_HEADER_BYTES` the parser's ``LineTooLong``
    refuses the request before it is parsed further. A head is over when the parser returns its
    message, whose body is read until its payload ends (a head that starts in the read that ends
    a body is counted from the next read: what a head holds stays within the bound plus one read)."""

    def __init__(self, parser: Any) -> None:
        self._parser = parser
        self._received = 0
        self._tail = b""
        self._payload: Any = None

    def feed_data(self, data: bytes) -> Any:
        if self._payload is None or self._payload.is_eof():  # a head is being read
            window = self._tail + data
            ends = [at for at in (window.find(end) for end in _HEADER_ENDS) if at >= 0]
            received = self._received + (min(ends) - len(self._tail) if ends else len(data))
            if received > MAX_HEADER_BYTES:
                raise LineTooLong(b"the request header", MAX_HEADER_BYTES, str(received))
            self._received, self._tail = received, window[-3:]
        parsed = self._parser.feed_data(data)
        if parsed[0]:
            self._received, self._tail = 0, b""
            self._payload = parsed[0][-1][1]
        return parsed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parser, name)


class ApiRequestHandler(RequestHandler):
    """aiohttp's connection handler, answering a request head past the hub's bounds as
    kube-apiserver (Go's net/http) does: 431 with its status text as the body, one log
    line, and the connection closed -- not aiohttp's 400 that echoes back the start of the
    line it refused. Its parser bounds a head's total bytes too (:class:`_HeadBytes`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parser = _HeadBytes(self._parser)  # type: ignore[assignment]  # the parser, bounded

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if not head_too_large(exc):
            return super().handle_error(request, status, exc, message)
        logger.info("refused a request from %s: %s (its request line or headers are past the bounds "
                    "the hub reads)", request.remote, HEAD_TOO_LARGE)
        response = web.Response(status=431, text=HEAD_TOO_LARGE, content_type="text/plain", charset="utf-8",
                                headers={"Connection": "close"})
        response.force_close()
        self.close()  # what else arrives is read and dropped, no longer parsed
        if self.transport is not None:
            _close_after_answering(self.transport)
        return response


#: Seconds a connection refused with 431 stays open after the answer (Go's ``rstAvoidanceDelay``).
REFUSED_LINGER = 0.5


def _close_after_answering(transport: asyncio.BaseTransport) -> None:
    """Have the close of ``transport`` wait as Go's ``closeWriteAndWait`` does: the answer sent, the
    writing side shut, and the connection closed :data:`REFUSED_LINGER` seconds later. A client
    still sending its head then reads the 431 before the close, which with its unread bytes is a
    reset that would drop the answer. Asked again (the server shutting down), it closes at once."""
    close = transport.close

    def lingering_close() -> None:
        transport.close = close  # type: ignore[method-assign]
        if isinstance(transport, asyncio.WriteTransport) and transport.can_write_eof():
            transport.write_eof()  # once what is written is sent
        asyncio.get_running_loop().call_later(REFUSED_LINGER, close)

    transport.close = lingering_close  # type: ignore[method-assign]  # this connection's close only


def _request_handler(server: web.Server) -> RequestHandler:
    # web.Server.__call__ builds aiohttp's own RequestHandler from these same arguments.
    return ApiRequestHandler(server, loop=server._loop, **server._kwargs)


def api_runner(app: web.Application) -> web.AppRunner:
    """The runner of an API server application: no access log of aiohttp's (the API server
    logs its own), kube's idle timeout, request heads as long as kube reads (served through
    :class:`GuardedTCPSite`, whose handler bounds their total), and request bodies read as sent:
    Go's net/http, so kube-apiserver, never inflates one whatever its ``Content-Encoding`` (aiohttp
    would inflate a gzipped body, even one it answers 401 and discards, on the event loop)."""
    return web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=IDLE_TIMEOUT,
                         auto_decompress=False, max_line_size=MAX_HEADER_BYTES, max_field_size=MAX_HEADER_BYTES, max_headers=MAX_HEADERS)


class _ServedTLS(SSLProtocol):
    """asyncio's TLS layer of one accepted connection (what ``loop.create_server(ssl=...)`` puts
    under it), built by the hub's protocol factory at accept so that the connection is admitted
    (:meth:`_GuardedProtocol.admit`) before its handshake, not after, and reading
    :data:`TLS_READ_SIZE` at a time from the start: asyncio's receive buffer is ``max_size``
    bytes allocated per connection when it is accepted (256 KiB: 2,000 connections that never
    finish a handshake held half a gigabyte) and never shrunk."""

    max_size = TLS_READ_SIZE

    def __init__(self, guarded: _GuardedProtocol, context: ssl.SSLContext, handshake_timeout: float) -> None:
        no_waiter: Any = None  # asyncio's own accept awaits one; the handshake's outcome is the protocol's here
        timeout: Any = handshake_timeout  # typeshed says int; asyncio takes seconds as a float
        super().__init__(asyncio.get_running_loop(), guarded, context, no_waiter, server_side=True,
                         ssl_handshake_timeout=timeout)
        self._guarded = guarded

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._guarded.admit(transport):
            super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        # asyncio tells the application only of a connection that finished its handshake.
        self._guarded.no_longer_pending()
        super().connection_lost(exc)


class GuardedTCPSite(web.TCPSite):
    """``web.TCPSite`` whose connections are bounded by :class:`ServingLimits`."""

    def __init__(
        self, runner: web.AppRunner, host: str, port: int, *, ssl_context: ssl.SSLContext | None,
        limits: ServingLimits,
    ) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self._guard = _ConnectionGuard(limits)
        self._tls = ssl_context
        self._bind = (host, port)

    async def start(self) -> None:
        # web.TCPSite.start, with a guarded protocol factory and a bounded TLS handshake.
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        guard = self._guard

        tls = self._tls

        def factory() -> asyncio.BaseProtocol:
            guarded = _GuardedProtocol(_request_handler(server), guard)
            return guarded if tls is None else _ServedTLS(guarded, tls, guard.limits.request_header_timeout)

        loop = asyncio.get_running_loop()
        # TLS is the factory's (:class:`_ServedTLS`): to asyncio, every connection is plain TCP.
        self._server = await loop.create_server(
            factory, self._bind[0], self._bind[1], backlog=128, reuse_address=True
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._bind[1]
