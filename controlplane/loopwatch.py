"""Where the event loop's time went when it was held: a watchdog thread that samples the loop.

The hub's stall detectors (the health monitor's, the leader's) run on the loop, so they learn
of a stall only when it has ended, and cannot say what held it. :class:`LoopWatchdog` keeps a
heartbeat on the loop every ``tick`` and a thread beside it: once a beat is a tick late, the
thread samples the loop thread's Python stack five times a tick until the loop runs again, and
if the stall lasted ``threshold`` seconds, logs one warning with its length and the stack most
samples were in (a sampling profiler's view, over the stall alone)::

    the event loop was held for 4.9s; 18 of 19 samples in: summarize (member_agent/capacity.py:412)
    <- build (controlplane/reports/snapshot.py:88) <- ...

A stall with no sample was spent in one C call that kept the GIL (a garbage-collector pass,
a large ``json.loads``): the warning says so; a sample taken as such a call returns shows
the code that made it. The thread wakes every ``tick`` (a quarter second) and does nothing
else while the loop keeps time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import FrameType

log = logging.getLogger(__name__)

#: The deepest frames a sampled stack keeps (innermost first).
STACK_DEPTH = 12
#: How often the loop's stack is sampled while it is held, per tick.
SAMPLES_PER_TICK = 5


@dataclass(frozen=True, slots=True)
class Stall:
    """One stall: how long the loop was held, and the most frequent sampled stack."""

    seconds: float
    samples: int
    #: Innermost first, each ``function (path:line)``; empty when nothing was sampled.
    stack: tuple[str, ...]
    #: How many samples were in ``stack``.
    count: int

    def message(self) -> str:
        if not self.samples:
            return (
                f"the event loop was held for {self.seconds:.1f}s, with no sample taken: one call that"
                " kept the interpreter's lock (a garbage-collector pass, a large decode)"
            )
        return (
            f"the event loop was held for {self.seconds:.1f}s; {self.count} of {self.samples} samples in: "
            + " <- ".join(self.stack)
        )


def _where(frame: FrameType) -> str:
    path = frame.f_code.co_filename
    # A library's path from its package; the project's, its folder and file.
    _, marker, inside = path.rpartition("site-packages/")
    shown = inside if marker else "/".join(path.split("/")[-2:])
    return f"{frame.f_code.co_name} ({shown}:{frame.f_lineno})"


def stack_of(frame: FrameType | None, depth: int = STACK_DEPTH) -> tuple[str, ...]:
    """``frame`` and its callers, innermost first, at most ``depth`` of them."""
    out: list[str] = []
    while frame is not None and len(out) < depth:
        out.append(_where(frame))
        frame = frame.f_back
    return tuple(out)


class LoopWatchdog:
    """Reports the stalls of the running loop longer than ``threshold`` seconds (see the module
    docstring) to ``on_stall`` (default: a warning in the log) while :meth:`run` runs."""

    def __init__(
        self,
        threshold: float = 1.0,
        *,
        tick: float = 0.25,
        on_stall: Callable[[Stall], None] | None = None,
    ) -> None:
        if threshold <= 0 or tick <= 0:
            raise ValueError("the watchdog's threshold and tick must be positive")
        self.threshold = threshold
        self.tick = min(tick, threshold)
        self._on_stall = on_stall or (lambda stall: log.warning("%s", stall.message()))
        self._beat = time.monotonic()
        #: The longest time between two beats since the last report (the loop measures it: the
        #: thread may wake late on a busy machine).
        self._longest_gap = 0.0

    async def run(self) -> None:
        """Beat on the loop, watched from a thread, until cancelled."""
        stop = threading.Event()
        watcher = threading.Thread(
            target=self._watch, args=(threading.get_ident(), stop), name="loop-watchdog", daemon=True
        )
        self._beat = time.monotonic()
        watcher.start()
        try:
            while True:
                now = time.monotonic()
                self._longest_gap = max(self._longest_gap, now - self._beat)
                self._beat = now
                await asyncio.sleep(self.tick)
        finally:
            stop.set()

    def _watch(self, loop_thread: int, stop: threading.Event) -> None:
        stacks: Counter[tuple[str, ...]] = Counter()
        held = False
        while not stop.wait(self.tick / SAMPLES_PER_TICK if held else self.tick):
            # The next beat is due ``tick`` after the last; a beat missed by a tick may be the
            # start of a stall: sample from then on, report if it lasts ``threshold``.
            if time.monotonic() - self._beat >= 2 * self.tick:
                held = True
                stacks[stack_of(sys._current_frames().get(loop_thread))] += 1
            elif held:
                gap, self._longest_gap = self._longest_gap, 0.0
                if gap - self.tick >= self.threshold:
                    self._report(gap - self.tick, stacks)
                held, stacks = False, Counter()
            else:
                self._longest_gap = 0.0

    def _report(self, seconds: float, stacks: Counter[tuple[str, ...]]) -> None:
        samples = sum(stacks.values())
        stack, count = stacks.most_common(1)[0] if stacks else ((), 0)
        try:
            self._on_stall(Stall(seconds=seconds, samples=samples, stack=stack, count=count))
        except Exception:  # a reporter's failure must not end the watch
            log.exception("reporting a stall of the event loop failed")


@contextlib.asynccontextmanager
async def watching_the_loop(threshold: float, on_stall: Callable[[Stall], None] | None = None) -> AsyncIterator[None]:
    """A :class:`LoopWatchdog` over the running loop for the block (none with ``threshold`` 0)."""
    if threshold <= 0:
        yield
        return
    task = asyncio.create_task(LoopWatchdog(threshold, on_stall=on_stall).run(), name="loop-watchdog")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
