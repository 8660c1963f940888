"""--max-requests-inflight: beyond the limit (and the priority level's queue) a request gets
kube's 429, health checks still pass, a watch takes a seat only while it starts (kube's APF), and
the count goes down as requests finish."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apis.kube.flowcontrol_bootstrap import bootstrap_object
from controlplane.apiserver.app import create_app
from controlplane.apiserver.flowcontrol import FlowControlConfig
from controlplane.apiserver.flowcontrol.maxinflight import MaxInFlightConfig
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.hub import hub_registry
from gpufed.logging_setup import ClientNoiseFilter


@pytest.fixture
def api_registry() -> Registry:
    return hub_registry()  # with the flowcontrol kinds


async def test_requests_beyond_the_inflight_limit_get_429(objects: ObjectStore, api_registry: Registry) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(_request: web.Request) -> web.StreamResponse:
        entered.set()
        await release.wait()
        return web.Response(text="done")

    # One seat and no queue (global-default made a Reject level): the second request is refused at once.
    limits = FlowControlConfig(total_concurrency=1)
    level = bootstrap_object("PriorityLevelConfiguration", "global-default")
    assert level is not None
    level["spec"]["limited"]["limitResponse"] = {"type": "Reject"}
    await objects.create(api_registry.require("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"), level)
    app = create_app(objects, api_registry, flow_control=limits, extra_routes=[web.get("/slow", slow)])
    async with TestClient(TestServer(app)) as client:
        first = asyncio.create_task(client.get("/slow"))
        await entered.wait()
        refused = await client.get("/api/v1/namespaces")
        assert refused.status == 429
        assert refused.headers["Retry-After"] == "1"
        status = await refused.json()
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "TooManyRequests", 429)
        assert "--max-requests-inflight" in status["message"]
        # Health checks are not counted; a watch needs a seat to start (kube's APF), none is free.
        assert (await client.get("/readyz")).status == 200
        refused_watch = await client.get("/api/v1/namespaces?watch=1&timeoutSeconds=1")
        assert refused_watch.status == 429
        release.set()
        assert (await first).status == 200
        # Once started (its initial events sent) a watch gives its seat back while it goes on.
        async with client.get("/api/v1/namespaces?watch=1&timeoutSeconds=30") as watch:
            assert watch.status == 200
            assert b'"ADDED"' in await watch.content.readline()  # an initial event
            assert (await client.get("/api/v1/namespaces")).status == 200


async def test_without_apf_kubes_max_in_flight_limits_reads_and_writes_apart(
    objects: ObjectStore, api_registry: Registry
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(_request: web.Request) -> web.StreamResponse:
        entered.set()
        await release.wait()
        return web.Response(text="done")

    # One read-only request at once, writes unlimited (0), no priority levels and no queue.
    app = create_app(objects, api_registry, flow_control=MaxInFlightConfig(read_only=1, mutating=0),
                     extra_routes=[web.get("/slow", slow)])
    async with TestClient(TestServer(app)) as client:
        first = asyncio.create_task(client.get("/slow"))
        await entered.wait()
        refused = await client.get("/api/v1/namespaces")
        assert (refused.status, refused.headers["Retry-After"]) == (429, "1")
        assert (await refused.json())["message"] == "Too many requests, please try again later."
        assert "X-Kubernetes-PF-FlowSchema-UID" not in refused.headers
        created = await client.post("/api/v1/namespaces", json={"metadata": {"name": "team-a"}})
        assert created.status == 201
        release.set()
        assert (await first).status == 200
        assert (await client.get("/api/v1/namespaces")).status == 200


def _record(name: str, exc: BaseException | None, message: str = "Error handling request") -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord(name, logging.ERROR, __file__, 1, message, None, exc_info)


def test_client_mistakes_are_not_logged_as_server_errors() -> None:
    from aiohttp.http_exceptions import BadHttpMessage

    noise = ClientNoiseFilter()
    bad = _record("aiohttp.server", BadHttpMessage("Invalid method encountered"))
    assert noise.filter(bad) is False  # DEBUG, and the root logger is not at DEBUG here
    assert (bad.levelno, bad.exc_info) == (logging.DEBUG, None)
    assert "malformed HTTP request" in bad.getMessage() and "\n" not in bad.getMessage()
    reset = _record("aiohttp.server", ConnectionResetError("Cannot write to closing transport"))
    assert noise.filter(reset) is False
    assert "lost connection" in reset.getMessage()
    lost_write = logging.LogRecord("asyncio", logging.WARNING, __file__, 1, "socket.send() raised exception.", None, None)
    assert noise.filter(lost_write) is False
    # A server fault is still an ERROR with its traceback.
    fault = _record("aiohttp.server", RuntimeError("boom"))
    assert noise.filter(fault) is True
    assert fault.levelno == logging.ERROR and fault.exc_info is not None
