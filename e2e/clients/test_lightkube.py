"""``lightkube`` over every kind the hub serves: its typed resources (``apps_v1.Deployment``…)
for Kubernetes' kinds, generic resources for the others (gpufed's, Karmada's, Kubeflow's,
Ray's): create, get, list, patch, replace, watch and delete."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from lightkube import ALL_NS, ApiError, AsyncClient, KubeConfig, codecs
from lightkube.core.resource_registry import resource_registry
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import PatchType

from e2e.clients.conftest import KINDS, Hub, ServedKind
from e2e.clients.scenario import PATCHED, Seen, exercise

pytestmark = pytest.mark.e2e

def resource_of(kind: ServedKind) -> Any:
    """lightkube's resource class: the typed one for Kubernetes' kinds, else a generic one."""
    if kind.builtin:
        return resource_registry.load(kind.api_version, kind.kind)
    create = create_namespaced_resource if kind.namespaced else create_global_resource
    return create(kind.group, kind.version, kind.kind, kind.plural)


def seen_of(obj: Any) -> Seen:
    meta = obj.metadata
    return Seen(meta.name, meta.uid, meta.resourceVersion, dict(meta.labels or {}))


class LightkubeDriver:
    def __init__(self, client: AsyncClient, kind: ServedKind) -> None:
        self.client = client
        self.kind = kind
        self.res = resource_of(kind)
        namespace = kind.namespace()
        self.where: dict[str, str] = {"namespace": namespace} if namespace else {}

    def _checked(self, obj: Any) -> Seen:
        assert isinstance(obj, self.res), type(obj)
        return seen_of(obj)

    async def create(self, manifest: dict[str, Any]) -> Seen:
        obj = codecs.from_dict(manifest)
        assert isinstance(obj, self.res), type(obj)
        return self._checked(await self.client.create(obj))

    async def read(self, name: str) -> Seen:
        return self._checked(await self.client.get(self.res, name, **self.where))

    async def list(self) -> list[Seen]:
        return [self._checked(obj) async for obj in self.client.list(self.res, **self.where)]

    async def list_all_namespaces(self) -> list[Seen]:
        return [self._checked(obj) async for obj in self.client.list(self.res, namespace=ALL_NS)]

    async def patch_labels(self, name: str, labels: dict[str, str]) -> Seen:
        patch = {"metadata": {"labels": labels}}
        return self._checked(await self.client.patch(self.res, name, patch, patch_type=PatchType.MERGE, **self.where))

    async def replace_labels(self, name: str, labels: dict[str, str]) -> Seen:
        current = await self.client.get(self.res, name, **self.where)
        if isinstance(current, dict):  # a generic resource: the dict is the object
            current["metadata"]["labels"] = {**(current["metadata"].get("labels") or {}), **labels}
        else:
            current.metadata.labels = {**(current.metadata.labels or {}), **labels}
        return self._checked(await self.client.replace(current))

    def conflicted(self, error: Exception) -> bool:
        return isinstance(error, ApiError) and error.status.code == 409

    async def watch_change(self, name: str, resource_version: str) -> tuple[str, Seen]:
        async for event_type, obj in self.client.watch(
            self.res, fields={"metadata.name": name}, resource_version=resource_version, **self.where
        ):
            seen = self._checked(obj)
            if PATCHED in seen.labels:
                return event_type, seen
        raise AssertionError(f"the watch of {self.kind.id} ended without the change")

    async def delete(self, name: str) -> None:
        await self.client.delete(self.res, name, **self.where)

    async def exists(self, name: str) -> bool:
        try:
            await self.client.get(self.res, name, **self.where)
        except ApiError as exc:
            if exc.status.code == 404:
                return False
            raise
        return True


@pytest.fixture
async def client(hub: Hub) -> AsyncIterator[AsyncClient]:
    lightkube = AsyncClient(config=KubeConfig.from_file(hub.kubeconfig))
    try:
        yield lightkube
    finally:
        await lightkube.close()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
async def test_resources(kind: ServedKind, served_verbs: dict[str, frozenset[str]], client: AsyncClient) -> None:
    await exercise(LightkubeDriver(client, kind), kind, served_verbs[kind.id], client="lk")

