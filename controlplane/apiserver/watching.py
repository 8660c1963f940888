"""A bounded buffer between a watch's event source and its HTTP writer, and the rule
that ends a watcher which does not read.

Why: a watch's events come as fast as etcd delivers them, and leave only as fast as the
client reads. A client that opens a watch and stops reading (a stalled ``kubectl get -w``,
or anyone holding a viewer or agent token) would otherwise make the hub hold every event
it cannot send -- with 100 KiB objects, tens of MB per watch. kube's cacher gives every
watcher a bounded channel and, when the channel stays full, closes the watcher
("Forcing watcher close due to unresponsiveness"); the client then re-watches from its
last resourceVersion, or re-lists on ``410 Gone``. This module does the same:

* each watch buffers encoded event lines until they reach :attr:`WatchLimits.max_bytes` or
  :attr:`WatchLimits.max_events` lines (the line that crosses the byte bound is kept, so
  the bound is exceeded by one event at most and a large object is never undeliverable);
* when the buffer is full the producer waits for the writer to make room *before* it takes
  the next event from etcd; if the buffer stays full for :attr:`WatchLimits.slow_timeout`
  seconds the watcher is slow and :class:`SlowWatcher` is raised -- the handler then drops
  the connection, which also frees what the transport still holds. A client that reads,
  however slowly, keeps making room and is never dropped.

In: encoded event lines (bytes). Out: the same lines, in order, to one writer -- one at a
time (:meth:`WatchBuffer.get`), or all those waiting joined for one transport write
(:meth:`WatchBuffer.take`: a client behind by several events gets them in one transport write
rather than one each; the batch taken no longer counts against the bound, so while it is being
written the producer may fill the buffer again: a watch holds at most twice the bound);
``None`` once the producer has finished (or the buffer was abandoned).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

#: Encoded bytes one watch may hold that its client has not read yet.
DEFAULT_WATCH_BUFFER_BYTES = 128 * 1024
#: Events one watch may hold that its client has not read yet.
DEFAULT_WATCH_BUFFER_EVENTS = 1000
#: Seconds a watch's buffer may stay full before its client is dropped as unresponsive.
DEFAULT_SLOW_WATCHER_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class WatchLimits:
    """How much one watch may hold for its client, and for how long it may stay full."""

    max_bytes: int = DEFAULT_WATCH_BUFFER_BYTES
    max_events: int = DEFAULT_WATCH_BUFFER_EVENTS
    slow_timeout: float = DEFAULT_SLOW_WATCHER_TIMEOUT

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.max_events < 1:
            raise ValueError(
                f"watch buffer limits must be positive, got {self.max_bytes} bytes and {self.max_events} events"
            )
        if self.slow_timeout <= 0:
            raise ValueError(f"the slow-watcher timeout must be positive, got {self.slow_timeout}")


class SlowWatcher(Exception):
    """The watch's buffer stayed full for the whole timeout: its client does not read."""


class WatchBuffer:
    """One producer, one consumer; bounded by bytes and by count (see the module docstring)."""

    def __init__(self, limits: WatchLimits) -> None:
        self._limits = limits
        self._lines: deque[bytes] = deque()
        self._bytes = 0
        self._finished = False
        self._ready = asyncio.Event()
        self._room = asyncio.Event()

    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._lines)

    def has_room(self) -> bool:
        return not self._lines or (
            len(self._lines) < self._limits.max_events and self._bytes < self._limits.max_bytes
        )

    async def wait_for_room(self) -> None:
        """Return once another line may be added; raise :class:`SlowWatcher` when no room comes in time.

        The producer waits *before* it takes the next event from its source, so while a client
        does not read, nothing is held for it beyond this buffer.
        """
        if self.has_room() or self._finished:
            return
        try:
            async with asyncio.timeout(self._limits.slow_timeout):
                while not (self.has_room() or self._finished):
                    self._room.clear()
                    await self._room.wait()
        except TimeoutError:
            raise SlowWatcher(
                f"the client read nothing for {self._limits.slow_timeout:g}s while {len(self._lines)} "
                f"event(s), {self._bytes} bytes, waited for it"
            ) from None

    def put(self, line: bytes) -> None:
        """Append ``line`` (after :meth:`wait_for_room`: the bound is then exceeded by one line at most)."""
        if self._finished:
            return
        self._lines.append(line)
        self._bytes += len(line)
        self._ready.set()

    def finish(self, last: bytes | None = None) -> None:
        """No more lines after ``last`` (an ERROR event, say; it is never refused)."""
        if self._finished:
            return
        if last is not None:
            self._lines.append(last)
            self._bytes += len(last)
        self._finished = True
        self._ready.set()
        self._room.set()

    def abandon(self) -> None:
        """Drop everything buffered (the client is gone); the consumer then gets ``None``."""
        self._lines.clear()
        self._bytes = 0
        self._finished = True
        self._ready.set()
        self._room.set()

    async def take(self) -> bytes | None:
        """Every line waiting, joined, for one write (a lone line as it is, never waiting for
        more); ``None`` once the producer finished and every line was taken."""
        while not self._lines:
            if self._finished:
                return None
            self._ready.clear()
            await self._ready.wait()
        if len(self._lines) == 1:
            lines = self._lines.popleft()
        else:
            lines = b"".join(self._lines)
            self._lines.clear()
        self._bytes = 0
        self._room.set()
        return lines

    async def get(self) -> bytes | None:
        """The next line, or ``None`` once the producer finished and every line was taken."""
        while not self._lines:
            if self._finished:
                return None
            self._ready.clear()
            await self._ready.wait()
        line = self._lines.popleft()
        self._bytes -= len(line)
        self._room.set()
        return line
