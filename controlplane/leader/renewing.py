"""The leader's lease renewals, on a thread of their own with its own event loop.

Why: the hub's API and controllers share one asyncio event loop. When they saturate it (a
full-size run kept it at 0.95 of a core for minutes), every ``await`` of a renewal waits its
turn behind thousands of ready callbacks: renewals took longer than the renew deadline while
etcd answered in milliseconds, and each needless step-down made the next term relist every
controller's objects. client-go renews on a goroutine that the Go scheduler runs whatever
the controllers do; here the renewals get a daemon thread, scheduled by the OS (a saturated
loop gives up the GIL every switch interval), with an event loop and an etcd connection of its
own (gRPC channels belong to the loop that opens them).

In: the thread's name, the renewal loop (a coroutine function of a store that returns when
the term ends) and an unopened store for it (:meth:`EtcdStore.twin` of the elector's).
Out: :attr:`RenewalThread.outcome`, a future on the starting loop that gets the loop's result
(or its error) thread-safely; :meth:`RenewalThread.stop` cancels the loop and waits, bounded,
for the thread to end. The store is opened (on its first call) and closed inside the thread's
loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Generic, TypeVar

from controlplane.storage.etcd import EtcdStore

log = logging.getLogger(__name__)

T = TypeVar("T")
U = TypeVar("U")

#: How long :meth:`RenewalThread.stop` waits for the thread (a cancelled renewal and two
#: closed gRPC channels take milliseconds).
STOP_LIMIT = 5.0


class RenewalThread(Generic[T]):
    """Runs ``renewals(store)`` on a daemon thread; ``start()``, then ``await stop()``."""

    def __init__(self, name: str, renewals: Callable[[EtcdStore], Awaitable[T]], store: EtcdStore) -> None:
        self._renewals = renewals
        self._store = store
        self._caller = asyncio.get_running_loop()
        #: The renewal loop's result (or error), on the starting loop.
        self.outcome: asyncio.Future[T] = self._caller.create_future()
        self._finished: asyncio.Future[None] = self._caller.create_future()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def name(self) -> str:
        return self._thread.name

    def start(self) -> None:
        self._thread.start()

    async def stop(self) -> None:
        """Cancel the renewals and wait (at most :data:`STOP_LIMIT`) for the thread to end."""
        with self._lock:
            self._stopping = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: the thread is ending
                loop.call_soon_threadsafe(task.cancel)
        if self._thread.ident is None:
            return  # never started
        try:
            async with asyncio.timeout(STOP_LIMIT):
                await asyncio.shield(self._finished)
        except TimeoutError:
            log.warning("the thread %s did not stop within %gs", self.name, STOP_LIMIT)
            return
        self._thread.join(STOP_LIMIT)  # it has returned from its loop: at once

    # -- on the thread ---------------------------------------------------------------

    def _main(self) -> None:
        try:
            with contextlib.suppress(asyncio.CancelledError):  # stopped: the thread's end
                asyncio.run(self._run())
        finally:
            self._report(partial(_set_result, self._finished, None))

    async def _run(self) -> None:
        with self._lock:
            if self._stopping:
                return
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
        try:
            result = await self._renewals(self._store)
        except Exception as exc:
            self._report(partial(_set_exception, self.outcome, exc))
        else:
            self._report(partial(_set_result, self.outcome, result))
        finally:
            with contextlib.suppress(Exception):
                await self._store.close()

    def _report(self, settle: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # the starting loop is closed: nobody waits
            self._caller.call_soon_threadsafe(settle)


def _set_result(future: asyncio.Future[U], result: U) -> None:
    if not future.done():
        future.set_result(result)


def _set_exception(future: asyncio.Future[U], error: Exception) -> None:
    if not future.done():
        future.set_exception(error)
