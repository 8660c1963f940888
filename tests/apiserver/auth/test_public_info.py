"""The public-info paths (``/healthz``, ``/livez``, ``/readyz``, ``/version``), the hub's CA and the
dashboard on a real hub (real etcd, HTTPS), authenticated as kube-apiserver authenticates them:
credentials that fail are 401 there too, a request without credentials is ``system:anonymous`` and
RBAC decides (``system:public-info-viewer``, ``gpufed:public-info-viewer``; on ``/metrics``, the single
checks and ``/debug/*`` kube's 403 for ``system:anonymous``), and
``--anonymous-auth=false`` answers it 401 but for the CA, which a joining agent fetches before it
trusts the hub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from controlplane.apis.constants import CA_PATH
from controlplane.apiserver.audit import AuditConfig, LogSettings
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import ca_hash, client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.commands.up.polling import kube_probe
from member_agent.hubclient import fetch_hub_ca

from .realhub import Client, eventually

PUBLIC_INFO = ("/healthz", "/livez", "/readyz", "/version", "/version/")
DASHBOARD = ("/ui", "/ui/", "/ui/dashboard.js")
MONITORING = ("/metrics", "/metrics/slis", "/healthz/etcd", "/livez/ping", "/readyz/shutdown", "/debug/writes")
PUBLIC_INFO_BINDING = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gpufed:public-info-viewer"
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
    # Only the paths system:public-info-viewer names: the single checks, /metrics and /debug/* are
    # system:anonymous's too, and kube's 403 for it (system:monitoring's, cluster-admin's).
    for path in MONITORING:
        code, status = await get(hub, path)
        assert code == 403, (path, status)
        assert (status["kind"], status["reason"]) == ("Status", "Forbidden"), status
        assert status["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"', status
        assert_unauthorized(await get(hub, path, token="not-a-token"), path)
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
    """kube-apiserver's ``--anonymous-auth=false``; the hub's own readiness check sends its token. The CA
    stays anonymous: an agent joins as before."""
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, anonymous_auth=False)) as hub:
        kubeconfig = load_kubeconfig(hub.kubeconfig_path)
        for path in (*PUBLIC_INFO, *DASHBOARD, *MONITORING):
            assert_unauthorized(await get(hub, path), path)
            assert (await get(hub, path, kubeconfig.token))[0] == 200, path
        assert await kube_probe(hub.kubeconfig_path)(0.0)
        assert await fetch_hub_ca(hub.url, ca_hash(kubeconfig.ca_pem)) == kubeconfig.ca_pem
        assert_unauthorized(await get(hub, CA_PATH, token="not-a-token"), CA_PATH)


async def test_the_ca_and_the_dashboard_are_anonymous_as_rbac_allows(tmp_path: Path) -> None:
    """Credentials that fail are 401 on them as anywhere; without credentials RBAC's
    ``gpufed:public-info-viewer`` decides, so taking ``system:unauthenticated`` off its binding makes them
    kube's 403 for ``system:anonymous``."""
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as hub:
        kubeconfig = load_kubeconfig(hub.kubeconfig_path)
        assert await get(hub, CA_PATH) == (200, kubeconfig.ca_pem.decode())
        for path in (CA_PATH, *DASHBOARD):
            assert (await get(hub, path))[0] == 200, path
            assert_unauthorized(await get(hub, path, token="not-a-token"), path)
        connector = aiohttp.TCPConnector(ssl=client_ssl_context(kubeconfig.ca_pem))
        async with aiohttp.ClientSession(connector=connector) as session:
            admin = Client(session, hub, kubeconfig.token)
            code, binding = await admin("GET", PUBLIC_INFO_BINDING)
            assert code == 200, binding
            binding["subjects"] = [s for s in binding["subjects"] if s["name"] != "system:unauthenticated"]
            assert (await admin("PUT", PUBLIC_INFO_BINDING, binding))[0] == 200

            async def refused() -> bool:
                return (await get(hub, CA_PATH))[0] == 403

            await eventually(refused)
        for path in (CA_PATH, *DASHBOARD):
            code, status = await get(hub, path)
            assert code == 403, (path, status)
            assert status["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"'
            assert (await get(hub, path, kubeconfig.token))[0] == 200, path  # system:authenticated still bound
