"""kubectl and the ``kubernetes`` client through the cluster proxy in one process (real hub,
agent tunnel and simulated member): ``port-forward`` to a pod's echo server with the real
kubectl (SPDY/3.1 tunnelled in a WebSocket) and the official client (``v4.channel.k8s.io``),
a member's refusal of an exec as kubectl shows it (after its SPDY fallback), and a terminal's
size reaching the pod from kubectl and ``gpufed exec -t``."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.stream import portforward

from controlplane.apis.proxyframing import ProxyLimits
from controlplane.wsdial import dial
from tests.proxy.test_proxy_tunnel import CLUSTER, PROXY, Fleet, _running_pod, fleet

__all__ = ["fleet"]
pytestmark = pytest.mark.timeout(120)
KUBECTL = shutil.which("kubectl")


def _full_limits(fleet: Fleet) -> None:
    """The default bounds (the shared fleet's 8 KiB messages are smaller than kubectl's frames)."""
    assert fleet.agent.tunnel is not None
    fleet.hub.proxy.tunnels.get(CLUSTER).limits = ProxyLimits()
    fleet.agent.tunnel.limits = ProxyLimits()


def _kubeconfig(fleet: Fleet, tmp_path: Path) -> Path:
    ca = tmp_path / "hub-ca.crt"
    ca.write_bytes(fleet.hub.pki.ca_pem)
    path = tmp_path / "proxy.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
        "clusters": [{"name": "proxy", "cluster": {"server": fleet.hub.url + PROXY, "certificate-authority": str(ca)}}],
        "users": [{"name": "admin", "user": {"token": fleet.tokens["admin"]}}],
        "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "admin"}}],
    }))
    return path


async def _kubectl(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _echo(port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        return await reader.readexactly(len(payload))
    finally:
        writer.close()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_port_forward_reaches_the_pods_echo_server(fleet: Fleet, tmp_path: Path) -> None:
    await _running_pod(fleet)
    _full_limits(fleet)
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(_kubeconfig(fleet, tmp_path)), "port-forward", "pod/train-0", "0:8080",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            line = (await proc.stdout.readline()).decode()
        found = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", line)
        assert found, line
        local = int(found.group(1))
        assert await _echo(local, b"hello through the proxy\n") == b"hello through the proxy\n"
        # A second connection, and more than one SPDY data frame (kubectl writes 32 KiB at most).
        big = os.urandom(100_000)
        assert await _echo(local, big) == big
        callers = [c for c in fleet.sim.callers.entries if c["path"].endswith("/train-0/portforward")]
        assert callers and {c["impersonateUser"] for c in callers} == {"admin-user"}
        # The tunnel drops: kubectl's connection to the pod is gone, and it says so.
        await fleet.hub.proxy.close()
        async with asyncio.timeout(60):
            _out, err = await proc.communicate()
        assert proc.returncode != 0 and b"lost connection to pod" in err, err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _python_client(fleet: Fleet, ca: Path) -> k8s.ApiClient:
    config = k8s.Configuration(host=fleet.hub.url + PROXY)
    config.api_key = {"authorization": "Bearer " + fleet.tokens["admin"]}
    config.ssl_ca_cert = str(ca)
    return k8s.ApiClient(config)


def _forward_with_the_python_client(fleet: Fleet, ca: Path, payload: bytes) -> bytes:
    with _python_client(fleet, ca) as api_client:
        api = k8s.CoreV1Api(api_client)
        forward = portforward(api.connect_get_namespaced_pod_portforward, "train-0", "default", ports="8080,9000")
        try:
            got = b""
            for port in (8080, 9000):
                sock = forward.socket(port)
                sock.settimeout(30)
                sock.sendall(payload)
                while len(got) < len(payload) * (1 + (port == 9000)):
                    chunk = sock.recv(65536)
                    assert chunk, "the forwarded connection closed"
                    got += chunk
                sock.close()
            return got
        finally:
            forward.close()
            # The client's own thread closes the WebSocket once it sees the ports closed: wait for
            # it, so the test does not end with the client's socket still open.
            deadline = time.monotonic() + 30
            while forward.connected and time.monotonic() < deadline:
                time.sleep(0.01)


async def test_the_kubernetes_client_port_forwards_through_the_proxy(fleet: Fleet, tmp_path: Path) -> None:
    await _running_pod(fleet)
    ca = tmp_path / "hub-ca.crt"
    ca.write_bytes(fleet.hub.pki.ca_pem)
    got = await asyncio.to_thread(_forward_with_the_python_client, fleet, ca, b"ping")
    assert got == b"pingping"


async def test_a_dropped_tunnel_ends_a_port_forward_without_a_status_on_a_ports_channel(fleet: Fleet) -> None:
    """Exec's error channel 3 is port 9000's error channel here: the hub sends no Status on it,
    it closes the connection (1011)."""
    await _running_pod(fleet)
    channels: dict[int, bytes] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=fleet.ssl)) as session, dial(
        session, fleet.hub.url + PROXY + "/api/v1/namespaces/default/pods/train-0/portforward",
        params=[("ports", "8080,9000")], protocols=("v4.channel.k8s.io",),
        headers={"Authorization": f"Bearer {fleet.tokens['admin']}"},
    ) as ws:
        await ws.send_bytes(b"\x00ping")
        async for message in ws:
            channels[message.data[0]] = channels.get(message.data[0], b"") + message.data[1:]
            if channels.get(0, b"").endswith(b"ping"):
                await fleet.hub.proxy.close()  # the hub drops every agent's tunnel
        assert ws.close_code == 1011
    ports = {0: struct.pack("<H", 8080), 1: struct.pack("<H", 8080), 2: struct.pack("<H", 9000),
             3: struct.pack("<H", 9000)}
    assert channels == {**ports, 0: ports[0] + b"ping"}


async def test_port_forward_needs_ports_and_a_running_pod(fleet: Fleet) -> None:
    await _running_pod(fleet)
    path = PROXY + "/api/v1/namespaces/default/pods/{pod}/portforward"
    status, body = await fleet.request("GET", path.format(pod="nope"))
    assert status == 404 and body["message"] == 'pods "nope" not found'
    status, body = await fleet.request("GET", path.format(pod="train-0"))
    assert status == 400 and "WebSocket upgrade offering SPDY/3.1+portforward.k8s.io" in body["message"]



@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_shows_the_members_refusal_of_an_exec(fleet: Fleet, tmp_path: Path) -> None:
    """The member refuses the WebSocket upgrade; kubectl then tries SPDY, which the hub does not
    carry but sends on as a plain request, so kubectl shows the member's own Status."""
    await _running_pod(fleet)
    kubeconfig = _kubeconfig(fleet, tmp_path)
    code, _out, err = await _kubectl(kubeconfig, "exec", "train-0", "-c", "nosuch", "--", "ls")
    assert code != 0 and "container nosuch is not valid for pod train-0" in err, err
    assert "WebSocket upgrades only" not in err
    # An exec the member accepts is unchanged.
    assert await _kubectl(kubeconfig, "exec", "train-0", "--", "echo", "hi") == (0, "hi\n", "")


def _in_a_terminal(argv: list[str], rows: int, columns: int) -> tuple[int, bytes]:
    """Run ``argv`` with a pseudo-terminal of that size as its stdin, stdout and stderr; its exit
    code and everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every holder of the terminal's other side is gone
                break
            if not chunk:
                break
            out += chunk
        return proc.wait(timeout=60), out
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_the_terminal_size_reaches_the_pod(fleet: Fleet, tmp_path: Path) -> None:
    await _running_pod(fleet)
    assert KUBECTL is not None
    kubectl = [KUBECTL, "--kubeconfig", str(_kubeconfig(fleet, tmp_path)), "exec", "-it", "train-0", "--", "stty", "size"]
    code, out = await asyncio.to_thread(_in_a_terminal, kubectl, 33, 101)
    assert (code, out.strip()) == (0, b"33 101"), out
    hub_config = tmp_path / "hub.kubeconfig"
    config = yaml.safe_load(_kubeconfig(fleet, tmp_path).read_text())
    config["clusters"][0]["cluster"]["server"] = fleet.hub.url
    hub_config.write_text(yaml.safe_dump(config))
    gpufed = [str(Path(sys.executable).with_name("gpufed")), "exec", "--kubeconfig", str(hub_config),
              "--cluster", CLUSTER, "-n", "default", "train-0", "-t", "--", "stty", "size"]
    code, out = await asyncio.to_thread(_in_a_terminal, gpufed, 40, 120)
    assert (code, out.strip()) == (0, b"40 120"), out


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_quick_execs_lose_no_output(fleet: Fleet, tmp_path: Path) -> None:
    """A command that ends at once (its output, exit status and close all sent at the member's
    handshake) prints all it wrote, every time. kubectl registers its streams only after the
    handshake, while its reader already runs: a message that comes with the handshake can be
    read before its stream exists ("Unknown stream id 1, discarding message") and a close
    before the last one fails the exec ("closed all streams")."""
    await _running_pod(fleet)
    _full_limits(fleet)
    kubeconfig = _kubeconfig(fleet, tmp_path)
    for _ in range(20):
        assert await _kubectl(kubeconfig, "exec", "train-0", "--", "echo", "hi") == (0, "hi\n", "")
