"""A client of a real hub for the auth tests (real etcd, HTTPS): one caller's bearer token, and a
wait for what the hub reaches asynchronously (the RBAC watch, aggregation, the ServiceAccount watch).
The ``hub``, ``session`` and ``admin`` fixtures are in this folder's conftest; a module whose
tests are independent of each other shares one hub with ``pytestmark = SHARED_HUB`` (a single test's
cases with ``@SHARED_HUB``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from controlplane.hub import Hub

DEADLINE_SECONDS = 20.0
#: The mark of tests that share their module's hub (a test's, or a module's for all of its tests):
#: they run on the module's event loop, where that hub runs.
SHARED_HUB = pytest.mark.asyncio(loop_scope="module")


def shares_hub(test: pytest.Item) -> bool:
    """Whether ``test`` runs on its module's shared hub (it is marked :data:`SHARED_HUB`)."""
    marker = test.get_closest_marker("asyncio")
    return marker is not None and marker.kwargs.get("loop_scope") == "module"


class Team:
    """A test's own namespace (the ``team`` fixture) and the paths and user name of its ServiceAccount
    ``bot``: tests that share their module's hub each work in theirs."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
        self.secrets = f"/api/v1/namespaces/{namespace}/secrets"
        self.configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
        self.bot_user = f"system:serviceaccount:{namespace}:bot"


class Client:
    def __init__(self, session: aiohttp.ClientSession, hub: Hub, token: str) -> None:
        self.session, self.hub, self.token = session, hub, token

    async def __call__(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        async with self.session.request(
            method, f"{self.hub.url}{path}", json=body, headers={"Authorization": f"Bearer {self.token}"}
        ) as resp:
            return resp.status, await resp.json(content_type=None)


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait for a condition the hub reaches asynchronously."""
    async with asyncio.timeout(DEADLINE_SECONDS):
        while not await check():  # noqa: ASYNC110 - the hub offers no event to wait on
            await asyncio.sleep(0.05)
