"""A member API for agent tests: the simulator's API machinery served over HTTP on 127.0.0.1,
with an outer middleware that records ``(method, path, query)`` of every request it answers, so
tests count the requests the agent really sends; and a plain clock the tests move."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from controlplane.apiserver import app as app_module
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.storage import MemoryStore
from member_agent.kubeapi import KubeApi


@dataclass
class ServedMember:
    url: str
    objects: ObjectStore
    requests: list[tuple[str, str, str]]


@contextlib.asynccontextmanager
async def served_member(registry: Registry) -> AsyncIterator[ServedMember]:
    seen: list[tuple[str, str, str]] = []

    @web.middleware
    async def record(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        seen.append((request.method, request.path, request.query_string))
        return await handler(request)

    async with MemoryStore() as store:
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        runner = web.AppRunner(app_module.create_app(objects, registry, outer_middlewares=[record]), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            yield ServedMember(url=f"http://127.0.0.1:{runner.addresses[0][1]}", objects=objects, requests=seen)
        finally:
            await runner.cleanup()


@contextlib.asynccontextmanager
async def member_client(url: str) -> AsyncIterator[KubeApi]:
    client = KubeApi(ApiClient(configuration=Configuration(host=url)), timeout=10)
    try:
        yield client
    finally:
        await client.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
