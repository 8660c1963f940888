"""Fencing: writes through a FencedStore hold only while the leader key is in the writer's term.

Runs against both stores (the ``store`` fixture: in-memory and real etcd), plus the etcd
store's own write guards, and the ObjectStore on top of a fenced store.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.leader import Fenced, FencedStore
from controlplane.storage import AlreadyExists, Conflict, EtcdStore, NotFound, Store
from controlplane.storage.etcd import GuardFailed, WriteGuard

LEADER = "/leader/controllers"


async def test_writes_hold_only_during_the_term(store: Store) -> None:
    term = (await store.create(LEADER, b"me")).create_revision
    fenced = FencedStore(store, guard_key=LEADER, term=term)

    created = await fenced.create("/objects/a", b"1")
    updated = await fenced.update("/objects/a", b"2", expected_revision=created.mod_revision)
    await fenced.create("/objects/b", b"1")
    await fenced.delete("/objects/b")
    assert (await fenced.get("/objects/a")).value == b"2"
    assert not fenced.fenced

    # The term ends (lease expired), and another replica is elected: a new create revision.
    await store.delete(LEADER)
    await store.create(LEADER, b"other")
    with pytest.raises(Fenced, match=f"term {term} is over"):
        await fenced.update("/objects/a", b"3", expected_revision=updated.mod_revision)
    with pytest.raises(Fenced):
        await fenced.create("/objects/c", b"1")
    with pytest.raises(Fenced):
        await fenced.delete("/objects/a")
    assert fenced.fenced

    # Nothing was written; reads still work; the plain store still writes.
    assert (await fenced.get("/objects/a")).value == b"2"
    assert [kv.key for kv in (await fenced.list("/objects/")).items] == ["/objects/a"]
    await store.update("/objects/a", b"4", expected_revision=updated.mod_revision)


async def test_a_term_without_a_leader_key_is_over(store: Store) -> None:
    fenced = FencedStore(store, guard_key=LEADER, term=5)
    with pytest.raises(Fenced):
        await fenced.create("/objects/a", b"1")
    with pytest.raises(NotFound):
        await store.get("/objects/a")


async def test_fenced_store_keeps_the_store_errors_within_its_term(store: Store) -> None:
    term = (await store.create(LEADER, b"me")).create_revision
    fenced = FencedStore(store, guard_key=LEADER, term=term)
    created = await fenced.create("/objects/a", b"1")
    with pytest.raises(AlreadyExists):
        await fenced.create("/objects/a", b"again")
    with pytest.raises(Conflict):
        await fenced.update("/objects/a", b"2", expected_revision=created.mod_revision + 100)
    with pytest.raises(NotFound):
        await fenced.delete("/objects/missing")
    assert not fenced.fenced


async def test_object_store_over_a_fenced_store_refuses_and_writes_nothing(store: Store) -> None:
    term = (await store.create(LEADER, b"me")).create_revision
    objects = ObjectStore(FencedStore(store, guard_key=LEADER, term=term), hub_registry())
    plain = ObjectStore(store, hub_registry())
    namespace = objects.registry.require("v1", "Namespace")
    await objects.create(namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})

    await store.delete(LEADER)
    with pytest.raises(errors.ApiError) as caught:
        await objects.create(namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    assert isinstance(caught.value.__cause__, Fenced)
    with pytest.raises(errors.NotFound):
        await plain.get(namespace, name="team-b")
    # The API server's ObjectStore (plain store) is not fenced.
    await plain.create(namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}})


# --- the etcd store's write guards ----------------------------------------------------------


@pytest.fixture
async def etcd(etcd_endpoint: str) -> AsyncIterator[EtcdStore]:
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/{uuid.uuid4().hex}") as store:
        yield store


async def test_failed_guards_win_over_other_failed_compares(etcd: EtcdStore) -> None:
    term = (await etcd.create(LEADER, b"me")).create_revision
    good, stale = WriteGuard(LEADER, term), WriteGuard(LEADER, term + 1)
    kv = await etcd.create("/objects/a", b"1", guards=(good,))
    with pytest.raises(GuardFailed, match="create revision"):
        await etcd.create("/objects/a", b"1", guards=(stale,))
    with pytest.raises(GuardFailed):
        await etcd.update("/objects/a", b"2", expected_revision=kv.mod_revision + 7, guards=(stale,))
    with pytest.raises(GuardFailed):
        await etcd.delete("/objects/a", guards=(stale,))
    with pytest.raises(GuardFailed):
        await etcd.delete("/objects/a", expected_revision=kv.mod_revision, guards=(stale,))
    assert (await etcd.get("/objects/a")).value == b"1"
    # With the guard holding, the ordinary outcomes come back.
    with pytest.raises(AlreadyExists):
        await etcd.create("/objects/a", b"1", guards=(good,))
    with pytest.raises(Conflict):
        await etcd.update("/objects/a", b"2", expected_revision=kv.mod_revision + 7, guards=(good,))
    with pytest.raises(NotFound):
        await etcd.delete("/objects/missing", guards=(good,))
    deleted = await etcd.delete("/objects/a", expected_revision=kv.mod_revision, guards=(good,))
    assert deleted.value == b"1"


async def test_leases_expire_their_keys(etcd: EtcdStore) -> None:
    lease, ttl = await etcd.grant_lease(5)
    assert ttl == 5
    await etcd.create("/leased", b"x", lease=lease)
    assert 0 < await etcd.keep_alive_lease(lease) <= 5
    await etcd.revoke_lease(lease)
    with pytest.raises(NotFound):
        await etcd.get("/leased")
    assert await etcd.keep_alive_lease(lease) == 0
    await etcd.revoke_lease(lease)  # already gone: fine
