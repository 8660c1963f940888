"""Updates made from a revision the hub has just seen skip the read (controlplane/storage/recent.py)
and keep kube's answers: the same object written, 409 when the object moved on, 404 when it is gone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from controlplane.storage.interface import KeyValue
from controlplane.storage.ledger import LedgerStore, WriteLedger
from controlplane.storage.recent import RecentStore, RecentValues


def config_map(data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": {"k": data}}


@pytest.fixture
async def stack() -> AsyncIterator[tuple[ObjectStore, ObjectStore, WriteLedger]]:
    """Two object layers sharing one memory of recent values (the hub's API and controllers)."""
    ledger, recent = WriteLedger(), RecentValues()
    async with MemoryStore() as memory:
        api = ObjectStore(RecentStore(LedgerStore(memory, ledger), recent), hub_registry())
        controllers = ObjectStore(RecentStore(LedgerStore(memory, ledger), recent), hub_registry())
        await api.bootstrap()
        yield api, controllers, ledger


def reads(ledger: WriteLedger) -> int:
    return sum(n for (resource, _), n in ledger.reads.items() if resource == "configmaps")


async def test_an_update_from_a_seen_revision_does_not_read(stack: tuple[ObjectStore, ObjectStore, WriteLedger]) -> None:
    api, controllers, ledger = stack
    rt = api.registry.require("v1", "ConfigMap")
    created = await api.create(rt, config_map("1"))
    updated = await controllers.update(rt, {**created, "data": {"k": "2"}})
    again = await api.update(rt, {**updated, "data": {"k": "3"}})
    assert reads(ledger) == 0
    assert (await api.get(rt, namespace="default", name="c"))["data"] == {"k": "3"}
    assert int(again["metadata"]["resourceVersion"]) > int(updated["metadata"]["resourceVersion"])
    # Without a resourceVersion the update reads what is stored.
    await api.update(rt, {k: v for k, v in again.items() if k != "metadata"} | {"metadata": {"name": "c", "namespace": "default"}})
    assert reads(ledger) == 2  # the get above, then the update's own read


async def test_a_stale_revision_is_a_conflict_and_a_deleted_object_not_found(
    stack: tuple[ObjectStore, ObjectStore, WriteLedger],
) -> None:
    api, controllers, ledger = stack
    rt = api.registry.require("v1", "ConfigMap")
    created = await api.create(rt, config_map("1"))
    await controllers.update(rt, {**created, "data": {"k": "2"}})
    with pytest.raises(errors.Conflict, match="the object has been modified"):
        await api.update(rt, {**created, "data": {"k": "stale"}})
    assert reads(ledger) == 0  # the hub had seen the newer revision: no read needed to know
    current = await api.get(rt, namespace="default", name="c")
    await api.delete(rt, namespace="default", name="c")
    with pytest.raises(errors.NotFound):
        await controllers.update(rt, {**current, "data": {"k": "gone"}})
    with pytest.raises(errors.NotFound):
        await api.get(rt, namespace="default", name="c")


def test_recent_values_keep_the_latest_revision_of_a_bounded_set_of_keys() -> None:
    recent = RecentValues(capacity=2)
    recent.saw(KeyValue("/a", b"2", 1, 2))
    recent.saw(KeyValue("/a", b"1", 1, 1))  # an older event from a lagging watcher
    assert recent.at("/a", 2) is not None and recent.at("/a", 1) is None
    recent.saw(KeyValue("/b", b"", 3, 3))
    recent.saw(KeyValue("/c", b"", 4, 4))
    assert len(recent) == 2 and recent.at("/a", 2) is None


def test_recent_values_keep_a_bounded_weight() -> None:
    recent = RecentValues(capacity=100, max_bytes=1600)
    for index in range(10):
        recent.saw(KeyValue(f"/k{index}", b"x" * 100, index + 1, index + 1))
    assert len(recent) == 10
    recent.saw(KeyValue("/k10", b"x" * 100, 11, 11))  # 1,100 bytes
    recent.saw(KeyValue("/k0", b"x" * 99, 1, 12))  # replaces its older value
    assert len(recent) == 11 and recent.at("/k0", 12) is not None
    for index in range(11, 20):
        recent.saw(KeyValue(f"/k{index}", b"x" * 100, index + 1, index + 100))
    assert len(recent) == 16 and recent.at("/k1", 2) is None  # the least recently seen went first
    recent.saw(KeyValue("/big", b"x" * 101, 50, 500))  # over a sixteenth of the budget: not kept
    assert recent.at("/big", 500) is None



async def test_the_latest_seen_object_is_served_without_a_read_and_a_write_from_it_stays_a_compare_and_swap() -> None:
    ledger, recent = WriteLedger(), RecentValues()
    async with MemoryStore() as memory:
        api = ObjectStore(RecentStore(LedgerStore(memory, ledger), recent), hub_registry())
        controllers = ObjectStore(RecentStore(LedgerStore(memory, ledger), recent), hub_registry())
        other = ObjectStore(memory, hub_registry())  # another process: the same store, its own memory
        await api.bootstrap()
        rt = api.registry.require("v1", "ConfigMap")
        created = await api.create(rt, config_map("1"))
        updated = await api.update(rt, {**created, "data": {"k": "2"}})
        # The controllers' layer sees the API's write at once (shared memory): no read, the new value.
        assert await controllers.get_latest_seen(rt, namespace="default", name="c") == updated
        assert reads(ledger) == 0
        # Another process's write is not seen until read or watched: the copy is the older one,
        # and a write made from it loses its compare-and-swap.
        moved = await other.update(rt, {**updated, "data": {"k": "3"}})
        stale = await controllers.get_latest_seen(rt, namespace="default", name="c")
        assert stale["data"] == {"k": "2"}
        with pytest.raises(errors.Conflict):
            await controllers.update(rt, {**stale, "data": {"k": "4"}})
        # The lost race forgets the stale copy: the retry reads the store, and then sees that.
        before = reads(ledger)
        assert await controllers.get_latest_seen(rt, namespace="default", name="c") == moved
        assert reads(ledger) == before + 1
        assert await controllers.get_latest_seen(rt, namespace="default", name="c") == moved
        assert reads(ledger) == before + 1
        # Forgotten with its delete, then absent: the store is asked, and answers NotFound.
        await api.delete(rt, namespace="default", name="c")
        before = reads(ledger)
        with pytest.raises(errors.NotFound):
            await controllers.get_latest_seen(rt, namespace="default", name="c")
        assert reads(ledger) == before + 1
