"""Knowing that etcd is down, so that callers fail at once instead of each waiting it out.

Without this every call made during an etcd outage retried for the store's whole retry
budget (10 s) before failing, so every API request of an outage took 10 s to answer.
:class:`OutageGate` is the etcd store's circuit breaker: once every call has failed
with a connection-level error for ``trip_after`` seconds (long enough to ride through
an etcd leader election or a restart), etcd counts as down -- once it has answered at
least once: a store that never reached etcd (a hub starting before its etcd) keeps
retrying for its whole budget. While it is down, calls
fail at once with :class:`Unavailable`, except one trial call per ``trial_interval``
that goes through to etcd; the first call that succeeds closes the gate again. Each
change of state is logged once, as a warning; nothing is logged per call.

Pure state over a clock: the store reports outcomes (``succeeded``/``failed``) and asks
``admit`` before each attempt. No task, no I/O.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from controlplane.storage.interface import Unavailable

logger = logging.getLogger(__name__)

#: How long calls must have failed without one success before etcd counts as down.
DEFAULT_TRIP_AFTER = 2.0
#: While down, how often one call is let through to see whether etcd is back.
DEFAULT_TRIAL_INTERVAL = 1.0

#: What a caller is told while etcd is down (no address: API clients see this message).
OUTAGE_MESSAGE = "etcd is unreachable"


class OutageGate:
    """Tracks whether etcd answers; see the module docstring."""

    def __init__(
        self,
        *,
        trip_after: float = DEFAULT_TRIP_AFTER,
        trial_interval: float = DEFAULT_TRIAL_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._trip_after = trip_after
        self._trial_interval = trial_interval
        self._clock = clock
        #: When the current run of failures began (None: the last call succeeded).
        self._failing_since: float | None = None
        self._down_since: float | None = None
        self._next_trial = 0.0
        self._trial_running = False
        self._answered_once = False

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def admit(self) -> bool:
        """May a call go to etcd now? True for a trial call while down (the caller must
        make a single attempt and call :meth:`end_trial`); raise Unavailable when not."""
        if self._down_since is None:
            return False
        now = self._clock()
        if self._trial_running or now < self._next_trial:
            raise self.unavailable()
        self._trial_running = True
        self._next_trial = now + self._trial_interval
        return True

    def end_trial(self) -> None:
        self._trial_running = False

    def succeeded(self) -> None:
        self._answered_once = True
        self._failing_since = None
        if self._down_since is not None:
            logger.warning(
                "etcd answers again after %.1fs; serving requests", self._clock() - self._down_since
            )
            self._down_since = None

    def failed(self) -> bool:
        """Record a connection-level failure; True when etcd now counts as down (stop retrying)."""
        now = self._clock()
        if self._failing_since is None:
            self._failing_since = now
        tripped = self._answered_once and now - self._failing_since >= self._trip_after
        if self._down_since is None and tripped:
            self._down_since = now
            self._next_trial = now + self._trial_interval
            logger.warning(
                "etcd has not answered for %.1fs; requests fail with 503 until it is back",
                now - self._failing_since,
            )
        return self._down_since is not None

    def unavailable(self) -> Unavailable:
        seconds = self._clock() - (self._down_since if self._down_since is not None else self._clock())
        return Unavailable(f"{OUTAGE_MESSAGE} (for {seconds:.0f}s)")
