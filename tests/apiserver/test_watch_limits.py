"""Bounded watch writes: a watcher that does not read is closed, one that reads is not.

The write and stall rules are table-driven; the HTTP tests open a real TCP watch that never reads
against the API server (aiohttp's test server on a real socket) next to one that does.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.objects.values import ObjectEvent, WatchEventType
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.watching import SlowWatcher, Stall, WatchLimits, writes

Client = TestClient[Any, Any]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
_TCP_ESTABLISHED = 1  # tcpi_state in struct tcp_info (Linux)


def _events(*lines: bytes) -> list[ObjectEvent]:
    return [ObjectEvent(WatchEventType.MODIFIED, {"line": line}, index) for index, line in enumerate(lines)]


def _line(event: ObjectEvent) -> bytes:
    line: bytes = event.object["line"]
    return line


@pytest.mark.parametrize(
    ("limits", "lines", "written"),
    [
        # A lone line is written as it is, however large.
        (WatchLimits(max_bytes=4), [b"a very long line"], [b"a very long line"]),
        # Every line of a batch in one write while they fit.
        (WatchLimits(max_bytes=100, max_events=3), [b"a", b"b", b"c"], [b"abc"]),
        (WatchLimits(max_bytes=100, max_events=2), [b"a", b"b", b"c"], [b"ab", b"c"]),
        # The line that crosses the byte bound is kept; the next one goes in the next write.
        (WatchLimits(max_bytes=10), [b"12345", b"123456", b"1"], [b"12345123456", b"1"]),
        (WatchLimits(max_bytes=10), [b"12345", b"12345", b"1", b"2"], [b"1234512345", b"12"]),
    ],
)
def test_a_batch_is_written_in_as_few_writes_as_the_bounds_allow(
    limits: WatchLimits, lines: list[bytes], written: list[bytes]
) -> None:
    assert list(writes(_events(*lines), _line, limits)) == written


def test_a_write_that_makes_no_progress_for_the_timeout_is_a_slow_watcher() -> None:
    stall = Stall(slow_timeout=1.0, period=0.25)
    # The first check sees the write under way; three more with nothing moving: not yet.
    for _ in range(4):
        assert stall.check(writing=True, writes=7, buffered=5000) is None
    slow = stall.check(writing=True, writes=7, buffered=5000)
    assert isinstance(slow, SlowWatcher)
    assert "read nothing for 1s" in str(slow)


@pytest.mark.parametrize(
    "progress",
    [
        {"writing": False},  # waiting for events, not for the client
        {"writes": 1},  # a write finished since the last check
        {"buffered": -1},  # the client read some of what the transport holds
    ],
)
def test_a_client_that_reads_however_slowly_is_never_dropped(progress: dict[str, int]) -> None:
    stall = Stall(slow_timeout=1.0, period=0.25)
    writes_done, buffered = 0, 100_000
    for _ in range(40):  # ten times the timeout
        for _ in range(3):  # stuck for three checks, then some progress
            assert stall.check(writing=True, writes=writes_done, buffered=buffered) is None
        writes_done += progress.get("writes", 0)
        buffered += progress.get("buffered", 0)
        assert stall.check(
            writing=bool(progress.get("writing", True)), writes=writes_done, buffered=buffered
        ) is None


@pytest.mark.parametrize("kwargs", [{"max_bytes": 0}, {"max_events": 0}, {"slow_timeout": 0}])
def test_limits_must_be_positive(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="positive"):
        WatchLimits(**kwargs)


# --- over HTTP ------------------------------------------------------------------------------

LIMITS = WatchLimits(max_bytes=256 * 1024, max_events=1000, slow_timeout=0.5)


@pytest.fixture
async def limited_api(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[Client]:
    app = create_app(objects, api_registry, watch_limits=LIMITS)
    async with TestClient(TestServer(app)) as client:
        yield client


def _stalled_watch(port: int) -> socket.socket:
    """A watch over real TCP whose client never reads (a tiny receive window, too)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        f"GET {CONFIGMAPS}?watch=true HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n\r\n".encode()
    )
    return sock


def _closed_by_server(sock: socket.socket, *, within: float) -> bool:
    """True once the server ends the connection (without this client reading a byte)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        if state != _TCP_ESTABLISHED:
            return True
        time.sleep(0.05)
    return False


def _configmap(name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"blob": "x" * size}}


async def test_a_watch_that_never_reads_is_closed_and_a_reading_one_gets_every_event(limited_api: Client) -> None:
    port = limited_api.port
    assert port is not None
    stalled = [_stalled_watch(port) for _ in range(3)]
    reading = await limited_api.get(CONFIGMAPS, params={"watch": "true"})
    names: list[str] = []
    all_received = asyncio.Event()

    async def read_events() -> None:
        while line := await reading.content.readline():
            names.append(json.loads(line)["object"]["metadata"]["name"])
            if len(names) == 63:
                all_received.set()

    reader = asyncio.create_task(read_events())
    try:
        await asyncio.sleep(0.2)  # let every watch start before the writes
        # 60 x 100 KiB: far more than one watch may hold plus what the kernel buffers.
        for index in range(60):
            created = await limited_api.post(CONFIGMAPS, json=_configmap(f"cm-{index}", 100 * 1024))
            assert created.status == 201
        closed = [
            await asyncio.to_thread(_closed_by_server, sock, within=LIMITS.slow_timeout * 10) for sock in stalled
        ]
        assert closed == [True, True, True], "the server kept a watch open whose client reads nothing"
        for index in range(60, 63):  # the reading watcher goes on receiving after the drops
            await limited_api.post(CONFIGMAPS, json=_configmap(f"cm-{index}", 1024))
        async with asyncio.timeout(10):
            await all_received.wait()
        assert names == [f"cm-{i}" for i in range(63)]
    finally:
        reader.cancel()
        reading.close()
        for sock in stalled:
            sock.close()
