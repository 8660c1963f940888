"""The dashboard's static files on the hub's HTTP app: readable without credentials as
``system:anonymous`` (they hold no data; the default RBAC policy allows it), 401 with credentials that
fail as every other path, cached by ETag, locked down by a Content-Security-Policy, while every data
call the page makes still needs a token."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.policy import default_policy_index
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.identity import Role
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.reports.api import ReportSource, waste_report_routes
from controlplane.storage import MemoryStore
from controlplane.ui.serving import load_static_files, ui_anonymous_paths, ui_routes


@pytest.fixture
async def client() -> AsyncIterator[tuple[TestClient[Any, Any], str]]:
    async with MemoryStore() as store:
        tokens = TokenStore(store)
        viewer = (await tokens.create(role=Role.VIEWER, name="viewer")).token
        app = create_app(
            ObjectStore(store, hub_registry()), hub_registry(), authenticator=tokens, authorizer=HubAuthorizer(default_policy_index()),
            extra_routes=[*waste_report_routes(ReportSource(store)), *ui_routes()], anonymous_paths=ui_anonymous_paths(),
        )
        async with TestClient(TestServer(app)) as test_client:
            yield test_client, viewer


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/ui", "text/html"), ("/ui/", "text/html"), ("/ui/dashboard.js", "text/javascript"), ("/ui/dashboard.css", "text/css")],
)
async def test_static_files_are_public_and_locked_down(
    client: tuple[TestClient[Any, Any], str], path: str, content_type: str
) -> None:
    test_client, _ = client
    async with test_client.get(path) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith(content_type)
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Frame-Options"] == "DENY"
        etag = response.headers["ETag"]
        assert await response.read()
    async with test_client.get(path, headers={"If-None-Match": etag}) as cached:
        assert cached.status == 304


@pytest.mark.parametrize("path", ["/ui", "/ui/", "/ui/dashboard.js", "/ui/secrets.txt"])
async def test_static_files_refuse_credentials_that_fail(client: tuple[TestClient[Any, Any], str], path: str) -> None:
    """As every path of kube-apiserver: a token that fails is 401, never served as anonymous."""
    test_client, _ = client
    async with test_client.get(path, headers={"Authorization": "Bearer not-a-token"}) as response:
        assert response.status == 401
        status = await response.json()
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "Unauthorized", 401)


async def test_the_page_loads_only_its_own_assets(client: tuple[TestClient[Any, Any], str]) -> None:
    test_client, _ = client
    async with test_client.get("/ui") as response:
        html = await response.text()
    referenced = set(re.findall(r'(?:src|href)="([^"]+)"', html))
    # The icon is declared inline, so the browser does not ask the hub for /favicon.ico (which,
    # outside /ui, needs a token and answered 401 in the console).
    icons = re.findall(r'<link rel="icon" href="([^"]+)">', html)
    assert icons == ["data:,"]
    referenced -= set(icons)
    assert referenced == {"/ui/dashboard.css", "/ui/dashboard.js", "/ui/queues.js"}
    assert "<script>" not in html and "style=" not in html  # nothing inline: the CSP forbids it
    for path in referenced:
        async with test_client.get(path) as asset:
            assert asset.status == 200


async def test_unknown_files_are_not_found(client: tuple[TestClient[Any, Any], str]) -> None:
    test_client, _ = client
    async with test_client.get("/ui/secrets.txt") as response:
        assert response.status in (401, 404)
    async with test_client.get("/ui/../hub.kubeconfig") as response:
        assert response.status in (401, 404)


@pytest.mark.parametrize(("token", "code"), [(None, 401), ("wrong", 401), ("viewer", 200)])
async def test_the_data_the_page_reads_needs_a_token(
    client: tuple[TestClient[Any, Any], str], token: str | None, code: int
) -> None:
    test_client, viewer = client
    headers = {} if token is None else {"Authorization": f"Bearer {viewer if token == 'viewer' else token}"}
    for path in ("/apis/reports.gpufed.io/v1alpha1/wastereports/last-1h", "/apis/cluster.gpufed.io/v1alpha1/clusters"):
        async with test_client.get(path, headers=headers) as response:
            assert response.status == code, path


def test_every_api_path_the_script_calls_is_served() -> None:
    files = load_static_files()
    script = files["dashboard.js"].body.decode()
    paths = set(re.findall(r'"(/apis/[^"]+)"', script))
    assert paths == {
        "/apis/reports.gpufed.io/v1alpha1/wastereports",
        "/apis/cluster.gpufed.io/v1alpha1/clusters",
        "/apis/work.gpufed.io/v1alpha1/resourcebindings",
        "/apis/work.gpufed.io/v1alpha1/works",
    }
    queues = files["queues.js"].body.decode()
    assert set(re.findall(r'"(/apis/[^"]+)"', queues)) == {"/apis/kueue.x-k8s.io/v1beta1"}
    for source in (script, queues):
        assert "innerHTML" not in source  # values go in with textContent only


@pytest.mark.parametrize(
    "path",
    ["/apis/kueue.x-k8s.io/v1beta1/clusterqueues", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues"],
)
async def test_the_queues_view_reads_what_a_viewer_may_read(client: tuple[TestClient[Any, Any], str], path: str) -> None:
    test_client, viewer = client
    async with test_client.get(path, headers={"Authorization": f"Bearer {viewer}"}) as response:
        assert response.status == 200, await response.text()
        assert (await response.json())["items"] == []
