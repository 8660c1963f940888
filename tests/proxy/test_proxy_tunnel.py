"""The cluster proxy in one process: a real hub (HTTPS, tokens, embedded etcd), a simulated
member (its HTTPS API, pod logs) and an agent with ``enable_proxy``; requests go through the
hub's proxy route over real HTTP, the agent's tunnel and the member's API."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest

from controlplane import hub as hub_module
from controlplane.apis.proxyframing import Frame, FrameKind, ProxyLimits
from controlplane.apiserver.identity import Role
from controlplane.apiserver.proxy.tunnels import TunnelRegistry
from controlplane.apiserver.tls import ca_hash
from controlplane.hubconfig import HubConfig
from member_agent.agent import Agent
from member_agent.config import AgentConfig
from simulator.clock import rfc3339
from simulator.podlogs import LINE_INTERVAL
from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]

T = TypeVar("T")
CLUSTER = "sim-p"
PROXY = f"/apis/cluster.gpufed.io/v1alpha1/clusters/{CLUSTER}/proxy"
#: Small, so that a slow client fills the window quickly.
LIMITS = ProxyLimits(window_bytes=16 * 1024, chunk_bytes=4 * 1024, max_streams=3, max_message_bytes=8 * 1024)
FLEET = {
    "clusters": [
        {"name": CLUSTER, "nodeGroups": [{"name": "cpu", "count": 1, "cpu": 64, "memoryGiB": 256}]}
    ]
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train-0", "namespace": "default", "labels": {"app": "train"}},
    "spec": {"containers": [{"name": "main", "image": "train:1", "resources": {"requests": {"cpu": "1"}}}]},
}


async def eventually(probe: Callable[[], Awaitable[T | None]], *, within: float = 30.0, what: str = "condition") -> T:
    deadline = asyncio.get_running_loop().time() + within
    last: Any = None
    while True:
        last = await probe()
        if last:
            return last  # type: ignore[no-any-return]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.05)


@dataclass
class Fleet:
    hub: Any
    sim: SimServer
    agent: Agent
    tokens: dict[str, str]
    ssl: ssl.SSLContext

    async def request(
        self, method: str, path: str, *, who: str = "admin", body: Any = None
    ) -> tuple[int, Any]:
        async with aiohttp.ClientSession() as session, session.request(
            method, self.hub.url + path, json=body, ssl=self.ssl,
            headers={"Authorization": f"Bearer {self.tokens[who]}"},
        ) as response:
            text = await response.text()
            try:
                return response.status, json.loads(text)
            except ValueError:
                return response.status, text


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    profile = parse_fleet(FLEET).clusters[0]
    sim_config = SimServerConfig(profile=profile, state_dir=tmp_path / "member", time_scale=20.0, snapshot_interval=None)
    async with (
        hub_module.Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as hub,
        SimServer(sim_config) as sim,
    ):
        hub.proxy.tunnels = TunnelRegistry(LIMITS)
        tokens = {}
        for role in (Role.ADMIN, Role.VIEWER):
            tokens[role.value] = (await hub.tokens.create(role=role, name=f"{role.value}-user")).token
        tokens["agent"] = (await hub.tokens.create(role=Role.AGENT, name="other", cluster="other")).token
        join = await hub.tokens.create(role=Role.BOOTSTRAP, name="join", cluster=CLUSTER, one_time=True,
                                       ttl=dt.timedelta(hours=1))
        config = AgentConfig(
            hub=hub.url, hub_ca_hash=ca_hash(hub.pki.ca_pem), bootstrap_token=join.token, cluster_name=CLUSTER,
            kubeconfig=sim.kubeconfig_path, state_dir=tmp_path / "agent", enable_proxy=True,
        )
        agent = Agent(config)
        async with agent:
            await eventually(lambda: _connected(agent), what="the agent's tunnel")
            assert agent.tunnel is not None
            agent.tunnel.limits = LIMITS
            context = ssl.create_default_context(cadata=hub.pki.ca_pem.decode())
            yield Fleet(hub, sim, agent, tokens, context)


async def _connected(agent: Agent) -> bool:
    return agent.tunnel is not None and agent.tunnel.connected.is_set()


async def _running_pod(fleet: Fleet) -> dict[str, Any]:
    pods = fleet.sim.objects.registry.require("v1", "Pod")
    await fleet.sim.objects.create(pods, POD)

    async def started() -> dict[str, Any] | None:
        pod = await fleet.sim.objects.get(pods, namespace="default", name="train-0")
        return pod if (pod.get("status") or {}).get("startTime") else None

    return await eventually(started, what="the pod to start")


async def test_admin_reads_member_pods_as_itself_through_the_agent(fleet: Fleet) -> None:
    await _running_pod(fleet)
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods")
    assert code == 200, body
    assert [p["metadata"]["name"] for p in body["items"]] == ["train-0"]
    proxied = [c for c in fleet.sim.callers.entries if c["path"] == "/api/v1/namespaces/default/pods"]
    assert proxied and proxied[-1]["impersonateUser"] == "admin-user"
    assert "gpufed:admins" in proxied[-1]["impersonateGroups"]
    # Discovery passes through too (what `kubectl --server .../proxy` needs).
    code, body = await fleet.request("GET", PROXY + "/api/v1")
    assert code == 200 and any(r["name"] == "pods/log" or r["name"] == "pods" for r in body["resources"])


async def test_the_member_sees_the_hub_users_name_groups_uid_and_extra(fleet: Fleet) -> None:
    """A hub user with a uid and extras (here the admin impersonating one at the hub, as a user of
    kube's impersonation would) reaches the member with all of them, as Karmada's proxy sends them."""
    credential = "authentication.kubernetes.io/credential-id"
    headers = {
        "Authorization": f"Bearer {fleet.tokens['admin']}", "Impersonate-User": "bob",
        "Impersonate-Group": "system:masters", "Impersonate-Uid": "uid-7",
        "Impersonate-Extra-Scopes": "view", "Impersonate-Extra-authentication.kubernetes.io%2Fcredential-id": "JTI=abc",
    }
    async with aiohttp.ClientSession() as session, session.get(
        fleet.hub.url + PROXY + "/api/v1/namespaces/default/configmaps", ssl=fleet.ssl, headers=headers
    ) as response:
        assert response.status == 200, await response.text()
    proxied = [c for c in fleet.sim.callers.entries if c["path"] == "/api/v1/namespaces/default/configmaps"]
    assert proxied and {key: proxied[-1][key] for key in (
        "impersonateUser", "impersonateGroups", "impersonateUid", "impersonateExtra")} == {
        "impersonateUser": "bob", "impersonateGroups": ["gpufed:users", "system:masters"],
        "impersonateUid": "uid-7", "impersonateExtra": {credential: ["JTI=abc"], "scopes": ["view"]},
    }


async def test_viewers_and_agents_may_not_proxy(fleet: Fleet) -> None:
    """A viewer's GET through the proxy would read whatever the member lets it, Secrets included
    (kube's view role has no ``*/proxy`` for that reason): the hub refuses it in kube's words,
    before the member is asked; an admin's passes."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "topsecret", "namespace": "default"},
              "data": {"password": "aHVudGVyMg=="}}
    await fleet.sim.objects.create(fleet.sim.objects.registry.require("v1", "Secret"), secret)
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/secrets/topsecret", who="viewer")
    assert code == 403 and body["kind"] == "Status" and body["reason"] == "Forbidden", body
    assert body["message"].startswith(
        f'clusters.cluster.gpufed.io "{CLUSTER}" is forbidden: User "viewer-user" cannot get resource '
        '"clusters/proxy" in API group "cluster.gpufed.io" at the cluster scope'
    ), body["message"]
    assert "data" not in body and not [c for c in fleet.sim.callers.entries if "secrets" in c["path"]]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    code, body = await fleet.request("POST", PROXY + "/api/v1/namespaces", who="viewer", body=namespace)
    assert code == 403 and body["kind"] == "Status"
    assert "clusters/proxy" in body["message"]
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/secrets/topsecret")
    assert code == 200 and body["data"] == secret["data"]
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces", who="agent")
    assert code == 403 and body["kind"] == "Status"
    # Only the cluster's own agent may open its tunnel.
    code, body = await fleet.request("GET", f"/apis/cluster.gpufed.io/v1alpha1/clusters/{CLUSTER}/tunnel")
    assert code == 403 and f"only cluster {CLUSTER}'s agent" in body["message"]
    code, body = await fleet.request("GET", "/apis/cluster.gpufed.io/v1alpha1/clusters/nowhere/proxy/api/v1/pods")
    assert code == 404 and body["kind"] == "Status" and '"nowhere" not found' in body["message"]
    clusters = fleet.hub.objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    await fleet.hub.objects.create(
        clusters, {"apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "idle"},
         "spec": {"provider": "onprem"}}
    )
    code, body = await fleet.request("GET", "/apis/cluster.gpufed.io/v1alpha1/clusters/idle/proxy/api/v1/pods")
    assert code == 503 and body["message"].startswith("cluster idle's agent is not connected")


async def test_follow_streams_new_log_lines(fleet: Fleet) -> None:
    await _running_pod(fleet)
    url = fleet.hub.url + PROXY + "/api/v1/namespaces/default/pods/train-0/log?follow=true&tailLines=1"
    steps: list[int] = []
    async with aiohttp.ClientSession() as session, session.get(
        url, ssl=fleet.ssl, headers={"Authorization": f"Bearer {fleet.tokens['admin']}"}
    ) as response:
        assert response.status == 200
        while len(steps) < 4:
            line = (await response.content.readline()).decode()
            assert line.startswith("[main] step "), line
            steps.append(int(line.split()[2].rstrip(":")))
    # One tail line, then new lines as the simulated clock writes them, in order.
    assert steps == list(range(steps[0], steps[0] + 4))


async def test_slow_client_cannot_grow_the_agents_buffer(fleet: Fleet) -> None:
    pod = await _running_pod(fleet)
    # A pod that has run for hours: its log is far longer than the window.
    pods = fleet.sim.objects.registry.require("v1", "Pod")
    started = rfc3339(fleet.sim.cluster.clock.now() - 100_000 * LINE_INTERVAL)
    await fleet.sim.objects.update_status(pods, {**pod, "status": {**pod["status"], "startTime": started}})
    assert await _log_longer_than(fleet, 20 * LIMITS.window_bytes)
    url = fleet.hub.url + PROXY + "/api/v1/namespaces/default/pods/train-0/log?follow=true"
    tunnel = fleet.hub.proxy.tunnels.get(CLUSTER)
    assert fleet.agent.tunnel is not None
    async with _slow_session() as session, session.get(
        url, ssl=fleet.ssl, headers={"Authorization": f"Bearer {fleet.tokens['admin']}"}, read_bufsize=1024
    ) as response:
        # The client reads nothing: the agent stalls once the window is used up.
        await eventually(lambda: _stalled(fleet), what="the agent to wait for credit")
        assert fleet.agent.tunnel.peak_buffered_bytes <= LIMITS.chunk_bytes
        assert all(s.peak_queued_bytes <= LIMITS.window_bytes for s in tunnel.streams())
        # Reading resumes the flow: far more than a window gets through, still bounded.
        received = 0
        while received < 10 * LIMITS.window_bytes:
            received += len(await response.content.read(1024))
            await asyncio.sleep(0)
        assert fleet.agent.tunnel.peak_buffered_bytes <= LIMITS.chunk_bytes
        assert all(s.peak_queued_bytes <= LIMITS.window_bytes for s in tunnel.streams())


def _tiny_receive_buffer(addr_info: Any) -> socket.socket:
    """A client socket whose kernel receive buffer stays small (no autotuning), so that a client
    that does not read is soon seen as not reading by the hub."""
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


def _slow_session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(socket_factory=_tiny_receive_buffer))


async def _log_longer_than(fleet: Fleet, size: int) -> bool:
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods/train-0/log")
    return code == 200 and len(body) > size


async def _stalled(fleet: Fleet) -> bool:
    tunnel = fleet.agent.tunnel
    assert tunnel is not None
    credits = tunnel.stream_credits()
    return bool(credits) and all(credit < LIMITS.chunk_bytes for credit in credits) and tunnel.buffered_bytes > 0


async def test_cut_tunnel_ends_streams_with_a_status_and_the_agent_reconnects(fleet: Fleet) -> None:
    assert fleet.agent.tunnel is not None
    url = fleet.hub.url + PROXY + "/api/v1/namespaces/default/pods?watch=true"
    lines: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session, session.get(
        url, ssl=fleet.ssl, headers={"Authorization": f"Bearer {fleet.tokens['admin']}"}
    ) as response:
        assert response.status == 200
        await _running_pod(fleet)
        lines.append(json.loads(await response.content.readline()))
        await fleet.hub.proxy.close()  # the hub drops every agent's tunnel
        async for raw in response.content:
            lines.append(json.loads(raw))
    assert lines[0]["type"] == "ADDED"
    assert lines[-1]["type"] == "ERROR"
    assert lines[-1]["object"]["code"] == 503
    assert f"cluster {CLUSTER}'s" in lines[-1]["object"]["message"]
    await eventually(lambda: _reconnected(fleet), what="the agent to reopen its tunnel")
    metrics = fleet.agent.metrics.render().decode()
    assert f'gpufed_agent_proxy_tunnel_connected{{cluster="{CLUSTER}"}} 1.0' in metrics
    assert f'gpufed_agent_proxy_tunnel_connections{{cluster="{CLUSTER}"}} 2.0' in metrics
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods")
    assert code == 200 and body["items"]


async def test_a_cut_with_data_in_flight_still_ends_the_watch_with_a_status(fleet: Fleet) -> None:
    """The member's event is queued for the client when the tunnel goes: the hub relays it and
    has no agent left to credit for it; the client still gets the event, then the Status."""
    url = fleet.hub.url + PROXY + "/api/v1/namespaces/default/pods?watch=true"
    async with aiohttp.ClientSession() as session, session.get(
        url, ssl=fleet.ssl, headers={"Authorization": f"Bearer {fleet.tokens['admin']}"}
    ) as response:
        assert response.status == 200
        pod = await _running_pod(fleet)
        first = json.loads(await response.content.readline())
        [stream] = fleet.hub.proxy.tunnels.get(CLUSTER).streams()
        in_flight = {"type": "MODIFIED", "object": pod}
        stream.deliver(Frame(FrameKind.DATA, stream.id, json.dumps(in_flight).encode() + b"\n"))
        await fleet.hub.proxy.close()  # before the hub's relay has taken the frame
        rest = [json.loads(raw) async for raw in response.content]
    assert first["type"] == "ADDED"
    assert {"type": "MODIFIED", "name": "train-0"} in [
        {"type": line["type"], "name": line["object"]["metadata"]["name"]} for line in rest if line["type"] != "ERROR"
    ]
    assert rest[-1]["type"] == "ERROR" and rest[-1]["object"]["code"] == 503


async def _reconnected(fleet: Fleet) -> bool:
    tunnel = fleet.agent.tunnel
    return tunnel is not None and tunnel.connections >= 2 and tunnel.connected.is_set()


async def test_a_second_tunnel_with_the_agents_credential_does_not_take_the_proxy_down(fleet: Fleet) -> None:
    """A tunnel opened with the agent's credential (a second replica, a restart while the old
    process runs, or a stolen credential) replaces the agent's: the hub closes the agent's socket
    (1012), the agent reconnects, and the proxy answers again once the newer tunnel is gone."""
    agent_tunnel = fleet.agent.tunnel
    assert agent_tunnel is not None
    await _running_pod(fleet)
    headers: dict[str, str] = {}
    await agent_tunnel.hub.update_params_for_auth(headers, [], ["BearerToken"])
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(agent_tunnel.url, headers=headers, ssl=fleet.ssl)
        await ws.close()
    await eventually(lambda: _reconnected(fleet), what="the replaced agent to reopen its tunnel")
    await eventually(lambda: _answers_pods(fleet), what="the proxy to answer through the agent's new tunnel")


async def _answers_pods(fleet: Fleet) -> bool:
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods")
    return code == 200 and bool(body["items"])


async def test_member_errors_pass_through_as_the_members_status(fleet: Fleet) -> None:
    await _running_pod(fleet)
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods/nope/log")
    assert code == 404 and body["kind"] == "Status" and body["message"] == 'pods "nope" not found'
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods/train-0/log?container=side")
    assert code == 400 and body["message"] == "container side is not valid for pod train-0"
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods/train-0/log?tailLines=x")
    assert code == 400 and "tailLines" in body["message"]
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods/train-0/log?tailLines=2")
    assert code == 200 and body.splitlines()[0].startswith("[main] step ") and len(body.splitlines()) == 2


async def test_streams_per_cluster_and_header_size_are_bounded(fleet: Fleet) -> None:
    await _running_pod(fleet)
    url = fleet.hub.url + PROXY + "/api/v1/namespaces/default/pods/train-0/log?follow=true"
    headers = {"Authorization": f"Bearer {fleet.tokens['admin']}"}
    async with aiohttp.ClientSession() as session:
        follows = [await session.get(url, ssl=fleet.ssl, headers=headers) for _ in range(LIMITS.max_streams)]
        try:
            assert [r.status for r in follows] == [200] * LIMITS.max_streams
            code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces")
            assert code == 429 and f"{LIMITS.max_streams} proxied requests" in body["message"]
        finally:
            for response in follows:
                response.close()
        big = {f"X-Big-{i}": "x" * 7000 for i in range(3)}
        async with session.get(fleet.hub.url + PROXY + "/api/v1/namespaces", ssl=fleet.ssl,
                               headers={**headers, **big}) as response:
            assert response.status == 431
            assert (await response.json())["kind"] == "Status"
    # Streams whose clients left are released: the proxy answers again.
    await eventually(lambda: _answers(fleet), what="the closed streams to be released")


async def _answers(fleet: Fleet) -> bool:
    code, _ = await fleet.request("GET", PROXY + "/api/v1/namespaces")
    return code == 200


async def test_a_client_that_takes_nothing_loses_its_stream(fleet: Fleet) -> None:
    pod = await _running_pod(fleet)
    pods = fleet.sim.objects.registry.require("v1", "Pod")
    started = rfc3339(fleet.sim.cluster.clock.now() - 100_000 * LINE_INTERVAL)
    await fleet.sim.objects.update_status(pods, {**pod, "status": {**pod["status"], "startTime": started}})
    tunnel = fleet.hub.proxy.tunnels.get(CLUSTER)
    tunnel.limits = replace(LIMITS, stall_timeout_seconds=0.5)
    url = fleet.hub.url + PROXY + "/api/v1/namespaces/default/pods/train-0/log?follow=true"
    async with _slow_session() as session, session.get(
        url, ssl=fleet.ssl, headers={"Authorization": f"Bearer {fleet.tokens['admin']}"}, read_bufsize=1024
    ) as response:
        assert response.status == 200
        await eventually(lambda: _stalled(fleet), what="the agent to wait for credit")
        # The hub ends the stream it cannot deliver; the agent's member request is cancelled too.
        await eventually(lambda: _no_streams(fleet), what="the stalled stream to end")


async def _no_streams(fleet: Fleet) -> bool:
    tunnel = fleet.hub.proxy.tunnels.get(CLUSTER)
    assert fleet.agent.tunnel is not None
    return not tunnel.streams() and not fleet.agent.tunnel.stream_credits()


async def test_the_query_reaches_the_member(fleet: Fleet) -> None:
    await _running_pod(fleet)
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods?labelSelector=app%3Dtrain%2Cx%21%3Dy")
    assert code == 200 and [p["metadata"]["name"] for p in body["items"]] == ["train-0"]
    code, body = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods?labelSelector=app%3Dother")
    assert code == 200 and body["items"] == []
