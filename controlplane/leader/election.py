"""Leader election among hub replicas on one etcd: who runs the controllers.

In: the hub's :class:`~controlplane.storage.etcd.EtcdStore`, this replica's identity, a
lease TTL (default 10 s) and two callbacks. Out: at most one leader at a time;
``on_started_leading(term)`` runs when this replica becomes leader and
``on_stopped_leading()`` when it stops (lost, resigned or shut down).

How (etcd's own election recipe, simplified to one key):

* Campaign: grant an etcd lease of ``ttl`` seconds and create the leader key
  (``/leader/controllers`` under the store's prefix) bound to it, only if absent (a
  transaction on ``create_revision == 0``). Whoever creates it leads; the key's
  ``create_revision`` is the :class:`Term`, the number every fenced write of the leader's
  controllers names (:mod:`controlplane.leader.fencing`).
* Lead: renew the lease every second (every ``ttl / 3`` seconds for a TTL under 3 s) and
  check the key is still ours, on a thread of its own with its own event loop and etcd
  connection (:mod:`controlplane.leader.renewing`): a hub whose event loop is saturated by
  its API and controllers still renews on time, as client-go's renew goroutine does. A
  renewal answering "expired", the key gone or held by another term, or no successful
  renewal for ``renew_deadline`` (2/3 of the TTL, before etcd would expire the lease) ends
  the term. A renewal may take until that deadline, as client-go's renew loop bounds each try
  by its RenewDeadline rather than by the retry period: an etcd that answers late under load
  is not a lost lease. Past the deadline, one more renewal is tried at once before stepping
  down: when the process was starved, the failed renewal was only its own timeout firing
  late, and etcd may still hold the lease.
* Follow: watch the key; when it is deleted (the leader resigned, or its lease expired
  because it died) campaign at once, and re-check every ``ttl`` seconds in any case. So
  leadership moves within the TTL plus a moment after a leader dies (15 s with the
  defaults), and at once when it shuts down cleanly (it revokes its lease).

A leader that stalls (a starved process, a network partition) may still believe it
leads after etcd has expired its lease. Its writes are fenced, so that belief does no
harm: they fail with :class:`~controlplane.leader.fencing.Fenced`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from controlplane.leader.fencing import FencedStore
from controlplane.leader.renewing import RenewalThread
from controlplane.lifecycle import Service
from controlplane.storage.etcd import EtcdStore
from controlplane.storage.interface import AlreadyExists, EventType, NotFound, StorageError

log = logging.getLogger(__name__)

LEADER_KEY = "/leader/controllers"
DEFAULT_TTL = 10
#: Seconds between renewals of the leader lease at most.
MAX_RENEW_INTERVAL = 1.0


@dataclass(frozen=True)
class Term:
    """One leadership term of one replica."""

    identity: str
    #: The leader key's create_revision: unique and increasing across terms.
    revision: int
    lease_id: int
    acquired: datetime


def default_identity() -> str:
    """``host-pid-random``: distinct for every process, readable in logs."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def holder_of(value: bytes) -> str:
    """The holder identity stored in the leader key's value."""
    try:
        decoded: Any = json.loads(value)
    except ValueError:
        return value.decode(errors="replace")
    return str(decoded.get("holderIdentity", "")) if isinstance(decoded, dict) else str(decoded)


class LeaderElector(Service):
    """``await elector.run()`` (until ``shutdown()``), or ``async with LeaderElector(...)``.

    ``shutdown()`` stops campaigning; a leader stops its work and resigns (others take over
    at once).
    """

    shutdown_raises = False  # stopped in the hub's cleanup, which must go on

    def __init__(
        self,
        store: EtcdStore,
        identity: str,
        *,
        ttl: int = DEFAULT_TTL,
        on_started_leading: Callable[[Term], Awaitable[None]],
        on_stopped_leading: Callable[[], Awaitable[None]],
        key: str = LEADER_KEY,
    ) -> None:
        if ttl < 2:
            raise ValueError(f"the leader lease TTL must be at least 2 seconds (etcd's minimum), got {ttl}")
        super().__init__(f"leader-elector-{identity}")
        self.store = store
        self.identity = identity
        self.key = key
        self.ttl = ttl
        # Renewals every second (ttl / 3 for the shortest TTLs): the lease survives a stall of
        # the renewal thread up to ttl - renew_interval (9 s with the default TTL; 6.7 s at ttl / 3).
        self.renew_interval = min(ttl / 3, MAX_RENEW_INTERVAL)
        self.renew_deadline = ttl * 2 / 3
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._term: Term | None = None
        self._leader: str | None = None
        self._changed = asyncio.Condition()

    # -- what others read ----------------------------------------------------------------

    @property
    def term(self) -> Term | None:
        """The current term while this replica leads, else None."""
        return self._term

    @property
    def is_leader(self) -> bool:
        return self._term is not None

    @property
    def leader(self) -> str | None:
        """The identity of the leader as last seen (this replica's own while it leads)."""
        return self._leader

    def fenced_store(self, term: Term) -> FencedStore:
        """A store whose writes fail once ``term`` is over."""
        return FencedStore(self.store, guard_key=self.key, term=term.revision)

    async def wait_leading(self) -> Term:
        """Wait until this replica leads; return the term."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._term is not None)
            assert self._term is not None
            return self._term

    # -- lifecycle -----------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, lead, follow, campaign again ... until :meth:`shutdown`.

        Cancelling this task (rather than calling ``shutdown``) stops it as a crash would:
        the term ends locally but the lease is left to expire.
        """
        self._stop = asyncio.Event()
        while not self._stop.is_set():
            try:
                term = await self._campaign()
                if term is None:
                    continue
                await self._lead(term)
            except asyncio.CancelledError:
                raise
            except StorageError as exc:
                log.warning("leader election: etcd call failed: %s; retrying", exc)
                await self._sleep(min(self.renew_interval, 1.0))

    # -- campaigning ---------------------------------------------------------------------

    async def _campaign(self) -> Term | None:
        """Try to become leader once; on failure wait for a vacancy and return None."""
        lease_id, _granted = await self.store.grant_lease(self.ttl)
        acquired = datetime.now(UTC)
        value = json.dumps({"holderIdentity": self.identity, "acquireTime": acquired.isoformat()}).encode()
        try:
            created = await self.store.create(self.key, value, lease=lease_id)
        except AlreadyExists:
            await self._revoke(lease_id)
        except BaseException:
            await self._revoke(lease_id)
            raise
        else:
            return Term(self.identity, created.create_revision, lease_id, acquired)
        # The key is written once per term, so its own revision falls out of etcd's history at the
        # next compaction: the watch starts after the revision the key was read at instead.
        read_at = await self.store.current_revision()
        try:
            holder = await self.store.get(self.key)
        except NotFound:
            return None  # it went in between: campaign again at once
        await self._set_leader(holder_of(holder.value))
        await self._wait_for_vacancy(max(read_at, holder.mod_revision))
        return None

    async def _wait_for_vacancy(self, seen: int) -> None:
        """Return when the leader key is deleted after revision ``seen``, or after ``ttl`` seconds,
        or on shutdown."""
        events = self.store.watch(self.key, from_revision=seen + 1)

        async def deleted() -> None:
            async for event in events:
                if event.kv.key == self.key and event.type is EventType.DELETE:
                    return
                if event.kv.key == self.key:
                    await self._set_leader(holder_of(event.kv.value))

        try:
            await self._until_stopped(deleted(), seconds=self.ttl)
        finally:
            with contextlib.suppress(StorageError):
                await events.aclose()  # type: ignore[attr-defined]

    # -- leading -------------------------------------------------------------------------

    async def _lead(self, term: Term) -> None:
        log.info("became leader (term %d) as %s", term.revision, self.identity)
        async with self._changed:
            self._term = term
            self._leader = self.identity
            self._changed.notify_all()
        resign = failed = True
        try:
            try:
                await self._on_started(term)
            except Exception:
                log.exception("starting the leader's work failed: resigning (term %d)", term.revision)
            else:
                failed = False
                resign = await self._keep_leading(term)
        finally:
            async with self._changed:
                self._term = None
                self._changed.notify_all()
            with contextlib.suppress(Exception):
                await asyncio.shield(self._on_stopped())
            log.info("stopped leading (term %d)", term.revision)
        if resign or self._stop.is_set():
            await self._revoke(term.lease_id)
        if failed:
            await self._sleep(self.renew_interval)  # let another replica try first

    async def _keep_leading(self, term: Term) -> bool:
        """Renew until the term ends; True when it ended by shutdown or on our side (resign).

        The renewals run on a thread of their own (:mod:`controlplane.leader.renewing`), so a
        saturated event loop here does not delay them."""
        renewals = RenewalThread(
            f"leader-renewals-{self.identity}", partial(self._renewals, term=term), self.store.twin()
        )
        renewals.start()
        stop = asyncio.ensure_future(self._stop.wait())
        ends: set[asyncio.Future[Any]] = {renewals.outcome, stop}
        try:
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            return self._stop.is_set() or renewals.outcome.result()
        finally:
            stop.cancel()
            await renewals.stop()

    async def _renewals(self, store: EtcdStore, *, term: Term) -> bool:
        """The renewal loop (on the renewal thread, with its own ``store``): as
        :meth:`_keep_leading` returns, once the term is over."""
        last_renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.renew_interval)
            left = self.renew_deadline - (time.monotonic() - last_renewed)
            renewal = await self._renew(store, term, within=max(self.renew_interval, left))
            if isinstance(renewal, Exception) and time.monotonic() - last_renewed >= self.renew_deadline:
                # The deadline may have passed while the thread was held (a starved process),
                # the renewal's own timeout firing late, rather than because etcd could not be
                # reached: ask etcd once more, at once. Only its answer says whether the lease
                # is still alive.
                renewal = await self._renew(store, term)
                if isinstance(renewal, Exception):
                    log.warning(
                        "could not renew the leader lease for %.1fs (%s): stepping down (term %d)",
                        time.monotonic() - last_renewed, renewal, term.revision,
                    )
                    return True
            if renewal is False:
                return False
            if renewal is True:
                last_renewed = time.monotonic()

    async def _renew(self, store: EtcdStore, term: Term, *, within: float | None = None) -> bool | Exception:
        """Renew the lease once: True when renewed, False when the term is over (the lease
        expired, the key is gone or another term's), the error when etcd did not answer within
        ``within`` seconds (the renew interval by default)."""
        try:
            async with asyncio.timeout(self.renew_interval if within is None else within):
                remaining = await store.keep_alive_lease(term.lease_id)
                holder = await store.get(self.key)
        except NotFound:
            log.warning("leader key %s is gone: leadership lost (term %d)", self.key, term.revision)
            return False
        except (StorageError, TimeoutError) as exc:
            return exc
        if remaining <= 0:
            log.warning("the leader lease expired: leadership lost (term %d)", term.revision)
            return False
        if holder.create_revision != term.revision:
            log.warning("another replica (%s) holds the leader key: leadership lost", holder_of(holder.value))
            return False
        return True

    # -- helpers -------------------------------------------------------------------------

    async def _set_leader(self, identity: str) -> None:
        if identity != self._leader:
            log.info("the leader is %s", identity)
        self._leader = identity

    async def _revoke(self, lease_id: int) -> None:
        try:
            async with asyncio.timeout(self.renew_interval):
                await self.store.revoke_lease(lease_id)
        except (StorageError, TimeoutError) as exc:
            log.info("could not revoke lease %x (%s); it expires by itself", lease_id, exc)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep, waking early on shutdown; True when shutting down."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stop.wait()
        return self._stop.is_set()

    async def _until_stopped(self, work: Awaitable[None], *, seconds: float) -> None:
        """Run ``work`` until it finishes, ``seconds`` pass or shutdown is asked."""
        job = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({job, stop}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (job, stop):
                task.cancel()
            results = await asyncio.gather(job, stop, return_exceptions=True)
        for result in results:
            if isinstance(result, StorageError):
                raise result
