"""The pure parts of upgraded connections: UPGRADE, MESSAGE and CLOSE frames, the credit window
in both directions, the verb an upgrade is authorized as, the simulated command set, the exit
code `gpufed exec` returns and a simulated member's rules for impersonated users."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from controlplane.apis import proxyframing as framing
from controlplane.apis.proxyframing import Frame, FrameKind, ProxyLimits, ProxyRequest
from controlplane.apiserver.proxy.tunnels import Tunnel
from controlplane.apiserver.proxy.upgrades import asks_member_of_spdy
from controlplane.apiserver.routing import is_upgrade, parse_request
from gpufed.commands.execute import exit_code, resize_message
from gpufed.hubclient import HubError
from member_agent.tunnelupgrades import AgentStream
from simulator import commands
from simulator.commands import Container, GpuView
from simulator.memberaccess import allows, refusal
from simulator.podexec import exit_status, parse_resize
from simulator.profile import AccessRule

LIMITS = ProxyLimits(window_bytes=100, max_message_bytes=60)


def test_upgrade_frame_carries_the_offered_subprotocols() -> None:
    request = ProxyRequest("GET", "/api/v1/namespaces/ml/pods/p/exec?command=ls", [], user="ann",
                           protocols=["v5.channel.k8s.io", "v4.channel.k8s.io"])
    frame = framing.decode(framing.encode(framing.open_frame(9, request, b"", kind=FrameKind.UPGRADE)))
    assert frame.kind is FrameKind.UPGRADE and framing.parse_open(frame.payload) == (request, b"")


def test_message_and_close_frames_round_trip() -> None:
    binary = framing.decode(framing.encode(framing.message_frame(4, b"\x01out")))
    assert framing.parse_message(binary.payload) == (b"\x01out", False)
    text = framing.message_frame(4, b"3eyJ9", text=True)
    assert framing.parse_message(text.payload) == (b"3eyJ9", True)
    assert framing.window_bytes(binary) == 4 and framing.window_bytes(Frame(FrameKind.DATA, 4, b"ab")) == 2
    assert framing.window_bytes(framing.close_frame(4, 1000)) == 0
    assert framing.parse_close(framing.close_frame(4, 1011, "x" * 500).payload) == (1011, "x" * 123)
    assert [framing.sendable_close_code(c) for c in (1000, 1005, 1006, 4001, None)] == [1000, 1000, 1000, 4001, 1000]
    with pytest.raises(framing.FrameError):
        framing.parse_message(b"\x07data")
    with pytest.raises(framing.FrameError):
        framing.parse_close(b"\x03")


def test_a_message_must_fit_in_the_window() -> None:
    with pytest.raises(ValueError, match="max_message_bytes"):
        ProxyLimits(window_bytes=1024, max_message_bytes=2048)


async def test_credit_waits_until_the_peer_credits() -> None:
    credit = framing.Credit(10)
    await credit.take(8)
    waiting = asyncio.create_task(credit.take(5))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting.done()
    credit.add(3)
    await waiting
    assert credit.credit == 0


async def _sent(_: bytes) -> None:
    return None


def test_the_hub_refuses_upgrade_frames_on_plain_streams_and_past_the_window() -> None:
    tunnel = Tunnel("c1", _sent, LIMITS)
    plain, upgraded = tunnel.open_stream(), tunnel.open_stream(upgraded=True)
    with pytest.raises(framing.FrameError, match="not an upgraded connection"):
        tunnel.receive(framing.encode(framing.message_frame(plain.id, b"x")))
    tunnel.receive(framing.encode(framing.credit_frame(upgraded.id, 50)))
    assert upgraded.send_credit.credit == LIMITS.window_bytes + 50
    tunnel.receive(framing.encode(framing.message_frame(upgraded.id, b"x" * 60)))
    with pytest.raises(framing.FrameError, match="window"):
        tunnel.receive(framing.encode(framing.message_frame(upgraded.id, b"x" * 41)))
    with pytest.raises(framing.FrameError, match="a message of"):
        tunnel.receive(framing.encode(framing.message_frame(upgraded.id, b"x" * 61)))


async def test_the_agent_refuses_messages_past_the_window() -> None:
    stream = AgentStream(LIMITS.window_bytes, upgraded=True)
    stream.accept(framing.message_frame(1, b"x" * 60), LIMITS)
    with pytest.raises(framing.FrameError):
        stream.accept(framing.message_frame(1, b"x" * 41), LIMITS)
    assert (await stream.next_inbound()).payload == b"\x00" + b"x" * 60
    stream.accept(framing.message_frame(1, b"x" * 41), LIMITS)  # the member took the first one
    with pytest.raises(framing.FrameError):
        AgentStream(100).accept(framing.message_frame(1, b"x"), LIMITS)


@pytest.mark.parametrize("path", [
    "/apis/cluster.gpufed.io/v1alpha1/clusters/c1/proxy/api/v1/namespaces/ml/pods/p/exec",
    "/api/v1/namespaces/ml/pods/p/exec",
])
def test_an_upgrade_is_authorized_as_create(path: str) -> None:
    headers = {"Connection": "keep-alive, Upgrade", "Upgrade": "websocket"}
    assert is_upgrade(headers) and not is_upgrade({"Upgrade": "websocket"})
    assert parse_request("GET", path, {}, upgrade=True).verb == "create"
    assert parse_request("GET", path, {}).verb == "get"
    # The agents' tunnel is a WebSocket too, read as get clusters/tunnel.
    tunnel = "/apis/cluster.gpufed.io/v1alpha1/clusters/c1/tunnel"
    assert parse_request("GET", tunnel, {}, upgrade=True).verb == "get"


POD = Container(
    pod="train-0", namespace="ml", container="main", env={"MODEL": "llama"},
    gpus=(GpuView("NVIDIA A100-SXM4-80GB", "GPU-1", (("1g.10gb", "MIG-a"), ("2g.20gb", "MIG-b"))),),
)


def test_the_simulated_command_set() -> None:
    assert commands.run(["echo", "hi", "there"], POD).stdout == "hi there\n"
    assert commands.run(["hostname"], POD).stdout == "train-0\n"
    assert commands.run(["cat", "/etc/hostname"], POD).stdout == "train-0\n"
    assert commands.run(["cat", "/nope"], POD).exit_code == 1
    env = commands.run(["env"], POD).stdout
    assert "MODEL=llama\n" in env and "NVIDIA_VISIBLE_DEVICES=MIG-a,MIG-b\n" in env
    assert commands.run(["nvidia-smi", "-L"], POD).stdout.splitlines() == [
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)",
        "  MIG 1g.10gb      Device  0: (UUID: MIG-a)",
        "  MIG 2g.20gb      Device  1: (UUID: MIG-b)",
    ]
    assert commands.run(["nvidia-smi", "-L"], Container("p", "ml", "main")).exit_code == 6
    unknown = commands.run(["python"], POD)
    assert unknown.exit_code == 127 and 'exec: "python": executable file not found' in unknown.stderr
    script = commands.run(["sh", "-c", "echo a && false || echo b; exit 4; echo never"], POD)
    assert (script.stdout, script.exit_code) == ("a\nb\n", 4)
    assert commands.run(["sh", "-c", "nosuch"], POD).stderr == "sh: 1: nosuch: not found\n"
    assert commands.run(["sh", "-c", "exit 300"], POD).exit_code == 44


def test_exit_code_follows_the_status_on_the_error_channel() -> None:
    assert exit_code(exit_status(0, ["true"]), "c1", "") == 0
    assert exit_code(exit_status(3, ["sh", "-c", "exit 3"]), "c1", "") == 3
    with pytest.raises(HubError, match="cluster c1's agent disconnected"):
        exit_code({"status": "Failure", "message": "cluster c1's agent disconnected"}, "c1", "")
    with pytest.raises(HubError, match="before the command's exit status"):
        exit_code(None, "c1", "close code 1006")


def test_member_rules_for_impersonated_users() -> None:
    team = AccessRule(subjects=["tess"], namespaces=["ml"])
    viewers = AccessRule(subjects=["gpufed:viewers"], verbs=["get", "list", "watch"])
    exec_in_ml = parse_request("GET", "/api/v1/namespaces/ml/pods/p/exec", {}, upgrade=True)
    list_default = parse_request("GET", "/api/v1/namespaces/default/pods", {})
    assert allows(team, {"tess"}, exec_in_ml) and not allows(team, {"tess"}, list_default)
    assert allows(viewers, {"ann", "gpufed:viewers"}, list_default)
    assert not allows(viewers, {"ann", "gpufed:viewers"}, exec_in_ml)
    assert refusal("tess", list_default, "c1") == (
        'pods is forbidden: User "tess" cannot list resource "pods" in API group "" in the namespace '
        '"default" (member cluster c1\'s access rules for impersonated users)'
    )


def test_only_a_pods_streaming_subresource_takes_a_spdy_upgrade_to_the_member() -> None:
    for path in ("/api/v1/namespaces/ml/pods/p/exec?command=ls", "/api/v1/namespaces/ml/pods/p/attach",
                 "/api/v1/namespaces/ml/pods/p/portforward"):
        assert asks_member_of_spdy("POST", path) and asks_member_of_spdy("GET", path)
        assert not asks_member_of_spdy("DELETE", path)
    for path in ("/api/v1/namespaces/ml/pods/p", "/api/v1/namespaces/ml/pods", "/api/v1/namespaces/ml/services/s/proxy",
                 "/apis/apps/v1/namespaces/ml/deployments/d/exec"):
        assert not asks_member_of_spdy("POST", path)


def test_terminal_sizes_go_on_the_resize_channel() -> None:
    message = resize_message(120, 40)
    assert message[0] == 4 and parse_resize(message[1:]) == (40, 120)
    assert parse_resize(b"{}") is None and parse_resize(b"x") is None
    assert parse_resize(b'{"Width": -1, "Height": 3}') is None
    assert commands.run(["stty", "size"], replace(POD, terminal=(40, 120))).stdout == "40 120\n"
    without = commands.run(["stty", "size"], POD)
    assert without.exit_code == 1 and "Inappropriate ioctl" in without.stderr
