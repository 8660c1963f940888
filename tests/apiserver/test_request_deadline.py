"""kube's --request-timeout for a body that does not arrive: a client that declares a large
Content-Length and sends a byte now and then holds a priority-and-fairness seat until the
request's timeout, then gets kube's 504 (``Timeout: request did not complete within the allotted
timeout``), its seat given back and its connection closed. A body that arrives in time is served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest

from controlplane.apis.kube.flowcontrol_bootstrap import bootstrap_object
from controlplane.apiserver.app import create_app
from controlplane.apiserver.flowcontrol import FlowControlConfig
from controlplane.apiserver.flowcontrol.debugging import DUMP_PRIORITY_LEVELS
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.serving import GuardedTCPSite, ServingLimits, api_runner
from controlplane.hub import hub_registry

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
#: Seconds: long enough for the test to see the request hold its seat on a loaded machine.
TIMEOUT = 2.0


@pytest.fixture
def api_registry() -> Registry:
    return hub_registry()  # with the flowcontrol kinds


async def _serve(objects: ObjectStore, api_registry: Registry, request_timeout: float) -> AsyncIterator[int]:
    # One seat and no queue: while a request holds the seat, another is refused at once (429).
    level = bootstrap_object("PriorityLevelConfiguration", "global-default")
    assert level is not None
    level["spec"]["limited"]["limitResponse"] = {"type": "Reject"}
    await objects.create(
        api_registry.require("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"), level
    )
    app = create_app(
        objects, api_registry, flow_control=FlowControlConfig(total_concurrency=1), request_timeout=request_timeout
    )
    runner = api_runner(app)
    await runner.setup()
    await GuardedTCPSite(runner, "127.0.0.1", 0, ssl_context=None, limits=ServingLimits()).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


@pytest.fixture
async def port(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[int]:
    async for serving in _serve(objects, api_registry, TIMEOUT):
        yield serving


@pytest.fixture
async def patient_port(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[int]:
    """A hub whose --request-timeout is an hour."""
    async for serving in _serve(objects, api_registry, 3600.0):
        yield serving


async def _get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n".encode())
        async with asyncio.timeout(10):
            answer = await reader.read()
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def _executing(port: int) -> int:
    """The requests executing at every priority level (the dump's own among them, at global-default)."""
    code, dump = await _get(port, DUMP_PRIORITY_LEVELS)
    assert code == 200, dump
    rows = [[cell.strip() for cell in line.split(",")] for line in dump.decode().splitlines()]
    column = rows[0].index("ExecutingRequests")
    return sum(int(row[column]) for row in rows[1:] if len(row) > column and row[column].isdigit())


async def _trickled(port: int, query: str = "") -> bytes:
    """The answer to a POST whose body comes a byte at a time, once the POST holds the one seat."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST {CONFIGMAPS}{query} HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\n"
        f"Content-Length: 3000000\r\n\r\n{{".encode()
    )
    await writer.drain()
    try:
        answer = b""
        async with asyncio.timeout(20):
            # The request holds the one seat while its body trickles in.
            while (await _get(port, CONFIGMAPS))[0] != 429:  # noqa: ASYNC110 (until the POST is in its seat)
                await asyncio.sleep(0.01)
            while not answer:  # a byte at a time, until the hub answers
                writer.write(b" ")
                await writer.drain()
                try:
                    answer = await asyncio.wait_for(reader.read(), TIMEOUT / 5)
                except TimeoutError:
                    continue
    finally:
        writer.close()
    return answer


async def test_a_body_that_does_not_arrive_is_504_and_gives_its_seat_back(port: int) -> None:
    answer = await _trickled(port)
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0].endswith(b" 504 Gateway Timeout"), answer[:300]
    # As kube's timeout filter writes it: the Status without kind and apiVersion, in Go's field
    # order, no Content-Type of its own (Go sniffs text/plain), so client-go reads it as kube's.
    assert b"Content-Type: text/plain; charset=utf-8" in lines, head
    assert body == (
        b'{"metadata":{},"status":"Failure","message":"Timeout: request did not complete within the allotted '
        b'timeout","reason":"Timeout","details":{},"code":504}\n'
    )
    assert await _executing(port) == 1  # the dump's own request: the POST's seat is free
    assert (await _get(port, CONFIGMAPS))[0] == 200


async def test_a_body_that_arrives_in_time_is_served(port: int) -> None:
    body = orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "in-time"}})
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:10]
        )
        await writer.drain()
        await asyncio.sleep(0)
        writer.write(body[10:])
        async with asyncio.timeout(10):
            answer = await reader.read()
    finally:
        writer.close()
    assert answer.split(b"\r\n")[0].endswith(b" 201 Created"), answer[:300]


async def test_the_requests_own_timeout_shortens_the_deadline(patient_port: int) -> None:
    """kubectl --request-timeout sends ?timeout=: a shorter one than the hub's bounds the request."""
    answer = await _trickled(patient_port, "?timeout=1s")
    assert answer.split(b"\r\n")[0].endswith(b" 504 Gateway Timeout"), answer[:300]
    assert await _executing(patient_port) == 1


@pytest.mark.parametrize(
    ("asked", "problem"),
    [("abc", 'time: invalid duration "abc"'), ("5", 'time: missing unit in duration "5"'),
     ("1d", 'time: unknown unit "d" in duration "1d"')],
)
async def test_a_timeout_that_is_no_duration_is_kubes_400(port: int, asked: str, problem: str) -> None:
    code, body = await _get(port, f"{CONFIGMAPS}?timeout={asked}")
    assert code == 400
    status = orjson.loads(body)
    assert (status["reason"], status["message"]) == (
        "BadRequest", f"invalid timeout specified in the request URL - {problem}"
    )
    assert (await _get(port, f"{CONFIGMAPS}?timeout=0s"))[0] == 200  # 0: no timeout of the client's


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/readyz/ping"])
async def test_a_health_checks_timeout_is_read_as_any_requests(port: int, path: str) -> None:
    # A health check is not long-running: kube's WithRequestDeadline reads its timeout too.
    code, body = await _get(port, f"{path}?timeout=abc")
    assert code == 400, body
    message = 'invalid timeout specified in the request URL - time: invalid duration "abc"'
    assert orjson.loads(body)["message"] == message
    assert (await _get(port, f"{path}?timeout=1s"))[0] == 200
