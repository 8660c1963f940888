"""Keeping CPython's cyclic garbage collector from holding the hub's event loop for seconds.

The collector's full pass (generation 2) walks every tracked container object, and CPython
runs one whenever the objects that survived younger collections have grown by a quarter.
The hub keeps every watched object decoded in memory (the watch cache and the informers;
a stored Deployment is some 45 dicts and lists), so at the scale benchmark's 100 clusters and
6,000 workloads a full pass walked up to 3.6 million objects and took up to 1.7 s, with the
loop held, some 13 s apart (median); more as the fleet grows. Those objects form no reference
cycles, and reference counting frees each one when a newer version replaces it: the walks
find nothing there.

So, while the policy runs, CPython makes no full pass of its own (its third threshold is
set out of reach) and every ``freeze_interval`` seconds the young generations are collected
and everything still alive is moved to the permanent generation (``gc.freeze``, a
constant-time splice of the collector's lists). The young generations' passes go on as
before and find the cycles that are garbage soon after they form (an exception and its
traceback), which is where nearly all of them are. A cycle that forms among older objects (a
long-lived connection or task torn down) waits for the full pass made every
``full_interval`` seconds over everything, unfrozen first, which bounds what such cycles
can hold. One such teardown is too large to wait: a hub replica that loses its leadership
term lets go of that term's controllers, informers and caches at once (a copy of every object
it watched, all of it in cycles), so it reports the loss (:meth:`CollectorTuning.released`) and
a full pass is made then. The pauses of the older generations' passes are a histogram in the
hub's metrics (``gpufed_gc_pause_seconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: A pause observer: the generation collected and the pass's seconds.
PauseObserver = Callable[[int, float], None]
#: The third threshold while the policy runs: CPython then makes no full pass of its own.
NO_AUTOMATIC_FULL_PASS = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CollectorPolicy:
    #: Seconds between freezes of the surviving objects; 0 leaves CPython's collector as it is.
    freeze_interval: float = 10
    #: Seconds between full passes over everything (unfrozen first); 0: never.
    full_interval: float = 3600

    @property
    def enabled(self) -> bool:
        return self.freeze_interval > 0


class CollectorTuning:
    """Applies a :class:`CollectorPolicy` to this process while :meth:`run` runs, and reports
    the collector's older-generation passes (1 and 2) to ``observe``."""

    def __init__(self, policy: CollectorPolicy, *, observe: PauseObserver | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._observe = observe
        self._clock = clock
        self._started: dict[int, float] = {}
        #: Full passes made by the policy (not by CPython's own schedule).
        self.full_passes = 0
        self._in_force = False

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if generation == 0:
            return  # many per second, each short: not worth a histogram's cost
        if phase == "start":
            self._started[generation] = time.perf_counter()
            return
        started = self._started.pop(generation, None)
        if started is not None and self._observe is not None:
            self._observe(generation, time.perf_counter() - started)

    def freeze(self) -> None:
        """Collect the young generations, then freeze what is left. Nothing is counted: CPython
        counts the frozen objects (``gc.get_freeze_count``) by walking every one of them, which
        at the hub's millions of objects cost more than the rest of the freeze."""
        gc.collect(1)
        gc.freeze()

    def full_pass(self, *, reason: str = "periodic") -> None:
        """Unfreeze everything and collect it all in one pass, then freeze the survivors."""
        gc.unfreeze()
        found = gc.collect()
        self.full_passes += 1
        self.freeze()
        log.info(
            "full garbage collection (%s): %d unreachable objects; %d objects frozen", reason, found, gc.get_freeze_count()
        )

    def released(self, what: str) -> None:
        """A large, long-lived object graph was just let go (``what``: a lost leadership term's
        controllers, informers and caches). It is full of reference cycles (a controller and its
        loop, a cancelled task's traceback and the frames it names), and what survived a freeze
        is looked at only by a full pass: while the policy is in force, one is made at the event
        loop's next turn (the code that let the graph go still refers to some of it until it
        returns), so the graph is not kept until the next pass of ``full_interval``. Nothing
        otherwise: CPython's own full passes come as the objects of the next term replace it."""
        if self._in_force:
            asyncio.get_running_loop().call_soon(self._collect_released, what)

    def _collect_released(self, what: str) -> None:
        if self._in_force:  # the policy may have ended meanwhile
            self.full_pass(reason=what)

    async def run(self, *, thaw: bool = True) -> None:
        """Freeze every ``freeze_interval``, a full pass every ``full_interval``, until
        cancelled; then the process's collector has its thresholds back and, with ``thaw``,
        everything unfrozen. A process that is exiting passes ``thaw=False``: unfrozen, its
        objects would be walked by one more full pass and by the interpreter's last one (4.3 s
        and 4.6 s for the hub after 20,000 workloads), for nothing."""
        if self._observe is not None:
            gc.callbacks.append(self._on_collection)
        thresholds = gc.get_threshold()
        try:
            if not self.policy.enabled:
                await asyncio.Event().wait()
            gc.set_threshold(thresholds[0], thresholds[1], NO_AUTOMATIC_FULL_PASS)
            self._in_force = True
            self.freeze()
            last_full = self._clock()
            while True:
                await asyncio.sleep(self.policy.freeze_interval)
                if self.policy.full_interval > 0 and self._clock() - last_full >= self.policy.full_interval:
                    self.full_pass()
                    last_full = self._clock()
                else:
                    self.freeze()
        finally:
            self._in_force = False
            if self._on_collection in gc.callbacks:
                gc.callbacks.remove(self._on_collection)
            if self.policy.enabled:
                gc.set_threshold(*thresholds)
                if thaw:
                    gc.unfreeze()


@contextlib.asynccontextmanager
async def collector_tuned(
    policy: CollectorPolicy, *, observe: PauseObserver | None = None
) -> AsyncIterator[CollectorTuning]:
    """Apply ``policy`` to this process while the block runs (a process's runner uses it: the
    hub, the agent, a hollow fleet); the block gets the tuning (to report what it let go, see
    :meth:`CollectorTuning.released`). What it froze stays frozen afterwards: the process is
    about to exit (see :meth:`CollectorTuning.run`)."""
    tuning = CollectorTuning(policy, observe=observe)
    task = asyncio.create_task(tuning.run(thaw=False), name="gc-policy")
    try:
        yield tuning
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)  # a cancellation of the caller still goes through
