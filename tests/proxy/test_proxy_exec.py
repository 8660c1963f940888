"""Upgraded connections through the cluster proxy in one process: ``exec`` into a simulated pod
over the hub's proxy route (real HTTPS and WebSockets), the agent's tunnel and the member's API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from controlplane.wsdial import HandshakeRefused, dial
from tests.proxy.test_proxy_tunnel import CLUSTER, LIMITS, PROXY, Fleet, _running_pod, eventually, fleet

__all__ = ["fleet"]
pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]
EXEC = PROXY + "/api/v1/namespaces/default/pods/{pod}/exec"
V5 = "v5.channel.k8s.io"


@asynccontextmanager
async def exec_ws(
    fleet: Fleet, command: list[str], *, who: str = "admin", stdin: bool = False, pod: str = "train-0",
    protocols: tuple[str, ...] = (V5, "v4.channel.k8s.io"),
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    params = [("command", word) for word in command] + [("stdout", "true"), ("stderr", "true")]
    if stdin:
        params.append(("stdin", "true"))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=fleet.ssl)) as session, dial(
        session, fleet.hub.url + EXEC.format(pod=pod), params=params, protocols=protocols,
        headers={"Authorization": f"Bearer {fleet.tokens[who]}"},
    ) as ws:
        yield ws


async def channels(ws: aiohttp.ClientWebSocketResponse) -> dict[int, bytes]:
    """Every channel's bytes until the server closes."""
    out: dict[int, bytes] = {}
    async for message in ws:
        assert message.type is aiohttp.WSMsgType.BINARY
        out[message.data[0]] = out.get(message.data[0], b"") + message.data[1:]
    return out


def status(out: dict[int, bytes]) -> dict[str, Any]:
    return json.loads(out[3])  # type: ignore[no-any-return]


async def test_exec_runs_a_command_in_the_members_pod(fleet: Fleet) -> None:
    await _running_pod(fleet)
    async with exec_ws(fleet, ["echo", "hi"]) as ws:
        assert ws.protocol == V5  # the member's choice, passed on by the hub
        out = await channels(ws)
    assert out[1] == b"hi\n" and status(out)["status"] == "Success"
    async with exec_ws(fleet, ["sh", "-c", "hostname; nosuch; exit 3"], protocols=("v4.channel.k8s.io",)) as ws:
        assert ws.protocol == "v4.channel.k8s.io"
        out = await channels(ws)
    assert out[1] == b"train-0\n" and b"nosuch: not found" in out[2]
    assert status(out)["reason"] == "NonZeroExitCode"
    assert status(out)["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    callers = [c for c in fleet.sim.callers.entries if c["path"].endswith("/train-0/exec")]
    assert callers and {c["impersonateUser"] for c in callers} == {"admin-user"}


async def test_a_quick_commands_output_waits_for_the_client_to_set_up_its_streams(fleet: Fleet) -> None:
    """The member, reached before the client's handshake is answered, has sent ``echo``'s
    output, exit status and close already; the hub gives them to the client only once the
    client sent a message (kubectl does once its streams exist) or after ``stream_setup_seconds``,
    never with the handshake (kubectl would drop them: "Unknown stream id 1")."""
    await _running_pod(fleet)
    tunnel = fleet.hub.proxy.tunnels.get(CLUSTER)
    tunnel.limits = replace(LIMITS, stream_setup_seconds=60.0)
    async with exec_ws(fleet, ["echo", "hi"]) as ws:
        await eventually(lambda: _held(fleet), what="the hub to hold the member's answer (not send it with the handshake)")
        with pytest.raises(TimeoutError):
            await ws.receive(timeout=0.3)
        await ws.send_bytes(b'\x04{"Width":80,"Height":24}')  # a terminal size: the client is set up
        out = await channels(ws)
    assert out[1] == b"hi\n" and status(out)["status"] == "Success"
    # A client that sends nothing gets it all after stream_setup_seconds.
    tunnel.limits = replace(LIMITS, stream_setup_seconds=0.2)
    async with exec_ws(fleet, ["echo", "hi"]) as ws:
        out = await channels(ws)
    assert out[1] == b"hi\n" and status(out)["status"] == "Success"


async def _held(fleet: Fleet) -> bool:
    """Whether the hub holds messages of the member's for the client (past the first one)."""
    return any(stream.queued_bytes for stream in fleet.hub.proxy.tunnels.get(CLUSTER).streams())


async def test_stdin_flows_to_the_command_and_its_close_ends_it(fleet: Fleet) -> None:
    await _running_pod(fleet)
    rounds = 3 * LIMITS.window_bytes // 4000
    echoed = b""
    async with exec_ws(fleet, ["cat"], stdin=True) as ws:
        # More than the credit window in total: the agent's credits keep the hub sending.
        for _ in range(rounds):
            await ws.send_bytes(b"\x00" + b"x" * 4000)
            got = b""
            while len(got) < 4000:
                message = await ws.receive()
                assert message.data[0] == 1
                got += message.data[1:]
            echoed += got
        await ws.send_bytes(b"\xff\x00")  # v5: stdin is closed
        out = await channels(ws)
    assert echoed == b"x" * 4000 * rounds
    assert status(out)["status"] == "Success"


async def test_a_dropped_tunnel_ends_the_exec_with_a_status_naming_the_cluster(fleet: Fleet) -> None:
    await _running_pod(fleet)
    async with exec_ws(fleet, ["cat"], stdin=True) as ws:
        await ws.send_bytes(b"\x00ping")
        assert (await ws.receive()).data == b"\x01ping"
        await fleet.hub.proxy.close()  # the hub drops every agent's tunnel
        out = await channels(ws)
        assert ws.close_code == 1011
    assert status(out)["status"] == "Failure" and status(out)["code"] == 503
    assert f"cluster {CLUSTER}'s" in status(out)["message"]


async def test_an_idle_exec_is_closed(fleet: Fleet) -> None:
    await _running_pod(fleet)
    tunnel = fleet.hub.proxy.tunnels.get(CLUSTER)
    tunnel.limits = replace(LIMITS, idle_timeout_seconds=0.5)
    async with exec_ws(fleet, ["cat"], stdin=True) as ws:
        out = await channels(ws)
    assert "idle for 0.5s" in status(out)["message"]
    await eventually(lambda: _no_streams(fleet), what="the agent's side of the idle stream to end")


async def _no_streams(fleet: Fleet) -> bool:
    assert fleet.agent.tunnel is not None
    return not fleet.hub.proxy.tunnels.get(CLUSTER).streams() and not fleet.agent.tunnel.stream_credits()


async def test_exec_needs_create_on_clusters_proxy_and_spdy_gets_the_members_refusal(fleet: Fleet) -> None:
    await _running_pod(fleet)
    with pytest.raises(HandshakeRefused) as refused:
        async with exec_ws(fleet, ["echo", "hi"], who="viewer"):
            pass
    assert refused.value.status == 403
    assert 'cannot create resource "clusters/proxy"' in refused.value.message
    # The member's own refusal comes back as its Status.
    with pytest.raises(HandshakeRefused) as missing:
        async with exec_ws(fleet, ["echo"], pod="nope"):
            pass
    assert missing.value.status == 404 and missing.value.message == 'pods "nope" not found'
    # SPDY is not carried: the hub sends the request on without its upgrade, so the client gets
    # the member's refusal (here: no WebSocket), or the hub's 400 when the member has none.
    for method, path, code, message in (
        ("POST", EXEC.format(pod="nope") + "?command=ls", 404, 'pods "nope" not found'),
        ("POST", EXEC.format(pod="train-0") + "?command=ls", 400, "this simulated member does not serve SPDY"),
        ("GET", PROXY + "/api/v1/namespaces/default/pods", 400, "WebSocket upgrades only, not 'SPDY/3.1'"),
        # (only a pod's exec, attach or portforward is sent on: this DELETE reaches no member)
        ("DELETE", PROXY + "/api/v1/namespaces/default/pods/train-0", 400, "WebSocket upgrades only"),
    ):
        async with aiohttp.ClientSession() as session, session.request(
            method, fleet.hub.url + path, ssl=fleet.ssl, headers={
                "Authorization": f"Bearer {fleet.tokens['admin']}", "Connection": "Upgrade", "Upgrade": "SPDY/3.1",
            },
        ) as response:
            body = await response.json()
        assert (response.status, body["kind"]) == (code, "Status") and message in body["message"], body
    await eventually(lambda: _no_streams(fleet), what="the SPDY probes' streams to end")
    pods = fleet.sim.objects.registry.require("v1", "Pod")
    assert await fleet.sim.objects.get(pods, namespace="default", name="train-0")


async def test_attach_streams_the_containers_output_from_now_on(fleet: Fleet) -> None:
    await _running_pod(fleet)
    params = [("container", "main"), ("stdout", "true"), ("stderr", "true")]
    url = fleet.hub.url + PROXY + "/api/v1/namespaces/default/pods/train-0/attach"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=fleet.ssl)) as session, dial(
        session, url, params=params, protocols=(V5,), headers={"Authorization": f"Bearer {fleet.tokens['admin']}"},
    ) as ws:
        first = await ws.receive()
        second = await ws.receive()
    steps = [int(m.data[1:].decode().splitlines()[0].split()[2].rstrip(":")) for m in (first, second)]
    assert first.data[0] == 1 and first.data[1:].startswith(b"[main] step ")
    assert steps[1] > steps[0]
