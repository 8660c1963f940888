"""The Store contract, run against every store (``store`` is parametrized in conftest).

Each test works on keys of its own; the etcd store namespaces them under a prefix
unique to the test. Revisions are compared relative to ``current_revision()`` because
the etcd server is shared by the session.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from controlplane.storage import (
    AlreadyExists,
    Conflict,
    EventType,
    Gone,
    KeyValue,
    MemoryStore,
    NotFound,
    Store,
    WatchEvent,
)

pytestmark = pytest.mark.waiting


async def take(events: AsyncIterator[WatchEvent], count: int) -> list[WatchEvent]:
    """The next ``count`` events, failing rather than hanging when they do not come."""
    received: list[WatchEvent] = []
    async with asyncio.timeout(10):
        async for event in events:
            received.append(event)
            if len(received) == count:
                break
    return received


def summary(events: list[WatchEvent]) -> list[tuple[EventType, str, bytes, int, bool]]:
    return [(e.type, e.kv.key, e.kv.value, e.kv.mod_revision, e.created) for e in events]


async def test_get_missing_key_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.get("/pods/missing")


async def test_create_then_get_returns_the_same_value(store: Store) -> None:
    before = await store.current_revision()
    created = await store.create("/pods/a", b"one")
    assert created == KeyValue("/pods/a", b"one", before + 1, before + 1)
    assert await store.get("/pods/a") == created
    assert await store.current_revision() == before + 1


async def test_create_existing_key_raises_already_exists(store: Store) -> None:
    first = await store.create("/pods/a", b"one")
    with pytest.raises(AlreadyExists):
        await store.create("/pods/a", b"two")
    assert await store.get("/pods/a") == first


async def test_update_with_current_revision_swaps_value(store: Store) -> None:
    created = await store.create("/pods/a", b"one")
    updated = await store.update("/pods/a", b"two", expected_revision=created.mod_revision)
    assert updated.value == b"two"
    assert updated.create_revision == created.create_revision
    assert updated.mod_revision == created.mod_revision + 1
    assert await store.get("/pods/a") == updated


async def test_update_with_stale_revision_raises_conflict(store: Store) -> None:
    created = await store.create("/pods/a", b"one")
    updated = await store.update("/pods/a", b"two", expected_revision=created.mod_revision)
    with pytest.raises(Conflict):
        await store.update("/pods/a", b"three", expected_revision=created.mod_revision)
    assert await store.get("/pods/a") == updated


async def test_update_missing_key_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.update("/pods/missing", b"x", expected_revision=1)


async def test_delete_without_precondition_returns_last_value(store: Store) -> None:
    created = await store.create("/pods/a", b"one")
    deleted = await store.delete("/pods/a")
    assert deleted == KeyValue("/pods/a", b"one", created.create_revision, created.mod_revision + 1)
    assert await store.current_revision() == deleted.mod_revision
    with pytest.raises(NotFound):
        await store.get("/pods/a")
    with pytest.raises(NotFound):
        await store.delete("/pods/a")


async def test_delete_with_precondition(store: Store) -> None:
    created = await store.create("/pods/a", b"one")
    updated = await store.update("/pods/a", b"two", expected_revision=created.mod_revision)
    with pytest.raises(Conflict):
        await store.delete("/pods/a", expected_revision=created.mod_revision)
    assert await store.get("/pods/a") == updated
    deleted = await store.delete("/pods/a", expected_revision=updated.mod_revision)
    assert (deleted.value, deleted.mod_revision) == (b"two", updated.mod_revision + 1)
    with pytest.raises(NotFound):
        await store.delete("/pods/a", expected_revision=updated.mod_revision)


async def test_recreated_key_gets_a_new_create_revision(store: Store) -> None:
    await store.create("/pods/a", b"one")
    deleted = await store.delete("/pods/a")
    again = await store.create("/pods/a", b"two")
    assert again.create_revision == again.mod_revision == deleted.mod_revision + 1


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("/pods/", ["/pods/a", "/pods/b", "/pods/c/x"]),
        ("/pods/c", ["/pods/c/x"]),
        ("/pods", ["/pods/a", "/pods/b", "/pods/c/x", "/podsx"]),
        ("/nodes/", []),
        ("", ["/pods/a", "/pods/b", "/pods/c/x", "/podsx", "/services/a"]),
    ],
)
async def test_list_by_prefix_in_key_order(store: Store, prefix: str, expected: list[str]) -> None:
    for key in ["/services/a", "/pods/c/x", "/podsx", "/pods/b", "/pods/a"]:
        await store.create(key, key.encode())
    result = await store.list(prefix)
    assert [kv.key for kv in result.items] == expected
    assert [kv.value for kv in result.items] == [key.encode() for key in expected]
    assert result.revision == await store.current_revision()
    assert result.more is False


async def test_list_at_a_past_revision(store: Store) -> None:
    a1 = await store.create("/pods/a", b"a1")
    b1 = await store.create("/pods/b", b"b1")
    at = b1.mod_revision
    await store.update("/pods/a", b"a2", expected_revision=a1.mod_revision)
    await store.delete("/pods/b")
    await store.create("/pods/c", b"c1")

    then = await store.list("/pods/", revision=at)
    assert then.items == [a1, b1]
    assert then.revision == at
    now = await store.list("/pods/")
    assert [(kv.key, kv.value) for kv in now.items] == [("/pods/a", b"a2"), ("/pods/c", b"c1")]
    assert (await store.list("/pods/", revision=a1.mod_revision)).items == [a1]


@pytest.mark.parametrize("limit", [1, 7, 25, 100])
async def test_pagination_covers_every_key_exactly_once(store: Store, limit: int) -> None:
    keys = [f"/pods/p{i:02d}" for i in range(25)]
    for key in reversed(keys):
        await store.create(key, b"v")
    await store.create("/podsx", b"outside the prefix")

    first = await store.list("/pods/", limit=limit)
    pinned = first.revision
    # Writes after the first page must not show up in later pages of the same list.
    await store.create("/pods/p99", b"late")
    await store.delete(keys[-1])

    seen = [kv.key for kv in first.items]
    page, pages = first, 1
    while page.more:
        assert len(page.items) == limit
        # The keys after the page at the list's revision (kube's remainingItemCount).
        assert page.remaining == len(keys) - len(seen)
        page = await store.list("/pods/", revision=pinned, limit=limit, start_after=page.items[-1].key)
        seen.extend(kv.key for kv in page.items)
        pages += 1
    assert seen == keys and page.remaining is None
    assert pages == -(-len(keys) // limit)


async def test_watch_receives_puts_and_deletes_in_order(store: Store) -> None:
    start = await store.current_revision() + 1
    events = store.watch("/pods/", from_revision=start)
    try:
        a = await store.create("/pods/a", b"one")
        await store.create("/services/a", b"other prefix")
        a2 = await store.update("/pods/a", b"two", expected_revision=a.mod_revision)
        deleted = await store.delete("/pods/a")
        b = await store.create("/pods/b", b"bee")
        received = await take(events, 4)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    assert summary(received) == [
        (EventType.PUT, "/pods/a", b"one", a.mod_revision, True),
        (EventType.PUT, "/pods/a", b"two", a2.mod_revision, False),
        (EventType.DELETE, "/pods/a", b"two", deleted.mod_revision, False),
        (EventType.PUT, "/pods/b", b"bee", b.mod_revision, True),
    ]
    assert received[2].kv.create_revision == a.create_revision


async def test_a_watch_of_a_quiet_prefix_is_told_how_far_the_store_has_moved(store: Store) -> None:
    """etcd's progress notifications (every 5 s from the hub's embedded etcd), the memory store's
    at once: the revision up to which every event of the prefix has been handed over."""
    told: list[int] = []
    pod = await store.create("/pods/a", b"one")
    events = store.watch("/pods/", from_revision=pod.mod_revision, progress=told.append)
    assert summary(await take(events, 1)) == [(EventType.PUT, "/pods/a", b"one", pod.mod_revision, True)]
    other = await store.create("/services/a", b"other prefix")
    pending = asyncio.ensure_future(anext(events))  # the watch runs on; nothing comes
    try:
        async with asyncio.timeout(20):
            while not told or told[-1] < other.mod_revision:
                await asyncio.wait({pending}, timeout=0.05)
        assert not pending.done()
        assert all(pod.mod_revision <= revision <= other.mod_revision for revision in told)
    finally:
        pending.cancel()
        await asyncio.wait({pending})
        await events.aclose()  # type: ignore[attr-defined]


async def test_watch_from_a_past_revision_replays_history(store: Store) -> None:
    a = await store.create("/pods/a", b"one")
    a2 = await store.update("/pods/a", b"two", expected_revision=a.mod_revision)
    deleted = await store.delete("/pods/a")

    events = store.watch("/pods/", from_revision=a2.mod_revision)
    try:
        replayed = await take(events, 2)
        b = await store.create("/pods/b", b"bee")
        live = await take(events, 1)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    assert summary(replayed + live) == [
        (EventType.PUT, "/pods/a", b"two", a2.mod_revision, False),
        (EventType.DELETE, "/pods/a", b"two", deleted.mod_revision, False),
        (EventType.PUT, "/pods/b", b"bee", b.mod_revision, True),
    ]


async def test_compacted_revisions_are_gone(store: Store) -> None:
    a = await store.create("/pods/a", b"one")
    a2 = await store.update("/pods/a", b"two", expected_revision=a.mod_revision)
    await store.compact(a2.mod_revision)

    events = store.watch("/pods/", from_revision=a.mod_revision)
    with pytest.raises(Gone) as watch_gone:
        await take(events, 1)
    assert watch_gone.value.compacted_revision == a2.mod_revision
    with pytest.raises(Gone) as list_gone:
        await store.list("/pods/", revision=a.mod_revision)
    assert list_gone.value.compacted_revision == a2.mod_revision

    # The compacted revision itself stays readable.
    assert (await store.list("/pods/", revision=a2.mod_revision)).items == [a2]
    events = store.watch("/pods/", from_revision=a2.mod_revision)
    try:
        assert summary(await take(events, 1)) == [(EventType.PUT, "/pods/a", b"two", a2.mod_revision, False)]
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def test_current_revision_increases_with_every_write(store: Store) -> None:
    revisions = [await store.current_revision()]
    kv = await store.create("/pods/a", b"one")
    revisions.append(await store.current_revision())
    await store.update("/pods/a", b"two", expected_revision=kv.mod_revision)
    revisions.append(await store.current_revision())
    await store.delete("/pods/a")
    revisions.append(await store.current_revision())
    assert revisions == list(range(revisions[0], revisions[0] + 4))


# Compare-and-swap semantics do not depend on the transport: it runs on plain etcd only.
# 20 writers that each yield between their read and their write collide on every round.
@pytest.mark.parametrize("store", ["memory", "etcd"], indirect=True)
async def test_concurrent_compare_and_swap_increments_lose_nothing(store: Store) -> None:
    writers, increments = 20, 50
    await store.create("/counter", b"0")
    conflicts = 0

    async def increment_many() -> None:
        nonlocal conflicts
        for _ in range(increments):
            for attempt in itertools.count():
                current = await store.get("/counter")
                await asyncio.sleep(0)  # let other writers interleave between read and write
                try:
                    await store.update(
                        "/counter",
                        str(int(current.value) + 1).encode(),
                        expected_revision=current.mod_revision,
                    )
                    break
                except Conflict:
                    conflicts += 1
                    # Back off as a real client would, so 50 writers do not spin in lockstep.
                    await asyncio.sleep(random.uniform(0, min(0.003 * 2**attempt, 0.3)))

    async with asyncio.TaskGroup() as group:
        for _ in range(writers):
            group.create_task(increment_many())
    assert int((await store.get("/counter")).value) == writers * increments
    assert conflicts > 0


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get("pods/a"),
        lambda s: s.create("pods/a", b"v"),
        lambda s: s.update("pods/a", b"v", expected_revision=1),
        lambda s: s.delete("pods/a"),
        lambda s: s.list("pods/"),
        lambda s: anext(s.watch("pods/", from_revision=1)),
    ],
    ids=["get", "create", "update", "delete", "list", "watch"],
)
async def test_keys_and_prefixes_must_start_with_a_slash(
    store: Store, call: Callable[[Store], Awaitable[object]]
) -> None:
    with pytest.raises(ValueError, match="start with '/'"):
        await call(store)


async def test_list_at_a_future_revision_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="future"):
        await store.list("/pods/", revision=await store.current_revision() + 1000)


async def test_closing_the_store_ends_its_watches(store: Store) -> None:
    events = store.watch("/pods/", from_revision=await store.current_revision() + 1)
    kv = await store.create("/pods/a", b"one")
    assert (await take(events, 1))[0].kv == kv
    pending = asyncio.ensure_future(take(events, 1))
    await asyncio.sleep(0.05)  # let the watch block waiting for its next event
    await store.close()
    assert await pending == []


async def test_compaction_is_idempotent_and_refuses_the_future(store: Store) -> None:
    kv = await store.create("/pods/a", b"one")
    await store.compact(kv.mod_revision)
    await store.compact(kv.mod_revision)
    await store.compact(kv.mod_revision - 1)  # already compacted beyond it: nothing to do
    assert (await store.list("/pods/", revision=kv.mod_revision)).items == [kv]
    with pytest.raises(ValueError, match="compact"):
        await store.compact(await store.current_revision() + 1000)


# --- lists read in pages ------------------------------------------------------------------

#: Keys per etcd range in the paging tests: a list of a few dozen keys takes many ranges.
SMALL_PAGE = 3


@pytest.fixture(params=["memory", "etcd"])
async def paged_store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A store whose lists take many etcd ranges (the in-memory store has no ranges)."""
    from controlplane.storage import EtcdStore, MemoryStore

    if request.param == "memory":
        async with MemoryStore() as memory:
            yield memory
        return
    endpoint: str = request.getfixturevalue("etcd_endpoint")
    async with EtcdStore([endpoint], prefix=f"/gpufed-test/{uuid.uuid4().hex}", page_size=SMALL_PAGE) as etcd:
        yield etcd


class Writer:
    """Creates ``/pods/kNNNb`` keys (between the ``/pods/kNNNa`` ones a test starts with) one
    after another until stopped, remembering each key's revision."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.created: dict[str, int] = {}
        self.stop = asyncio.Event()

    async def run(self, count: int) -> None:
        order = list(range(count))
        random.Random(7).shuffle(order)  # new keys land in every page
        for index in order:
            if self.stop.is_set():
                return
            kv = await self.store.create(f"/pods/k{index:03d}b", b"new")
            self.created[kv.key] = kv.mod_revision
            await asyncio.sleep(0)


async def initial_keys(store: Store, count: int) -> dict[str, int]:
    created = {}
    for index in range(count):
        kv = await store.create(f"/pods/k{index:03d}a", b"old")
        created[kv.key] = kv.mod_revision
    return created


async def test_an_unbounded_list_over_many_pages_is_one_snapshot(paged_store: Store) -> None:
    """Writes that land between two pages of a list are not in it: every page is read at the
    revision of the first, so the list is exactly the store as of its revision."""
    store = paged_store
    before = await initial_keys(store, 30)
    writer = Writer(store)
    writing = asyncio.create_task(writer.run(60))
    lists_overlapping_writes = 0
    try:
        while not writing.done():
            start = await store.current_revision()
            listed = await store.list("/pods/")
            known = {**before, **writer.created}
            expected = sorted(key for key, revision in known.items() if revision <= listed.revision)
            assert [kv.key for kv in listed.items] == expected
            assert all(kv.mod_revision <= listed.revision for kv in listed.items)
            assert not listed.more
            if listed.revision > start or max(known.values()) > listed.revision:
                lists_overlapping_writes += 1
            await asyncio.sleep(0)  # the in-memory store never suspends: let the writer in
    finally:
        writer.stop.set()
        await writing
    # The in-memory store lists without suspending, so no write can land mid-list there.
    assert lists_overlapping_writes > 0 or isinstance(store, MemoryStore)


async def test_a_watch_after_a_paged_list_has_no_gap_and_no_duplicate(paged_store: Store) -> None:
    store = paged_store
    before = await initial_keys(store, 20)
    writer = Writer(store)
    writing = asyncio.create_task(writer.run(40))
    await asyncio.sleep(0)
    listed = await store.list("/pods/")
    events = store.watch("/pods/", from_revision=listed.revision + 1)
    try:
        await writing
        last = max(writer.created.values())
        watched: list[str] = []
        if last > listed.revision:
            async with asyncio.timeout(10):
                async for event in events:
                    assert event.type is EventType.PUT and event.created
                    watched.append(event.kv.key)
                    if event.kv.mod_revision == last:
                        break
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    listed_keys = [kv.key for kv in listed.items]
    assert not set(listed_keys) & set(watched)
    assert sorted(listed_keys + watched) == sorted({**before, **writer.created})


@pytest.mark.parametrize("limit", [2, 3, 7, 50])
async def test_a_limit_beyond_one_page_returns_that_many_keys(paged_store: Store, limit: int) -> None:
    keys = sorted(await initial_keys(paged_store, 20))
    page = await paged_store.list("/pods/", limit=limit)
    assert [kv.key for kv in page.items] == keys[:limit]
    assert page.more is (limit < len(keys))
    assert page.remaining == (len(keys) - limit if limit < len(keys) else None)
    rest = await paged_store.list("/pods/", revision=page.revision, start_after=page.items[-1].key)
    assert [kv.key for kv in page.items + rest.items] == keys
