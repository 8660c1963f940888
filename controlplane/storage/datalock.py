"""The lock that makes an embedded etcd's data directory one process's at a time.

In: the embedded etcd's data directory (``STATE_DIR/etcd``) and who is taking it (``hub``,
``restore``). Out: :class:`DataLock`, an exclusive ``flock`` on ``<data_dir>/lock`` held until
released (or until the process ends, however it ends), or :class:`DataDirBusy` naming the
holder's pid and role.

A hub holds it while its embedded etcd runs; ``gpufed backup restore`` holds it while it
replaces the data, so a restore refuses to run under a live hub and a hub refuses to start in
the middle of a restore.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_NAME = "lock"


class DataDirBusy(RuntimeError):
    """Another process holds the data directory; the message names it."""


class DataLock:
    """An exclusive lock on a data directory; ``release()`` (idempotent) lets it go."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle: IO[str] | None = handle

    @classmethod
    def take(cls, data_dir: Path, *, role: str) -> DataLock:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = (data_dir / LOCK_NAME).open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise DataDirBusy(f"{data_dir} is in use by {holder}") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{role} (pid {os.getpid()})\n")
        handle.flush()
        return cls(handle)

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
