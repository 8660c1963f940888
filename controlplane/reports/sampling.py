"""The hub's waste accounting loop: sample the fleet every interval, account it, persist it.

In: the hub's :class:`~controlplane.objectclient.ObjectClient` (Clusters, ResourceBindings,
Works, the trainer's runtimes, which a TrainJob's pending pods are read with, and DRA's claim templates, claims and DeviceClasses, which a Work's pending pods' claimed GPUs are read with, are read through it, as a client of the API would see them) and the raw
:class:`~controlplane.storage.interface.Store` the rollups are kept in
(:class:`~controlplane.reports.persistence.RollupStore`). Out: a live
:class:`~controlplane.reports.accounting.Accumulator` (:attr:`WasteSampler.accumulator`) that
the reports API queries, the rollups in the store after every sample, and, when given
:class:`~controlplane.metrics.HubMetrics`, the fleet's waste gauges and counters.

One pass (:meth:`WasteSampler.sample_once`): list the three kinds and the runtimes and DRA objects (each with a timeout, a page
at a time), build a :class:`~controlplane.reports.fleet.FleetSample` at the hub's wall-clock time with
:func:`~controlplane.reports.snapshot.sample_steps` (a turn for the loop every 500 objects), add it to the accumulator,
save what changed. Samples are taken on a fixed cadence (``interval`` seconds from the first,
not from the end of the previous one), so a slow pass does not stretch the intervals. The pass
keeps to :data:`MAX_LOOP_SHARE` of the event loop: after each step of its own (a cluster's
nodes or states, a step of the classification; not the reads) it rests for the step's time times
``(1 - share) / share`` (:class:`LoopTime`). A fleet of 100 members of 5,000 nodes whose reports
all change (pods starting everywhere) makes a pass of about ten seconds of the loop's time; run
in one go every minute, it held the controllers back for those ten seconds each minute (apply
-> Works written p99 34 s at 25 applies a second), and before, on a saturated hub, it took half
the hub's CPU and its leader lease. Paced, the same pass spreads over about forty seconds with
the controllers served between its steps; a pass that runs past the interval makes the next
one start an interval after it ends. While the controllers are behind (given their ``backlog``:
a key of theirs has waited :data:`BACKLOG_WAIT` for a worker), a step keeps to
:data:`BEHIND_LOOP_SHARE` instead: on a saturated hub, where a quarter of the loop would come
out of the control path, the accounting slows down rather than the controllers.

:meth:`WasteSampler.run` first restores the accumulator from the store, so a restarted hub (or
a replica that just became leader) continues where the last one stopped; the gap in between is
accounted by the accumulator's rules (as unavailable beyond its ``max_interval``). Only one
replica should run the sampler -- the one running the controllers. ``run()`` may be called
again after it returned (each call restores afresh); :meth:`shutdown` is idempotent.

A pass that fails (etcd unreachable, a list timing out) is logged and skipped: nothing is
accounted for it, the next pass integrates over the gap. A failed save keeps the changes
pending until the next save succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from controlplane.apis import constants as c
from controlplane.apis import trainer
from controlplane.apis.dra import RESOURCE_API_VERSION
from controlplane.apis.drareading import LISTED_KINDS
from controlplane.apis.podview import propagated_workloads
from controlplane.lifecycle import Service
from controlplane.objectclient import ObjectClient, errors
from controlplane.objectclient.paging import DEFAULT_PAGE_SIZE, list_pages
from controlplane.reports.accounting import Accumulator, PassMemos, PreparedSample
from controlplane.reports.classify import Steps
from controlplane.reports.fleet import FleetSample
from controlplane.reports.persistence import DEFAULT_PREFIX, RollupStore
from controlplane.reports.rollups import DEFAULT_BUCKET_SECONDS, check_bucket_seconds
from controlplane.reports.snapshot import ClusterNodesCache, sample_steps, warm_cluster_nodes
from controlplane.storage.interface import StorageError, Store

if TYPE_CHECKING:
    from controlplane.metrics import HubMetrics

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL = 60.0
#: A cluster whose last capacity report is older than this counts as unavailable, even if its
#: Ready condition was never updated (e.g. the hub was down when the agent died).
DEFAULT_STALE_AFTER = timedelta(minutes=5)
DEFAULT_TIMEOUT = 30.0
#: The share of the hub's event loop a pass's own steps may take while it runs.
MAX_LOOP_SHARE = 0.25
#: The share while the controllers are behind (a key of theirs has waited :data:`BACKLOG_WAIT`
#: or more for a worker): the accounting yields to the control path. A pass of a whole large
#: fleet (about ten seconds of the loop) then spreads over about a hundred, well inside the
#: accumulator's five-minute cap on one interval.
BEHIND_LOOP_SHARE = 0.1
#: Seconds a controller's key may wait for a worker before the controllers count as behind
#: (at 25 applies a second an apply is Running within a second at the 99th percentile).
BACKLOG_WAIT = 1.0
#: Backoff between attempts to restore the rollups while the store is unreachable.
RESTORE_RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0)

_API_VERSION_CLUSTER = f"{c.CLUSTER_GROUP}/{c.VERSION}"
_API_VERSION_WORK = f"{c.WORK_GROUP}/{c.VERSION}"

Clock = Callable[[], datetime]
T = TypeVar("T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def next_pass_at(due: float, *, now: float, interval: float) -> float:
    """When the next pass starts (loop time), after a pass that ended at ``now``: at ``due`` on
    the cadence, or one interval from now when the pass ran past it (missed slots are skipped)."""
    return now + interval if due < now else due


class LoopTime:
    """The time a pass's own steps hold the event loop: ``with held:`` around each step adds its
    time to :attr:`seconds` and owes the loop ``(1 - share) / share`` times as long, which
    :meth:`turn` rests; so the pass takes at most ``share`` of the loop while it runs. A step
    that ends while ``behind()`` is true owes the rest of ``behind_share`` instead (the smaller
    share of the two), and counts in :attr:`steps_behind`."""

    __slots__ = ("_behind", "_behind_rest_per_second", "_owed", "_rest_per_second", "_started", "seconds",
                 "steps", "steps_behind")

    def __init__(
        self,
        share: float = MAX_LOOP_SHARE,
        *,
        behind: Callable[[], bool] | None = None,
        behind_share: float = BEHIND_LOOP_SHARE,
    ) -> None:
        self._rest_per_second = (1 - share) / share
        self._behind_rest_per_second = max(self._rest_per_second, (1 - behind_share) / behind_share)
        self._behind = behind
        self.seconds = 0.0
        self.steps = 0
        self.steps_behind = 0
        self._owed = 0.0
        self._started = 0.0

    def __enter__(self) -> LoopTime:
        self._started = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        elapsed = time.perf_counter() - self._started
        self.seconds += elapsed
        self.steps += 1
        if self._behind is not None and self._behind():
            self.steps_behind += 1
            self._owed += elapsed * self._behind_rest_per_second
        else:
            self._owed += elapsed * self._rest_per_second

    @property
    def owed(self) -> float:
        """Seconds of rest the steps since the last :meth:`turn` owe the loop."""
        return self._owed

    async def turn(self) -> None:
        """Give the loop its turn: rest what the last steps owe (at least one turn)."""
        owed, self._owed = self._owed, 0.0
        await asyncio.sleep(owed)


async def _in_turns(steps: Steps[T], held: LoopTime | None = None) -> T:
    """Run ``steps`` to the end, giving the event loop its turn after each step (paced by
    ``held``; without it, a plain turn)."""
    held = held or LoopTime(1.0)
    while True:
        try:
            with held:
                next(steps)
        except StopIteration as done:
            return cast(T, done.value)
        await held.turn()


class WasteSampler(Service):
    """Samples the fleet every ``interval`` seconds into an accumulator kept in ``store``, with
    fine rollup buckets of ``bucket_seconds``.

    ``async with WasteSampler(objects, store, interval=60):`` runs it in the background, or
    ``await sampler.run()`` / ``sampler.request_stop()`` (it returns after the current pass).
    """

    def __init__(
        self,
        objects: ObjectClient,
        store: Store,
        *,
        interval: float = DEFAULT_INTERVAL,
        stale_after: timedelta | None = DEFAULT_STALE_AFTER,
        timeout: float = DEFAULT_TIMEOUT,
        metrics: HubMetrics | None = None,
        prefix: str = DEFAULT_PREFIX,
        bucket_seconds: int = DEFAULT_BUCKET_SECONDS,
        accumulator_factory: Callable[[], Accumulator] | None = None,
        clock: Clock = _utc_now,
        page_size: int = DEFAULT_PAGE_SIZE,
        loop_share: float = MAX_LOOP_SHARE,
        backlog: Callable[[], float] | None = None,
        behind_loop_share: float = BEHIND_LOOP_SHARE,
    ) -> None:
        for what, share in (("", loop_share), (" while the controllers are behind", behind_loop_share)):
            if not 0 < share <= 1:
                raise ValueError(f"the sampler's share of the event loop{what} must be in (0, 1], got {share}")
        if interval <= 0:
            raise ValueError("the waste sample interval must be positive")
        if page_size <= 0:
            raise ValueError("the list page size must be positive")
        check_bucket_seconds(bucket_seconds)
        super().__init__("waste-sampler")
        self._objects = objects
        self._store = store
        self.interval = interval
        self._stale_after = stale_after
        self._timeout = timeout
        self._metrics = metrics
        self._prefix = prefix
        #: Seconds in one fine rollup bucket (the accumulators' unless ``accumulator_factory`` says otherwise).
        self.bucket_seconds = bucket_seconds
        self._new_accumulator = accumulator_factory or functools.partial(Accumulator, bucket_seconds=bucket_seconds)
        self._clock = clock
        self._page_size = page_size
        self._share = loop_share
        self._behind_share = behind_loop_share
        #: How long the controllers' longest-waiting key has waited, in seconds (None: not known).
        self.backlog = backlog
        registry = objects.registry
        self._cluster_type = registry.require(_API_VERSION_CLUSTER, "Cluster")
        self._binding_type = registry.require(_API_VERSION_WORK, "ResourceBinding")
        self._work_type = registry.require(_API_VERSION_WORK, "Work")
        #: The trainer's runtime kinds the hub serves (a TrainJob's pending pods ask what its runtime says).
        self._runtime_types = [
            rt for kind in trainer.RUNTIME_PLURALS if (rt := registry.for_kind(trainer.API_VERSION, kind)) is not None
        ]
        #: DRA's claim templates, claims and DeviceClasses (the GPUs a Work's pending pods ask through claims).
        self._claim_types = [rt for kind in LISTED_KINDS if (rt := registry.for_kind(RESOURCE_API_VERSION, kind)) is not None]
        self._accumulator: Accumulator | None = None
        self._rollups: RollupStore | None = None
        self.samples_taken = 0
        #: Each cluster's nodes, rebuilt only when its report changes (only one pass at a time uses it).
        self._nodes_cache = ClusterNodesCache()
        #: The per-cluster memos of the last run's accumulator, handed to the next run's.
        self._memos: PassMemos | None = None
        self.last_sample: FleetSample | None = None
        #: Seconds the last pass's own steps (building and classifying) held the loop.
        self.last_pass_held = 0.0
        #: The last pass's own steps, and how many of them ended while the controllers were behind.
        self.last_pass_steps = (0, 0)

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def accumulator(self) -> Accumulator | None:
        """The live accumulator while :meth:`run` runs (after the restore); else None."""
        return self._accumulator

    async def run(self, *, store: Store | None = None) -> None:
        """Restore the rollups, then sample every ``interval`` until :meth:`shutdown`.

        ``store`` replaces the constructor's store for this run (e.g. a leader's store fenced to
        its term, so a deposed leader cannot overwrite the new leader's rollups).
        """
        try:
            restored = await self._restore(store or self._store)
            if restored is None:
                return
            if self._memos is not None:
                restored.memos = self._memos  # the last term's classification still holds
            self._memos = restored.memos
            self._accumulator = restored
            logger.info(
                "waste accounting running: a fleet sample every %.1fs (rollups restored up to %s)",
                self.interval,
                restored.newest.isoformat() if restored.newest else "nothing",
            )
            loop = asyncio.get_running_loop()
            next_due = loop.time()
            while not self._stop.is_set():
                try:
                    await self.sample_once()
                except Exception:  # one bad pass must not end the accounting
                    logger.exception("waste sample failed; the next pass integrates over the gap")
                next_due = next_pass_at(next_due + self.interval, now=loop.time(), interval=self.interval)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(next_due):
                        await self._stop.wait()
            await self._final_save()
        finally:
            self._accumulator = None
            self._rollups = None
            self._stop.clear()  # run() may be called again (e.g. on regaining leadership)
            if self._metrics is not None:
                self._metrics.forget_held_sample()
            logger.info("waste accounting stopped")

    async def _restore(self, store: Store) -> Accumulator | None:
        """The accumulator as saved in ``store``; retries while the store is unreachable.
        None when shut down before it could be read."""
        attempt = 0
        while not self._stop.is_set():
            rollups = RollupStore(store, prefix=self._prefix, timeout=self._timeout)
            try:
                accumulator = await rollups.load(self._new_accumulator())
            except (StorageError, TimeoutError) as exc:
                delay = RESTORE_RETRY_SECONDS[min(attempt, len(RESTORE_RETRY_SECONDS) - 1)]
                attempt += 1
                logger.warning("cannot restore the waste rollups yet (%s); retrying in %.0fs", exc, delay)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._stop.wait()
                continue
            self._rollups = rollups
            return accumulator
        return None

    async def _final_save(self) -> None:
        if self._accumulator is None or self._rollups is None:
            return
        try:
            await self._rollups.save(self._accumulator)
        except (StorageError, TimeoutError) as exc:
            logger.warning("could not save the waste rollups on shutdown: %s", exc)

    # -- one pass ------------------------------------------------------------------------------

    async def _list(self, kind: Any) -> list[dict[str, Any]]:
        """Every object of ``kind``, read a page at a time (one consistent snapshot, as kube's
        continue tokens give): each page is decoded in one go, and the event loop has a turn
        between pages (thousands of Works and bindings at once held it for seconds). Not paced:
        a page's read waits on other tasks too, so its time is not the sampler's alone, and
        rests would count against the list's timeout."""
        items: list[dict[str, Any]] = []
        async with asyncio.timeout(self._timeout):
            async for page in list_pages(self._objects, kind, limit=self._page_size):
                items.extend(page.items)
                await asyncio.sleep(0)
        return items

    async def _prepare(
        self,
        accumulator: Accumulator,
        clusters: list[dict[str, Any]],
        bindings: list[dict[str, Any]],
        works: list[dict[str, Any]],
        now: datetime,
        held: LoopTime,
        runtimes: list[dict[str, Any]],
        claims: list[dict[str, Any]],
    ) -> PreparedSample:
        """The sample and its classification, giving the event loop a turn after each cluster
        whose report changed (its nodes are built and its devices classified anew: 40,000 for a
        5,000-node cluster), so leases, reports and leadership renewals are served meanwhile.
        Unchanged clusters are the caches' and cost next to nothing."""
        with held:
            owners = propagated_workloads(works)
        for raw in clusters:
            with held:
                built = warm_cluster_nodes(raw, owners, cache=self._nodes_cache)
            if built:
                await held.turn()
        # The bindings and Works are read in steps too: 20,000 bindings held the loop for seconds.
        sample = await _in_turns(
            sample_steps(clusters, bindings, works, now=now, stale_after=self._stale_after, cache=self._nodes_cache,
                         runtimes=runtimes, claims=claims),
            held,
        )
        for cluster in sample.clusters:
            with held:
                warmed = accumulator.warm(cluster)
            if warmed:
                await held.turn()
        # Matching the pending demand and summing the cells of the clusters it changed is done
        # in steps too (a cluster's free layout, its new states, its cells: each up to one
        # object per device), with a turn for the loop after each.
        return await _in_turns(accumulator.prepare_steps(sample), held)

    async def sample_once(self) -> FleetSample | None:
        """Take one sample, account it and save the rollups; None when the pass failed."""
        accumulator, rollups = self._accumulator, self._rollups
        if accumulator is None or rollups is None:
            raise RuntimeError("sample_once() needs a running sampler (call run() first)")
        started = time.perf_counter()
        held = LoopTime(self._share, behind=self._controllers_behind, behind_share=self._behind_share)
        try:
            clusters = await self._list(self._cluster_type)
            bindings = await self._list(self._binding_type)
            works = await self._list(self._work_type)
            runtimes = [runtime for rt in self._runtime_types for runtime in await self._list(rt)]
            claims = [claim for rt in self._claim_types for claim in await self._list(rt)]
        except (errors.ApiError, StorageError, TimeoutError) as exc:
            logger.warning("skipping a waste sample: cannot read the fleet: %s", exc)
            if self._metrics is not None:
                self._metrics.observe_sample(time.perf_counter() - started, ok=False)
            return None
        now = self._clock()
        prepared = await self._prepare(accumulator, clusters, bindings, works, now, held, runtimes, claims)
        self.last_pass_held = held.seconds
        self.last_pass_steps = (held.steps, held.steps_behind)
        if not accumulator.commit(prepared):
            return None
        sample = prepared.sample
        self.samples_taken += 1
        self.last_sample = sample
        if self._metrics is not None:
            self._metrics.record_fleet_cells(prepared.rates.cells, time=now)
            self._metrics.record_bindings(bindings)
            self._metrics.record_cluster_reports(clusters)
        try:
            await rollups.save(accumulator)
        except (StorageError, TimeoutError) as exc:
            logger.warning("could not save the waste rollups (kept for the next save): %s", exc)
        if self._metrics is not None:
            self._metrics.observe_sample(time.perf_counter() - started, ok=True)
        logger.debug(
            "waste sample at %s: %d clusters, %d pending demands, the loop held %.2fs (%d of %d steps yielded "
            "to controllers behind)",
            now.isoformat(),
            len(sample.clusters),
            len(sample.pending),
            held.seconds,
            held.steps_behind,
            held.steps,
        )
        return sample

    def _controllers_behind(self) -> bool:
        """Whether a controller's key has waited :data:`BACKLOG_WAIT` or more for a worker."""
        return self.backlog is not None and self.backlog() >= BACKLOG_WAIT


__all__ = ["DEFAULT_INTERVAL", "DEFAULT_STALE_AFTER", "WasteSampler"]
