"""Restoring the hub's embedded etcd from a snapshot, so that every client relists.

In: a snapshot file (``gpufed backup save``, or ``etcdctl snapshot save`` of the hub's etcd) and
the embedded etcd's directory (``STATE_DIR/etcd``) of a hub that is not running. Out: that
directory's data replaced by the snapshot's, the old data kept beside it as
``etcd.before-restore-<UTC time>``, and :class:`RestoreOutcome`.

Steps, under the data directory's lock (:mod:`controlplane.storage.datalock`: no hub runs, none
starts meanwhile):

1. ``etcdutl snapshot status`` checks the snapshot and reads its revision; the same on the old
   backend file (``etcd/member/snap/db``) reads the highest revision the old data reached.
2. ``etcdutl snapshot restore`` writes a new data directory beside the old one (its integrity
   hash checked).
3. The revision bump (after revoking the snapshot's etcd leases: their holders, the replaced
   data's hub replicas, are stopped, and the restarted hub should not wait out the old leader's). Clients (agents' informers, controllers, ``kubectl get -w``) hold
   resourceVersions of the old data, newer than the snapshot's revision. Resumed as they are,
   they would skip or misread the writes of the restored history. kube's procedure restores
   with ``etcdutl snapshot restore --bump-revision N --mark-compacted``; etcdutl 3.5.1 has
   neither flag, so this module does what they do through etcd itself: it starts the restored
   etcd on its own, writes throwaway keys (``/gpufed-restore/``; one revision each, many in
   flight) until the revision is past the old data's highest plus :data:`REVISION_MARGIN`,
   deletes them, and compacts at that revision. Every resourceVersion a client holds is then
   compacted: a watch or list from it gets 410 Gone (``too old resource version``) and the
   client relists, as after any compaction; nothing resumes silently in the new history.
4. The new directory and the old one are swapped with one ``renameat2(RENAME_EXCHANGE)``, so
   ``etcd/`` always holds a whole data directory; the old one is then renamed aside.

The hub's PKI, the embedded etcd's own certificates and its ports are untouched; what lives in
etcd (objects, tokens) is the snapshot's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import datetime as dt
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from controlplane.storage.datalock import DataDirBusy, DataLock
from controlplane.storage.embedded import ETCD_SUBDIR, PORTS_FILE, EmbeddedEtcd, EtcdStartError
from controlplane.storage.etcd import EtcdStore
from controlplane.storage.snapshots import (
    BackupError,
    SnapshotSummary,
    etcdutl,
    snapshot_status,
    sync_directory,
)

#: Revisions added past the old backend file's highest: etcd commits its backend every 100 ms,
#: so a hub killed outright may have applied (and answered with) revisions its file lacks;
#: the hub writes far fewer than 1000 revisions in 100 ms.
REVISION_MARGIN = 1000
#: Throwaway writes in flight during the bump (etcd batches them into few disk syncs).
BUMP_CONCURRENCY = 64
BUMP_PREFIX = "/gpufed-restore"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100

#: Called with one line of progress.
Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class RestoreOutcome:
    snapshot: SnapshotSummary
    #: The revision the restored etcd starts at (the snapshot's when nothing was bumped).
    revision: int
    #: Where the old data went (None when there was none).
    previous: Path | None


def _exchange(first: Path, second: Path) -> None:
    """Swap two directories' names atomically (Linux ``renameat2``)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    result = libc.renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"cannot swap {first} and {second}: {os.strerror(error)}")


def _peer_url(data_dir: Path) -> str:
    """The peer URL the embedded etcd advertises (its remembered port; etcd's default otherwise)."""
    try:
        port = int(json.loads((data_dir / PORTS_FILE).read_text())["peer_port"])
    except (OSError, ValueError, KeyError, TypeError):
        port = 2380
    return f"http://127.0.0.1:{port}"


async def _bump(store: EtcdStore, target: int, say: Say) -> int:
    """Write throwaway keys until etcd's revision reaches ``target``; the revision reached."""
    current = await store.current_revision()
    start, step = current, max((target - current) // 10, 1)
    marks = iter(range(start + step, target + step, step))
    mark = next(marks, target)

    async def writer(worker: int) -> None:
        nonlocal current, mark
        key = f"/{worker}"
        stored = await store.create(key, b"")
        current = max(current, stored.mod_revision)
        while current < target:
            stored = await store.update(key, b"", expected_revision=stored.mod_revision)
            current = max(current, stored.mod_revision)
            if current >= mark:
                say(f"bumping the revision: {min(current, target) - start} of {target - start}")
                mark = next(marks, target + 1)

    async with asyncio.TaskGroup() as group:
        for worker in range(min(BUMP_CONCURRENCY, max(target - current, 1))):
            group.create_task(writer(worker))
    for key in (kv.key for kv in (await store.list("")).items):
        await store.delete(key)
    return await store.current_revision()


async def _bump_and_compact(data_dir: Path, target: int, say: Say) -> int:
    """Start the restored etcd in ``data_dir`` on its own, bump its revision to ``target`` and
    compact at the revision reached."""
    etcd = EmbeddedEtcd(data_dir, log_file=data_dir / "etcd.log")
    try:
        url = await etcd.start()
    except EtcdStartError as exc:
        raise BackupError(f"the restored etcd did not start: {exc}") from None
    try:
        store = EtcdStore([url], prefix=BUMP_PREFIX, tls=etcd.client_tls)
        async with store:
            # The leases were held by the processes of the replaced data, all stopped: the restarted
            # hub need not wait out the old leader lease.
            for lease in await store.lease_ids():
                await store.revoke_lease(lease)
            reached = await _bump(store, target, say)
            say(f"compacting at revision {reached}: clients holding an older resourceVersion relist")
            await store.compact(reached, physical=True)
            return reached
    finally:
        await etcd.stop()


async def restore_snapshot(
    snapshot: Path, etcd_dir: Path, *, bump_revision: int | None = None, say: Say = lambda _line: None
) -> RestoreOutcome:
    """Replace the data of the embedded etcd in ``etcd_dir`` by ``snapshot`` (module docstring).

    ``bump_revision``: revisions to add to the snapshot's (etcdutl's ``--bump-revision``); None:
    past the old data's highest revision, or none when there is no old data.
    """
    # The directories the lock creates: a restore that fails removes them (and the lock in them).
    created = next((d for d in (*reversed(etcd_dir.parents), etcd_dir) if not d.exists()), None)
    try:
        lock = DataLock.take(etcd_dir, role="gpufed backup restore")
    except DataDirBusy as exc:
        raise BackupError(f"{exc}: stop the hub of this state dir first, then restore") from None
    try:
        return await _restore(snapshot, etcd_dir, bump_revision=bump_revision, say=say)
    except BaseException:
        if created is not None:
            lock.release()
            shutil.rmtree(created, ignore_errors=True)
        raise
    finally:
        lock.release()


async def _restore(snapshot: Path, etcd_dir: Path, *, bump_revision: int | None, say: Say) -> RestoreOutcome:
    summary = await snapshot_status(snapshot)
    say(f"snapshot {snapshot}: revision {summary.revision}, {summary.total_keys} keys")
    current = etcd_dir / ETCD_SUBDIR
    old_db = current / "member" / "snap" / "db"
    target = summary.revision
    if bump_revision is not None:
        target = summary.revision + bump_revision
    elif old_db.exists():
        old = await snapshot_status(old_db)
        target = max(summary.revision, old.revision + REVISION_MARGIN)
        say(f"the current data reached revision {old.revision}; the restored etcd will start past {target}")
    work = etcd_dir / "restore.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    try:
        restored = work / ETCD_SUBDIR
        peer = _peer_url(etcd_dir)
        await etcdutl(
            "snapshot", "restore", str(snapshot), f"--data-dir={restored}", "--name=gpufed",
            f"--initial-cluster=gpufed={peer}", f"--initial-advertise-peer-urls={peer}",
        )
        say(f"restored the snapshot into {restored}")
        revision = summary.revision
        if target > summary.revision:
            revision = await _bump_and_compact(work, target, say)
        previous = None
        if current.exists():
            _exchange(restored, current)
            previous = etcd_dir / f"etcd.before-restore-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}"
            restored.rename(previous)
        else:
            restored.rename(current)
        sync_directory(etcd_dir)
        return RestoreOutcome(snapshot=summary, revision=revision, previous=previous)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
