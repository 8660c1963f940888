"""Upgrade requests to an aggregated API (an extension server's exec, attach or port-forward
style streams), relayed as kube-aggregator's proxy handler relays them.

The hub has authenticated and authorized the request first, as for any other; it then opens a
WebSocket to the server with the front-proxy certificate and the caller in ``X-Remote-*`` headers
(the client's own credentials, identity and ``Impersonate-*`` headers are not forwarded), offering
the client's subprotocols. Only once the server accepted does the hub accept the client's
handshake, with the subprotocol the server chose; a server's refusal reaches the client with its
status code. Each message is relayed as it comes, either way, text or binary, up to
:attr:`~controlplane.apis.proxyframing.ProxyLimits.max_message_bytes`; on kube's channel
protocols the server's first messages wait until the client sent one or for
``stream_setup_seconds``, as the cluster proxy does (kubectl drops what comes before it registered
its streams). The stream ends, on both sides with the close code, when either side closes or when
nothing moved for ``idle_timeout_seconds``. SPDY upgrades are refused with a 400 saying so
(kubectl then has spoken WebSockets first).

In: the authorized request, the APIService's server. Out: the relayed WebSocket, or a Status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable

import aiohttp
from aiohttp import WSMsgType, web

from controlplane.apis.proxyframing import WEBSOCKET_HANDSHAKE_HEADERS, ProxyLimits
from controlplane.apiserver import errors
from controlplane.apiserver.aggregator.frontproxy import proxied_headers
from controlplane.apiserver.app import USER
from controlplane.apiserver.proxy.upgrades import (
    STATUS_CHANNEL_PROTOCOLS,
    cancel_relays,
    is_websocket,
    offered_protocols,
)

logger = logging.getLogger(__name__)

LIMITS = ProxyLimits()
HANDSHAKE_TIMEOUT_SECONDS = 60.0
#: A server's refusal of the handshake, as the client gets it (other codes: 503).
_REFUSALS: dict[int, type[errors.ApiError]] = {
    400: errors.BadRequest, 401: errors.Unauthorized, 403: errors.Forbidden, 404: errors.NotFound,
    405: errors.MethodNotAllowed,
}


async def relay_upgrade(
    request: web.Request, session: aiohttp.ClientSession, url: str, *,
    name: str, context: ssl.SSLContext, server_name: str,
) -> web.StreamResponse:
    """Relay ``request``'s WebSocket upgrade to ``url`` (the server of the APIService ``name``)."""
    if not is_websocket(request):
        raise errors.BadRequest(
            f"upgrade requests to the server of {name} are proxied as WebSockets only, not "
            f"{request.headers.get('Upgrade', '')!r}: use a client that speaks WebSockets")
    headers = proxied_headers(list(request.headers.items()), request[USER], drop=WEBSOCKET_HANDSHAKE_HEADERS)
    try:
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_SECONDS):
            upstream = await session.ws_connect(
                url, method=request.method, protocols=offered_protocols(request), headers=headers, ssl=context,
                server_hostname=server_name, autoclose=False, max_msg_size=LIMITS.max_message_bytes,
            )
    except aiohttp.WSServerHandshakeError as exc:
        error = _REFUSALS.get(exc.status, errors.ServiceUnavailable)
        raise error(f"the server of {name} refused the upgrade: {exc.status} {exc.message}") from None
    except TimeoutError:
        raise errors.ServiceUnavailable(f"error trying to reach service: {name} did not answer the upgrade within "
                                        f"{HANDSHAKE_TIMEOUT_SECONDS:g}s") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise errors.ServiceUnavailable(f"error trying to reach service: {exc}") from None
    async with upstream:
        return await _relay(request, upstream, name)


async def _relay(request: web.Request, upstream: aiohttp.ClientWebSocketResponse, name: str) -> web.StreamResponse:
    protocol = upstream.protocol or ""
    ws = web.WebSocketResponse(protocols=(protocol,) if protocol else (), max_msg_size=LIMITS.max_message_bytes,
                               autoclose=False)
    await ws.prepare(request)
    loop = asyncio.get_running_loop()
    client_ready = asyncio.Event()
    setup = loop.call_later(LIMITS.stream_setup_seconds if protocol in STATUS_CHANNEL_PROTOCOLS else 0, client_ready.set)
    pending: set[asyncio.Task[None]] = set()
    try:
        async with asyncio.timeout(LIMITS.idle_timeout_seconds) as idle:

            def touch() -> None:
                idle.reschedule(loop.time() + LIMITS.idle_timeout_seconds)

            pending = {
                asyncio.create_task(_pump(ws, upstream, touch, client_ready.set, None)),
                asyncio.create_task(_pump(upstream, ws, touch, None, client_ready)),
            }
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    except TimeoutError:
        logger.info("upgraded stream %s to %s closed: idle for %gs", request.path, name, LIMITS.idle_timeout_seconds)
    finally:
        setup.cancel()
        await cancel_relays(pending)
        for side in (ws, upstream):
            if not side.closed:
                with contextlib.suppress(ConnectionError):
                    await side.close()
    return ws


_Socket = web.WebSocketResponse | aiohttp.ClientWebSocketResponse


async def _pump(
    source: _Socket, sink: _Socket, touch: Callable[[], None],
    sent: Callable[[], None] | None, ready: asyncio.Event | None,
) -> None:
    """Messages of ``source`` to ``sink`` until ``source`` closes; its close code passed on."""
    async for message in source:
        touch()
        if ready is not None:
            await ready.wait()
        if message.type is WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        elif message.type is WSMsgType.TEXT:
            await sink.send_str(message.data)
        else:  # a close, or an error
            break
        if sent is not None:
            sent()
    code = source.close_code or 1000
    if not sink.closed:
        await sink.close(code=code)
