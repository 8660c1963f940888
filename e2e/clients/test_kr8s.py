"""``kr8s`` over every kind the hub serves: its own object classes for Kubernetes' kinds it
knows, classes made with ``new_class`` for the others: create, get, list, patch, replace (a PUT
through kr8s' API), watch and delete."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import kr8s
import kr8s.asyncio
import pytest
from kr8s.asyncio.objects import APIObject, get_class, new_class

from e2e.clients.conftest import KINDS, Hub, ServedKind
from e2e.clients.scenario import PATCHED, Seen, exercise

pytestmark = pytest.mark.e2e


def class_of(kind: ServedKind) -> type[APIObject]:
    """kr8s' own class for the kind, or one made for it as kr8s makes them for custom resources."""
    try:
        cls = get_class(kind.kind, kind.api_version)
    except KeyError:
        cls = new_class(kind.kind, version=kind.api_version, namespaced=kind.namespaced, plural=kind.plural)
    assert cls.namespaced == kind.namespaced
    return cls


def seen_of(obj: APIObject) -> Seen:
    meta = obj.metadata
    return Seen(meta.name, meta.get("uid", ""), meta.get("resourceVersion", ""), dict(meta.get("labels") or {}))


class Kr8sDriver:
    def __init__(self, api: Any, kind: ServedKind) -> None:
        self.api = api
        self.kind = kind
        self.cls = class_of(kind)
        self.namespace = kind.namespace()

    def _checked(self, obj: Any) -> Seen:
        assert isinstance(obj, self.cls), type(obj)
        return seen_of(obj)

    async def _get(self, name: str) -> APIObject:
        return await self.cls.get(name, namespace=self.namespace, api=self.api)

    async def create(self, manifest: dict[str, Any]) -> Seen:
        obj = self.cls(manifest, api=self.api)
        await obj.create()
        return self._checked(obj)

    async def read(self, name: str) -> Seen:
        return self._checked(await self._get(name))

    async def list(self) -> list[Seen]:
        return [self._checked(obj) async for obj in self.api.get(self.cls, namespace=self.namespace)]

    async def list_all_namespaces(self) -> list[Seen]:
        return [self._checked(obj) async for obj in self.api.get(self.cls, namespace=kr8s.ALL)]

    async def patch_labels(self, name: str, labels: dict[str, str]) -> Seen:
        obj = await self._get(name)
        await obj.patch({"metadata": {"labels": labels}})
        return self._checked(obj)

    async def replace_labels(self, name: str, labels: dict[str, str]) -> Seen:
        obj = await self._get(name)
        raw = obj.raw.to_dict()
        raw["metadata"]["labels"] = {**(raw["metadata"].get("labels") or {}), **labels}
        async with self.api.call_api(
            "PUT", version=self.cls.version, url=f"{self.cls.endpoint}/{name}", namespace=self.namespace,
            content=json.dumps(raw),
        ) as response:
            return self._checked(self.cls(response.json(), api=self.api))

    def conflicted(self, error: Exception) -> bool:
        return isinstance(error, kr8s.ServerError) and error.response is not None and error.response.status_code == 409

    async def watch_change(self, name: str, resource_version: str) -> tuple[str, Seen]:
        async for event_type, obj in self.api.watch(
            self.cls, namespace=self.namespace, field_selector=f"metadata.name={name}", since=resource_version
        ):
            seen = self._checked(obj)
            if PATCHED in seen.labels:
                return event_type, seen
        raise AssertionError(f"the watch of {self.kind.id} ended without the change")

    async def delete(self, name: str) -> None:
        await (await self._get(name)).delete()

    async def exists(self, name: str) -> bool:
        metadata = {"name": name, **({"namespace": self.namespace} if self.namespace else {})}
        return bool(await self.cls({"metadata": metadata}, api=self.api).exists())


@pytest.fixture
async def api(hub: Hub) -> AsyncIterator[Any]:
    client = await kr8s.asyncio.api(kubeconfig=str(hub.kubeconfig))
    try:
        yield client
    finally:
        # kr8s has no close of its own: its connection pool is the httpx client it opened.
        if client._session is not None:
            await client._session.aclose()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
async def test_objects(kind: ServedKind, served_verbs: dict[str, frozenset[str]], api: Any) -> None:
    await exercise(Kr8sDriver(api, kind), kind, served_verbs[kind.id], client="kr8s")
