"""How an audit backend takes its events, as kube-apiserver's ``--audit-{log,webhook}-mode``:

* ``blocking``: each event is handed to the backend in the request's path (the request waits for
  the write or the POST); a failure is counted and the request goes on (:class:`Blocking`);
* ``blocking-strict``: the same, but the backend's failure is the caller's to see: the audit filter
  then fails a request whose ``RequestReceived`` event could not be recorded;
* ``batch``: kube's buffered backend (:class:`Buffered`): events go into a buffer of
  ``--audit-*-batch-buffer-size`` events (beyond it they are dropped and counted as
  ``apiserver_audit_error_total{plugin="buffered"}``, logged at most once a minute); a task of its
  own hands the backend a batch once ``--audit-*-batch-max-size`` events wait or
  ``--audit-*-batch-max-wait`` has passed (0: as soon as any waits), at most
  ``--audit-*-batch-throttle-qps`` batches a second with bursts of ``-burst`` when
  ``--audit-*-batch-throttle-enable`` (client-go's token bucket, :class:`Throttle`). At shutdown
  what the buffer holds is handed over once more, for at most :data:`FLUSH_SECONDS`.

In: events (dicts). Out: the same events to the backend (:class:`Delegate`). I/O: none of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from controlplane.apiserver.audit.metrics import AuditMetrics

BATCH: Final = "batch"
BLOCKING: Final = "blocking"
BLOCKING_STRICT: Final = "blocking-strict"
#: kube's ``AllowedModes``.
MODES: Final = (BATCH, BLOCKING, BLOCKING_STRICT)
PLUGIN: Final = "buffered"
#: How long closing may spend handing over what the buffer holds.
FLUSH_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class BatchSettings:
    """``--audit-<backend>-mode`` and its batch flags; the defaults are kube's webhook's
    (:data:`LOG_BATCH` has the log's)."""

    mode: str = BATCH
    buffer_size: int = 10000
    max_size: int = 400
    max_wait_seconds: float = 30.0
    throttle_enable: bool = True
    throttle_qps: float = 10.0
    throttle_burst: int = 15


#: kube's defaults for the log file: blocking; in batch mode, batches of one and no throttling.
LOG_BATCH: Final = BatchSettings(mode=BLOCKING, max_size=1, max_wait_seconds=0.0, throttle_enable=False)


class Delegate(Protocol):
    """A backend that writes or sends events: the log file, the webhook."""

    async def process(self, events: list[dict[str, Any]], *, final: bool = False) -> bool:
        """Record ``events``; False when some were lost (counted by the backend itself). ``final``:
        the last try at shutdown (no retries)."""
        ...

    def start(self) -> None: ...

    async def close(self) -> None: ...


class Throttle:
    """client-go's token bucket: ``burst`` tokens at first, ``qps`` more each second."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        #: Whether :meth:`accept` is waiting for a token.
        self.waiting = False

    def reserve(self) -> float:
        """Take a token: the seconds to wait before it may be used (0: at once)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def accept(self) -> None:
        delay = self.reserve()
        if delay <= 0:
            return
        self.waiting = True
        try:
            await asyncio.sleep(delay)
        finally:
            self.waiting = False


class Blocking:
    """``blocking``: the backend's failures are counted by it and hidden from the audit filter;
    ``blocking-strict`` (``strict``): its answer, as is."""

    def __init__(self, delegate: Delegate, *, strict: bool = False) -> None:
        self.delegate = delegate
        self.strict = strict

    async def process(self, events: list[dict[str, Any]]) -> bool:
        recorded = await self.delegate.process(events)
        return recorded or not self.strict

    def start(self) -> None:
        self.delegate.start()

    async def close(self) -> None:
        await self.delegate.close()


class Buffered:
    """``batch``: :meth:`process` never waits; a task of its own hands the batches over."""

    def __init__(self, delegate: Delegate, settings: BatchSettings, metrics: AuditMetrics) -> None:
        self.delegate = delegate
        self.settings = settings
        self.metrics = metrics
        self.throttle = Throttle(settings.throttle_qps, settings.throttle_burst) if settings.throttle_enable else None
        self.buffer: deque[dict[str, Any]] = deque()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def process(self, events: list[dict[str, Any]]) -> bool:
        for event in events:
            if len(self.buffer) >= self.settings.buffer_size:
                self.metrics.lost(PLUGIN, 1, "audit buffer queue blocked")
                continue
            self.buffer.append(event)
        if len(self.buffer) >= self.settings.max_size or self.settings.max_wait_seconds <= 0:
            self._ready.set()
        return True

    def start(self) -> None:
        self.delegate.start()
        self._task = asyncio.create_task(self.run(), name="audit-buffer")

    async def run(self) -> None:
        """Hand over a batch whenever one is full or the oldest has waited ``max_wait``."""
        while True:
            if self.settings.max_wait_seconds > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.max_wait_seconds):
                        await self._ready.wait()
            else:
                await self._ready.wait()
            self._ready.clear()
            while self.buffer:
                if self.throttle is not None:
                    await self.throttle.accept()
                batch = self._take()
                try:
                    await self.delegate.process(batch)
                except asyncio.CancelledError:
                    # Shutting down: what was being sent goes back first, for close() to flush.
                    self.buffer.extendleft(reversed(batch))
                    raise
                if len(self.buffer) < self.settings.max_size and self.settings.max_wait_seconds > 0:
                    break

    async def close(self) -> None:
        """Stop the task, then hand over what the buffer holds within :data:`FLUSH_SECONDS` (once
        each: what cannot be recorded then is counted lost)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            async with asyncio.timeout(FLUSH_SECONDS):
                while self.buffer:
                    await self.delegate.process(self._take(), final=True)
        except TimeoutError:
            pass
        finally:
            if self.buffer:
                self.metrics.lost(PLUGIN, len(self.buffer), "shutting down")
                self.buffer.clear()
            await self.delegate.close()

    def _take(self) -> list[dict[str, Any]]:
        count = min(len(self.buffer), self.settings.max_size)
        return [self.buffer.popleft() for _ in range(count)]


def taking(delegate: Delegate, settings: BatchSettings, metrics: AuditMetrics) -> Blocking | Buffered:
    """``delegate`` in ``settings.mode`` (kube's ``wrapBackend``)."""
    if settings.mode in (BLOCKING, BLOCKING_STRICT):
        return Blocking(delegate, strict=settings.mode == BLOCKING_STRICT)
    return Buffered(delegate, settings, metrics)
