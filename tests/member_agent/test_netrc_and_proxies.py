"""The agent's clients (hub and member) read no ``~/.netrc``, as client-go reads none, and take
the proxy from the environment. aiohttp, trusting the environment as kubernetes_asyncio's session
does, looks every request's host up in the netrc file (on a worker thread) and refuses a request
that carries a bearer token's ``Authorization`` header when an entry matches. Against real
servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from member_agent.kubeapi import KubeApi, environment_proxy
from member_agent.reachability import Unreachable

pytestmark = pytest.mark.timeout(60)

PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy")


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def serve(port: int, seen: list[tuple[str, str]], answer: str) -> web.AppRunner:
    """A server that records each request's target and Authorization header and answers a version."""

    async def handle(request: web.Request) -> web.Response:
        seen.append((str(request.url) if request.raw_path.startswith("http") else request.raw_path,
                     request.headers.get("Authorization", "")))
        return web.json_response({"gitVersion": answer})

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


def client(url: str) -> KubeApi:
    configuration = Configuration(host=url)
    configuration.api_key = {"BearerToken": "agent-token"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return KubeApi(ApiClient(configuration=configuration), timeout=5)


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[tuple[str, str]]]]:
    port, seen = free_port(), []
    runner = await serve(port, seen, "v1.31.0")
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def test_a_netrc_entry_for_the_server_does_not_refuse_the_bearer_token(
    server: tuple[str, list[tuple[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = server
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    api = client(url)
    try:
        assert (await api.get("/version"))["gitVersion"] == "v1.31.0"
    finally:
        await api.close()
    assert seen == [("/version", "Bearer agent-token")]


async def test_the_proxy_comes_from_the_environment_unless_no_proxy_lists_the_host(
    server: tuple[str, list[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, through_proxy = server
    target = f"http://127.0.0.1:{free_port()}"  # nothing listens there: only the proxy can answer
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    api = client(target)
    try:
        assert (await api.get("/version"))["gitVersion"] == "v1.31.0"
    finally:
        await api.close()
    assert through_proxy == [(f"{target}/version", "Bearer agent-token")]

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert environment_proxy(target) is None
    api = client(target)
    try:
        with pytest.raises(Unreachable):
            await api.get("/version")
    finally:
        await api.close()
    assert len(through_proxy) == 1


def test_a_proxy_the_configuration_names_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    configuration = Configuration(host="https://hub.example:6443")
    configuration.proxy = "http://kubeconfig-proxy:3128"
    assert environment_proxy("https://hub.example:6443") == "http://env-proxy:3128"

    async def made() -> str:
        api = KubeApi(ApiClient(configuration=configuration))
        try:
            return str(api.client.rest_client.proxy)
        finally:
            await api.close()

    assert asyncio.run(made()) == "http://kubeconfig-proxy:3128"
