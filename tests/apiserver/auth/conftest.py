"""A real hub (real etcd, HTTPS) for the auth tests that need one, an HTTPS session trusting its
CA, and its admin as a :class:`~tests.apiserver.auth.realhub.Client`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig

from .realhub import Client


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        yield running


@pytest.fixture
async def session(hub: Hub) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(load_kubeconfig(hub.kubeconfig_path).ca_pem))
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as s:
        yield s


@pytest.fixture
def admin(hub: Hub, session: aiohttp.ClientSession) -> Client:
    return Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
