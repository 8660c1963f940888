"""A real hub (real etcd, HTTPS) for the auth tests that need one, an HTTPS session trusting its
CA, and its admin as a :class:`~tests.apiserver.auth.realhub.Client`.

Each test gets a hub of its own, unless it shares its module's (marked :data:`.realhub.SHARED_HUB`,
or its module ``pytestmark = SHARED_HUB``): tests that neither see nor change each other's objects
(their own names, no hub-wide object that changes what another test sees) run on one hub, started
for the first of them and stopped after the module's last test. A module whose hub runs with flags
gives them as its own ``hub_options`` (HubConfig's fields), for its own hubs and its shared one."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig

from .realhub import Client, Team, shares_hub


@pytest.fixture
def hub(request: pytest.FixtureRequest) -> Hub:
    hub: Hub = request.getfixturevalue("module_hub" if shares_hub(request.node) else "own_hub")
    return hub


@pytest.fixture
def session(request: pytest.FixtureRequest) -> aiohttp.ClientSession:
    session: aiohttp.ClientSession = request.getfixturevalue(
        "module_session" if shares_hub(request.node) else "own_session"
    )
    return session


@pytest.fixture
def admin(hub: Hub, session: aiohttp.ClientSession) -> Client:
    return Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)


@pytest.fixture
def team(request: pytest.FixtureRequest) -> Team:
    """A namespace of the test's own (named from its id): tests sharing a hub do not meet in it."""
    return Team("team-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:12])


@pytest.fixture(scope="module")
def hub_options() -> dict[str, Any]:
    """The hub's flags beyond its state dir and port: none unless the module says."""
    return {}


@pytest.fixture
async def own_hub(tmp_path: Path, hub_options: dict[str, Any]) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, **hub_options)) as running:
        yield running


@pytest.fixture
async def own_session(hub: Hub) -> AsyncIterator[aiohttp.ClientSession]:
    """A session for the test's hub: its own, or the one its module configures (a ``hub`` fixture of its own)."""
    async with _session(hub) as s:
        yield s


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_hub(tmp_path_factory: pytest.TempPathFactory, hub_options: dict[str, Any]) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path_factory.mktemp("hub"), port=0, **hub_options)) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_session(module_hub: Hub) -> AsyncIterator[aiohttp.ClientSession]:
    async with _session(module_hub) as s:
        yield s


def _session(hub: Hub) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(load_kubeconfig(hub.kubeconfig_path).ca_pem))
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30))
