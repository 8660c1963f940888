"""Rollups whose fine buckets are not a minute long (the hub's ``--waste-bucket-length``):
alignment, retention, the report windows and steps, persistence, and stored buckets of another
length, which are dropped rather than misread."""

from __future__ import annotations

import json
import logging
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.reports.accounting import DEFAULT_MINUTE_RETENTION, Accumulator
from controlplane.reports.api import ReportSource, waste_report_routes
from controlplane.reports.classify import WasteState
from controlplane.reports.fleet import FleetSample
from controlplane.reports.persistence import DEFAULT_PREFIX, RollupStore
from controlplane.reports.resource import (
    QueryError,
    QueryParams,
    ReportQuery,
    format_duration,
    parse_query,
    report_object,
)
from controlplane.reports.rollups import Resolution
from controlplane.storage import MemoryStore, Store

from .builders import A100, T0, cluster, fleet, gpu, node, pod

S = WasteState
HOUR = 3600.0


def second(value: float) -> datetime:
    return T0 + timedelta(seconds=value)


def sample(at: float, *, idle_held: bool = False) -> FleetSample:
    """One node of two A100s at $3.60/h: GPU 0 busy; GPU 1 free, or held at 2 % (idle-allocated)."""
    second_gpu = gpu(1, pod("idle"), 0.02) if idle_held else gpu(1)
    return fleet(cluster("dc1", [node("n1", [gpu(0, pod("train"), 0.9), second_gpu])], pricing={A100: 3.6}),
                 time=second(at))


def fine_starts(accumulator: Accumulator) -> list[int]:
    return [start for resolution, start in accumulator.bucket_ids() if resolution is Resolution.MINUTE]


def test_buckets_start_on_multiples_of_their_length_and_aligned_windows_are_exact() -> None:
    accumulator = Accumulator(bucket_seconds=5)
    for at, idle_held in ((0, False), (7, True), (13, True)):
        assert accumulator.add(sample(at, idle_held=idle_held))
    t0 = int(T0.timestamp())
    assert fine_starts(accumulator) == [t0, t0 + 5, t0 + 10]
    # [5, 10): GPU 1 free for 2 s, then held idle for 3 s -- exact, as the window is two bucket edges.
    report = accumulator.query(second(5), second(10))
    assert report.observed_seconds == pytest.approx(5.0)
    assert report.totals.gpu_hours[S.FREE_SPARE] == pytest.approx(2 / HOUR)
    assert report.totals.gpu_hours[S.IDLE_ALLOCATED] == pytest.approx(3 / HOUR)
    assert report.totals.gpu_hours[S.BUSY] == pytest.approx(5 / HOUR)
    assert report.totals.cost_usd[S.IDLE_ALLOCATED] == pytest.approx(3 * 0.001)
    # A minute's bucket holds the same 13 s as one: the same window is only its share of them.
    minute = Accumulator()
    for at, idle_held in ((0, False), (7, True), (13, True)):
        minute.add(sample(at, idle_held=idle_held))
    assert fine_starts(minute) == [t0]
    assert minute.query(second(5), second(10)).totals.gpu_hours[S.IDLE_ALLOCATED] == pytest.approx(6 / 60 * 5 / HOUR)


def test_the_fine_retention_is_2880_buckets_of_their_length() -> None:
    assert Accumulator().minute_retention == DEFAULT_MINUTE_RETENTION == timedelta(hours=48)
    assert Accumulator(bucket_seconds=5).minute_retention == timedelta(hours=4)
    assert Accumulator(bucket_seconds=5, minute_retention=timedelta(hours=1)).minute_retention == timedelta(hours=1)
    accumulator = Accumulator(bucket_seconds=5, max_interval=timedelta(hours=1))
    for minute in range(0, 5 * 60 + 1, 10):
        accumulator.add(sample(minute * 60))
    assert accumulator.bucket_counts() == {Resolution.MINUTE: 2880, Resolution.HOUR: 5}
    # The first hour, out of the fine retention, comes from its hour bucket; the rest from 5 s buckets.
    assert accumulator.query(T0, second(5 * HOUR)).totals.total_gpu_hours == pytest.approx(2 * 5)
    assert accumulator.query(T0, second(HOUR)).totals.total_gpu_hours == pytest.approx(2)


@pytest.mark.parametrize("bucket_seconds", [0, 7, 90, 120, 3600])
def test_a_length_that_does_not_divide_a_minute_is_refused(bucket_seconds: int) -> None:
    with pytest.raises(ValueError, match="divides a minute"):
        Accumulator(bucket_seconds=bucket_seconds)
    with pytest.raises(ValueError, match="divides a minute"):
        ReportSource(MemoryStore(), bucket_seconds=bucket_seconds)


NOW = datetime(2024, 5, 1, 12, 0, 7, 750000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("bucket_seconds", "end"),
    [(60, datetime(2024, 5, 1, 12, 0, tzinfo=UTC)), (5, datetime(2024, 5, 1, 12, 0, 5, tzinfo=UTC)),
     (1, datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC))],
)
def test_a_named_window_ends_at_the_start_of_the_newest_samples_bucket(bucket_seconds: int, end: datetime) -> None:
    query = ReportQuery("last-1h", since=timedelta(hours=1))
    assert query.window(newest=NOW - timedelta(seconds=0.5), now=NOW, bucket_seconds=bucket_seconds) == (
        end - timedelta(hours=1), end
    )


@pytest.mark.parametrize(
    ("bucket_seconds", "step", "accepted"),
    [(5, "2s", False), (5, "5s", True), (5, "1m", True), (60, "30s", False), (60, "59s", False), (60, "1m", True),
     (1, "1s", True),
     # Not a multiple of the bucket: accepted, as 90s always was with minute buckets (edges count in proportion).
     (5, "7s", True), (60, "90s", True)],
)
def test_a_step_is_at_least_one_bucket(bucket_seconds: int, step: str, accepted: bool) -> None:
    params = QueryParams(step=step)
    if accepted:
        assert parse_query("last-1h", params, bucket_seconds=bucket_seconds).step is not None
        return
    with pytest.raises(QueryError) as caught:
        parse_query("last-1h", params, bucket_seconds=bucket_seconds)
    assert caught.value.field == "step"
    bucket = format_duration(timedelta(seconds=bucket_seconds))
    assert caught.value.message == f"step: must be at least {bucket} (the length of the waste rollups' buckets), got {step}"


def test_a_series_of_one_bucket_steps_is_exact() -> None:
    accumulator = Accumulator(bucket_seconds=5)
    for at in range(0, 21):
        accumulator.add(sample(at, idle_held=at >= 10))
    query = parse_query("custom", QueryParams(start="2024-05-01T00:00:00Z", end="2024-05-01T00:00:20Z", step="5s"),
                        bucket_seconds=5)
    series = report_object(query, accumulator, now=second(21))["status"]["series"]
    assert [(point["from"][-3:], point["to"][-3:]) for point in series] == [
        ("00Z", "05Z"), ("05Z", "10Z"), ("10Z", "15Z"), ("15Z", "20Z")
    ]
    assert [point["gpus"]["idle-allocated"] for point in series] == [0.0, 0.0, 1.0, 1.0]
    assert [point["gpus"]["free-spare"] for point in series] == [1.0, 1.0, 0.0, 0.0]


def test_dump_and_load_keep_the_length() -> None:
    accumulator = Accumulator(bucket_seconds=5)
    for at in range(0, 30, 3):
        accumulator.add(sample(at))
    restored = Accumulator.load(accumulator.dump())
    assert restored.bucket_seconds == 5
    assert restored.bucket_counts() == accumulator.bucket_counts()
    assert restored.query(second(5), second(25)) == accumulator.query(second(5), second(25))


async def fine_documents(store: Store) -> list[dict[str, object]]:
    listed = await store.list(f"{DEFAULT_PREFIX}minute/")
    return [json.loads(zlib.decompress(kv.value)) for kv in listed.items]


async def test_round_trip_through_the_store_at_5_seconds(store: Store) -> None:
    accumulator = Accumulator(bucket_seconds=5)
    for at in range(0, 63, 2):
        accumulator.add(sample(at, idle_held=at >= 30))
    await RollupStore(store).save(accumulator)
    documents = await fine_documents(store)
    assert len(documents) == 13 and all(doc["seconds"] == 5 for doc in documents)
    restored = await RollupStore(store).load(Accumulator(bucket_seconds=5))
    assert restored.bucket_counts() == accumulator.bucket_counts()
    for window in ((T0, second(62)), (second(25), second(35))):
        assert restored.query(*window) == accumulator.query(*window)
    accumulator.add(sample(64, idle_held=True))
    restored.add(sample(64, idle_held=True))
    assert restored.query(T0, second(64)) == accumulator.query(T0, second(64))


async def test_a_minute_buckets_document_is_as_it_always_was(store: Store) -> None:
    accumulator = Accumulator()
    for at in (0, 30, 70):
        accumulator.add(sample(at))
    await RollupStore(store).save(accumulator)
    documents = await fine_documents(store)
    assert [list(doc) for doc in documents] == [
        ["version", "type", "resolution", "start", "observed", "unobserved", "strings", "cells", "opportunities"]
    ] * 2


@pytest.mark.parametrize(("saved", "loading"), [(5, 60), (60, 5), (5, 10)])
@pytest.mark.parametrize("read_only", [False, True])
async def test_fine_buckets_of_another_length_are_dropped_with_a_warning(
    store: Store, saved: int, loading: int, read_only: bool, caplog: pytest.LogCaptureFixture
) -> None:
    saver = Accumulator(bucket_seconds=saved, minute_retention=timedelta(minutes=2), max_interval=timedelta(hours=1))
    for at in (0, 600, 2 * HOUR, 2 * HOUR + 120):
        saver.add(sample(at))
    await RollupStore(store).save(saver)
    fine_saved = len(await fine_documents(store))
    assert fine_saved == 120 // saved
    with caplog.at_level(logging.WARNING, logger="controlplane.reports.persistence"):
        restored = await RollupStore(store).load(Accumulator(bucket_seconds=loading), read_only=read_only)
    # Read as the other length, each bucket's GPU-seconds would land in the wrong time: not read.
    assert restored.bucket_counts() == {Resolution.MINUTE: 0, Resolution.HOUR: 3}
    assert [r.getMessage() for r in caplog.records] == [
        f"dropping {fine_saved} waste rollup buckets of {saved} s: this hub's buckets are {loading} s long"
        " (--waste-bucket-length); the hour rollups keep the time they covered"
    ]
    assert len(await fine_documents(store)) == (fine_saved if read_only else 0)
    # The accounting goes on at the new length from the held sample, which does not depend on it.
    assert restored.newest == saver.newest
    restored.add(sample(2 * HOUR + 180))
    assert restored.query(second(2 * HOUR + 120), second(2 * HOUR + 180)).observed_seconds == pytest.approx(60)
    assert fine_starts(restored)[0] == int(T0.timestamp() + 2 * HOUR + 120) // loading * loading
    # The hours before the new buckets' are read from the hour rollups, as the saving hub read them.
    before = saver.query(T0, second(2 * HOUR))
    after = restored.query(T0, second(2 * HOUR))
    assert after.observed_seconds == pytest.approx(before.observed_seconds) and after.observed_seconds > 0
    assert after.totals.gpu_hours == pytest.approx(before.totals.gpu_hours)


async def test_the_api_aligns_windows_and_steps_to_the_hubs_bucket_length() -> None:
    accumulator = Accumulator(bucket_seconds=5)
    for at in range(0, 33):
        accumulator.add(sample(at))
    async with MemoryStore() as store:
        await RollupStore(store).save(accumulator)
        objects = ObjectStore(store, hub_registry())
        source = ReportSource(store, bucket_seconds=5)
        app = create_app(objects, hub_registry(), extra_routes=waste_report_routes(source, clock=lambda: second(40)))
        reports = "/apis/reports.gpufed.io/v1alpha1/wastereports"
        async with TestClient(TestServer(app)) as client:
            async with client.get(f"{reports}/last-15s?step=5s") as response:
                assert response.status == 200
                obj = await response.json()
            async with client.get(f"{reports}/last-1h?step=2s") as response:
                refused = await response.json()
                assert response.status == 400, refused
    # The newest sample is at 32 s: the window ends at 30 s, the start of its 5 s bucket.
    assert (obj["status"]["window"]["from"], obj["status"]["window"]["to"]) == (
        "2024-05-01T00:00:15Z", "2024-05-01T00:00:30Z"
    )
    assert [point["observed_hours"] for point in obj["status"]["series"]] == [round(5 / HOUR, 6)] * 3
    assert refused["kind"] == "Status" and refused["reason"] == "BadRequest"
    assert refused["message"] == "step: must be at least 5s (the length of the waste rollups' buckets), got 2s"
    assert [c["field"] for c in refused["details"]["causes"]] == ["step"]
