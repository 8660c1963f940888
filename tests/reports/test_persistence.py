"""Rollups survive a hub restart: saved to and loaded from a real store (memory and etcd)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controlplane.reports.accounting import Accumulator
from controlplane.reports.fleet import FleetSample
from controlplane.reports.persistence import DEFAULT_PREFIX, RollupStore
from controlplane.reports.rollups import Resolution
from controlplane.storage import Store

from .builders import A100, GPU, T0, at, cluster, demand, fleet, gpu, gpus, mig, node, pod


def sample(minutes: float) -> FleetSample:
    return fleet(
        cluster(
            "dc1",
            [
                node("a1", [gpu(0, pod("train"), 0.9), gpu(1, pod("idle"), 0.02), *gpus(2)[1:]]),
                node("m1", [mig(0, "1g.10gb", instance=i) for i in range(7)]),
            ],
            pricing={A100: 2.0},
        ),
        pending=[demand({GPU: 1}), demand({"nvidia.com/mig-3g.40gb": 1}, workload="Deployment/mig")],
        time=at(minutes),
    )


async def keys(store: Store) -> list[str]:
    return [kv.key for kv in (await store.list(DEFAULT_PREFIX)).items]


async def test_round_trip_through_the_store(store: Store) -> None:
    accumulator = Accumulator()
    for minute in range(0, 125):
        accumulator.add(sample(minute))
    rollups = RollupStore(store)
    written = await rollups.save(accumulator)
    counts = accumulator.bucket_counts()
    assert written == counts[Resolution.MINUTE] + counts[Resolution.HOUR] + 1  # + the cursor

    restored = await RollupStore(store).load()
    assert restored.bucket_counts() == counts
    for window in ((T0, at(124)), (at(61), at(62))):
        assert restored.query(*window, by=["workload"]) == accumulator.query(*window, by=["workload"])
    # The held sample came back too: the next sample integrates the interval since it.
    accumulator.add(sample(125))
    restored.add(sample(125))
    assert restored.query(T0, at(125)) == accumulator.query(T0, at(125))


async def test_save_writes_only_what_changed(store: Store) -> None:
    accumulator = Accumulator()
    rollups = RollupStore(store)
    for minute in range(0, 10):
        accumulator.add(sample(minute))
    await rollups.save(accumulator)
    assert await rollups.save(accumulator) == 0
    accumulator.add(sample(10))
    # one minute bucket, its hour bucket and the cursor
    assert await rollups.save(accumulator) == 3


async def test_expired_buckets_are_deleted(store: Store) -> None:
    accumulator = Accumulator(minute_retention=timedelta(minutes=5), hour_retention=timedelta(hours=2))
    rollups = RollupStore(store)
    for minute in range(0, 11):
        accumulator.add(sample(minute))
    await rollups.save(accumulator)
    for minute in range(11, 200, 5):
        accumulator.add(sample(minute))
        await rollups.save(accumulator)
    minute_keys = [k for k in await keys(store) if "/minute/" in k]
    hour_keys = [k for k in await keys(store) if "/hour/" in k]
    assert len(minute_keys) == accumulator.bucket_counts()[Resolution.MINUTE] <= 6
    assert len(hour_keys) == accumulator.bucket_counts()[Resolution.HOUR] <= 3


@pytest.mark.parametrize("read_only", [False, True])
async def test_loading_removes_expired_documents_unless_read_only(store: Store, read_only: bool) -> None:
    long_kept = Accumulator()
    for minute in range(0, 20):
        long_kept.add(sample(minute))
    await RollupStore(store).save(long_kept)
    saved = await keys(store)
    short = Accumulator(minute_retention=timedelta(minutes=5), hour_retention=timedelta(hours=2))
    restored = await RollupStore(store).load(short, read_only=read_only)
    left = await keys(store)
    assert restored.bucket_counts()[Resolution.MINUTE] <= 6
    if read_only:
        assert left == saved
    else:
        assert len([k for k in left if "/minute/" in k]) == restored.bucket_counts()[Resolution.MINUTE] < 20


async def test_large_documents_are_split_into_parts(store: Store) -> None:
    accumulator = Accumulator()
    for minute in range(0, 3):
        accumulator.add(sample(minute))
    rollups = RollupStore(store, max_value_bytes=64)
    await rollups.save(accumulator)
    stored = await keys(store)
    assert any(k.endswith("/001") for k in stored)
    assert all(len(kv.value) <= 64 for kv in (await store.list(DEFAULT_PREFIX)).items)
    restored = await RollupStore(store).load()
    assert restored.query(T0, at(2)) == accumulator.query(T0, at(2))
    # Re-saving with bigger parts removes the surplus ones (a fresh RollupStore lists to learn them).
    accumulator.add(sample(3))
    await RollupStore(store).save(accumulator)
    hour_parts = [k for k in await keys(store) if "/hour/" in k]
    assert hour_parts == [f"{DEFAULT_PREFIX}hour/{int(T0.timestamp()):012d}/000"]
    restored_again = await RollupStore(store).load()
    assert restored_again.query(T0, at(3)) == accumulator.query(T0, at(3))


async def test_unreadable_documents_are_skipped(store: Store) -> None:
    accumulator = Accumulator()
    for minute in range(0, 3):
        accumulator.add(sample(minute))
    await RollupStore(store).save(accumulator)
    first_minute = next(k for k in await keys(store) if "/minute/" in k)
    current = await store.get(first_minute)
    await store.update(first_minute, b"not zlib", expected_revision=current.mod_revision)
    restored = await RollupStore(store).load()
    assert restored.bucket_counts()[Resolution.MINUTE] == accumulator.bucket_counts()[Resolution.MINUTE] - 1


def test_prefix_must_end_with_a_slash() -> None:
    from controlplane.storage import MemoryStore

    with pytest.raises(ValueError):
        RollupStore(MemoryStore(), prefix="/gpufed/waste")
