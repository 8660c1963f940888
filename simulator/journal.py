"""The simulated member's write journal: every write the store commits, one line, kept between snapshots.

A snapshot (:mod:`simulator.server`) is taken every few seconds; the journal holds the writes
made since, so a member killed between two snapshots (``kill -9``) comes back with every write
it acknowledged, at the resourceVersions it gave them, as a real member's etcd does.

A line is appended (``os.write`` on a file opened ``O_APPEND``) in the store's commit, before the
write is answered or any watcher hears of it. The line is not fsynced: a killed process's
writes are already in the kernel's page cache, which outlives the process; only losing the
machine itself loses them (and the snapshot, which is fsynced, bounds that loss).

When a snapshot is due, the journal is set aside (renamed ``<journal>.prev``) in the same step
as the store is listed, and a fresh one started; once the snapshot is written and synced, the
set-aside journal is removed. Reading back replays the set-aside journal, then the current one,
over the snapshot, skipping the writes the snapshot already holds; a last line cut short by the
kill is a write that was never answered.

A line: ``{"r": modRevision, "k": key, "c": createRevision, "v": value}`` (``"b"``: the value in
base64 when it is not UTF-8), or ``{"r": modRevision, "k": key, "d": 1}`` for a deletion.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from controlplane.storage.interface import EventType, KeyValue, WatchEvent

log = logging.getLogger(__name__)

JOURNAL_NAME = "writes.journal"


def _line(event: WatchEvent) -> bytes:
    kv = event.kv
    entry: dict[str, object] = {"r": kv.mod_revision, "k": kv.key}
    if event.type is EventType.DELETE:
        entry["d"] = 1
    else:
        entry["c"] = kv.create_revision
        try:
            entry["v"] = kv.value.decode("utf-8")
        except UnicodeDecodeError:
            entry["b"] = base64.b64encode(kv.value).decode("ascii")
    return (json.dumps(entry, separators=(",", ":")) + "\n").encode()


def _cut_partial_line(path: Path) -> None:
    """Drop a last line a killed process left cut short (replay ignores it), so that the next
    line appended starts a line of its own rather than ending that one and being lost with it."""
    try:
        data = path.read_bytes()  # the writes since the last snapshot: seconds' worth
    except FileNotFoundError:
        return
    whole = data.rfind(b"\n") + 1
    if whole != len(data):
        os.truncate(path, whole)


class WriteJournal:
    """Appends the store's commits to ``<state-dir>/writes.journal`` (:meth:`record` is the
    store's ``on_commit``)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / JOURNAL_NAME
        self.prev_path = state_dir / f"{JOURNAL_NAME}.prev"
        _cut_partial_line(self.path)
        self._fd = self._open()

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def record(self, event: WatchEvent) -> None:
        """Append the commit ``event`` (no fsync: see the module's docstring)."""
        os.write(self._fd, _line(event))

    def set_aside(self) -> None:
        """A snapshot of the store as it is now is about to be written: start a fresh journal.
        A journal already set aside (for a snapshot that failed, or by an earlier run) stays,
        and this one goes on: the snapshot covers all of the former and part of the latter, and
        replaying skips the writes a snapshot holds."""
        if self.prev_path.exists():
            return
        os.replace(self.path, self.prev_path)
        os.close(self._fd)
        self._fd = self._open()

    def snapshot_written(self) -> None:
        """The snapshot is on disk: the writes set aside for it are no longer needed."""
        self.prev_path.unlink(missing_ok=True)

    def close(self) -> None:
        os.close(self._fd)


def replay(state_dir: Path, items: Iterable[KeyValue], revision: int) -> tuple[list[KeyValue], int]:
    """The snapshot's ``items`` at ``revision`` with the journalled writes past it applied: the
    items and the revision of the last write."""
    live = {kv.key: kv for kv in items}
    for path in (state_dir / f"{JOURNAL_NAME}.prev", state_dir / JOURNAL_NAME):
        try:
            lines = path.read_bytes().splitlines()
        except FileNotFoundError:
            continue
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
                mod = int(entry["r"])
                key = str(entry["k"])
                if mod <= revision:
                    continue  # in the snapshot already
                if entry.get("d"):
                    live.pop(key, None)
                else:
                    value = entry["v"].encode("utf-8") if "v" in entry else base64.b64decode(entry["b"])
                    live[key] = KeyValue(
                        key=key, value=value, create_revision=int(entry["c"]), mod_revision=mod
                    )
                revision = mod
            except (KeyError, TypeError, ValueError):
                if number < len(lines):
                    log.warning("ignoring unreadable line %d of the write journal %s", number, path)
                # The last line, cut short by the kill: a write that was never answered.
    return list(live.values()), revision
