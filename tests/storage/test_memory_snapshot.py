"""MemoryStore.restore and the simulated member's snapshot file: a store read back from a
snapshot keeps its resourceVersions, and a watcher that cannot resume across the restore
is told to relist."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.storage import Conflict, EventType, Gone, KeyValue, MemoryStore
from simulator.server import UNCLEAN_REVISION_GAP, SnapshotError, read_snapshot, write_snapshot


async def _written_store() -> tuple[MemoryStore, list[KeyValue], int]:
    store = MemoryStore()
    a = await store.create("/pods/a", b"a0")
    await store.create("/pods/b", b"b0")
    a = await store.update("/pods/a", b"a1", expected_revision=a.mod_revision)
    await store.delete("/pods/b")
    await store.create("/nodes/n1", b"n")
    listed = await store.list("")
    return store, listed.items, listed.revision


async def test_restore_keeps_keys_values_and_revisions() -> None:
    _, items, revision = await _written_store()
    restored = MemoryStore()
    restored.restore(items, revision=revision)

    assert (await restored.list("")).items == items
    assert await restored.get("/pods/a") == next(kv for kv in items if kv.key == "/pods/a")
    assert await restored.current_revision() == revision + 1
    # Compare-and-swap works against the old resourceVersion, and writes go on from there.
    a = await restored.get("/pods/a")
    with pytest.raises(Conflict):
        await restored.update("/pods/a", b"x", expected_revision=a.mod_revision - 1)
    updated = await restored.update("/pods/a", b"a2", expected_revision=a.mod_revision)
    assert updated.mod_revision == revision + 2
    assert updated.create_revision == a.create_revision


@pytest.mark.parametrize(
    ("watch_from_offset", "gone"),
    [
        (-2, True),  # the client missed writes it can no longer be told about
        (0, True),  # the event at the snapshot's revision is not replayable
        (1, False),  # the client had seen exactly the snapshot's state
    ],
)
async def test_watch_across_restore(watch_from_offset: int, gone: bool) -> None:
    _, items, revision = await _written_store()
    restored = MemoryStore()
    restored.restore(items, revision=revision)
    events = restored.watch("/pods/", from_revision=revision + watch_from_offset)
    if gone:
        with pytest.raises(Gone):
            await anext(events)
        return
    written = await restored.create("/pods/c", b"c0")
    event = await anext(events)
    await events.aclose()  # type: ignore[attr-defined]
    assert (event.type, event.kv) == (EventType.PUT, written)


async def test_list_at_the_restored_revision_reads_the_snapshot() -> None:
    _, items, revision = await _written_store()
    restored = MemoryStore()
    restored.restore(items, revision=revision)
    current = await restored.current_revision()
    await restored.delete("/pods/a")
    assert [kv.key for kv in (await restored.list("/pods/", revision=current)).items] == ["/pods/a"]
    with pytest.raises(Gone):
        await restored.list("/pods/", revision=revision)


def _kv(key: str, create: int, mod: int) -> KeyValue:
    return KeyValue(key=key, value=b"v", create_revision=create, mod_revision=mod)


@pytest.mark.parametrize(
    ("items", "revision", "message"),
    [
        ([_kv("/a", 2, 5)], 4, "mod revision <= 4"),
        ([_kv("/a", 3, 2)], 4, "create revision <= mod revision"),
        ([_kv("/a", 1, 2)], 4, "1 < create revision"),
        ([_kv("/a", 2, 2), _kv("/a", 3, 3)], 4, "appears twice"),
        ([_kv("a", 2, 2)], 4, "start with '/'"),
        ([], 0, "at least 1"),
    ],
)
def test_restore_rejects_inconsistent_snapshots(items: list[KeyValue], revision: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MemoryStore().restore(items, revision=revision)


async def test_restore_refuses_a_store_in_use() -> None:
    store = MemoryStore()
    await store.create("/a", b"v")
    with pytest.raises(ValueError, match="not been written"):
        store.restore([_kv("/b", 2, 2)], revision=2)


@pytest.mark.parametrize(("clean", "gap"), [(True, 0), (False, UNCLEAN_REVISION_GAP)])
async def test_snapshot_file_round_trip(tmp_path: Path, clean: bool, gap: int) -> None:
    store, _, _ = await _written_store()
    await store.create("/secrets/binary", b"\xff\x00\xfe")
    listed = await store.list("")
    path = tmp_path / "snapshot.json"
    write_snapshot(path, listed.items, revision=listed.revision, clean=clean)

    read = read_snapshot(path)
    assert read is not None
    items, revision = read
    assert items == listed.items
    assert revision == listed.revision + gap
    restored = MemoryStore()
    restored.restore(items, revision=revision)
    assert (await restored.get("/secrets/binary")).value == b"\xff\x00\xfe"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "cannot read"),
        ('{"format": 99, "revision": 3, "items": []}', "format 99"),
        ('{"format": 1, "revision": 3, "items": [{"key": "/a"}]}', "malformed"),
    ],
)
def test_unreadable_snapshots_are_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text(text)
    with pytest.raises(SnapshotError, match=message):
        read_snapshot(path)


def test_no_snapshot_file_means_a_fresh_store(tmp_path: Path) -> None:
    assert read_snapshot(tmp_path / "snapshot.json") is None


def test_snapshot_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """It holds every object of the member, propagated Secrets included."""
    path = tmp_path / "snapshot.json"
    leftover = tmp_path / ".snapshot.json.tmp"
    leftover.write_text("{}")
    leftover.chmod(0o644)
    path.write_text("{}")
    path.chmod(0o644)

    write_snapshot(path, [_kv("/registry/core/secrets/a/b", 1, 1)], revision=1, clean=True)

    assert path.stat().st_mode & 0o777 == 0o600
    assert read_snapshot(path) is not None
