"""A command reads at most 64 MiB of one answer from the hub: a larger answer, whether its
Content-Length says so or it simply keeps coming, ends the command with one line that names the
request and what to do, and is never read whole into memory. Against a real HTTP server on
127.0.0.1 that answers too much (the hub's own answers are not that large)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from controlplane.apiserver.kubeconfig import HubCredentials, write_kubeconfig
from controlplane.apiserver.tls import ensure_pki
from gpufed import hubclient
from gpufed.cli import main
from gpufed.hubclient import MAX_RESPONSE_BYTES, HubClient, HubError

CAP = 4096
ADVICE = "the most gpufed reads of one answer; ask for less (one namespace, a selector, a smaller --chunk-size)"


async def declared(request: web.Request) -> web.StreamResponse:
    """Says up front it will send more than the command reads, sends a little, and stops."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = MAX_RESPONSE_BYTES + 1
    await response.prepare(request)
    await response.write(b'{"items": [')
    return response


async def endless(request: web.Request) -> web.StreamResponse:
    """Chunked, no Content-Length: more than ``CAP`` bytes as they come."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(b'{"items": [')
    for _ in range(8):
        await response.write(b'"x",' * (CAP // 4))
    await response.write(b'"x"]}')
    return response


async def small(request: web.Request) -> web.Response:
    return web.json_response({"items": ["x"] * 100})


async def never_ending(request: web.Request) -> web.Response:
    """A list whose every page has a continue token for one more."""
    page = int(request.query.get("continue") or 0)
    return web.json_response({"items": [f"x{page}"], "metadata": {"continue": str(page + 1)}})


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/declared", declared)
    app.router.add_get("/endless", endless)
    app.router.add_get("/small", small)
    app.router.add_get("/never-ending", never_ending)
    app.router.add_route("GET", "/{tail:.*}", declared)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def client(server: str, tmp_path: Path, *, cap: int = CAP) -> HubClient:
    ca_pem = ensure_pki(tmp_path / "pki", hosts=[]).ca_pem
    return HubClient(HubCredentials(server=server, ca_pem=ca_pem, token="t"), max_response_bytes=cap)


@pytest.mark.parametrize("path", ["/declared", "/endless"])
async def test_an_answer_past_the_cap_is_refused_with_what_to_do(server: str, tmp_path: Path, path: str) -> None:
    with pytest.raises(HubError) as refused:
        await client(server, tmp_path).request("GET", path)
    assert str(refused.value) == f"the hub's answer to GET {path} exceeds {CAP} bytes, {ADVICE}"


async def test_an_answer_within_the_cap_is_read_whole(server: str, tmp_path: Path) -> None:
    assert await client(server, tmp_path).request("GET", "/small") == {"items": ["x"] * 100}


async def test_a_command_stops_at_64_mib_with_one_line(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "hub.kubeconfig"
    write_kubeconfig(config, server=server, ca_pem=ensure_pki(tmp_path / "pki", hosts=[]).ca_pem, token="t", user="u")
    status = await asyncio.to_thread(main, ["queues", "--kubeconfig", str(config)])
    err = capsys.readouterr().err
    assert status == 1
    assert re.fullmatch(rf"error: the hub's answer to GET /\S+ exceeds 64 MiB, {re.escape(ADVICE)}\n", err), err


async def test_a_list_whose_pages_never_end_is_refused_after_the_most_pages(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hubclient, "MAX_LIST_PAGES", 3)  # 10,000 in earnest
    with pytest.raises(HubError) as refused:
        await client(server, tmp_path).read_list("/never-ending")
    assert str(refused.value) == "the list /never-ending did not end after 3 pages; ask for less (one namespace, a selector)"
