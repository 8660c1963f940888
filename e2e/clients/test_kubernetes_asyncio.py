"""``kubernetes_asyncio`` (what the member agent uses) over every built-in kind the hub serves:
create, read, list, patch, replace, watch and delete, each answer deserialized into the
typed model; and a label-selector watch an object leaves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as aio_client
from kubernetes_asyncio import config as aio_config
from kubernetes_asyncio import watch as aio_watch

from e2e.clients.conftest import NAMESPACE, Hub, ServedKind, unique_name
from e2e.clients.scenario import WATCH_TIMEOUT, exercise
from e2e.clients.typed import TYPED, TypedDriver

pytestmark = pytest.mark.e2e


class AsyncioDriver(TypedDriver):
    async def events(self, resource_version: str, name: str) -> AsyncIterator[tuple[str, Any]]:
        async with aio_watch.Watch(return_type=self.watch_return_type) as watch:
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



async def test_a_selector_watch_sees_an_object_leave_as_it_last_saw_it(api_client: Any) -> None:
    """A watch with a label selector: the ConfigMap labelled into it arrives as ADDED, labelled out
    of it as DELETED showing the labels it matched with at the change's resourceVersion (kube's
    cacher sends the previous object), so a client's cache drops what it held."""
    core = aio_client.CoreV1Api(api_client)
    name = unique_name("aio-leaving")
    created = await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": name, "labels": {"suite": "clients"}}})
    seen: list[tuple[str, dict[str, str], str]] = []

    async def watch() -> None:
        async with aio_watch.Watch() as stream:
            async for event in stream.stream(
                core.list_namespaced_config_map, NAMESPACE, label_selector=f"{name}=in",
                resource_version=created.metadata.resource_version, timeout_seconds=25,
            ):
                meta = event["object"].metadata
                seen.append((event["type"], dict(meta.labels or {}), meta.resource_version))
                if event["type"] == "DELETED":
                    return

    watching = asyncio.create_task(watch())
    joined = await core.patch_namespaced_config_map(name, NAMESPACE, {"metadata": {"labels": {name: "in"}}})
    left = await core.patch_namespaced_config_map(name, NAMESPACE, {"metadata": {"labels": {name: "out"}}})
    await asyncio.wait_for(watching, WATCH_TIMEOUT)
    assert seen == [
        ("ADDED", {"suite": "clients", name: "in"}, joined.metadata.resource_version),
        ("DELETED", {"suite": "clients", name: "in"}, left.metadata.resource_version),
    ]
    await core.delete_namespaced_config_map(name, NAMESPACE)
