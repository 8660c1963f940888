"""While the hub is away the agent says so in one line of words -- ``hub https://...
unreachable (connection refused); retrying`` -- not an aiohttp repr per loop and retry: the
first failure to connect is a WARNING, the retries after it DEBUG, the hub's return one INFO
line. Against a real closed port on 127.0.0.1 and a real server started on it later."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from member_agent.agent import Agent
from member_agent.kubeapi import KubeApi
from member_agent.reachability import Reachability, Unreachable, connection_problem
from tests.member_agent.test_agent_integration import (  # noqa: F401 (fixtures)
    Hub,
    Member,
    agent_config,
    eventually,
    hub,
    member,
)

pytestmark = [pytest.mark.timeout(60), pytest.mark.waiting]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port bound but not listening for the whole test: a connection to it is refused, and no
    other process of a parallel run can take it meanwhile (as it could a port merely closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        yield port


def agent_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("member_agent") and r.levelno == level]


@pytest.fixture
async def api() -> AsyncIterator[tuple[KubeApi, int]]:
    port = closed_port()
    url = f"http://127.0.0.1:{port}"
    client = KubeApi(ApiClient(Configuration(host=url)), timeout=5, reachability=Reachability("hub", url))
    try:
        yield client, port
    finally:
        await client.close()


async def version(request: web.Request) -> web.Response:
    return web.json_response({"gitVersion": "v1.31.0"})


async def serve_version(port: int) -> web.AppRunner:
    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def test_a_hub_away_is_one_warning_in_words_and_its_return_one_info(
    api: tuple[KubeApi, int], caplog: pytest.LogCaptureFixture
) -> None:
    client, port = api
    caplog.set_level(logging.DEBUG, logger="member_agent")
    line = f"hub http://127.0.0.1:{port} unreachable (connection refused)"
    for _ in range(3):
        with pytest.raises(Unreachable) as caught:
            await client.get("/version")
        assert str(caught.value) == line
    assert agent_lines(caplog, logging.WARNING) == [f"{line}; retrying"]
    assert agent_lines(caplog, logging.DEBUG) == [f"{line}; retrying"] * 2
    assert not any(r.exc_info or "Error(" in r.getMessage() for r in caplog.records)

    runner = await serve_version(port)
    try:
        assert (await client.get("/version"))["gitVersion"] == "v1.31.0"
        await client.get("/version")
    finally:
        await runner.cleanup()
    assert agent_lines(caplog, logging.INFO) == [f"hub http://127.0.0.1:{port} answers again"]

    # Away again: a change, so a WARNING again.
    with pytest.raises(Unreachable):
        await client.get("/version")
    assert agent_lines(caplog, logging.WARNING) == [f"{line}; retrying"] * 2


async def test_an_agent_whose_hub_is_away_says_so_once(
    hub: Hub, member: Member, tmp_path: Path, caplog: pytest.LogCaptureFixture, refusing_port: int  # noqa: F811
) -> None:
    caplog.set_level(logging.DEBUG, logger="member_agent")
    away = f"https://127.0.0.1:{refusing_port}"
    cfg = (await agent_config(hub, member, tmp_path / "agent", token="abcdef.0123456789abcdef")).model_copy(
        update={"hub": away}
    )
    agent = Agent(cfg)
    running = asyncio.create_task(agent.run())
    try:

        async def retried() -> bool:
            return sum("joining the hub failed" in m for m in agent_lines(caplog, logging.DEBUG)) >= 3

        await eventually(retried, what="three attempts to join the hub")
    finally:
        await agent.shutdown()
        await asyncio.wait_for(running, 10)
    assert agent_lines(caplog, logging.WARNING) == [f"hub {away} unreachable (connection refused); retrying"]
    assert not any("ClientConnectorError" in r.getMessage() or r.exc_info for r in caplog.records)


@pytest.mark.parametrize(("error", "words"), [
    (ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)"), "connection refused"),
    (OSError("Multiple exceptions: [Errno 111] Connect call failed ('::1', 1, 0, 0), "
             "[Errno 111] Connect call failed ('127.0.0.1', 1)"), "connection refused"),
    (TimeoutError(), "timed out"),
    (aiohttp.ServerDisconnectedError(), "server disconnected"),
    (socket.gaierror(-2, "Name or service not known"), "name not resolved: Name or service not known"),
])
def test_a_connection_failure_is_told_in_words(error: BaseException, words: str) -> None:
    assert connection_problem(error) == words
