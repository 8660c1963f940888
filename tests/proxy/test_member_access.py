"""A simulated member's rules for impersonated hub users, over HTTP: a rule may name
``system:authenticated`` (kube's impersonation adds it to every user but the anonymous one), and
the uid and extra that come with a hub user pass through to the member's API."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from simulator.memberaccess import access_middleware
from simulator.profile import AccessRule


async def _answer(_request: web.Request) -> web.StreamResponse:
    return web.json_response({"kind": "ConfigMapList", "items": []})


async def test_every_authenticated_user_may_read_and_the_anonymous_one_may_not() -> None:
    rules = [AccessRule(subjects=["system:authenticated"], verbs=["get", "list", "watch"])]
    app = web.Application(middlewares=[access_middleware(rules, "sim-a")])
    app.router.add_route("*", "/api/v1/namespaces/{namespace}/configmaps", _answer)
    path = "/api/v1/namespaces/ml/configmaps"
    bob = {"Impersonate-User": "bob", "Impersonate-Uid": "u-1", "Impersonate-Extra-Scopes": "view"}
    client: TestClient[Any, Any]
    async with TestClient(TestServer(app)) as client:
        assert (await client.get(path, headers=bob)).status == 200
        refused = await client.post(path, headers=bob, json={})
        assert refused.status == 403 and 'User "bob" cannot create resource "configmaps"' in (await refused.json())["message"]
        anonymous = await client.get(path, headers={"Impersonate-User": "system:anonymous"})
        assert anonymous.status == 403
