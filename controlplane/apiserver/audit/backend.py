"""kube-apiserver's audit log backend (``--audit-log-path``): one ``audit.k8s.io/v1`` Event per
line, as JSON (``--audit-log-format=json``) or kube's one-line text (``legacy``), appended to a file
created 0600 (``-``: standard output), rotated as kube's (lumberjack): once the file would pass
``--audit-log-maxsize`` megabytes (0: 100) it is renamed ``<name>-<UTC time>.<ext>`` and a new one
started; ``--audit-log-compress`` gzips the renamed file (``.<ext>.gz``, in a thread of its own),
``--audit-log-maxbackup`` keeps that many old files (0: all), ``--audit-log-maxage`` removes those
older than that many days (0: none).

Each line is written in one ``write`` (the events of one request never interleave with another's);
in the default ``blocking`` mode an event is on disk once its request is answered, short of a power
loss. A write that fails is counted (``apiserver_audit_error_total{plugin="log"}``) and logged once
a minute.

In: events (dicts). Out: lines in the file. I/O: the file only.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gzip
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from controlplane.apiserver.audit.buffered import LOG_BATCH, BatchSettings
from controlplane.apiserver.audit.legacy import event_string
from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.audit.truncate import TruncateSettings
from controlplane.apiserver.codec import any_text_utf8, dumps_any_text

PLUGIN: Final = "log"
#: lumberjack's size when none is given, in megabytes.
DEFAULT_MAX_SIZE_MB: Final = 100
_MB: Final = 1024 * 1024
#: kube's ``AllowedFormats``.
FORMATS: Final = ("json", "legacy")


@dataclass(frozen=True, slots=True)
class LogSettings:
    """``--audit-log-path`` and the other ``--audit-log-*`` flags, with kube's defaults."""

    path: str
    max_size_mb: int = 0
    max_backups: int = 0
    max_age_days: int = 0
    format: str = "json"
    compress: bool = False
    batch: BatchSettings = LOG_BATCH
    truncate: TruncateSettings = field(default_factory=TruncateSettings)


class AuditLog:
    """The ``--audit-log-*`` file; :meth:`write` appends one event."""

    def __init__(
        self, path: str, *, max_size_mb: int = 0, max_backups: int = 0, max_age_days: int = 0, format: str = "json",
        compress: bool = False, metrics: AuditMetrics | None = None,
    ) -> None:
        self.path = path
        self.max_bytes = (max_size_mb or DEFAULT_MAX_SIZE_MB) * _MB
        self.max_backups = max_backups
        self.max_age = dt.timedelta(days=max_age_days) if max_age_days > 0 else None
        self.legacy = format == "legacy"
        self.compress = compress
        self.metrics = metrics if metrics is not None else AuditMetrics()
        self._stdout: TextIO | None = sys.stdout if path == "-" else None
        self._fd: int | None = None
        self._size = 0
        self._last_rotation: dt.datetime | None = None
        # lumberjack's "mill": compressing and removing old files, one at a time, off the event loop.
        self._mill = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-log-mill") if compress else None
        if self._stdout is None:
            self._open()

    @classmethod
    def of(cls, settings: LogSettings, metrics: AuditMetrics | None = None) -> AuditLog:
        return cls(settings.path, max_size_mb=settings.max_size_mb, max_backups=settings.max_backups,
                   max_age_days=settings.max_age_days, format=settings.format, compress=settings.compress,
                   metrics=metrics)

    def _open(self) -> None:
        directory = Path(self.path).parent
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._size = os.fstat(self._fd).st_size

    async def process(self, events: list[dict[str, Any]], *, final: bool = False) -> bool:
        return all([self.write(event) for event in events])

    def start(self) -> None:
        pass

    def write(self, event: dict[str, Any]) -> bool:
        """Append ``event``; False (and counted) when it could not be written."""
        # Header values that are not UTF-8 (a User-Agent, an impersonated name) written as U+FFFD, as kube's.
        line = any_text_utf8(event_string(event) + "\n") if self.legacy else dumps_any_text(event) + b"\n"
        try:
            if self._stdout is not None:
                self._stdout.write(line.decode())
                self._stdout.flush()
                return True
            if self._size + len(line) > self.max_bytes and self._size > 0:
                self._rotate()
            assert self._fd is not None
            os.write(self._fd, line)
            self._size += len(line)
        except OSError as exc:
            self.metrics.lost(PLUGIN, 1, f"could not write to {self.path}: {exc}")
            return False
        return True

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
        if self._mill is None:
            self._prune()
        else:
            self._mill.submit(self._compress_and_prune, backup)

    def _compress_and_prune(self, backup: Path) -> None:
        """lumberjack's compression: ``<backup>.gz`` (0600), then the backup removed."""
        compressed = backup.with_name(f"{backup.name}.gz")
        try:
            fd = os.open(compressed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with backup.open("rb") as source, os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as target:
                shutil.copyfileobj(source, target)
            backup.unlink()
        except OSError as exc:
            self.metrics.lost(PLUGIN, 0, f"could not compress {backup}: {exc}")
        self._prune()

    def _stem_and_extension(self) -> tuple[str, str]:
        """``audit`` and ``.log`` of ``audit.log``, as lumberjack splits a name."""
        name = Path(self.path).name
        stem, dot, ext = name.rpartition(".")
        return (stem, f".{ext}") if dot and stem else (name, "")

    def backups(self) -> list[Path]:
        """The rotated files (compressed or not), oldest first."""
        stem, ext = self._stem_and_extension()
        directory = Path(self.path).parent
        found = {*directory.glob(f"{stem}-*{ext}"), *directory.glob(f"{stem}-*{ext}.gz")} - {Path(self.path)}
        return sorted(found, key=lambda p: p.name.removesuffix(".gz"))

    def _prune(self) -> None:
        backups = self.backups()
        doomed = set(backups[: -self.max_backups]) if self.max_backups > 0 and len(backups) > self.max_backups else set()
        if self.max_age is not None:
            cutoff = time.time() - self.max_age.total_seconds()
            doomed |= {p for p in backups if p.stat().st_mtime < cutoff}
        for path in doomed:
            path.unlink(missing_ok=True)

    async def close(self) -> None:
        if self._mill is not None:
            await asyncio.to_thread(self._mill.shutdown, True)  # compresses what was rotated first
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
