"""One lifecycle for every long-lived component: ``start()``, ``shutdown()`` and ``async with``.

:class:`Lifecycle` is the context-manager protocol written once: ``async with component:``
awaits :meth:`~Lifecycle.start` (and, if starting fails, :meth:`~Lifecycle.shutdown` before
the error goes on), and :meth:`~Lifecycle.shutdown` on the way out. Subclasses implement the
two calls; ``shutdown`` is idempotent (:class:`ShutdownOnce` makes it so for components that
release resources in order, such as the hub).

:class:`Service` is the lifecycle of a component whose work is one ``run()`` coroutine in a
background task (controllers, the health monitor, leader election, the waste sampler, the
agent, a simulated cluster): ``start()`` spawns it (and, when the component says when it is
ready, waits for that or for ``run()`` to fail); ``shutdown()`` asks ``run()`` to return and
waits for it.

Pure asyncio: no I/O, no other layer, so storage, the agent and the simulator all build on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import ClassVar, Self

log = logging.getLogger(__name__)


class Lifecycle:
    """``start()`` / ``shutdown()``, and ``async with`` calling them."""

    async def start(self) -> object:
        """Start the component (nothing to start by default). A subclass may return what
        callers need (the embedded etcd its URL); ``async with`` ignores it."""
        return None

    async def shutdown(self) -> None:
        """Stop the component and release what it holds; idempotent."""

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.shutdown()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()


class ShutdownOnce(Lifecycle):
    """A component whose release (:meth:`_release`) runs once, however often ``shutdown`` is called."""

    _shut_down = False

    async def shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        await self._release()

    async def _release(self) -> None:
        """Release what the component holds, in order (called at most once)."""


class Service(Lifecycle):
    """A component whose work is :meth:`run`, in a background task.

    ``start()`` spawns the task; when :meth:`ready` gives an event, it also waits until
    ``run()`` sets it, or raises what ended ``run()`` first. ``shutdown()`` asks ``run()`` to
    return (:meth:`request_stop`: the ``_stop`` event) and waits for the task. Both may be
    called again after a shutdown: the component runs again.
    """

    #: Whether ``shutdown()`` raises what ended ``run()`` (else it is logged): False for
    #: components whose shutdown runs in another's cleanup, which must go on.
    shutdown_raises: ClassVar[bool] = True

    def __init__(self, task_name: str) -> None:
        #: The background task's name (the component's name in task dumps).
        self.task_name = task_name
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        raise NotImplementedError

    def ready(self) -> asyncio.Event | None:
        """Set by :meth:`run` once the component serves (None: ``start`` does not wait)."""
        return None

    def spawn(self) -> asyncio.Task[None]:
        """Run in the background task (unless it runs already); return the task."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=self.task_name)
        return self._task

    async def start(self) -> None:
        task = self.spawn()
        ready = self.ready()
        if ready is None:
            return
        started = asyncio.ensure_future(ready.wait())
        await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            started.cancel()
            await task  # raises what stopped it

    def request_stop(self) -> None:
        """Ask :meth:`run` to return (safe from a signal handler; any number of times)."""
        self._stop.set()

    async def shutdown(self) -> None:
        self.request_stop()
        task, self._task = self._task, None
        if task is None or task is asyncio.current_task():
            return
        if self.shutdown_raises:
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return
        (outcome,) = await asyncio.gather(task, return_exceptions=True)
        if isinstance(outcome, Exception):
            log.debug("%s ended with %r", self.task_name, outcome)
