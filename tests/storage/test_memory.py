"""What only the in-memory store promises: bounded memory and slow-watcher handling."""

from __future__ import annotations

import asyncio

import pytest

from controlplane.storage import EventType, Gone, MemoryStore, Unavailable, WatchEvent


async def test_event_log_bound_compacts_automatically() -> None:
    store = MemoryStore(max_events=10)
    first = await store.create("/pods/a", b"0")
    latest = first
    for i in range(1, 25):
        latest = await store.update("/pods/a", str(i).encode(), expected_revision=latest.mod_revision)

    oldest_kept = latest.mod_revision - 9
    assert store.compacted_revision == oldest_kept
    with pytest.raises(Gone) as gone:
        await store.list("/pods/", revision=first.mod_revision)
    assert gone.value.compacted_revision == oldest_kept
    with pytest.raises(Gone):
        await anext(store.watch("/pods/", from_revision=oldest_kept - 1))

    events = store.watch("/pods/", from_revision=oldest_kept)
    replayed = [await anext(events) for _ in range(10)]
    await events.aclose()  # type: ignore[attr-defined]
    assert [e.kv.mod_revision for e in replayed] == list(range(oldest_kept, latest.mod_revision + 1))
    assert (await store.list("/pods/", revision=oldest_kept)).items[0].value == b"15"


@pytest.mark.parametrize("churn", [100, 1_000])
async def test_history_of_deleted_keys_is_forgotten(churn: int) -> None:
    store = MemoryStore(max_events=50)
    for i in range(churn):
        await store.create(f"/pods/p{i}", b"v")
        await store.delete(f"/pods/p{i}")
    await store.create("/pods/kept", b"v")
    # Only keys touched by the retained events (plus the live one) keep any history.
    assert len(store._keys) <= 26
    assert [kv.key for kv in (await store.list("/pods/")).items] == ["/pods/kept"]


async def test_slow_watcher_gets_buffered_events_then_gone() -> None:
    store = MemoryStore(watch_queue_size=5)
    start = await store.current_revision() + 1
    events = store.watch("/pods/", from_revision=start)
    first = await store.create("/pods/p0", b"v")
    assert (await anext(events)).kv == first
    for i in range(1, 20):
        await store.create(f"/pods/p{i}", b"v")

    buffered: list[WatchEvent] = []
    with pytest.raises(Gone) as gone:
        async with asyncio.timeout(5):
            async for event in events:
                buffered.append(event)
    assert [e.kv.key for e in buffered] == [f"/pods/p{i}" for i in range(1, 6)]
    assert gone.value.compacted_revision == first.mod_revision + 6
    # Other watchers and the store itself are unaffected.
    assert len((await store.list("/pods/")).items) == 20


async def test_close_ends_watches_and_refuses_further_calls() -> None:
    store = MemoryStore()
    events = store.watch("/", from_revision=await store.current_revision() + 1)

    async def next_event() -> WatchEvent:
        return await anext(events)

    waiting = asyncio.create_task(next_event())
    await asyncio.sleep(0)
    await store.create("/a", b"v")
    assert (await waiting).type is EventType.PUT
    ended = asyncio.create_task(next_event())
    await asyncio.sleep(0)
    await store.close()
    with pytest.raises(StopAsyncIteration):
        async with asyncio.timeout(5):
            await ended
    with pytest.raises(Unavailable):
        await store.get("/a")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_events": 0}, "max_events"),
        ({"watch_queue_size": 0}, "watch_queue_size"),
    ],
)
def test_bounds_must_be_positive(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MemoryStore(**kwargs)


async def test_future_revision_and_compaction_are_refused() -> None:
    store = MemoryStore()
    now = await store.current_revision()
    with pytest.raises(ValueError, match="future"):
        await store.list("/", revision=now + 1)
    with pytest.raises(ValueError, match="compact"):
        await store.compact(now + 1)
