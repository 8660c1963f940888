"""The hub's resourcequota controller writes every quota's ``status.hard`` and ``status.used`` as
kube-controller-manager's does: counted from what the hub stores, recounted when ``spec.hard``
changes and when a counted object is deleted, written only when it changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.quotaadmission import QuotaAdmission
from controlplane.apiserver.watchcache import WatchCache
from controlplane.apiserver.watchcache.client import CachedObjects
from controlplane.controllers.resourcequota import ResourceQuotaController
from controlplane.storage import MemoryStore
from controlplane.storage.interface import ListResult
from controlplane.storage.wrapping import WrappedStore

from .fleet import eventually, hub_objects

NS = "team"


@pytest.fixture
async def controller(objects: ObjectStore) -> AsyncIterator[ResourceQuotaController]:
    objects.admit_writes(QuotaAdmission(objects))
    await objects.create(objects.registry.require("v1", "Namespace"), {"metadata": {"name": NS}})
    running = ResourceQuotaController(objects)
    task = asyncio.create_task(running.run())
    yield running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def _status_is(objects: ObjectStore, name: str, expected: dict[str, Any]) -> Any:
    async def probe() -> dict[str, Any] | None:
        q = await objects.get(objects.registry.require("v1", "ResourceQuota"), namespace=NS, name=name)
        status = q.get("status") or {}
        return q if status == expected else None

    return probe


def _pod(name: str, gpus: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "train", "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}}
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"containers": [container], **spec}}


async def test_status_shows_hard_and_what_the_namespace_holds(
    objects: ObjectStore, controller: ResourceQuotaController
) -> None:
    registry = objects.registry
    quotas, configmaps = registry.require("v1", "ResourceQuota"), registry.require("v1", "ConfigMap")
    for name in ("a", "b"):
        await objects.create(configmaps, {"metadata": {"name": name, "namespace": NS}})
    await objects.create(configmaps, {"metadata": {"name": "elsewhere", "namespace": "default"}})
    hard = {"count/configmaps": "5", "configmaps": "5", "count/deployments.apps": "1", "requests.nvidia.com/gpu": "4"}
    await objects.create(quotas, {"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": hard}})
    used = {"count/configmaps": "2", "configmaps": "2", "count/deployments.apps": "0", "requests.nvidia.com/gpu": "0"}
    counted = await eventually(_status_is(objects, "q", {"hard": hard, "used": used}), what="status counted")

    # Admission charges a create; a delete is given back by the recount it triggers.
    await objects.create(registry.require("v1", "Pod"), _pod("p", "3"))
    await objects.delete(configmaps, namespace=NS, name="a")
    used = {**used, "count/configmaps": "1", "configmaps": "1", "requests.nvidia.com/gpu": "3"}
    await eventually(_status_is(objects, "q", {"hard": hard, "used": used}), what="the delete given back")

    # A new spec.hard is counted at once.
    current = await objects.get(quotas, namespace=NS, name="q")
    current["spec"]["hard"] = {"count/configmaps": "1"}
    await objects.update(quotas, current)
    await eventually(
        _status_is(objects, "q", {"hard": {"count/configmaps": "1"}, "used": {"count/configmaps": "1"}}),
        what="the new hard counted",
    )
    assert int(counted["metadata"]["resourceVersion"]) > 0


async def test_scoped_quotas_count_their_pods_only(objects: ObjectStore, controller: ResourceQuotaController) -> None:
    registry = objects.registry
    pods = registry.require("v1", "Pod")
    await objects.create(pods, _pod("batch", "2", activeDeadlineSeconds=600))
    await objects.create(pods, _pod("serve", "1"))
    done = await objects.create(pods, _pod("done", "4"))
    await objects.update_status(pods, {**done, "status": {"phase": "Succeeded"}})
    hard = {"pods": "10", "requests.nvidia.com/gpu": "8"}
    quotas = registry.require("v1", "ResourceQuota")
    for name, scopes in (("all", []), ("terminating", ["Terminating"]), ("long", ["NotTerminating"])):
        await objects.create(quotas, {"metadata": {"name": name, "namespace": NS}, "spec": {"hard": hard, "scopes": scopes}})
    await eventually(_status_is(objects, "all", {"hard": hard, "used": {"pods": "2", "requests.nvidia.com/gpu": "3"}}), what="all")
    await eventually(
        _status_is(objects, "terminating", {"hard": hard, "used": {"pods": "1", "requests.nvidia.com/gpu": "2"}}),
        what="terminating",
    )
    await eventually(_status_is(objects, "long", {"hard": hard, "used": {"pods": "1", "requests.nvidia.com/gpu": "1"}}), what="long")


async def test_an_unchanged_count_writes_nothing(objects: ObjectStore, controller: ResourceQuotaController) -> None:
    quotas = objects.registry.require("v1", "ResourceQuota")
    hard = {"secrets": "3"}
    await objects.create(quotas, {"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": hard}})
    counted = await eventually(_status_is(objects, "q", {"hard": hard, "used": {"secrets": "0"}}), what="counted")
    assert await controller.reconcile((NS, "q")) is not None  # due again at the resync
    again = await objects.get(quotas, namespace=NS, name="q")
    assert again["metadata"]["resourceVersion"] == counted["metadata"]["resourceVersion"]


class ListCountingStore(WrappedStore):
    """The hub's memory store, recording the limit of every list read under each prefix."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner)
        self.lists: dict[str, list[int]] = {}

    async def list(
        self, prefix: str, *, revision: int | None = None, limit: int = 0, start_after: str | None = None
    ) -> ListResult:
        self.lists.setdefault(prefix, []).append(limit)
        return await super().list(prefix, revision=revision, limit=limit, start_after=start_after)


@contextlib.asynccontextmanager
async def counted_store() -> AsyncIterator[tuple[ObjectStore, ListCountingStore]]:
    async with MemoryStore() as memory:
        store = ListCountingStore(memory)
        objects = await hub_objects(store, NS)
        objects.admit_writes(QuotaAdmission(objects))
        yield objects, store


@contextlib.asynccontextmanager
async def running(controller: ResourceQuotaController) -> AsyncIterator[ResourceQuotaController]:
    task = asyncio.create_task(controller.run())
    try:
        yield controller
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_count_reads_the_store_a_page_at_a_time() -> None:
    """kube's evaluators count from listers; over the store, the count is read in pages of at most
    ``page_size`` objects (one snapshot), never the namespace in one read."""
    async with counted_store() as (objects, store):
        registry = objects.registry
        configmaps = registry.require("v1", "ConfigMap")
        for index in range(5):
            await objects.create(configmaps, {"metadata": {"name": f"c{index}", "namespace": NS}})
        async with running(ResourceQuotaController(objects, page_size=2)):
            hard = {"count/configmaps": "10"}
            await objects.create(registry.require("v1", "ResourceQuota"), {"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": hard}})
            await eventually(_status_is(objects, "q", {"hard": hard, "used": {"count/configmaps": "5"}}), what="counted")
            await objects.delete(configmaps, namespace=NS, name="c0")
            await eventually(_status_is(objects, "q", {"hard": hard, "used": {"count/configmaps": "4"}}), what="recounted")
        reads = store.lists.get(configmaps.key_prefix(NS), [])
        assert len(reads) >= 3 + 2, "each count took its pages"
        assert set(reads) == {2}, reads


async def test_a_count_over_the_watch_cache_reads_no_store() -> None:
    """On the hub the leader's client lists from the API's watch cache: a recount is answered from
    memory, as kube's listers answer it."""
    async with counted_store() as (objects, store):
        registry = objects.registry
        configmaps = registry.require("v1", "ConfigMap")
        for index in range(3):
            await objects.create(configmaps, {"metadata": {"name": f"c{index}", "namespace": NS}})
        cache = WatchCache(objects)
        try:
            async with running(ResourceQuotaController(CachedObjects(objects, cache), page_size=2)):
                hard = {"count/configmaps": "10"}
                await objects.create(registry.require("v1", "ResourceQuota"), {"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": hard}})
                await eventually(_status_is(objects, "q", {"hard": hard, "used": {"count/configmaps": "3"}}), what="counted")
                before = list(store.lists.get(configmaps.key_prefix(NS), []))
                for name in ("c0", "c1"):
                    await objects.delete(configmaps, namespace=NS, name=name)
                await eventually(_status_is(objects, "q", {"hard": hard, "used": {"count/configmaps": "1"}}), what="recounted")
                assert store.lists.get(configmaps.key_prefix(NS), []) == before, "the recounts read the cache"
        finally:
            await cache.close()
