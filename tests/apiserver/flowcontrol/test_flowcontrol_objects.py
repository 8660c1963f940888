"""The dispatcher follows the objects without a restart: an admin routes one user, by a FlowSchema,
to a ``Reject`` priority level of one seat (that borrows none); while that user's first LIST holds the seat their next
is refused at once with 429 (naming the objects' UIDs; kube's ``dump_priority_levels`` counts it),
another user's same LIST is served, and deleting the FlowSchema sends the user back to global-default."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth import RoleAuthorizer, TokenStore
from controlplane.apiserver.flowcontrol import FLOW_SCHEMA_HEADER, PRIORITY_LEVEL_HEADER, FlowControlConfig
from controlplane.apiserver.identity import Role
from controlplane.apiserver.tls import ensure_pki
from controlplane.hub import hub_registry
from controlplane.storage import Store

from .gating import GatedObjects

APF = "/apis/flowcontrol.apiserver.k8s.io/v1"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
DEBUG = "/debug/api_priority_and_fairness"
Call = Callable[..., Awaitable[tuple[int, dict[str, Any], dict[str, str]]]]


@pytest.fixture
async def hub(tmp_path: Path, store: Store) -> AsyncIterator[tuple[Call, GatedObjects]]:
    pki = ensure_pki(tmp_path, hosts=[])
    registry = hub_registry()
    objects = GatedObjects(store, registry, signal_at=1, hold_at_most=1)
    tokens = TokenStore(store)
    app = create_app(
        objects, registry, authenticator=tokens, authorizer=RoleAuthorizer(),
        flow_control=FlowControlConfig(total_concurrency=20), watch_cache=None,
    )
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pki.server_ssl_context())
    await site.start()
    url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    issued = {
        "admin": (await tokens.create(role=Role.ADMIN, name="admin")).token,
        "bob": (await tokens.create(role=Role.VIEWER, name="bob")).token,
        "carol": (await tokens.create(role=Role.VIEWER, name="carol")).token,
        "dave": (await tokens.create(role=Role.USER, name="dave")).token,
    }
    connector = aiohttp.TCPConnector(ssl=pki.client_ssl_context(), limit=0)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:

            async def call(method: str, path: str, *, who: str, body: Any = None) -> tuple[int, dict[str, Any], dict[str, str]]:
                headers = {"Authorization": f"Bearer {issued[who]}", "Content-Type": "application/json"}
                data = json.dumps(body).encode() if body is not None else None
                async with session.request(method, url + path, headers=headers, data=data) as response:
                    if response.content_type != "application/json":
                        return response.status, {"text": await response.text()}, dict(response.headers)
                    return response.status, await response.json(), dict(response.headers)

            yield call, objects
    finally:
        objects.gate.set()
        await runner.cleanup()


async def wait_for_schema(call: Call, who: str, uid: str) -> None:
    """Until ``who``'s requests are classified by the FlowSchema ``uid`` (the watch has it)."""
    async with asyncio.timeout(10):
        while True:
            if (await call("GET", "/api/v1/namespaces", who=who))[2].get(FLOW_SCHEMA_HEADER) == uid:
                return
            await asyncio.sleep(0.02)


async def test_a_flow_schema_routes_a_user_to_a_rejecting_level(hub: tuple[Call, GatedObjects]) -> None:
    call, objects = hub
    level = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
             "metadata": {"name": "tiny"},
             "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "borrowingLimitPercent": 0,
                                                     "limitResponse": {"type": "Reject"}}}}
    code, level, _ = await call("POST", f"{APF}/prioritylevelconfigurations", who="admin", body=level)
    assert code == 201, level
    assert level["spec"]["limited"]["lendablePercent"] == 0  # kube's defaulting
    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "bob-to-tiny"},
              "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 100,
                       "distinguisherMethod": {"type": "ByUser"},
                       "rules": [{"subjects": [{"kind": "User", "user": {"name": "bob"}}],
                                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                     "clusterScope": True, "namespaces": ["*"]}]}]}}
    code, schema, _ = await call("POST", f"{APF}/flowschemas", who="admin", body=schema)
    assert code == 201, schema
    await wait_for_schema(call, "bob", schema["metadata"]["uid"])

    held = asyncio.create_task(call("GET", CONFIGMAPS, who="bob"))
    await objects.all_held.wait()
    code, refused, headers = await call("GET", CONFIGMAPS, who="bob")
    assert code == 429, refused
    assert headers["Retry-After"] == "1"
    assert "priority level 'tiny' (flow schema 'bob-to-tiny')" in refused["message"]
    assert "concurrency-limit" in refused["message"]
    assert (headers[FLOW_SCHEMA_HEADER], headers[PRIORITY_LEVEL_HEADER]) == (schema["metadata"]["uid"], level["metadata"]["uid"])
    # Another user's same LIST is served meanwhile (global-default).
    code, _, headers = await call("GET", CONFIGMAPS, who="carol")
    assert code == 200 and headers[FLOW_SCHEMA_HEADER] != schema["metadata"]["uid"]
    # kube's dump_requests shows the held LIST executing in the level, outside any queue (-1).
    code, dump, _ = await call("GET", f"{DEBUG}/dump_requests?includeRequestDetails=1", who="admin")
    assert code == 200, dump
    rows = [[cell.strip() for cell in line.split(",")[:-1]] for line in dump["text"].splitlines()]
    assert rows[0] == [
        "PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher", "ArriveTime",
        "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime", "UserName", "Verb", "APIPath", "Namespace",
        "Name", "APIVersion", "Resource", "SubResource",
    ]
    [bobs] = [row for row in rows[1:] if row[0] == "tiny"]
    assert bobs[1:5] + bobs[6:9] == ["bob-to-tiny", "-1", "-1", "bob", "1", "0", "0s"]
    assert bobs[5].endswith("Z") and bobs[9] >= bobs[5]  # arrived, then started
    assert bobs[10:] == ["bob", "list", CONFIGMAPS, "default", "", "v1", "configmaps", ""]
    code, dump, _ = await call("GET", f"{DEBUG}/dump_requests", who="admin")
    assert [line.count(",") for line in dump["text"].splitlines()] == [10] * len(dump["text"].splitlines())
    # dump_queues: a line per queue of each queuing level (a Reject level has none).
    code, dump, _ = await call("GET", f"{DEBUG}/dump_queues", who="admin")
    assert code == 200, dump
    lines = dump["text"].splitlines()
    assert lines[0].split() == ["PriorityLevelName,", "Index,", "PendingRequests,", "ExecutingRequests,", "SeatsInUse,",
                                "NextDispatchR,", "InitialSeatsSum,", "MaxSeatsSum,", "TotalWorkSum,"]
    names = [line.split(",")[0] for line in lines[1:]]
    assert names.count("global-default") == 128 and "tiny" not in names and names.count("exempt") == 1
    idle = [line.split(",")[1:-1] for line in lines[1:] if line.startswith("global-default,")]
    assert [[cell.strip() for cell in cells[1:4] + cells[5:]] for cells in idle] == [
        ["0", "0", "0", "0", "0", "0.00000000ss"]
    ] * 128
    objects.gate.set()
    assert (await held)[0] == 200
    # kube's debug dump counts it; only admins may read it.
    code, dump, _ = await call("GET", "/debug/api_priority_and_fairness/dump_priority_levels", who="admin")
    assert code == 200, dump
    lines = dump["text"].splitlines()
    assert lines[0].split() == ["PriorityLevelName,", "ActiveQueues,", "IsIdle,", "IsQuiescing,", "WaitingRequests,",
                                "ExecutingRequests,", "DispatchedRequests,", "RejectedRequests,", "TimedoutRequests,",
                                "CancelledRequests,"]
    rows = {line.split(",")[0]: [cell.strip() for cell in line.split(",")[1:-1]] for line in lines[1:]}
    tiny = rows["tiny"]
    assert tiny[:5] + tiny[6:] == ["0", "true", "false", "0", "0", "1", "0", "0"]  # one rejected
    assert int(tiny[5]) >= 2  # dispatched: the held LIST and the GETs that waited for the schema
    assert rows["exempt"][0] == "<none>"
    for who in ("carol", "dave"):
        for dump_name in ("dump_priority_levels", "dump_queues", "dump_requests"):
            code, _, _ = await call("GET", f"{DEBUG}/{dump_name}", who=who)
            assert code == 403

    # Without the schema bob is back in global-default, served.
    code, _, _ = await call("DELETE", f"{APF}/flowschemas/bob-to-tiny", who="admin")
    assert code == 200
    async with asyncio.timeout(10):
        while True:
            code, _, headers = await call("GET", CONFIGMAPS, who="bob")
            if headers.get(FLOW_SCHEMA_HEADER) != schema["metadata"]["uid"]:
                break
            await asyncio.sleep(0.02)
    assert code == 200


async def test_kube_validation_messages_reach_the_client(hub: tuple[Call, GatedObjects]) -> None:
    call, _ = hub
    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "early"},
              "spec": {"priorityLevelConfiguration": {"name": "global-default"}, "matchingPrecedence": 1}}
    code, status, _ = await call("POST", f"{APF}/flowschemas", who="admin", body=schema)
    assert code == 422, status
    assert status["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.matchingPrecedence",
        "message": "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1",
    }]
