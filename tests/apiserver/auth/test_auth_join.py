"""The credential endpoints over real HTTP: join with a bootstrap token, token
management for admins, the public CA; every error a Kubernetes Status."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.auth import (
    CA_PATH,
    JOIN_PATH,
    TOKENS_PATH,
    TokenStore,
    ca_routes,
    join_routes,
    token_routes,
)
from controlplane.apiserver.identity import Role, UserInfo
from controlplane.storage import Store
from gpufed.commands.token import join_command

CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.fixture
async def tokens(store: Store) -> TokenStore:
    return TokenStore(store)


@pytest.fixture
async def client(tokens: TokenStore) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = web.Application()
    app.router.add_routes(join_routes(tokens))
    app.router.add_routes(token_routes(tokens))
    app.router.add_routes(ca_routes(ca_pem=CA_PEM))
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        yield test_client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def call(
    client: TestClient[web.Request, web.Application],
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: Any = None,
    data: bytes | None = None,
) -> tuple[int, dict[str, Any]]:
    headers = auth(token) if token else {}
    async with client.request(method, path, headers=headers, json=body, data=data) as response:
        return response.status, await response.json()


def assert_status(document: dict[str, Any], *, code: int, reason: str, message: str) -> None:
    assert document["kind"] == "Status"
    assert document["apiVersion"] == "v1"
    assert document["status"] == "Failure"
    assert (document["code"], document["reason"]) == (code, reason)
    assert message in document["message"]


async def admin_token(tokens: TokenStore) -> str:
    return (await tokens.create(role=Role.ADMIN, name="admin")).token


async def test_join_trades_a_bootstrap_token_for_an_agent_token(
    client: TestClient[web.Request, web.Application], tokens: TokenStore
) -> None:
    admin = await admin_token(tokens)
    status, created = await call(client, "POST", TOKENS_PATH, token=admin, body={"spec": {"role": "bootstrap"}})
    assert status == 201
    assert (created["kind"], created["spec"]["role"], created["spec"]["oneTime"]) == ("Token", "bootstrap", True)
    assert created["status"] == {"used": False}
    assert "expires" in created["spec"]
    bootstrap = created["token"]

    status, joined = await call(client, "POST", JOIN_PATH, token=bootstrap, body={"clusterName": "onprem-a"})

    assert status == 201
    assert joined["apiVersion"] == "auth.gpufed.io/v1alpha1"
    assert joined["kind"] == "ClusterJoin"
    assert joined["metadata"]["name"] == joined["clusterName"] == "onprem-a"
    user = await tokens.authenticate(joined["token"])
    assert user == UserInfo(name="agent:onprem-a", role=Role.AGENT, cluster="onprem-a", token_id=joined["tokenId"])
    # The bootstrap token is spent.
    assert await tokens.authenticate(bootstrap) is None
    status, spent = await call(client, "GET", f"{TOKENS_PATH}/{created['metadata']['name']}", token=admin)
    assert (spent["status"]["used"], spent["status"]["usedFor"]) == (True, "onprem-a")
    status, again = await call(client, "POST", JOIN_PATH, token=bootstrap, body={"clusterName": "onprem-a"})
    assert status == 401
    assert_status(again, code=401, reason="Unauthorized", message="invalid, expired, revoked or already used")


async def test_a_failed_join_leaves_no_agent_token_behind(
    client: TestClient[web.Request, web.Application], tokens: TokenStore, store: Store
) -> None:
    bootstrap = await tokens.create(role=Role.BOOTSTRAP, name="join", one_time=True)
    # Spent through another hub process: this one still has it cached as unused, so the
    # join passes authentication and fails only at the compare-and-swap, as in a race.
    await TokenStore(store).consume_bootstrap(bootstrap.token, cluster="x")

    status, document = await call(client, "POST", JOIN_PATH, token=bootstrap.token, body={"clusterName": "x"})

    assert status == 401
    assert_status(document, code=401, reason="Unauthorized", message="already been used")
    assert [info.role for info in await tokens.list()] == [Role.BOOTSTRAP]


async def _join(
    client: TestClient[web.Request, web.Application], tokens: TokenStore, cluster: str, *, scoped: bool = False
) -> tuple[int, dict[str, Any]]:
    bootstrap = await tokens.create(
        role=Role.BOOTSTRAP, name="join", one_time=True, cluster=cluster if scoped else None
    )
    return await call(client, "POST", JOIN_PATH, token=bootstrap.token, body={"clusterName": cluster})


async def test_an_unscoped_token_cannot_take_over_a_joined_cluster(
    client: TestClient[web.Request, web.Application], tokens: TokenStore
) -> None:
    status, first = await _join(client, tokens, "victim")
    assert status == 201

    bootstrap = await tokens.create(role=Role.BOOTSTRAP, name="join", one_time=True)
    status, document = await call(client, "POST", JOIN_PATH, token=bootstrap.token, body={"clusterName": "victim"})

    assert status == 409, document
    assert_status(document, code=409, reason="Conflict", message='cluster "victim" has already joined the hub')
    assert "gpufed token create --cluster victim" in document["message"]
    assert document["details"] == {"name": "victim", "group": "auth.gpufed.io", "kind": "clusterjoins"}
    # The member keeps its credential, and the refused bootstrap token is not spent.
    assert await tokens.authenticate(first["token"]) is not None
    assert [info.id for info in await tokens.cluster_agents("victim")] == [first["tokenId"]]
    assert (await tokens.get(bootstrap.id)).used_at is None


async def test_rejoining_with_a_token_scoped_to_the_cluster_replaces_its_credential(
    client: TestClient[web.Request, web.Application], tokens: TokenStore
) -> None:
    status, first = await _join(client, tokens, "onprem-a")
    assert status == 201

    status, second = await _join(client, tokens, "onprem-a", scoped=True)

    assert status == 201, second
    assert await tokens.authenticate(first["token"]) is None
    assert await tokens.authenticate(second["token"]) is not None


async def test_a_scoped_token_may_join_a_new_cluster(
    client: TestClient[web.Request, web.Application], tokens: TokenStore
) -> None:
    status, joined = await _join(client, tokens, "fresh", scoped=True)
    assert status == 201, joined


async def test_a_cluster_object_on_the_hub_makes_its_name_taken(tokens: TokenStore) -> None:
    """A Cluster an admin created (or whose agent tokens were revoked) still needs a scoped token."""
    existing = {"registered"}

    async def cluster_exists(name: str) -> bool:
        return name in existing

    app = web.Application()
    app.router.add_routes(join_routes(tokens, cluster_exists=cluster_exists))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        status, document = await _join(client, tokens, "registered")
        assert status == 409, document
        status, joined = await _join(client, tokens, "registered", scoped=True)
        assert status == 201, joined
        status, joined = await _join(client, tokens, "other")
        assert status == 201, joined


async def test_racing_first_joins_never_leave_two_credentials(
    client: TestClient[web.Request, web.Application], tokens: TokenStore
) -> None:
    results = await asyncio.gather(*(_join(client, tokens, "contested") for _ in range(4)))

    codes = sorted(status for status, _ in results)
    assert set(codes) <= {201, 409}, results
    assert codes.count(201) <= 1
    live = [info.id for info in await tokens.cluster_agents("contested")]
    assert live == [doc["tokenId"] for status, doc in results if status == 201]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "clusterName: Required value"),
        ({"clusterName": ""}, "clusterName: Required value"),
        ({"clusterName": 7}, "must be a string"),
        ({"clusterName": "Onprem_A"}, "lowercase RFC 1123 label"),
        ({"clusterName": "-a"}, "lowercase RFC 1123 label"),
        ({"clusterName": "a" * 54}, "no more than 53 characters"),
    ],
)
async def test_join_validates_the_cluster_name(
    client: TestClient[web.Request, web.Application], tokens: TokenStore, body: dict[str, Any], message: str
) -> None:
    bootstrap = await tokens.create(role=Role.BOOTSTRAP, name="join", one_time=True)

    status, document = await call(client, "POST", JOIN_PATH, token=bootstrap.token, body=body)

    assert status == 422
    assert_status(document, code=422, reason="Invalid", message=message)
    assert document["details"]["causes"][0]["field"] == "clusterName"
    assert document["details"]["kind"] == "ClusterJoin"
    # Nothing was spent or issued.
    assert await tokens.authenticate(bootstrap.token) is not None
    assert [info.role for info in await tokens.list()] == [Role.BOOTSTRAP]


@pytest.mark.parametrize(("data", "message"), [(b"{not json", "not valid JSON"), (b"[1]", "must be a JSON object")])
async def test_join_rejects_malformed_bodies(
    client: TestClient[web.Request, web.Application], tokens: TokenStore, data: bytes, message: str
) -> None:
    bootstrap = await tokens.create(role=Role.BOOTSTRAP, name="join", one_time=True)
    status, document = await call(client, "POST", JOIN_PATH, token=bootstrap.token, data=data)
    assert status == 400
    assert_status(document, code=400, reason="BadRequest", message=message)


@pytest.mark.parametrize(
    ("role", "cluster", "join_as", "code", "message"),
    [
        (None, None, "a", 401, "bearer token is invalid"),
        (Role.ADMIN, None, "a", 403, "only a bootstrap token may join a cluster"),
        (Role.AGENT, "a", "a", 403, "only a bootstrap token may join a cluster"),
        (Role.VIEWER, None, "a", 403, "only a bootstrap token may join a cluster"),
        (Role.BOOTSTRAP, "a", "b", 403, 'may only join cluster "a", not "b"'),
    ],
)
async def test_join_refuses_other_credentials(
    client: TestClient[web.Request, web.Application],
    tokens: TokenStore,
    role: Role | None,
    cluster: str | None,
    join_as: str,
    code: int,
    message: str,
) -> None:
    token = (await tokens.create(role=role, name="x", cluster=cluster)).token if role else "abcdef.0000000000000000"
    status, document = await call(client, "POST", JOIN_PATH, token=token, body={"clusterName": join_as})
    assert status == code
    assert_status(document, code=code, reason="Unauthorized" if code == 401 else "Forbidden", message=message)


async def test_join_without_a_token_is_unauthorized(client: TestClient[web.Request, web.Application]) -> None:
    status, document = await call(client, "POST", JOIN_PATH, body={"clusterName": "a"})
    assert_status(document, code=401, reason="Unauthorized", message="bootstrap token is required")
    assert status == 401


async def test_admins_list_get_and_revoke_tokens_without_seeing_secrets(
    client: TestClient[web.Request, web.Application], tokens: TokenStore
) -> None:
    admin = await tokens.create(role=Role.ADMIN, name="admin")
    status, created = await call(
        client, "POST", TOKENS_PATH, token=admin.token,
        body={"role": "agent", "name": "agent:a", "cluster": "a", "ttlSeconds": 60},
    )
    assert status == 201
    secret = created["token"].split(".")[1]

    status, listed = await call(client, "GET", TOKENS_PATH, token=admin.token)
    assert status == 200
    assert listed["kind"] == "TokenList"
    assert sorted(item["metadata"]["name"] for item in listed["items"]) == sorted([admin.id, created["metadata"]["name"]])
    assert all("token" not in item for item in listed["items"])
    assert secret not in str(listed)

    item = f"{TOKENS_PATH}/{created['metadata']['name']}"
    status, got = await call(client, "GET", item, token=admin.token)
    assert got["spec"] == {"role": "agent", "name": "agent:a", "cluster": "a", "oneTime": False, "expires": got["spec"]["expires"]}
    assert status == 200
    status, deleted = await call(client, "DELETE", item, token=admin.token)
    assert (status, deleted["status"]) == (200, "Success")
    assert await tokens.authenticate(created["token"]) is None
    status, gone = await call(client, "GET", item, token=admin.token)
    assert_status(gone, code=404, reason="NotFound", message=f'tokens.auth.gpufed.io "{created["metadata"]["name"]}" not found')


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AGENT, Role.BOOTSTRAP])
@pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("POST", ""), ("GET", "/abcdef"), ("DELETE", "/abcdef")])
async def test_only_admins_manage_tokens(
    client: TestClient[web.Request, web.Application], tokens: TokenStore, role: Role, method: str, suffix: str
) -> None:
    caller = await tokens.create(role=role, name="x", cluster="a" if role is Role.AGENT else None)
    status, document = await call(client, method, TOKENS_PATH + suffix, token=caller.token, body={"role": "admin"})
    assert status == 403
    assert_status(document, code=403, reason="Forbidden", message="only admins may manage tokens")
    assert len(await tokens.list()) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "role"),
        ({"role": "root"}, "role"),
        ({"role": "viewer", "ttlSeconds": 0}, "ttlSeconds"),
        ({"role": "viewer", "ttlSeconds": "1h"}, "ttlSeconds"),
        ({"role": "bootstrap", "oneTime": "yes"}, "oneTime"),
        ({"role": "bootstrap", "cluster": "Not_A_Name"}, "cluster"),
        ({"role": "viewer", "name": ""}, "name"),
    ],
)
async def test_token_requests_are_validated(
    client: TestClient[web.Request, web.Application], tokens: TokenStore, body: dict[str, Any], field: str
) -> None:
    status, document = await call(client, "POST", TOKENS_PATH, token=await admin_token(tokens), body=body)
    assert status == 422
    assert_status(document, code=422, reason="Invalid", message=field)
    assert field in [cause["field"] for cause in document["details"]["causes"]]


async def test_ca_is_served_without_authentication(client: TestClient[web.Request, web.Application]) -> None:
    async with client.get(CA_PATH) as response:
        assert response.status == 200
        assert await response.read() == CA_PEM


def test_join_command_is_exact_and_shell_safe() -> None:
    """The token goes in the agent's environment, never on its command line (``ps`` shows that)."""
    command = join_command(hub_url="https://hub.example.com:6443", ca_hash="sha256:" + "ab" * 32, token="abcdef.x1y2")
    assert command == (
        "GPUFED_BOOTSTRAP_TOKEN=abcdef.x1y2 gpufed agent --hub https://hub.example.com:6443 --hub-ca-hash sha256:"
        + "ab" * 32
    )
    assert shlex.split(join_command(hub_url="https://h/a b", ca_hash="sha256:0", token="t"))[4] == "https://h/a b"
    scoped = shlex.split(join_command(hub_url="https://h", ca_hash="sha256:0", token="t", cluster="victim"))
    assert scoped[0] == "GPUFED_BOOTSTRAP_TOKEN=t"
    assert scoped[-2:] == ["--cluster-name", "victim"]
    assert "--bootstrap-token" not in scoped
