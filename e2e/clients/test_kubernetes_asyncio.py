"""``kubernetes_asyncio`` (what the member agent uses) over every built-in kind the hub serves:
create, read, list, patch, replace, watch and delete, each answer deserialized into the
typed model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as aio_client
from kubernetes_asyncio import config as aio_config
from kubernetes_asyncio import watch as aio_watch

from e2e.clients.conftest import Hub, ServedKind
from e2e.clients.scenario import exercise
from e2e.clients.typed import TYPED, TypedDriver

pytestmark = pytest.mark.e2e


class AsyncioDriver(TypedDriver):
    async def events(self, resource_version: str, name: str) -> AsyncIterator[tuple[str, Any]]:
        async with aio_watch.Watch() as watch:
            async for event in watch.stream(
                self.method("list"), *self.args(), resource_version=resource_version,
                field_selector=f"metadata.name={name}", timeout_seconds=25,
            ):
                yield event["type"], event["object"]

    def status_of(self, exc: Exception) -> int | None:
        return exc.status if isinstance(exc, aio_client.ApiException) else None


async def awaited(call: Callable[[], Any]) -> Any:
    return await call()


@pytest.fixture
async def api_client(hub: Hub) -> AsyncIterator[Any]:
    api = await aio_config.new_client_from_config(config_file=str(hub.kubeconfig))
    async with api:
        yield api


@pytest.mark.parametrize("kind", TYPED, ids=lambda k: k.id)
async def test_typed_api(kind: ServedKind, served_verbs: dict[str, frozenset[str]], api_client: Any) -> None:
    await exercise(AsyncioDriver(aio_client, api_client, kind, run=awaited), kind, served_verbs[kind.id], client="aio")

