"""How the agent logs the end of its proxy tunnel: a tunnel the hub ends in the ordinary way (a
close frame saying done or going away, or the connection simply ended or reset, as when the hub
restarts or an idle timeout cuts it) is an INFO line; one that breaks (the hub stops answering
the heartbeat) is the hub's reachability WARNING, once, and the tunnel's return says the hub
answers again; a close code outside the ordinary ones is a WARNING naming it. Against a real
WebSocket server on 127.0.0.1 that ends each tunnel as told."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import WSCloseCode, web
from kubernetes_asyncio.client import ApiClient, Configuration

from member_agent import tunnel as tunnel_module
from member_agent.tunnel import AgentTunnel, ReconnectBackoff

pytestmark = pytest.mark.timeout(60)
CLUSTER = "c1"


@dataclass
class FakeHubEnd:
    """The hub's end of the tunnel: each connection ends as the next of ``endings`` says, the
    ones after them stay open."""

    endings: list[str]
    url: str = ""
    opened: list[str] = field(default_factory=list)
    holding: asyncio.Event = field(default_factory=asyncio.Event)

    async def tunnel(self, request: web.Request) -> web.StreamResponse:
        ending = self.endings[len(self.opened)] if len(self.opened) < len(self.endings) else "hold"
        ws = web.WebSocketResponse(autoping=ending != "silent")
        await ws.prepare(request)
        self.opened.append(ending)
        transport = request.transport
        assert transport is not None
        if ending == "going-away":
            await ws.close(code=WSCloseCode.GOING_AWAY)
        elif ending == "done":
            await ws.close()
        elif ending == "code-4000":
            await ws.close(code=4000)
        elif ending == "eof":  # the connection ends without a close frame
            transport.close()
        elif ending == "reset":  # the connection breaks: a TCP reset
            transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        elif ending == "silent":  # no answer to the agent's pings, until it gives up
            async for _ in ws:
                pass
        else:
            self.holding.set()
            await ws.receive()  # until the agent goes
        return ws


@pytest.fixture
async def hub_end(request: pytest.FixtureRequest) -> AsyncIterator[FakeHubEnd]:
    end = FakeHubEnd(list(request.param))
    app = web.Application()
    app.router.add_get(f"/apis/cluster.gpufed.io/v1alpha1/clusters/{CLUSTER}/tunnel", end.tunnel)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    end.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield end
    finally:
        await runner.cleanup()


async def run_until_held(end: FakeHubEnd) -> None:
    """Run the agent's tunnel against ``end`` until it has gone through every ending and holds
    the next connection open."""
    async with ApiClient(Configuration(host=end.url)) as hub, ApiClient(Configuration()) as member:
        tunnel = AgentTunnel(cluster=CLUSTER, hub=hub, member=member, backoff=ReconnectBackoff(0.001, 0.004))
        task = asyncio.create_task(tunnel.run())
        try:
            await end.holding.wait()
            await tunnel.connected.wait()  # the earlier tunnels ended (and cleared it) before this one
            assert tunnel.connections == len(end.endings) + 1
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


def agent_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("member_agent") and r.levelno == level]


@pytest.mark.parametrize("hub_end", [("going-away", "done", "eof", "reset")], indirect=True)
async def test_a_tunnel_the_hub_ends_normally_is_an_info_line(hub_end: FakeHubEnd, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await run_until_held(hub_end)
    assert agent_records(caplog, logging.WARNING) == []
    ended = [line for line in agent_records(caplog, logging.INFO) if "reconnecting" in line]
    assert ended == [
        f"the hub closed the proxy tunnel of cluster {CLUSTER} (code 1001); reconnecting",
        f"the hub closed the proxy tunnel of cluster {CLUSTER} (code 1000); reconnecting",
        f"the hub ended the proxy tunnel of cluster {CLUSTER}; reconnecting",
        f"the hub ended the proxy tunnel of cluster {CLUSTER}; reconnecting",
    ]
    assert hub_end.opened == ["going-away", "done", "eof", "reset", "hold"]


@pytest.mark.parametrize("hub_end", [("silent",)], indirect=True)
async def test_a_broken_tunnel_is_the_hubs_reachability_warning_once(
    hub_end: FakeHubEnd, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tunnel_module, "HEARTBEAT_SECONDS", 0.05)  # the agent's ping, 20 s in earnest
    caplog.set_level(logging.DEBUG)
    await run_until_held(hub_end)
    assert agent_records(caplog, logging.WARNING) == [f"hub {hub_end.url} unreachable (timed out); retrying"]
    assert f"hub {hub_end.url} answers again" in agent_records(caplog, logging.INFO)
    assert not any("reconnecting" in line for line in agent_records(caplog, logging.INFO))


@pytest.mark.parametrize("hub_end", [("code-4000",)], indirect=True)
async def test_an_unusual_close_code_is_a_warning_naming_it(hub_end: FakeHubEnd, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await run_until_held(hub_end)
    assert agent_records(caplog, logging.WARNING) == [
        f"the hub closed the proxy tunnel of cluster {CLUSTER} with code 4000; reconnecting"
    ]
