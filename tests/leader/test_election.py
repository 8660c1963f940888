"""Leader election against a real etcd: one leader, takeover when it dies or resigns, and the
deposed leader's fenced writes fail while the plain store keeps working."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack

import pytest

from controlplane.leader import Fenced, LeaderElector, Term
from controlplane.storage import EtcdStore

pytestmark = pytest.mark.waiting

TTL = 2
#: Generous bound for a takeover (TTL plus detection), failing the test instead of hanging.
TAKEOVER_LIMIT = 6 * TTL


class Replica:
    """One elector plus a record of its callbacks, as a hub replica would wire it."""

    def __init__(self, store: EtcdStore, name: str, *, ttl: int = TTL) -> None:
        self.name = name
        self.terms: list[Term] = []
        self.stops = 0
        self.elector = LeaderElector(
            store, name, ttl=ttl, on_started_leading=self._started, on_stopped_leading=self._stopped
        )
        self.task: asyncio.Task[None] | None = None

    async def _started(self, term: Term) -> None:
        self.terms.append(term)

    async def _stopped(self) -> None:
        self.stops += 1

    def start(self) -> None:
        self.task = self.elector.spawn()

    async def crash(self) -> None:
        """Stop as a killed process would: no resignation, the lease is left to expire."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


@pytest.fixture
async def prefix() -> str:
    return f"/gpufed-test/{uuid.uuid4().hex}"


@pytest.fixture
async def stores(etcd_endpoint: str, prefix: str) -> AsyncIterator[Callable[[], Awaitable[EtcdStore]]]:
    """Separate connections to one etcd under one prefix: one per hub replica."""
    async with AsyncExitStack() as stack:

        async def connect() -> EtcdStore:
            return await stack.enter_async_context(EtcdStore([etcd_endpoint], prefix=prefix))

        yield connect


async def eventually(probe: Callable[[], bool], *, what: str, limit: float = TAKEOVER_LIMIT) -> None:
    try:
        async with asyncio.timeout(limit):
            while True:
                if probe():
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_one_leader_and_takeover_after_a_crash(stores: Callable[[], Awaitable[EtcdStore]]) -> None:
    a, b = Replica(await stores(), "a"), Replica(await stores(), "b")
    a.start()
    term_a = await asyncio.wait_for(a.elector.wait_leading(), TAKEOVER_LIMIT)
    b.start()
    await eventually(lambda: b.elector.leader == "a", what="b to see a as leader")
    assert not b.elector.is_leader and b.terms == []
    fenced_a = a.elector.fenced_store(term_a)
    await fenced_a.create("/objects/by-a", b"1")

    await a.crash()
    await eventually(lambda: b.elector.is_leader, what="b to take over after a died")
    term_b = b.terms[-1]
    assert term_b.revision > term_a.revision
    assert b.elector.leader == "b"

    # a's controllers may still be writing: every write is refused, nothing lands.
    with pytest.raises(Fenced):
        await fenced_a.create("/objects/late-by-a", b"1")
    plain = b.elector.store
    with pytest.raises(Exception, match="not found"):
        await plain.get("/objects/late-by-a")
    # b's fenced writes and the plain store work.
    await b.elector.fenced_store(term_b).create("/objects/by-b", b"1")
    await plain.create("/objects/by-api", b"1")
    assert a.stops == 1
    await b.elector.shutdown()


async def test_resignation_hands_over_at_once(stores: Callable[[], Awaitable[EtcdStore]]) -> None:
    a, b = Replica(await stores(), "a"), Replica(await stores(), "b")
    a.start()
    await asyncio.wait_for(a.elector.wait_leading(), TAKEOVER_LIMIT)
    b.start()
    await eventually(lambda: b.elector.leader == "a", what="b to see a as leader")
    await a.elector.shutdown()
    assert a.stops == 1 and not a.elector.is_leader
    # The key is gone with the revoked lease: b does not wait for a TTL (bounded by 1 TTL here).
    await eventually(lambda: b.elector.is_leader, what="b to take over after a resigned", limit=TTL)
    await b.elector.shutdown()


async def test_a_follower_of_a_leader_key_older_than_etcds_history_waits_quietly(
    stores: Callable[[], Awaitable[EtcdStore]], caplog: pytest.LogCaptureFixture
) -> None:
    """The leader key is written once per term; after the periodic compaction has passed its
    revision a follower still watches it (from the revision it read at), not retrying in a loop."""
    a, b = Replica(await stores(), "a"), Replica(await stores(), "b")
    a.start()
    await asyncio.wait_for(a.elector.wait_leading(), TAKEOVER_LIMIT)
    other = await stores()
    for i in range(3):
        await other.create(f"/objects/later-{i}", b"1")
    await other.compact(await other.current_revision())
    caplog.set_level("WARNING", logger="controlplane.leader")
    b.start()
    await eventually(lambda: b.elector.leader == "a", what="b to see a as leader")
    await asyncio.sleep(0.5)  # long enough for a failing watch to be retried at least once
    assert not [r.getMessage() for r in caplog.records if "etcd call failed" in r.getMessage()]
    await a.elector.shutdown()
    await eventually(lambda: b.elector.is_leader, what="b to take over after a resigned", limit=TTL)
    await b.elector.shutdown()


async def test_a_leader_that_loses_its_key_steps_down_and_campaigns_again(
    stores: Callable[[], Awaitable[EtcdStore]],
) -> None:
    a = Replica(await stores(), "a")
    a.start()
    first = await asyncio.wait_for(a.elector.wait_leading(), TAKEOVER_LIMIT)
    admin = await stores()
    await admin.revoke_lease(first.lease_id)  # as if etcd had expired it
    await eventually(lambda: a.stops == 1, what="a to notice it lost leadership")
    await eventually(lambda: len(a.terms) == 2, what="a to be elected again")
    assert a.terms[1].revision > first.revision
    with pytest.raises(Fenced):
        await a.elector.fenced_store(first).create("/objects/x", b"1")
    await a.elector.shutdown()
    assert a.stops == 2


async def test_failing_to_start_the_leaders_work_resigns(stores: Callable[[], Awaitable[EtcdStore]]) -> None:
    failures = 0

    async def broken(_term: Term) -> None:
        nonlocal failures
        failures += 1
        raise RuntimeError("controllers failed to start")

    async def stopped() -> None:
        return None

    store = await stores()
    elector = LeaderElector(store, "a", ttl=TTL, on_started_leading=broken, on_stopped_leading=stopped)
    elector.spawn()
    await eventually(lambda: failures >= 2, what="the elector to retry after resigning")
    await elector.shutdown()
    assert not elector.is_leader
    with pytest.raises(Exception, match="not found"):
        await store.get(elector.key)


def test_ttl_below_etcds_minimum_is_refused() -> None:
    async def noop(*_args: object) -> None:
        return None

    with pytest.raises(ValueError, match="at least 2 seconds"):
        LeaderElector(None, "a", ttl=1, on_started_leading=noop, on_stopped_leading=noop)  # type: ignore[arg-type]


def before_renewals(monkeypatch: pytest.MonkeyPatch, before: Callable[[], Awaitable[None]]) -> None:
    """Every store's lease renewal runs ``before`` first: the renewals use a store of their own,
    on their own thread, so the class is patched, not the test's store."""
    renew = EtcdStore.keep_alive_lease

    async def renewal(self: EtcdStore, lease_id: int) -> int:
        await before()
        return await renew(self, lease_id)

    monkeypatch.setattr(EtcdStore, "keep_alive_lease", renewal)


async def test_a_leader_whose_renewals_were_held_keeps_a_lease_etcd_still_holds(
    stores: Callable[[], Awaitable[EtcdStore]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renewal whose timeout fires late, because the renewal thread was held (a starved
    process) past the renew deadline but not past the lease's TTL, does not end the term: etcd,
    asked again at once, still holds the lease."""
    ttl = 3  # renewals every 1 s, deadline 2 s, the lease expires 3 s after the last renewal
    store = await stores()
    a = Replica(store, "a", ttl=ttl)
    stalls = 0

    async def hold_once() -> None:
        nonlocal stalls
        if stalls == 0:
            stalls += 1
            time.sleep(1.5)  # noqa: ASYNC251 -- the renewals' loop held on purpose: the 1 s timeout fires late

    a.start()
    term = await asyncio.wait_for(a.elector.wait_leading(), TAKEOVER_LIMIT)
    before_renewals(monkeypatch, hold_once)
    await eventually(lambda: stalls == 1, what="the held renewal")
    await asyncio.sleep(2 * ttl)  # renewals go on
    assert a.stops == 0 and a.elector.term is term
    await a.elector.fenced_store(term).create("/objects/still-leading", b"1")
    await a.elector.shutdown()


async def test_renewals_that_answer_late_but_within_the_deadline_keep_the_term(
    stores: Callable[[], Awaitable[EtcdStore]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every renewal takes twice the renew interval (an etcd, or a hub at full CPU, answering
    late), well within the deadline: the term goes on, as client-go's renew loop lets a try run
    until its RenewDeadline."""
    ttl = 6  # renewals every 1 s, deadline 4 s, the lease expires 6 s after the last renewal
    store = await stores()
    a = Replica(store, "a", ttl=ttl)
    late = 0

    async def answer_late() -> None:
        nonlocal late
        late += 1
        await asyncio.sleep(2 * a.elector.renew_interval)  # the loop stays free: only the answer is late

    a.start()
    term = await asyncio.wait_for(a.elector.wait_leading(), TAKEOVER_LIMIT)
    before_renewals(monkeypatch, answer_late)
    await eventually(lambda: late >= 5, what="five late renewals", limit=4 * ttl)  # past the deadline twice over
    assert a.stops == 0 and a.elector.term is term
    await a.elector.fenced_store(term).create("/objects/still-leading", b"1")
    await a.elector.shutdown()


def renewal_threads(name: str) -> list[threading.Thread]:
    """The live renewal threads of the replica called ``name``."""
    return [thread for thread in threading.enumerate() if thread.name == f"leader-renewals-{name}"]


async def test_a_leader_whose_event_loop_is_saturated_keeps_its_term(
    stores: Callable[[], Awaitable[EtcdStore]],
) -> None:
    """The event loop never idles for three TTLs: one task holds it 0.9 s at a time and 50
    others 0.05 s each, so one turn of the loop takes 3.4 s, longer than the lease's TTL. The
    renewals, on a thread of their own, still get through and the term goes on."""
    ttl = 3  # renewals every 1 s, deadline 2 s, the lease expires 3 s after the last renewal
    store = await stores()
    a = Replica(store, "a", ttl=ttl)
    a.start()
    term = await asyncio.wait_for(a.elector.wait_leading(), TAKEOVER_LIMIT)
    busy_until = time.monotonic() + 3 * ttl

    async def hold_the_loop(step: float) -> None:
        while time.monotonic() < busy_until:
            time.sleep(step)  # noqa: ASYNC251 -- the event loop held on purpose, as a saturated hub's
            await asyncio.sleep(0)

    async with asyncio.TaskGroup() as busy:
        busy.create_task(hold_the_loop(0.9))
        for _ in range(50):
            busy.create_task(hold_the_loop(0.05))
    assert a.stops == 0 and a.elector.term is term
    await a.elector.fenced_store(term).create("/objects/still-leading", b"1")
    assert len(renewal_threads("a")) == 1
    await a.elector.shutdown()
    assert renewal_threads("a") == []


async def test_no_renewal_thread_outlives_its_term(stores: Callable[[], Awaitable[EtcdStore]]) -> None:
    """A lost term, a shutdown and a cancelled elector each stop the term's renewal thread."""
    a = Replica(await stores(), "a")
    a.start()
    first = await asyncio.wait_for(a.elector.wait_leading(), TAKEOVER_LIMIT)
    assert len(renewal_threads("a")) == 1
    admin = await stores()
    await admin.delete(a.elector.key)  # the term is lost: its renewals end
    await eventually(lambda: len(a.terms) == 2, what="a to be elected again")
    assert a.stops == 1 and a.terms[1].revision > first.revision
    assert len(renewal_threads("a")) == 1  # the new term's only
    await a.elector.shutdown()
    assert a.stops == 2 and renewal_threads("a") == []

    b = Replica(await stores(), "b")
    b.start()
    await asyncio.wait_for(b.elector.wait_leading(), TAKEOVER_LIMIT)
    assert len(renewal_threads("b")) == 1
    await b.crash()
    assert renewal_threads("b") == []
