"""Serving one watch over HTTP: its events written in batches, a bound on what it holds for
its client, and the rule that ends a watcher which does not read.

Why bounded: a watch's events come as fast as the store delivers them, and leave only as
fast as the client reads. A client that opens a watch and stops reading (a stalled ``kubectl
get -w``, or anyone holding a viewer or agent token) would otherwise make the hub hold every
event it cannot send -- with 100 KiB objects, tens of MB per watch. kube's cacher gives every
watcher a bounded channel and, when the channel stays full, closes the watcher ("Forcing
watcher close due to unresponsiveness"); the client then re-watches from its last
resourceVersion, or re-lists on ``410 Gone``. Here:

* one task serves a watch (:func:`serve_watch`): it takes every event waiting for the watch as
  one batch from its source (the watch cache queues a watch's events and wakes its task once
  for all of them), and writes the batch's lines, joined, in one transport write -- at most
  :attr:`WatchLimits.max_bytes` or :attr:`WatchLimits.max_events` lines per write (the line
  that crosses the byte bound is kept, so a large object is never undeliverable);
* the next batch is taken only once the write is done, i.e. once the transport has room again:
  what the hub holds for a client is what the transport buffers plus one write. Events that
  come meanwhile wait in the source: the watch cache bounds each watch's queue and closes a
  watch that falls too far behind with ``410 Expired``; a store watch is not read further;
* a write that makes no progress for :attr:`WatchLimits.slow_timeout` seconds (nothing written,
  and the transport's buffer not shrinking: the client reads nothing) raises
  :class:`SlowWatcher` -- the handler then drops the connection, which also frees what the
  transport still holds. A client that reads, however slowly, keeps the buffer shrinking and is
  never dropped;
* the watch ends at its deadline, or -- checked every ``poll`` seconds by one timer per watch,
  not per event -- when its client went away or the handler says it should stop.

In: batches of watch events (:func:`~.watchcache.watcher.in_batches_of_one` turns an event stream into batches of one).
Out: the events' lines on the response, then an ERROR event if the source failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass

from controlplane.apiserver import codec, errors
from controlplane.apiserver.objects.values import ObjectEvent

logger = logging.getLogger(__name__)

#: Encoded bytes one write of a watch may carry (the line that crosses it is kept).
DEFAULT_WATCH_BUFFER_BYTES = 128 * 1024
#: Events one write of a watch may carry.
DEFAULT_WATCH_BUFFER_EVENTS = 1000
#: Seconds a watch's write may make no progress before its client is dropped as unresponsive.
DEFAULT_SLOW_WATCHER_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class WatchLimits:
    """How much one write of a watch may carry, and how long it may make no progress."""

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
    """A write of the watch made no progress for the whole timeout: its client does not read."""


def event_line(event_type: str, obj: object) -> bytes:
    """One watch event as the stream carries it (a JSON line)."""
    return codec.dumps({"type": event_type, "object": obj}) + b"\n"


def writes(batch: Sequence[ObjectEvent], encode: Callable[[ObjectEvent], bytes], limits: WatchLimits) -> Iterator[bytes]:
    """The batch's lines, joined into as few writes as the limits allow (a lone line as it is)."""
    if len(batch) == 1:
        yield encode(batch[0])
        return
    lines: list[bytes] = []
    size = 0
    for event in batch:
        line = encode(event)
        lines.append(line)
        size += len(line)
        if size >= limits.max_bytes or len(lines) >= limits.max_events:
            yield b"".join(lines)
            lines, size = [], 0
    if lines:
        yield b"".join(lines)


class Stall:
    """Tells a client that reads from one that does not, from what is seen at each check:
    whether a write is under way, how many writes were done, and what the transport buffers."""

    def __init__(self, slow_timeout: float, period: float) -> None:
        self._slow_timeout = slow_timeout
        self._period = period
        self._stalled = 0.0
        self._writes = -1
        self._buffered = -1

    def check(self, *, writing: bool, writes: int, buffered: int) -> SlowWatcher | None:
        """Called every ``period`` seconds; a :class:`SlowWatcher` once a write made no
        progress (no write finished, the buffer did not shrink) for the whole timeout."""
        progressed = not writing or writes != self._writes or buffered < self._buffered
        self._writes, self._buffered = writes, buffered
        if progressed:
            self._stalled = 0.0
            return None
        self._stalled += self._period
        if self._stalled < self._slow_timeout:
            return None
        return SlowWatcher(
            f"the client read nothing for {self._stalled:g}s while {buffered} bytes waited for it"
        )


class _Watchdog:
    """One timer per watch, every ``period`` seconds: ends the watch (through its timeout
    context) when it should stop or its client does not read."""

    def __init__(
        self,
        limit: asyncio.Timeout,
        *,
        period: float,
        stall: Stall,
        keep_going: Callable[[], bool],
        buffered: Callable[[], int],
        on_slow: Callable[[SlowWatcher], None],
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._limit = limit
        self._period = period
        self._stall = stall
        self._keep_going = keep_going
        self._buffered = buffered
        self._on_slow = on_slow
        self.writing = False
        self.writes = 0
        self.slow = False
        self._handle: asyncio.TimerHandle | None = self._loop.call_later(period, self._check)

    def _check(self) -> None:
        self._handle = None
        if self._limit.expired():
            return
        slow = self._stall.check(writing=self.writing, writes=self.writes, buffered=self._buffered())
        if slow is not None:
            self.slow = True
            self._on_slow(slow)
        if slow is not None or not self._keep_going():
            self._limit.reschedule(self._loop.time())
            return
        self._handle = self._loop.call_later(self._period, self._check)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


async def serve_watch(
    batches: AsyncIterator[Sequence[ObjectEvent]],
    *,
    encode: Callable[[ObjectEvent], bytes],
    write: Callable[[bytes], Awaitable[None]],
    limits: WatchLimits,
    deadline: float,
    poll: float,
    keep_going: Callable[[], bool],
    buffered: Callable[[], int],
    on_slow: Callable[[SlowWatcher], None],
) -> None:
    """Write the watch's batches until its source ends, ``deadline`` (event loop time) passes,
    ``keep_going()`` turns false or the client does not read (see the module docstring). A
    source that fails ends the stream with an ERROR event. Raises ConnectionResetError when
    the client went away during a write."""
    period = min(poll, limits.slow_timeout / 4)
    try:
        async with asyncio.timeout_at(deadline) as limit:
            watchdog = _Watchdog(
                limit, period=period, stall=Stall(limits.slow_timeout, period),
                keep_going=keep_going, buffered=buffered, on_slow=on_slow,
            )
            try:
                try:
                    async for batch in batches:
                        for data in writes(batch, encode, limits):
                            watchdog.writing = True
                            await write(data)
                            watchdog.writing = False
                            watchdog.writes += 1
                        del batch
                except ConnectionError:
                    raise
                except errors.ApiError as exc:
                    await write(event_line("ERROR", exc.to_status()))
                except Exception:
                    logger.exception("watch stream failed")
                    failed = errors.InternalError("the watch stream failed; see the server log")
                    await write(event_line("ERROR", failed.to_status()))
            finally:
                watchdog.stop()
                aclose = getattr(batches, "aclose", None)
                if aclose is not None:
                    await aclose()
    except TimeoutError:
        pass  # the deadline, or the watchdog ended the watch
