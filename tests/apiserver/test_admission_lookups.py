"""The per-request lookups of admission and of bound service account tokens come from the watch
cache's memory, as kube's plugins read their listers: a Namespace, a param or a token's bound Pod
is read without a store read per request; an object the cache does not hold yet is read from the
store (kube's live GET after a lister's NotFound); a deletion the cache has seen ends a bound token."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.auth.serviceaccountjwt import token_claims
from controlplane.apiserver.auth.serviceaccounts import ServiceAccountTokens
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.identity import HUB_AUDIENCE
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.watchcache import WatchCache
from controlplane.apiserver.webhooks.calling import WebhookClient
from controlplane.storage import MemoryStore
from controlplane.storage.interface import KeyValue, Progress, WatchEvent
from controlplane.storage.wrapping import WrappedStore
from tests.controllers.fleet import eventually, hub_objects

NS = "team"


class GetCountingStore(WrappedStore):
    """The hub's memory store, counting the reads of each key; its watches hand events on only while
    :attr:`flowing` is set (a watch that lags behind the writes)."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner)
        self.gets: dict[str, int] = {}
        self.flowing = asyncio.Event()
        self.flowing.set()

    async def get(self, key: str) -> KeyValue:
        self.gets[key] = self.gets.get(key, 0) + 1
        return await super().get(key)

    def watch(
        self, prefix: str, *, from_revision: int, progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        return self._held(prefix, from_revision)  # no progress: an event held here is not handed over

    async def _held(self, prefix: str, from_revision: int) -> AsyncIterator[WatchEvent]:
        async for event in self.inner.watch(prefix, from_revision=from_revision):
            await self.flowing.wait()
            yield event


#: The hub's objects over a counting store, and a watch cache over them.
Counted = tuple[ObjectStore, GetCountingStore, WatchCache]


@pytest.fixture
async def counted() -> AsyncIterator[Counted]:
    async with MemoryStore() as memory:
        store = GetCountingStore(memory)
        objects = await hub_objects(store, NS)
        cache = WatchCache(objects)
        try:
            yield objects, store, cache
        finally:
            await cache.close()


async def test_a_cached_object_is_read_from_memory_and_a_missing_one_from_the_store(counted: Counted) -> None:
    objects, store, cache = counted
    namespaces = objects.registry.require("v1", "Namespace")
    key = namespaces.key(namespace=None, name=NS)
    store.gets.clear()
    for _ in range(3):
        assert (await cache.get(namespaces, name=NS))["metadata"]["name"] == NS
    assert store.gets.get(key, 0) == 0, "a cached namespace is not read from the store"

    # Not in memory: the store answers (an object written an instant ago), 404 when it has none.
    with pytest.raises(errors.NotFound):
        await cache.get(namespaces, name="nowhere")
    assert store.gets[namespaces.key(namespace=None, name="nowhere")] == 1

    # A change reaches memory by the cache's watch: the next read sees it, still without a store read.
    current = await objects.get(namespaces, name=NS)
    await objects.update(namespaces, {**current, "metadata": {**current["metadata"], "labels": {"tier": "gold"}}})
    store.gets.clear()

    async def relabelled() -> bool:
        return (await cache.get(namespaces, name=NS))["metadata"]["labels"].get("tier") == "gold"

    await eventually(relabelled, what="the cache to see the new labels")
    assert store.gets.get(key, 0) == 0


async def test_an_object_the_cache_has_not_seen_yet_is_read_from_the_store(counted: Counted) -> None:
    """kube's live GET after a lister's NotFound: a namespace created an instant ago is found."""
    objects, store, cache = counted
    namespaces = objects.registry.require("v1", "Namespace")
    await cache.get(namespaces, name=NS)  # the cache of namespaces has listed
    store.flowing.clear()
    await objects.create(namespaces, {"metadata": {"name": "fresh", "labels": {"tier": "gold"}}})
    assert cache.cached(namespaces, name="fresh") is None, "the cache's watch is held"
    assert (await cache.get(namespaces, name="fresh"))["metadata"]["labels"]["tier"] == "gold"
    assert store.gets[namespaces.key(namespace=None, name="fresh")] == 1
    store.flowing.set()

    async def seen() -> bool:
        return cache.cached(namespaces, name="fresh") is not None

    await eventually(seen, what="the cache to see the new namespace")


async def test_a_webhook_service_is_resolved_from_memory_and_from_the_store_when_memory_has_none(counted: Counted) -> None:
    objects, store, cache = counted
    services, endpoints = objects.registry.require("v1", "Service"), objects.registry.require("v1", "Endpoints")
    await cache.listed(services)
    await cache.listed(endpoints)
    store.flowing.clear()  # written while the cache's watch lags: the store answers
    await objects.create(services, {"metadata": {"name": "hooks"}, "spec": {"ports": [{"name": "https", "port": 443}]}},
                         namespace=NS)
    await objects.create(endpoints, {"metadata": {"name": "hooks"}, "subsets": [
        {"addresses": [{"ip": "10.0.0.7"}], "ports": [{"name": "https", "port": 8443}]}]}, namespace=NS)
    client = WebhookClient(objects, cache)
    try:
        assert await client._endpoint("hooks", NS, 443) == ("10.0.0.7", 8443)
        service_key, endpoints_key = (rt.key(namespace=NS, name="hooks") for rt in (services, endpoints))
        assert store.gets[service_key] == 1 and store.gets[endpoints_key] == 1
        store.flowing.set()

        async def seen() -> bool:
            return cache.cached(endpoints, namespace=NS, name="hooks") is not None

        await eventually(seen, what="the cache to see the endpoints")
        store.gets.clear()
        for _ in range(3):
            assert await client._endpoint("hooks", NS, 443) == ("10.0.0.7", 8443)
        assert not store.gets, "a cached service and its endpoints are not read from the store"
    finally:
        await client.close()


async def test_a_pod_bound_token_is_checked_from_memory_and_ends_with_the_pod(counted: Counted) -> None:
    objects, store, cache = counted
    tokens = ServiceAccountTokens(TokenStore(store), objects, cache=cache)
    accounts, pods = objects.registry.require("v1", "ServiceAccount"), objects.registry.require("v1", "Pod")
    account = await objects.create(accounts, {"metadata": {"name": "bot"}}, namespace=NS)
    pod = await objects.create(pods, {"metadata": {"name": "worker"}, "spec": {
        "serviceAccountName": "bot", "containers": [{"name": "main", "image": "nginx:1"}]}}, namespace=NS)
    claims = token_claims(
        issuer=tokens.issuer.issuer, namespace=NS, account="bot", account_uid=account["metadata"]["uid"],
        audiences=[HUB_AUDIENCE], seconds=3600, now=dt.datetime.now(dt.UTC),
        bound=("Pod", "worker", pod["metadata"]["uid"]),
    )
    token = tokens.issuer.sign(claims)
    task = asyncio.create_task(tokens.run())
    try:
        await tokens.synced()

        async def answered_from_memory() -> bool:
            answered, user = tokens.authenticate_cached(token)
            return answered and user is not None and user.name == f"system:serviceaccount:{NS}:bot"

        await eventually(answered_from_memory, what="the bound pod in the watch cache")
        pod_key = pods.key(namespace=NS, name="worker")
        store.gets.clear()
        for _ in range(3):
            assert (await tokens.authenticate(token)) is not None
            assert tokens.authenticate_cached(token)[0]
        assert store.gets.get(pod_key, 0) == 0, "the bound pod is not read from the store per request"

        await objects.delete(pods, namespace=NS, name="worker")

        async def ended() -> bool:
            return await tokens.authenticate(token) is None and tokens.authenticate_cached(token)[1] is None

        await eventually(ended, what="the pod's deletion to end its token")
        reviewed = await tokens.review(token, [HUB_AUDIENCE])
        assert reviewed == "service account token has been invalidated"

    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
