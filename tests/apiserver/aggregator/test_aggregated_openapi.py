"""The extension servers' OpenAPI through a real hub (real etcd, HTTPS) and a real extension server
in the same loop: ``/openapi/v3`` lists the aggregated group-version, whose document is the server's
(by hash, immutable; a stale hash redirected); ``/openapi/v2`` is the hub's merged with the server's
(its path and definition added, a definition the hub has with other content renamed ``_v2`` with
the references to it), with a strong ETag and ``304``; an APIService no longer Available is left
out again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from controlplane.hub import Hub
from tests.extensionserver import (
    GROUP,
    OPENAPI_V3,
    STATUS_DEFINITION,
    VERSION,
    WIDGET_DEFINITION,
    WIDGET_SCHEMA,
)

from ..auth.realhub import Client, eventually
from .test_proxied_requests import NAME, available, registered_server

KEY = f"apis/{GROUP}/{VERSION}"
LIST_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/widgets"


async def index(admin: Client) -> dict[str, Any]:
    code, document = await admin("GET", "/openapi/v3")
    assert code == 200, document
    return dict(document["paths"])


async def test_the_servers_openapi_is_in_the_hubs(
    hub: Hub, admin: Client, session: aiohttp.ClientSession, tmp_path: Path,
) -> None:
    auth = {"Authorization": f"Bearer {admin.token}"}
    async with registered_server(admin, tmp_path) as server:
        async def listed() -> bool:
            return KEY in await index(admin)

        await eventually(listed)
        paths = await index(admin)
        assert "apis/apps/v1" in paths  # the hub's own stay
        url = paths[KEY]["serverRelativeURL"]
        assert url.startswith(f"/openapi/v3/{KEY}?hash=")
        async with session.get(f"{hub.url}{url}", headers=auth) as response:
            assert response.status == 200 and response.headers["Cache-Control"] == "public, immutable"
            assert await response.json() == OPENAPI_V3
        async with session.get(f"{hub.url}/openapi/v3/{KEY}?hash=0", headers=auth, allow_redirects=False) as response:
            assert response.status == 301 and response.headers["Location"] == url
        # The fetches came through the front proxy as the aggregator.
        assert server.seen[f"/openapi/v3/{KEY}"][0].user == "system:kube-aggregator"

        async with session.get(f"{hub.url}/openapi/v2", headers=auth) as response:
            assert response.status == 200
            etag = response.headers["ETag"]
            merged = await response.json()
        assert merged["definitions"][WIDGET_DEFINITION] == WIDGET_SCHEMA
        assert "io.k8s.api.apps.v1.Deployment" in merged["definitions"]
        # The hub's Status stays; the server's, other content, is renamed with its reference.
        assert merged["definitions"][STATUS_DEFINITION]["description"] != "The extension server's Status."
        assert merged["definitions"][f"{STATUS_DEFINITION}_v2"] == {"type": "object", "description": "The extension server's Status."}
        responses = merged["paths"][LIST_PATH]["get"]["responses"]
        assert responses["401"]["schema"] == {"$ref": f"#/definitions/{STATUS_DEFINITION}_v2"}
        assert responses["200"]["schema"] == {"$ref": f"#/definitions/{WIDGET_DEFINITION}"}
        assert "/apis/apps/v1/namespaces/{namespace}/deployments" in merged["paths"]
        async with session.get(f"{hub.url}/openapi/v2", headers={**auth, "If-None-Match": etag}) as response:
            assert response.status == 304
        async with session.get(f"{hub.url}/openapi/v2", headers={
                **auth, "Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}) as response:
            assert response.status == 200 and WIDGET_DEFINITION.encode() in await response.read()

    # The server stopped: once the APIService is not Available its documents are left out.
    async with asyncio.timeout(60):
        while (await available(admin, NAME)).get("status") != "False":  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    assert KEY not in await index(admin)
    code, _ = await admin("GET", f"/openapi/v3/{KEY}")
    assert code == 404
    async with session.get(f"{hub.url}/openapi/v2", headers=auth) as response:
        assert LIST_PATH not in (await response.json())["paths"]
