"""Watches that never read cannot exhaust a hub's memory: 50 of them, opened with a viewer
token over TCP to a real hub on a real etcd while 100 KiB objects are written, cost the hub
less than 100 MiB and are closed by it, while a watcher that reads receives every event."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from e2e.harness import GPUFED, wait_for

pytestmark = pytest.mark.e2e

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
STALLED = 50
OBJECT_BYTES = 100 * 1024
WRITES = 100
_TCP_ESTABLISHED = 1  # tcpi_state in struct tcp_info (Linux)


class _Hub:
    """Where the hub is and how to reach it, read from its kubeconfig as a client would."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        url = urlsplit(cluster["server"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.admin_token: str = config["users"][0]["user"]["token"]
        self.context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)

    def stalled_watch(self, token: str) -> socket.socket:
        """Open a watch and never read from it (with a small receive window, as a stuck client has)."""
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect((self.host, self.port))
        sock = self.context.wrap_socket(raw, server_hostname=self.host)
        sock.sendall(
            f"GET {CONFIGMAPS}?watch=true HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: application/json\r\n\r\n".encode()
        )
        return sock


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def _still_open(sock: socket.socket) -> bool:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == _TCP_ESTABLISHED


def _configmap(name: str, size: int) -> bytes:
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"blob": "x" * size}}
    ).encode()


def test_stalled_watchers_are_closed_and_cost_the_hub_little_memory(processes, tmp_path: Path) -> None:
    proc, kubectl = processes.start_hub()
    assert proc.popen is not None
    pid = proc.popen.pid
    hub = _Hub(kubectl.kubeconfig)
    viewer_token = subprocess.run(
        [GPUFED, "token", "create", "--role", "viewer", "--kubeconfig", str(kubectl.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()

    # A watcher that reads, for the whole test.
    received: list[str] = []
    watch = hub.connection()
    watch.request("GET", f"{CONFIGMAPS}?watch=true", headers={"Authorization": f"Bearer {hub.admin_token}"})
    stream = watch.getresponse()
    assert stream.status == 200

    def read_events() -> None:
        try:
            while line := stream.readline():
                name = json.loads(line)["object"]["metadata"]["name"]
                if name != "kube-root-ca.crt":  # the namespace's own, published when it is created
                    received.append(name)
        except (OSError, ValueError, http.client.HTTPException):
            return  # the connection was shut down under the read (a chunk cut short is IncompleteRead)

    reader = threading.Thread(target=read_events, daemon=True)
    reader.start()

    writer = hub.connection()

    def create(name: str, size: int) -> None:
        writer.request("POST", CONFIGMAPS, body=_configmap(name, size), headers={
            "Authorization": f"Bearer {hub.admin_token}", "Content-Type": "application/json",
        })
        response = writer.getresponse()
        body = response.read()
        assert response.status == 201, body[:500]

    for index in range(5):  # warm up every code path before the baseline
        create(f"warm-{index}", OBJECT_BYTES)
    wait_for(lambda: len(received) == 5, timeout=30, what="the reading watcher to see the warm-up objects")
    baseline = _rss_bytes(pid)

    peak = baseline
    sampling = True

    def sample() -> None:
        nonlocal peak
        while sampling:
            peak = max(peak, _rss_bytes(pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stalled = [hub.stalled_watch(viewer_token) for _ in range(STALLED)]
    try:
        time.sleep(1)  # every watch is registered before the writes
        for index in range(WRITES):
            create(f"big-{index}", OBJECT_BYTES)
        # The hub closes every one of them (default --watch-slow-client-timeout 10 s).
        wait_for(lambda: not any(_still_open(s) for s in stalled), timeout=120,
                 what="the hub to close every watch whose client does not read")
        for index in range(3):  # the reading watcher still receives events after the drops
            create(f"after-{index}", 1024)
        expected = [f"warm-{i}" for i in range(5)] + [f"big-{i}" for i in range(WRITES)]
        expected += [f"after-{i}" for i in range(3)]
        wait_for(lambda: len(received) >= len(expected), timeout=60, what="the reading watcher to see every event")
        assert received == expected
    finally:
        sampling = False
        sampler.join()
        for sock in stalled:
            sock.close()
        # The reading thread is blocked in a read on this connection: shut the socket down so
        # that the read returns now (a plain close waits for the read to time out first).
        if watch.sock is not None:
            watch.sock.shutdown(socket.SHUT_RDWR)
        reader.join(timeout=30)  # the read has returned before the response it reads is closed
        watch.close()
        writer.close()
    growth = peak - baseline
    print(f"hub RSS: baseline {baseline / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB, "
          f"growth {growth / 2**20:.1f} MiB with {STALLED} stalled watchers and {WRITES} x 100 KiB writes")
    assert growth < 100 * 2**20, f"the hub's RSS grew by {growth / 2**20:.0f} MiB"
    log = proc.log()
    assert log.count("closing an unresponsive watch") == STALLED
    assert "Traceback" not in log
