"""--max-pending-connections counts a TLS connection from its accept, its handshake included: a
client holding connections open without a ClientHello is capped as one that sends no request
header is (each held 256 KiB of asyncio's receive buffer, uncounted, until the header timeout).
What a connection counts goes when it closes, handshake done or not, and a client that completes
its handshake and its request is served."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import aiohttp
from aiohttp import web

from controlplane.apiserver.serving import GuardedTCPSite, ServingLimits, api_runner
from controlplane.apiserver.tls import ensure_pki

PENDING = 3


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 (the server's count signals nothing)
            await asyncio.sleep(0.01)


async def _ok(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def test_connections_in_their_tls_handshake_count_as_pending(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    app = web.Application()
    app.router.add_get("/ok", _ok)
    runner = api_runner(app)
    await runner.setup()
    # A header timeout far past the test's waits: a connection closed is closed for the count.
    limits = ServingLimits(max_pending_connections=PENDING, request_header_timeout=600)
    site = GuardedTCPSite(runner, "127.0.0.1", 0, ssl_context=pki.server_ssl_context(), limits=limits)
    await site.start()
    port = runner.addresses[0][1]
    guard = site._guard
    held: list[asyncio.StreamWriter] = []
    try:
        for _ in range(PENDING):  # TCP connections that never start their handshake
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            held.append(writer)
        await _until(lambda: guard.pending == PENDING)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        async with asyncio.timeout(10):  # closed at once, not at the header timeout
            assert await reader.read() == b""
        writer.close()
        assert guard.refused == 1
        for writer in held:
            writer.close()
        await _until(lambda: guard.pending == 0)
        connector = aiohttp.TCPConnector(ssl=pki.client_ssl_context())
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(f"https://127.0.0.1:{port}/ok") as response,
        ):
            assert (response.status, await response.text()) == (200, "ok")
        assert guard.pending == 0
    finally:
        for writer in held:
            with contextlib.suppress(Exception):
                writer.close()
        await runner.cleanup()
