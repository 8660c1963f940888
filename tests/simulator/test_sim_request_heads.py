"""A simulated member reads a request's head as kube-apiserver does (the hub's bounds,
:mod:`controlplane.apiserver.serving`): a header of 64 KiB (an OIDC bearer token of many groups)
is served, a head past Go's 1 MiB is answered ``431 Request Header Fields Too Large``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from controlplane.apiserver.serving import MAX_HEADER_BYTES
from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

FLEET = {"clusters": [{"name": "h", "nodeGroups": [{"name": "cpu", "count": 1, "cpu": 8, "memoryGiB": 64}]}]}


@pytest.fixture
async def member(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    config = SimServerConfig(
        profile=parse_fleet(FLEET).clusters[0], state_dir=tmp_path, seed=1, snapshot_interval=None
    )
    async with SimServer(config) as server:
        token = (tmp_path / "admin.token").read_text(encoding="utf-8").strip()
        # The member's certificate is its own CA's; what is checked here is the answer, not TLS.
        async with aiohttp.ClientSession(
            server.url,
            connector=aiohttp.TCPConnector(ssl=False),
            headers={"Authorization": f"Bearer {token}"},
            timeout=aiohttp.ClientTimeout(total=30),
        ) as session:
            yield session


async def test_a_64_kib_header_is_served_and_a_head_past_kubes_bound_is_431(
    member: aiohttp.ClientSession,
) -> None:
    async with member.get("/api/v1/namespaces", headers={"X-Groups": "g" * 65536}) as listed:
        assert listed.status == 200, await listed.text()
    past = {f"X-Pad-{n}": "p" * (MAX_HEADER_BYTES // 3) for n in range(4)}
    async with member.get("/api/v1/namespaces", headers=past) as refused:
        assert (refused.status, await refused.text()) == (431, "431 Request Header Fields Too Large")
