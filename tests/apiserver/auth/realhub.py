"""A client of a real hub for the auth tests (real etcd, HTTPS): one caller's bearer token, and a
wait for what the hub reaches asynchronously (the RBAC watch, aggregation, the ServiceAccount watch).
The ``hub``, ``session`` and ``admin`` fixtures are in this folder's conftest."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from controlplane.hub import Hub

DEADLINE_SECONDS = 20.0


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
