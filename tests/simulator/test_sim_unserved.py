"""A simulated member's API over HTTP, for a kind it does not serve (``unservedResources``, as a
cluster without an operator's CRDs, or a kind no cluster serves): lists and watches are kube's
404 ``Status``, never an empty list or an empty stream that stays open until its timeout."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

FLEET = {
    "clusters": [{
        "name": "k",
        "unservedResources": ["pytorchjobs"],
        "nodeGroups": [{"name": "a100", "count": 1, "cpu": 8, "memoryGiB": 64,
                        "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 1}}],
    }]
}
NOT_FOUND = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404, "details": {},
}


@pytest.fixture
async def member(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    profile = parse_fleet(FLEET).clusters[0]
    config = SimServerConfig(profile=profile, state_dir=tmp_path, seed=1, snapshot_interval=None)
    async with SimServer(config) as server:
        token = (tmp_path / "admin.token").read_text(encoding="utf-8").strip()
        # The member's certificate is its own CA's; what is checked here is the answer, not TLS.
        connector = aiohttp.TCPConnector(ssl=False)
        async with aiohttp.ClientSession(
            server.url, connector=connector, headers={"Authorization": f"Bearer {token}"},
            timeout=aiohttp.ClientTimeout(total=30),
        ) as session:
            yield session


@pytest.mark.parametrize("path", [
    "/apis/kubeflow.org/v1/pytorchjobs",  # left out by unservedResources
    "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs",
    "/apis/example.io/v1/gadgets",  # served by no cluster
    "/api/v1/nosuchthings",
])
@pytest.mark.parametrize("query", [{}, {"watch": "true", "timeoutSeconds": "60"},
                                   {"watch": "1", "allowWatchBookmarks": "true", "resourceVersion": "0"}])
async def test_lists_and_watches_of_a_kind_the_member_does_not_serve_are_not_found(
    member: aiohttp.ClientSession, path: str, query: dict[str, str]
) -> None:
    async with member.get(path, params=query) as response:
        assert response.status == 404
        assert await response.json() == NOT_FOUND


async def test_a_kind_the_member_serves_is_listed_and_watched(member: aiohttp.ClientSession) -> None:
    async with member.get("/apis/batch/v1/jobs") as response:
        assert response.status == 200
        assert (await response.json())["kind"] == "JobList"
    async with member.get("/apis/batch/v1/jobs", params={"watch": "1", "timeoutSeconds": "1"}) as response:
        assert response.status == 200
        assert await response.read() == b""  # no jobs, and the stream ended at its timeout
