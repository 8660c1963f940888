"""Keeping etcd small (controlplane.storage.spacekeeping), against a real embedded etcd: a churned
database is defragmented when it is more than RATIO times what it uses (and only the embedded
etcd is), its sizes reach the gauges, and a NOSPACE alarm refuses writes as kube says until the
keeper frees space and disarms it.

What would break unseen: a database file that only grows to the quota, a defragmentation of an
etcd the hub does not own, or writes that never resume after the alarm."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from controlplane.apiserver.errors import from_storage_error
from controlplane.storage import EmbeddedEtcd, EtcdStore
from controlplane.storage.etcd.maintenance import NOSPACE, EtcdStatus
from controlplane.storage.interface import NoSpace
from controlplane.storage.spacekeeping import SpaceKeeper, SpacePolicy, StorageSizeMetrics

MiB = 1024 * 1024
#: The quota of the NOSPACE test: a few 512 KiB values fill it.
TINY_QUOTA = 8 * MiB


async def _etcd(tmp_path: Path, *, quota: int = 2 * 1024 * MiB) -> AsyncIterator[tuple[EmbeddedEtcd, EtcdStore]]:
    etcd = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True, quota_backend_bytes=quota)
    url = await etcd.start()
    try:
        async with EtcdStore([url], prefix="/space-test") as store:
            yield etcd, store
    finally:
        await etcd.stop()


@pytest.fixture
async def etcd_store(tmp_path: Path) -> AsyncIterator[EtcdStore]:
    async for _, store in _etcd(tmp_path):
        yield store


@pytest.fixture
async def tiny_etcd_store(tmp_path: Path) -> AsyncIterator[EtcdStore]:
    async for _, store in _etcd(tmp_path, quota=TINY_QUOTA):
        yield store


async def _churn(store: EtcdStore, *, rounds: int, size: int) -> None:
    """Rewrite a few keys many times, then compact away their history: pages freed, file as large."""
    revisions = {}
    for round_number in range(rounds):
        for key in ("/a", "/b", "/c", "/d"):
            value = bytes([round_number % 256]) * size
            if key in revisions:
                revisions[key] = (await store.update(key, value, expected_revision=revisions[key])).mod_revision
            else:
                revisions[key] = (await store.create(key, value)).mod_revision
    await store.compact(await store.current_revision(), physical=True)


async def _fragmented(store: EtcdStore) -> EtcdStatus:
    """etcd's status once the compaction's freed pages show: bbolt frees them for reuse once the
    read transactions older than them end, which etcd does at its next commits (writes make them)."""
    for number in range(100):
        await store.create(f"/tick/{number}", b"")
        status = await store.maintenance.status()
        if status.db_size > 2 * status.db_size_in_use:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"the compaction freed nothing: {status}")


def _gauge(registry: CollectorRegistry, name: str) -> float:
    values = [sample.value for metric in registry.collect() for sample in metric.samples if sample.name == name]
    assert len(values) == 1, values
    return values[0]


async def test_a_churned_database_is_defragmented_and_its_size_reported(
    etcd_store: EtcdStore, caplog: pytest.LogCaptureFixture
) -> None:
    await _churn(etcd_store, rounds=40, size=64 * 1024)
    before = await _fragmented(etcd_store)
    registry = CollectorRegistry()
    policy = SpacePolicy(min_db_bytes=MiB, ratio=2.0)
    metrics = StorageSizeMetrics(registry)
    # Another's etcd is measured, not defragmented.
    unowned = await SpaceKeeper(etcd_store, policy=policy, metrics=metrics, embedded=False).check()
    assert unowned.db_size >= before.db_size
    assert _gauge(registry, "apiserver_storage_size_bytes") == unowned.db_size
    with caplog.at_level(logging.INFO, logger="controlplane.storage.spacekeeping"):
        after = await SpaceKeeper(etcd_store, policy=policy, metrics=metrics, embedded=True).check()
    assert after.db_size < before.db_size / 2, (before, after)
    assert _gauge(registry, "apiserver_storage_size_bytes") == after.db_size
    assert _gauge(registry, "gpufed_etcd_db_size_in_use_bytes") == after.db_size_in_use
    assert [r.getMessage() for r in caplog.records if "defragmented etcd" in r.getMessage()], caplog.text
    # Once defragmented it is not again until it has grown: below the floor nothing happens.
    high_floor = SpacePolicy(min_db_bytes=after.db_size + MiB, ratio=2.0)
    again = await SpaceKeeper(etcd_store, policy=high_floor, metrics=metrics, embedded=True).check()
    assert again.db_size == after.db_size


async def _fill(store: EtcdStore) -> int:
    """Write 512 KiB values until etcd refuses for want of space; how many went in."""
    for number in range(100):
        try:
            await store.create(f"/fill/{number}", b"x" * (512 * 1024))
        except NoSpace:
            return number
    raise AssertionError("etcd never ran out of space")


async def test_nospace_is_kubes_error_and_the_keeper_recovers_from_it(tiny_etcd_store: EtcdStore) -> None:
    store = tiny_etcd_store
    written = await _fill(store)
    with pytest.raises(NoSpace) as refused:
        await store.create("/small", b"1")
    status = from_storage_error(refused.value, plural="configmaps", group="").to_status()
    assert status["code"] == 500
    assert status["message"] == "etcdserver: mvcc: database space exceeded"
    assert "reason" not in status  # kube's StatusReasonUnknown
    assert NOSPACE in (await store.maintenance.status()).alarms
    # Deletes still work under the alarm; the keeper then compacts, defragments and disarms.
    for number in range(written):
        await store.delete(f"/fill/{number}")
    keeper = SpaceKeeper(
        store, policy=SpacePolicy(quota_backend_bytes=TINY_QUOTA),
        metrics=StorageSizeMetrics(CollectorRegistry()), embedded=True,
    )
    recovered = await keeper.check()
    assert NOSPACE not in recovered.alarms
    await store.create("/small", b"1")


async def test_the_alarm_stays_while_the_data_still_fills_the_quota(tiny_etcd_store: EtcdStore) -> None:
    store = tiny_etcd_store
    await _fill(store)
    # etcd refuses once its file (data and free pages) passes the quota, so what the data itself
    # uses may end a little under it, and the keeper then rightly disarms the alarm after
    # defragmenting. The keeper here is told a quota of half of that, which the data still fills
    # whatever the pages did: nothing deleted, compaction and defragmentation cannot bring what
    # is used under it.
    used = (await store.maintenance.status()).db_size_in_use
    assert used > TINY_QUOTA // 2, used
    keeper = SpaceKeeper(
        store, policy=SpacePolicy(quota_backend_bytes=TINY_QUOTA // 2),
        metrics=StorageSizeMetrics(CollectorRegistry()), embedded=True,
    )
    still = await keeper.check()
    assert NOSPACE in still.alarms
    with pytest.raises(NoSpace):
        await store.create("/small", b"1")


def test_the_suite_removes_the_etcd_data_of_passing_tests(request: pytest.FixtureRequest) -> None:
    """Each embedded etcd preallocates a 64 MB write-ahead log and a run of the suite starts about
    300 of them: with pytest's default retention (every test's directory, three runs) the suite
    filled a CI machine's disk mid-run. The project's pytest configuration removes a passing
    test's directory as it passes."""
    assert request.config.getini("tmp_path_retention_policy") == "failed"
