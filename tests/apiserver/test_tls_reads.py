"""The hub's TLS connections read a record at a time (serving.TLS_READ_SIZE) instead of asking
for 256 KiB per read, a buffer the hub's allocator setting maps and unmaps every time: request
bodies of every size still arrive whole, over one keep-alive connection and over many, and each
served connection's TLS layer reads with the smaller size into a receive buffer of that size (this
fails if asyncio's TLS layer is no longer where the hub sets it, rather than the cut silently
stopping)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from controlplane.apiserver.serving import TLS_READ_SIZE, GuardedTCPSite, ServingLimits
from controlplane.apiserver.tls import ensure_pki

SIZES = [
    0,
    1,
    1300,
    TLS_READ_SIZE - 1,
    TLS_READ_SIZE,
    TLS_READ_SIZE + 1,
    3 * TLS_READ_SIZE + 5,
    300 * 1024,
    1 << 20,
]


async def _echo(request: web.Request) -> web.Response:
    body = await request.read()
    transport = request.transport
    assert transport is not None
    tls = getattr(transport, "_ssl_protocol", None)
    read_size = None if tls is None else [tls.max_size, len(tls._ssl_buffer)]
    return web.json_response(
        {"length": len(body), "sha256": hashlib.sha256(body).hexdigest(), "read": read_size}
    )


@pytest.mark.parametrize("tls", [True, False], ids=["https", "http"])
async def test_bodies_of_every_size_arrive_whole(tmp_path: Path, tls: bool) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    app = web.Application(client_max_size=2 << 20)
    app.router.add_post("/echo", _echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = GuardedTCPSite(
        runner, "127.0.0.1", 0, ssl_context=pki.server_ssl_context() if tls else None, limits=ServingLimits()
    )
    await site.start()
    port = runner.addresses[0][1]
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/echo"
    try:
        for connections in (1, 8):  # one keep-alive connection for all, then several at once
            connector = aiohttp.TCPConnector(
                ssl=pki.client_ssl_context() if tls else False, limit=connections
            )
            async with aiohttp.ClientSession(connector=connector) as session:
                for size in SIZES:
                    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
                    async with session.post(url, data=body) as response:
                        assert response.status == 200
                        answer = await response.json()
                    assert answer["length"] == size
                    assert answer["sha256"] == hashlib.sha256(body).hexdigest()
                    assert answer["read"] == ([TLS_READ_SIZE, TLS_READ_SIZE] if tls else None)
    finally:
        await runner.cleanup()
