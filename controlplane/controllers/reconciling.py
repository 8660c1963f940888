"""The loop every hub controller runs: keys from a work queue, one reconcile per key, retries.

A controller is a ``reconcile(key)`` coroutine (level-based: it reads the current state and
makes the world match it, whatever event queued the key) plus the handlers that queue keys.
:class:`ReconcileLoop` runs ``workers`` coroutines over one :class:`WorkQueue`, so one key is
never reconciled twice at once while different keys proceed in parallel. Keys may be added
with a priority (the scheduler passes each binding's ``spec.schedulePriority.priority``):
waiting keys of higher priority are taken first, equal ones in FIFO order; retries keep it.

Outcomes: ``None`` means done; a number means "look again in that many seconds" (waiting for
a grace period or for members to catch up). A ``Conflict`` (a compare-and-swap write lost a
race) re-queues the key with backoff, and the next attempt re-reads; an API or storage error
or a failed interpreter webhook call is logged in one line and re-queued with backoff; any other failure is
logged (with its traceback the first time for a key) and re-queued with exponential backoff,
capped. Malformed objects are not failures: controllers report them on the object.

A controller subclasses :class:`KeyedController`, which gives it the hub's context and a loop
named after it. Given :class:`WorkqueueMetrics` (a KeyedController's come from its context),
the loop's queue feeds client-go's workqueue series under the loop's name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from controlplane.apis.views import ObjectView
from controlplane.controllers.queueing import ShutDown, WorkQueue
from controlplane.interpreter.webhook_calls import InterpreterWebhookFailed
from controlplane.objectclient import WRITER, errors

if TYPE_CHECKING:
    from controlplane.controllers.context import ControllerContext
    from controlplane.controllers.workqueuemetrics import WorkqueueMetrics

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
Reconcile = Callable[[K], Awaitable[float | None]]
CONFLICT_MAX_DELAY = 1.0


class ReconcileLoop(Generic[K]):
    """Workers that take keys from ``queue`` and reconcile them."""

    def __init__(
        self,
        name: str,
        reconcile: Reconcile[K],
        *,
        workers: int = 4,
        max_delay: float = 30.0,
        metrics: WorkqueueMetrics | None = None,
    ) -> None:
        self.name = name
        self.queue: WorkQueue[K] = WorkQueue(max_delay=max_delay, name=name, metrics=metrics)
        self._reconcile = reconcile
        self._workers = max(1, workers)
        #: Keys whose last attempt raised something unexpected (their traceback was logged).
        self._failing: set[K] = set()
        #: Reconciles run so far (what an event costs the controllers, in tests and benchmarks).
        self.reconciles = 0

    async def add(self, key: K, *, priority: int | None = None) -> None:
        """Queue ``key``; workers take higher ``priority`` first (None: the key's last one, else 0)."""
        await self.queue.add(key, priority=priority)

    async def run(self) -> None:
        """Run the workers until the queue shuts down (or the task is cancelled)."""
        try:
            async with asyncio.TaskGroup() as group:
                for index in range(self._workers):
                    group.create_task(self._work(), name=f"{self.name}-worker-{index}")
        finally:
            self.queue.stop_reporting()

    async def shutdown(self) -> None:
        await self.queue.shutdown()

    async def _work(self) -> None:
        WRITER.set(f"controller:{self.name}")  # this worker task's writes, in the write ledger
        queue = self.queue
        while True:
            # A turn of the loop between keys: taking a ready key and a reconcile that finds
            # nothing to write (its reads served from caches) never wait, so a queue of
            # thousands of such keys (a policy change, a resync) would otherwise be worked
            # through with the loop held (6 s at 20,000 workloads).
            await asyncio.sleep(0)
            try:
                key = await queue.get()
            except ShutDown:
                return
            self.reconciles += 1
            try:
                again = await self._reconcile(key)
            except asyncio.CancelledError:
                raise
            except errors.Conflict as exc:
                log.debug("%s: %s lost a write race, retrying: %s", self.name, key, exc)
                # The next attempt re-reads, so a lost race is retried soon, not backed off for long.
                await queue.add_rate_limited(key, max_delay=CONFLICT_MAX_DELAY)
            except (errors.ApiError, errors.StorageError, InterpreterWebhookFailed) as exc:
                log.warning("%s: reconciling %s failed: %s; retrying", self.name, key, exc)
                await queue.add_rate_limited(key)
            except Exception as exc:
                # A bug (or an object no check foresaw) fails the same way on every retry: the
                # traceback once per key, then one line per backed-off attempt.
                if key in self._failing:
                    log.warning("%s: reconciling %s failed again: %r; retrying", self.name, key, exc)
                else:
                    self._failing.add(key)
                    log.exception("%s: reconciling %s failed; retrying", self.name, key)
                await queue.add_rate_limited(key)
            else:
                self._failing.discard(key)
                queue.forget(key)
                if again is not None:
                    await queue.add_after(key, again)
            finally:
                await queue.done(key)


class KeyedController(Generic[K]):
    """A controller over the hub's context whose ``reconcile`` runs on a loop of its own, named
    after the controller, with ``workers`` coroutines (default: the context's worker count;
    different keys in parallel)."""

    name: ClassVar[str]

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        self.ctx = ctx
        self.loop: ReconcileLoop[K] = ReconcileLoop(
            self.name,
            self.reconcile,
            workers=ctx.settings.workers if workers is None else workers,
            metrics=ctx.workqueue_metrics,
        )

    async def reconcile(self, key: K) -> float | None:
        """Make the world match the object behind ``key`` (see the module docstring for outcomes)."""
        raise NotImplementedError


#: How many of its own writes a controller remembers until their watch events come.
OWN_WRITES_REMEMBERED = 4096


class OwnWrites:
    """The revisions this controller last wrote, by object uid: the watch event of such a write
    brings back a state its reconcile produced, with nothing left for it to do (a write that
    raced another was refused by its compare-and-swap, and is retried). Only a skip of work:
    an event that comes before the write's answer is handled as any other. Bounded: an object
    deleted before its event came is forgotten ``size`` writes later."""

    def __init__(self, size: int = OWN_WRITES_REMEMBERED) -> None:
        self._size = size
        self._revisions: dict[str, str] = {}

    def wrote(self, obj: Mapping[str, Any]) -> None:
        meta = ObjectView(obj).metadata
        uid, revision = meta.get("uid"), meta.get("resourceVersion")
        if isinstance(uid, str) and isinstance(revision, str):
            self._revisions.pop(uid, None)
            self._revisions[uid] = revision
            if len(self._revisions) > self._size:
                del self._revisions[next(iter(self._revisions))]

    def is_echo(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` is the last write recorded for its uid (forgotten once asked)."""
        meta = ObjectView(obj).metadata
        uid = meta.get("uid")
        if not isinstance(uid, str) or uid not in self._revisions:
            return False
        return self._revisions.pop(uid) == meta.get("resourceVersion")
