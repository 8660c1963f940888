"""Who may read the hub's non-resource paths, on a real hub (real etcd, HTTPS), as kube's default RBAC
decides: discovery and OpenAPI for every authenticated user (``system:discovery``), ``/metrics``,
``/metrics/slis`` and the single health checks for the group ``system:monitoring``, ``/debug/*`` for
``cluster-admin`` or whom a ClusterRole grants it, and a bootstrap token no more than discovery,
public info, the CA and the dashboard. A refusal is kube's 403 (``forbidden: User "x" cannot get
path "/metrics"``), for ``system:anonymous`` too.

The tests marked :data:`SHARED_HUB` share the module's hub: each reads with tokens of its own users
(the one ClusterRole made is bound to a user no other test has). Resetting the SLIs, which are the
hub's, takes a hub of its own."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from controlplane.apis.constants import CA_PATH
from controlplane.apiserver.identity import Role
from controlplane.hub import Hub

from .realhub import SHARED_HUB, Client, eventually

RBAC = "/apis/rbac.authorization.k8s.io/v1"
DISCOVERY = ("/api", "/api/v1", "/apis", "/apis/apps/v1", "/openapi/v2", "/openapi/v3", "/version")
PUBLIC = (*DISCOVERY, "/healthz", "/livez", "/readyz", CA_PATH, "/ui", "/ui/dashboard.js")
MONITORING = ("/metrics", "/metrics/slis", "/healthz/etcd", "/readyz/ping", "/livez/ping")
DEBUG = ("/debug/writes", "/debug/api_priority_and_fairness/dump_priority_levels")


async def get(session: aiohttp.ClientSession, hub: Hub, path: str, token: str | None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with session.get(hub.url + path, headers=headers) as response:
        text = await response.text()
        return response.status, json.loads(text) if response.content_type == "application/json" else text


async def assert_forbidden(session: aiohttp.ClientSession, hub: Hub, path: str, token: str, user: str) -> None:
    code, status = await get(session, hub, path, token)
    assert code == 403, (path, status)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403), status
    assert status["message"].startswith(f'forbidden: User "{user}" cannot get path "{path}"'), status


async def token(hub: Hub, role: Role, name: str, *groups: str) -> str:
    assert hub.tokens is not None
    return (await hub.tokens.create(role=role, name=name, groups=groups, one_time=role is Role.BOOTSTRAP)).token


@SHARED_HUB
async def test_a_bootstrap_token_reads_only_discovery_and_public_info(hub: Hub, session: aiohttp.ClientSession) -> None:
    joiner = await token(hub, Role.BOOTSTRAP, "join")
    for path in PUBLIC:
        assert (await get(session, hub, path, joiner))[0] == 200, path
    # Not the single checks (system:monitoring's), /metrics or the debug dumps.
    for path in (*MONITORING, *DEBUG):
        await assert_forbidden(session, hub, path, joiner, "join")


@SHARED_HUB
async def test_metrics_and_single_checks_are_for_system_monitoring(hub: Hub, session: aiohttp.ClientSession) -> None:
    prometheus = await token(hub, Role.USER, "prometheus", "system:monitoring")
    alice = await token(hub, Role.USER, "alice")
    for path in MONITORING:
        assert (await get(session, hub, path, prometheus))[0] == 200, path
        await assert_forbidden(session, hub, path, alice, "alice")
    assert (await get(session, hub, "/metrics", alice))[1]["message"] == 'forbidden: User "alice" cannot get path "/metrics"'
    for path in DISCOVERY:  # system:discovery: every authenticated user
        assert (await get(session, hub, path, alice))[0] == 200, path
    for path in DEBUG:
        await assert_forbidden(session, hub, path, prometheus, "prometheus")
    # Without credentials: system:anonymous on the monitoring and debug paths, which RBAC refuses it
    # (kube's 403); discovery and OpenAPI are 401.
    for path in (*MONITORING, *DEBUG):
        code, status = await get(session, hub, path, None)
        assert code == 403, (path, status)
        assert status["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"', status
    for path in ("/api", "/openapi/v2"):
        assert (await get(session, hub, path, None))[0] == 401, path


@SHARED_HUB
async def test_debug_paths_are_whatever_rbac_grants(hub: Hub, session: aiohttp.ClientSession, admin: Client) -> None:
    sre = await token(hub, Role.USER, "sre")
    for path in DEBUG:
        await assert_forbidden(session, hub, path, sre, "sre")
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "debugger"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/debug/*"]}]}
    assert (await admin("POST", f"{RBAC}/clusterroles", role))[0] == 201
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "sre"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "debugger"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "sre"}]}
    assert (await admin("POST", f"{RBAC}/clusterrolebindings", binding))[0] == 201

    async def granted() -> bool:
        return all([(await get(session, hub, path, sre))[0] == 200 for path in DEBUG])

    await eventually(granted)


async def test_resetting_the_slis_takes_delete_on_the_path(hub: Hub, session: aiohttp.ClientSession, admin: Client) -> None:
    """kube's ``HandlerWithReset``: ``DELETE /metrics/slis`` is the verb ``delete`` on the path, which
    ``system:monitoring`` (``get`` only) lacks and ``cluster-admin`` has."""
    prometheus = await token(hub, Role.USER, "prometheus", "system:monitoring")
    headers = {"Authorization": f"Bearer {prometheus}"}
    async with session.delete(hub.url + "/metrics/slis", headers=headers) as refused:
        status = await refused.json()
    assert (refused.status, status["reason"]) == (403, "Forbidden"), status
    assert status["message"].startswith('forbidden: User "prometheus" cannot delete path "/metrics/slis"'), status
    assert (await get(session, hub, "/readyz", None))[0] == 200
    assert "kubernetes_healthchecks_total{" in (await get(session, hub, "/metrics/slis", prometheus))[1]
    async with session.delete(hub.url + "/metrics/slis", headers={"Authorization": f"Bearer {admin.token}"}) as reset:
        assert (reset.status, await reset.text()) == (200, "metrics reset\n")
    assert "kubernetes_healthchecks_total{" not in (await get(session, hub, "/metrics/slis", prometheus))[1]
