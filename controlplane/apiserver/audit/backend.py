"""kube-apiserver's audit log backend (``--audit-log-path``): one ``audit.k8s.io/v1`` Event per
line, as JSON, appended to a file created 0600 (``-``: standard output), rotated as kube's
(lumberjack): once the file would pass ``--audit-log-maxsize`` megabytes (0: 100) it is renamed
``<name>-<UTC time>.<ext>`` and a new one started; ``--audit-log-maxbackup`` keeps that many old
files (0: all), ``--audit-log-maxage`` removes those older than that many days (0: none).

Each line is written in one ``write`` (the events of one request never interleave with another's);
there is no buffering beyond the operating system's, so an event is on disk once its request is
answered, short of a power loss. A write that fails is counted (``apiserver_audit_error_total``) and
logged once a minute; the request is still served, as kube's blocking backend does not stop serving
either.

In: events (dicts). Out: lines in the file. I/O: the file only.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Final, TextIO

import orjson

log = logging.getLogger(__name__)

#: lumberjack's size when none is given, in megabytes.
DEFAULT_MAX_SIZE_MB: Final = 100
_MB: Final = 1024 * 1024
_ERROR_LOG_PERIOD_SECONDS: Final = 60.0


class AuditLog:
    """The ``--audit-log-*`` file; :meth:`write` appends one event."""

    def __init__(self, path: str, *, max_size_mb: int = 0, max_backups: int = 0, max_age_days: int = 0) -> None:
        self.path = path
        self.max_bytes = (max_size_mb or DEFAULT_MAX_SIZE_MB) * _MB
        self.max_backups = max_backups
        self.max_age = dt.timedelta(days=max_age_days) if max_age_days > 0 else None
        self.errors = 0
        self._stdout: TextIO | None = sys.stdout if path == "-" else None
        self._fd: int | None = None
        self._size = 0
        self._last_error_log = 0.0
        self._last_rotation: dt.datetime | None = None
        if self._stdout is None:
            self._open()

    def _open(self) -> None:
        directory = Path(self.path).parent
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._size = os.fstat(self._fd).st_size

    def write(self, event: dict[str, Any]) -> None:
        line = orjson.dumps(event) + b"\n"
        try:
            if self._stdout is not None:
                self._stdout.write(line.decode())
                self._stdout.flush()
                return
            if self._size + len(line) > self.max_bytes and self._size > 0:
                self._rotate()
            assert self._fd is not None
            os.write(self._fd, line)
            self._size += len(line)
        except OSError as exc:
            self.errors += 1
            now = time.monotonic()
            if now - self._last_error_log >= _ERROR_LOG_PERIOD_SECONDS:
                self._last_error_log = now
                log.error("could not write to the audit log %s: %s (%d events lost so far)", self.path, exc, self.errors)

    def _rotate(self) -> None:
        assert self._fd is not None
        os.close(self._fd)
        self._fd = None
        stem, ext = self._stem_and_extension()
        # Names sort in rotation order: two rotations in one millisecond take the next one.
        now = dt.datetime.now(dt.UTC)
        moment = now.replace(microsecond=now.microsecond // 1000 * 1000)
        if self._last_rotation is not None and moment <= self._last_rotation:
            moment = self._last_rotation + dt.timedelta(milliseconds=1)
        while (backup := Path(self.path).with_name(f"{stem}-{moment.strftime('%Y-%m-%dT%H-%M-%S.%f')[:-3]}{ext}")).exists():
            moment += dt.timedelta(milliseconds=1)  # never over an earlier process's backup
        self._last_rotation = moment
        os.replace(self.path, backup)
        self._open()
        self._prune()

    def _stem_and_extension(self) -> tuple[str, str]:
        """``audit`` and ``.log`` of ``audit.log``, as lumberjack splits a name."""
        name = Path(self.path).name
        stem, dot, ext = name.rpartition(".")
        return (stem, f".{ext}") if dot and stem else (name, "")

    def backups(self) -> list[Path]:
        """The rotated files, oldest first."""
        stem, ext = self._stem_and_extension()
        return sorted(p for p in Path(self.path).parent.glob(f"{stem}-*{ext}") if p.name != Path(self.path).name)

    def _prune(self) -> None:
        backups = self.backups()
        doomed = set(backups[: -self.max_backups]) if self.max_backups > 0 and len(backups) > self.max_backups else set()
        if self.max_age is not None:
            cutoff = time.time() - self.max_age.total_seconds()
            doomed |= {p for p in backups if p.stat().st_mtime < cutoff}
        for path in doomed:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
