"""Bounded watch buffers: a watcher that does not read is closed, one that reads is not.

The buffer rules are table-driven; the HTTP tests open a real TCP watch that never reads
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
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.watching import SlowWatcher, WatchBuffer, WatchLimits

Client = TestClient[Any, Any]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
_TCP_ESTABLISHED = 1  # tcpi_state in struct tcp_info (Linux)


@pytest.mark.parametrize(
    ("limits", "lines", "fits"),
    [
        (WatchLimits(max_bytes=10, max_events=5), [b"12345", b"12345"], True),
        # The line that crosses the byte bound is kept; the next one must wait.
        (WatchLimits(max_bytes=10, max_events=5), [b"12345", b"123456"], True),
        (WatchLimits(max_bytes=10, max_events=5), [b"12345", b"123456", b"1"], False),
        (WatchLimits(max_bytes=100, max_events=2), [b"a", b"b", b"c"], False),
        (WatchLimits(max_bytes=100, max_events=3), [b"a", b"b", b"c"], True),
        # One line larger than the byte bound passes into an empty buffer.
        (WatchLimits(max_bytes=4), [b"a very long line"], True),
        (WatchLimits(max_bytes=4), [b"a very long line", b"a"], False),
    ],
)
async def test_buffer_bounds_bytes_and_events(limits: WatchLimits, lines: list[bytes], fits: bool) -> None:
    buffer = WatchBuffer(WatchLimits(max_bytes=limits.max_bytes, max_events=limits.max_events, slow_timeout=0.05))

    async def fill() -> None:
        for line in lines:
            await buffer.wait_for_room()
            buffer.put(line)

    if fits:
        await fill()
        assert len(buffer) == len(lines)
    else:
        with pytest.raises(SlowWatcher):
            await fill()
        assert buffer.buffered_bytes < limits.max_bytes + max(len(line) for line in lines)


async def test_a_reader_that_keeps_up_slowly_is_never_dropped() -> None:
    buffer = WatchBuffer(WatchLimits(max_bytes=1000, max_events=2, slow_timeout=0.2))
    received: list[bytes] = []

    async def read() -> None:
        while (line := await buffer.get()) is not None:
            received.append(line)
            await asyncio.sleep(0.05)  # slower than the producer, faster than the timeout

    reader = asyncio.create_task(read())
    for index in range(20):
        await buffer.wait_for_room()
        buffer.put(b"%d" % index)
    buffer.finish(b"last")
    await reader
    assert received == [b"%d" % i for i in range(20)] + [b"last"]


async def test_finish_is_never_refused_and_abandon_ends_the_reader() -> None:
    buffer = WatchBuffer(WatchLimits(max_bytes=1, max_events=1, slow_timeout=0.05))
    buffer.put(b"x")
    buffer.finish(b"an ERROR event")
    assert [await buffer.get(), await buffer.get(), await buffer.get()] == [b"x", b"an ERROR event", None]

    abandoned = WatchBuffer(WatchLimits())
    abandoned.put(b"y")
    abandoned.abandon()
    assert abandoned.buffered_bytes == 0
    assert await abandoned.get() is None


async def test_the_writer_takes_every_waiting_line_in_one_piece_and_a_lone_line_at_once() -> None:
    buffer = WatchBuffer(WatchLimits(max_bytes=1000, max_events=3, slow_timeout=0.05))
    buffer.put(b"a\n")
    assert await buffer.take() == b"a\n"  # a lone line is not held back for company
    for line in (b"b\n", b"c\n", b"d\n"):
        buffer.put(line)
    assert not buffer.has_room()
    assert await buffer.take() == b"b\nc\nd\n"
    assert (buffer.buffered_bytes, len(buffer), buffer.has_room()) == (0, 0, True)
    later = asyncio.ensure_future(buffer.take())
    await asyncio.sleep(0)
    assert not later.done()  # nothing waiting: the writer waits
    buffer.finish(b"e\n")
    assert await later == b"e\n"
    assert await buffer.take() is None


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
