"""The benchmarks' hub client waits out a ``Retry-After`` answer and sends the create again, as
client-go does (the hub answers 503 with ``Retry-After: 1`` while etcd is away, 429 when flow
control turns a request away), and fails on any other error. Against a real HTTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from bench.hubdriving import MAX_RETRIES, Hub

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def answers() -> AsyncIterator[tuple[Hub, list[tuple[int, dict[str, str]]], list[int]]]:
    """A hub whose POSTs get the queued answers (status, headers) in turn, then 201."""
    queued: list[tuple[int, dict[str, str]]] = []
    posts: list[int] = []

    async def create(request: web.Request) -> web.Response:
        posts.append(len(await request.read()))
        status, headers = queued.pop(0) if queued else (201, {})
        return web.json_response({"kind": "Status", "code": status}, status=status, headers=headers)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/x/configmaps", create)
    server = web.AppRunner(app)
    await server.setup()
    site = web.TCPSite(server, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    async with aiohttp.ClientSession() as session:
        yield Hub(session, f"http://127.0.0.1:{port}"), queued, posts
    await server.cleanup()


async def test_a_retry_after_answer_is_waited_out_and_the_create_sent_again(
    answers: tuple[Hub, list[tuple[int, dict[str, str]]], list[int]],
) -> None:
    hub, queued, posts = answers
    queued += [(503, {"Retry-After": "0"}), (429, {"Retry-After": "0"})]
    assert await hub.create("/api/v1/namespaces/x/configmaps", {"metadata": {"name": "a"}}) == 201
    assert (hub.retries, len(posts)) == (2, 3)
    assert len(set(posts)) == 1  # the same body each time


async def test_an_error_without_retry_after_or_past_the_limit_fails(
    answers: tuple[Hub, list[tuple[int, dict[str, str]]], list[int]],
) -> None:
    hub, queued, posts = answers
    queued.append((503, {}))
    with pytest.raises(RuntimeError, match="HTTP 503"):
        await hub.create("/api/v1/namespaces/x/configmaps", {})
    queued += [(503, {"Retry-After": "0"})] * (MAX_RETRIES + 1)
    with pytest.raises(RuntimeError, match="HTTP 503"):
        await hub.create("/api/v1/namespaces/x/configmaps", {})
    assert hub.retries == MAX_RETRIES
    queued.append((422, {"Retry-After": "0"}))  # not a server-side error: no retry
    with pytest.raises(RuntimeError, match="HTTP 422"):
        await hub.create("/api/v1/namespaces/x/configmaps", {})
    assert len(posts) == 1 + MAX_RETRIES + 1 + 1
