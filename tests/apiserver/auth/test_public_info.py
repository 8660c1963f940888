"""The public-info paths (``/healthz``, ``/livez``, ``/readyz``, ``/version``) on a real hub (real
etcd, HTTPS), authenticated as kube-apiserver authenticates them: credentials that fail are 401
there too, a request without credentials is ``system:anonymous`` and RBAC's
``system:public-info-viewer`` lets it read them, and ``--anonymous-auth=false`` answers it 401."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from controlplane.apiserver.audit import AuditConfig, LogSettings
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub, HubConfig
from gpufed.commands.up.polling import kube_probe

PUBLIC_INFO = ("/healthz", "/livez", "/readyz", "/version", "/version/")
POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}


@pytest.fixture
async def audited(tmp_path: Path) -> AsyncIterator[tuple[Hub, Path]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    log = tmp_path / "audit.log"
    config = HubConfig(state_dir=tmp_path / "hub", port=0, audit=AuditConfig(policy, LogSettings(str(log))))
    async with Hub(config) as running:
        yield running, log


async def get(hub: Hub, path: str, token: str | None = None) -> tuple[int, Any]:
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(load_kubeconfig(hub.kubeconfig_path).ca_pem))
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session,
        session.get(hub.url + path, headers=headers) as response,
    ):
        text = await response.text()
        return response.status, json.loads(text) if response.content_type == "application/json" else text


def assert_unauthorized(answer: tuple[int, Any], path: str) -> None:
    code, body = answer
    assert code == 401, (path, body)
    assert (body["kind"], body["status"], body["reason"], body["code"]) == ("Status", "Failure", "Unauthorized", 401)


async def test_public_info_is_anonymous_but_credentials_that_fail_are_401(audited: tuple[Hub, Path]) -> None:
    hub, log = audited
    for path in PUBLIC_INFO:
        code, body = await get(hub, path)
        assert code == 200, (path, body)
        assert "gitVersion" in body if path.startswith("/version") else body == "ok", (path, body)
        assert_unauthorized(await get(hub, path, token="not-a-token"), path)
    # Only the paths system:public-info-viewer names: one check of /healthz needs credentials.
    assert_unauthorized(await get(hub, "/healthz/etcd"), "/healthz/etcd")
    assert await get(hub, "/healthz/etcd", load_kubeconfig(hub.kubeconfig_path).token) == (200, "ok")

    found = [json.loads(line) for line in log.read_text().splitlines()]
    healthz = [e for e in found if e["requestURI"] == "/healthz" and e["stage"] != "RequestReceived"]
    [anonymous, failed] = healthz
    assert anonymous["user"] == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
    assert anonymous["responseStatus"] == {"metadata": {}, "code": 200}
    assert anonymous["annotations"]["authorization.k8s.io/decision"] == "allow"
    # As kube's failed-authentication audit: one ResponseStarted event naming what was tried.
    assert (failed["stage"], failed["user"]) == ("ResponseStarted", {})
    assert failed["responseStatus"] == {"metadata": {}, "message": "Authentication failed, attempted: bearer", "code": 401}


async def test_without_anonymous_auth_every_path_needs_credentials(tmp_path: Path) -> None:
    """kube-apiserver's ``--anonymous-auth=false``; the hub's own readiness check sends its token."""
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, anonymous_auth=False)) as hub:
        token = load_kubeconfig(hub.kubeconfig_path).token
        for path in PUBLIC_INFO:
            assert_unauthorized(await get(hub, path), path)
            assert (await get(hub, path, token))[0] == 200, path
        assert await kube_probe(hub.kubeconfig_path)(0.0)
