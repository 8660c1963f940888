"""Where the event loop's time went when it was held: a watchdog thread that samples the loop.

The hub's stall detectors (the health monitor's, the leader's) run on the loop, so they learn
of a stall only when it has ended, and cannot say what held it. :class:`LoopWatchdog` keeps a
heartbeat on the loop every ``tick`` and a thread beside it: once a beat is a tick late, the
thread samples the loop thread's Python stack five times a tick until the loop runs again, and
if the stall lasted ``threshold`` seconds, logs one warning with its length and the deepest
call path at least half the samples were in (a sampling profiler's view, over the stall
alone); a warning reads like::

    the event loop was held for 6.0s; 19 of 21 samples in: reconcile (controllers/detecting.py)
    <- _work (controllers/reconciling.py:79) <- _run (asyncio/events.py:80) <- ...

A stall with no sample was spent in one C call that kept the GIL (a garbage-collector pass,
a large ``json.loads``): the warning says so; a sample taken as such a call returns shows
the code that made it. A stall that goes on is also reported while it lasts, after
:data:`STILL_HELD_AFTER` seconds and each time it doubles (a loop held for good would
otherwise never be reported). The thread wakes every ``tick`` (a quarter second) and does
nothing else while the loop keeps time.
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

#: The frames of the held code a warning shows (innermost first).
STACK_DEPTH = 12
#: The frames a sample keeps (the innermost): the held code and its callers down to the loop.
SAMPLE_DEPTH = 128
#: How often the loop's stack is sampled while it is held, per tick.
SAMPLES_PER_TICK = 5
#: The samples one stall keeps (a minute of them at the default tick): a loop held for good
#: must not grow the watchdog's memory.
MAX_SAMPLES = 1200
#: The default threshold of the commands' ``--loop-stall-warning``.
DEFAULT_STALL_WARNING = 1.0
#: A stall still going on is reported after this many seconds, and again each time it doubles
#: (a loop held for good never resumes to have its stall reported).
STILL_HELD_AFTER = 30.0


@dataclass(frozen=True, slots=True)
class Stall:
    """One stall: how long the loop was held, and the call path most samples were in."""

    seconds: float
    samples: int
    #: Innermost first, each ``function (path:line)`` (see :func:`dominant_path`); empty
    #: when nothing was sampled.
    stack: tuple[str, ...]
    #: How many samples were in ``stack`` (at least half of them).
    count: int

    def message(self) -> str:
        if not self.samples:
            return (
                f"the event loop was held for {self.seconds:.1f}s, with no sample taken: one call that"
                " kept the interpreter's lock (a garbage-collector pass, a large decode)"
            )
        if not self.stack:
            return f"the event loop was held for {self.seconds:.1f}s; no call path is in half of its {self.samples} samples"
        return (
            f"the event loop was held for {self.seconds:.1f}s; {self.count} of {self.samples} samples in: "
            + " <- ".join(self.stack)
        )

    def still_held(self) -> str:
        """The message for a stall that has not ended yet."""
        where = (
            f"; {self.count} of {self.samples} samples so far in: " + " <- ".join(self.stack)
            if self.stack
            else f"; {self.samples} samples so far, no call path in half of them"
        )
        return f"the event loop has been held for {self.seconds:.1f}s and is still held" + where


#: One frame of a sample: function, file (shortened), line.
Frame = tuple[str, str, int]


def _where(frame: FrameType) -> Frame:
    path = frame.f_code.co_filename
    # A library's path from its package; the project's, its folder and file.
    _, marker, inside = path.rpartition("site-packages/")
    shown = inside if marker else "/".join(path.split("/")[-2:])
    return frame.f_code.co_name, shown, frame.f_lineno


def call_stack(frame: FrameType | None, depth: int = SAMPLE_DEPTH) -> tuple[Frame, ...]:
    """``frame`` and its callers, outermost first: the innermost ``depth`` of them."""
    out: list[Frame] = []
    while frame is not None and len(out) < depth:
        out.append(_where(frame))
        frame = frame.f_back
    return tuple(reversed(out))


def dominant_path(samples: Counter[tuple[Frame, ...]]) -> tuple[tuple[str, ...], int]:
    """The deepest call path at least half of ``samples`` were in, innermost first (at most
    :data:`STACK_DEPTH` frames, each ``function (file:line)``, the line left out where the
    samples differ), and how many were in it."""
    total = sum(samples.values())
    current = list(samples.items())
    path: list[str] = []
    depth = 0
    while True:
        at: Counter[tuple[str, str]] = Counter()
        for stack, count in current:
            if len(stack) > depth:
                at[stack[depth][:2]] += count
        if not at:
            break
        (function, file), count = at.most_common(1)[0]
        if 2 * count < total:
            break
        current = [(stack, n) for stack, n in current if len(stack) > depth and stack[depth][:2] == (function, file)]
        lines = {stack[depth][2] for stack, _ in current}
        path.append(f"{function} ({file}:{lines.pop()})" if len(lines) == 1 else f"{function} ({file})")
        depth += 1
    return tuple(reversed(path))[:STACK_DEPTH], sum(n for _, n in current) if path else 0


class LoopWatchdog:
    """Reports the stalls of the running loop longer than ``threshold`` seconds (see the module
    docstring) to ``on_stall`` (default: a warning in the log) while :meth:`run` runs."""

    def __init__(
        self,
        threshold: float = 1.0,
        *,
        tick: float = 0.25,
        on_stall: Callable[[Stall], None] | None = None,
        still_held_after: float = STILL_HELD_AFTER,
    ) -> None:
        if threshold <= 0 or tick <= 0:
            raise ValueError("the watchdog's threshold and tick must be positive")
        self.threshold = threshold
        self.tick = min(tick, threshold)
        self.still_held_after = max(still_held_after, threshold)
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
        stacks: Counter[tuple[Frame, ...]] = Counter()
        held = False
        next_notice = self.still_held_after
        while not stop.wait(self.tick / SAMPLES_PER_TICK if held else self.tick):
            # The next beat is due ``tick`` after the last; a beat missed by a tick may be the
            # start of a stall: sample from then on, report if it lasts ``threshold``.
            late = time.monotonic() - self._beat
            if late >= 2 * self.tick:
                held = True
                if stacks.total() < MAX_SAMPLES:
                    stacks[call_stack(sys._current_frames().get(loop_thread))] += 1
                if late - self.tick >= next_notice:
                    stack, count = dominant_path(stacks)
                    log.warning("%s", Stall(late - self.tick, stacks.total(), stack, count).still_held())
                    next_notice *= 2
            elif held:
                gap, self._longest_gap = self._longest_gap, 0.0
                if gap - self.tick >= self.threshold:
                    self._report(gap - self.tick, stacks)
                held, stacks, next_notice = False, Counter(), self.still_held_after
            else:
                self._longest_gap = 0.0

    def _report(self, seconds: float, stacks: Counter[tuple[Frame, ...]]) -> None:
        samples = sum(stacks.values())
        stack, count = dominant_path(stacks)
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
