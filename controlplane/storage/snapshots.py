"""Backups of the hub's etcd: a consistent snapshot saved to a file, and what ``etcdutl`` says of it.

In: a running etcd (:class:`~controlplane.storage.etcd.maintenance.EtcdMaintenance`, through the
hub's own client credentials) and the file to write. Out: the file, written whole or not at
all (a temporary file beside it, synced, then renamed), readable by its owner only (0600: it
holds every Secret and token digest of the hub), and :class:`SnapshotSummary`, the hash,
revision, key count and size ``etcdutl snapshot status`` reads back from it, which is the check
that the file is a snapshot etcd can restore.

The snapshot is etcd's Maintenance ``Snapshot`` stream (what ``etcdctl snapshot save`` reads):
one point in time of the whole backend, taken while the hub keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from controlplane.storage.etcd.maintenance import EtcdMaintenance
from controlplane.storage.etcdbinary import EtcdBinaryError, find_etcdutl

#: Called with the bytes written so far and the total expected.
Progress = Callable[[int, int], None]


class BackupError(RuntimeError):
    """A backup or restore cannot go on; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class SnapshotSummary:
    """``etcdutl snapshot status``: what a snapshot file holds."""

    hash: int
    revision: int
    total_keys: int
    total_size: int

    def table(self) -> str:
        header = ("HASH", "REVISION", "TOTAL KEYS", "TOTAL SIZE")
        row = (f"{self.hash:x}", str(self.revision), str(self.total_keys), _size(self.total_size))
        widths = [max(len(a), len(b)) for a, b in zip(header, row, strict=True)]
        return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                         for line in (header, row))


def _size(size: int) -> str:
    """A size as etcdutl prints it (decimal units)."""
    if size < 1000:
        return f"{size} B"
    value = size / 1000
    for unit in ("kB", "MB"):
        if value < 1000:
            return f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


async def etcdutl(*args: str) -> str:
    """Run ``etcdutl ARGS``; its standard output, or :class:`BackupError` with what it said."""
    try:
        tool = find_etcdutl()
    except EtcdBinaryError as exc:
        raise BackupError(str(exc)) from None
    process = await asyncio.create_subprocess_exec(
        str(tool), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        said = (err or out).decode(errors="replace").strip().splitlines()
        raise BackupError(f"etcdutl {args[0]} {args[1]} failed: {said[-1] if said else f'exit {process.returncode}'}")
    return out.decode()


async def snapshot_status(path: Path) -> SnapshotSummary:
    """What ``etcdutl snapshot status`` reads from a snapshot (or an etcd backend file)."""
    try:
        text = await etcdutl("snapshot", "status", str(path), "--write-out=json")
    except BackupError as exc:
        raise BackupError(f"{path} is not a readable etcd snapshot ({exc})") from None
    try:
        data = json.loads(text)
        return SnapshotSummary(
            hash=int(data["hash"]), revision=int(data["revision"]),
            total_keys=int(data["totalKey"]), total_size=int(data["totalSize"]),
        )
    except (ValueError, KeyError, TypeError):
        raise BackupError(f"{path} is not an etcd snapshot (etcdutl snapshot status: {text.strip()[:200]})") from None


def sync_directory(directory: Path) -> None:
    """Make the renames in ``directory`` durable."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _partial_file(target: Path, *, force: bool) -> Path:
    """Where the snapshot is written before it becomes ``target``; checks that it may."""
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent} is not a directory; create it first")
    if (target.exists() or target.is_symlink()) and not force:
        raise BackupError(f"{target} already exists; pass --force to replace it")
    partial = target.with_name(f".{target.name}.part")
    partial.unlink(missing_ok=True)
    return partial


async def save_snapshot(
    maintenance: EtcdMaintenance, target: Path, *, force: bool = False, progress: Progress | None = None
) -> SnapshotSummary:
    """Stream etcd's snapshot into ``target`` (see the module docstring); an existing ``target``
    is replaced only with ``force``."""
    partial = _partial_file(target, force=force)
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise BackupError(f"cannot write {partial}: {exc.strerror}") from None
    try:
        with os.fdopen(descriptor, "wb") as out:
            written = 0
            async for chunk, remaining in maintenance.snapshot():
                out.write(chunk)
                written += len(chunk)
                if progress is not None:
                    progress(written, written + remaining)
            out.flush()
            os.fsync(out.fileno())
        if written == 0:
            raise BackupError(f"etcd at {maintenance.endpoint} sent an empty snapshot")
        summary = await snapshot_status(partial)
        if force:
            os.replace(partial, target)
        else:
            try:
                os.link(partial, target)  # fails, rather than replaces, if the file appeared meanwhile
            except FileExistsError:
                raise BackupError(f"{target} already exists; pass --force to replace it") from None
        sync_directory(target.parent)
        return summary
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
