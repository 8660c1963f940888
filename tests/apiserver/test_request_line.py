"""A request head as long as kube-apiserver reads (Go's 1 MiB of a request's head) is served:
a list with a label selector of thousands of values, a name past the 8190 bytes aiohttp reads by
default (its Status says what is wrong with it, as kube's does), a bearer token of 64 KiB (an OIDC
token of many groups: authentication decides). Past the bounds (the head's bytes, one line of
it, the number of header lines) the hub answers as Go's net/http does: 431 in plain text, the
connection closed, one log line and no traceback, and it does so while a hostile head is still
arriving. Over plain HTTP, on the runner the hub serves its API with."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web

from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth import TokenStore
from controlplane.apiserver.identity import Role
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.serving import MAX_HEADER_BYTES, GuardedTCPSite, ServingLimits, api_runner
from controlplane.storage import MemoryStore

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@asynccontextmanager
async def _served(app: web.Application) -> AsyncIterator[str]:
    runner = api_runner(app)
    await runner.setup()
    site = GuardedTCPSite(runner, "127.0.0.1", 0, ssl_context=None, limits=ServingLimits())
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def base_url(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[str]:
    async with _served(create_app(objects, api_registry)) as url:
        yield url


async def test_a_64_kib_bearer_token_reaches_authentication(api_registry: Registry) -> None:
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, api_registry)
        await objects.bootstrap()
        tokens = TokenStore(memory)
        token = (await tokens.create(role=Role.ADMIN, name="ada")).token
        async with _served(create_app(objects, api_registry, authenticator=tokens)) as url, aiohttp.ClientSession() as session:
            unknown = {"Authorization": f"Bearer {'t' * 65536}"}
            async with session.get(url + CONFIGMAPS, headers=unknown) as refused:
                status = await refused.json()
                assert (refused.status, status["reason"]) == (401, "Unauthorized"), status
            padded = {"Authorization": f"Bearer {token}", "X-Groups": "g" * 65536, "X-More": "m" * 65536}
            async with session.get(url + CONFIGMAPS, headers=padded) as listed:
                assert listed.status == 200, await listed.text()


async def test_a_long_selector_and_a_long_name_are_served(base_url: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(base_url + CONFIGMAPS, json={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "v2999", "labels": {"app": "v2999"}},
        }) as created:
            assert created.status == 201, await created.text()
        values = ",".join(f"v{index}" for index in range(3000))  # about 20 KB
        async with session.get(base_url + CONFIGMAPS, params={"labelSelector": f"app in ({values})"}) as listed:
            assert listed.status == 200, await listed.text()
            assert [item["metadata"]["name"] for item in (await listed.json())["items"]] == ["v2999"]
        async with session.get(f"{base_url}{CONFIGMAPS}/{'a' * 20000}") as missing:
            status = await missing.json()
            assert (missing.status, status["kind"], status["reason"]) == (404, "Status", "NotFound"), status


async def _raw(base_url: str, head: bytes) -> bytes:
    """Everything the hub answers to ``head`` before it closes the connection."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head)
        await writer.drain()
        async with asyncio.timeout(10):
            return await reader.read()
    finally:
        writer.close()


@pytest.mark.parametrize("head", [
    pytest.param(f"GET {CONFIGMAPS}?labelSelector={'a' * MAX_HEADER_BYTES} HTTP/1.1\r\nHost: hub\r\n\r\n",
                 id="request line"),
    pytest.param(f"GET /readyz HTTP/1.1\r\nHost: hub\r\nX-Long: {'a' * MAX_HEADER_BYTES}\r\n\r\n", id="header line"),
    pytest.param("GET /readyz HTTP/1.1\r\nHost: hub\r\n" + "".join(f"X-{n}: {'a' * 400_000}\r\n" for n in range(3))
                 + "\r\n", id="header bytes"),
    pytest.param("GET /readyz HTTP/1.1\r\n" + "".join(f"X-{n}: v\r\n" for n in range(200)) + "\r\n",
                 id="header count"),
])
async def test_a_head_past_the_bounds_is_answered_431_as_go_does(
    base_url: str, head: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    answer = await _raw(base_url, head.encode())
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line.endswith(b" 431 Request Header Fields Too Large"), answer[:300]
    assert body == b"431 Request Header Fields Too Large", answer[:300]
    assert b"Content-Type: text/plain; charset=utf-8" in headers
    assert b"Connection: close" in headers
    records = [r for r in caplog.records if r.name.startswith(("aiohttp", "controlplane.apiserver.serving"))]
    assert [(r.levelname, "431" in r.getMessage(), r.exc_info) for r in records] == [("INFO", True, None)], [
        r.getMessage() for r in records]


async def test_a_head_that_never_ends_is_refused_while_it_arrives(base_url: str) -> None:
    """Header lines, each within the bounds and fewer than their count's, sent on without the blank
    line that ends the head: the hub answers 431 once it has read kube's bound of bytes, not when
    the head ends (it never does) nor at the header timeout (a close without an answer). What the
    client sends on is read and dropped until the connection closes, Go's half second later."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    line = f"X-Pad: {'p' * 60000}\r\n".encode()
    try:
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: hub\r\n")
        with contextlib.suppress(ConnectionError):
            for _ in range(100):  # 6 MB in 100 lines, six times the bound
                writer.write(line)
                await writer.drain()
        async with asyncio.timeout(ServingLimits().request_header_timeout / 2):
            answer = await reader.read()
    finally:
        writer.close()
    assert answer.split(b"\r\n")[0].endswith(b" 431 Request Header Fields Too Large"), answer[:300]


async def test_a_malformed_head_is_still_a_400(base_url: str) -> None:
    answer = await _raw(base_url, b"GET / HTTP/1.1\r\nHost: hub\r\nBad Header Line\r\n\r\n")
    assert answer.split(b"\r\n")[0].endswith(b" 400 Bad Request"), answer[:300]
