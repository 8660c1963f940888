"""What only the etcd store and the embedded launcher promise: durability across an etcd
restart, transparent reconnection, namespacing, and clear errors when etcd is not there."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from controlplane.storage import (
    EmbeddedEtcd,
    EtcdClientTransport,
    EtcdStartError,
    EtcdStore,
    EventType,
    Unavailable,
    WatchEvent,
)
from controlplane.storage.connecting import grpc_target

pytestmark = pytest.mark.waiting


async def take(events: AsyncIterator[WatchEvent], count: int) -> list[WatchEvent]:
    received: list[WatchEvent] = []
    async with asyncio.timeout(20):
        async for event in events:
            received.append(event)
            if len(received) == count:
                break
    return received


def closed_port() -> int:
    """A port nothing listens on (bound once to pick it, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("transport", [EtcdClientTransport.UNIX, EtcdClientTransport.TLS])
async def test_data_and_watches_survive_an_etcd_restart(tmp_path: Path, transport: EtcdClientTransport) -> None:
    etcd = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=False, transport=transport)
    url = await etcd.start()
    tls = etcd.client_tls
    assert (tls is None) == (transport is EtcdClientTransport.UNIX)
    certificates = {path.name: path.read_bytes() for path in sorted(etcd.pki_dir.glob("*"))}
    try:
        # A restart under load can take longer than the outage gate's default 2 s, after which
        # calls fail fast with Unavailable (tests/storage/test_outage.py); this test is about
        # riding through a restart, so the gate trips only after the whole retry budget.
        async with EtcdStore([url], prefix="/gpufed", tls=tls, outage_trip_after=30.0) as store:
            a = await store.create("/pods/a", b"a1")
            a = await store.update("/pods/a", b"a2", expected_revision=a.mod_revision)
            await store.create("/pods/b", b"b1")
            gone = await store.create("/pods/c", b"c1")
            await store.delete("/pods/c")

            events = store.watch("/pods/", from_revision=gone.mod_revision)
            seen = await take(events, 2)  # create c, delete c
            last_seen = seen[-1].kv.mod_revision
            unseen_before_stop = await store.create("/pods/d", b"d1")
            before = await store.list("/pods/")

            await etcd.stop()
            # A read issued while etcd is down is retried until it comes back.
            pending_read = asyncio.ensure_future(store.get("/pods/a"))
            await asyncio.sleep(0.3)
            assert await etcd.start() == url  # same data dir, same client URL
            # Same CA and certificates: the open store keeps working, so does a copied client cert.
            assert etcd.client_tls == tls
            assert {path.name: path.read_bytes() for path in sorted(etcd.pki_dir.glob("*"))} == certificates
            assert await pending_read == a

            after = await store.list("/pods/")
            assert after.items == before.items
            assert after.revision == before.revision
            written_after_restart = await store.create("/pods/e", b"e1")

            # The open watch reconnected by itself and missed nothing.
            resumed = await take(events, 2)
            await events.aclose()  # type: ignore[attr-defined]
            assert [(e.type, e.kv) for e in resumed] == [
                (EventType.PUT, unseen_before_stop),
                (EventType.PUT, written_after_restart),
            ]

        # A new client resuming from the last revision it saw gets the same events.
        async with EtcdStore([url], prefix="/gpufed", tls=tls) as fresh:
            events = fresh.watch("/pods/", from_revision=last_seen + 1)
            replayed = await take(events, 2)
            await events.aclose()  # type: ignore[attr-defined]
            assert [e.kv for e in replayed] == [unseen_before_stop, written_after_restart]
    finally:
        await etcd.stop()


async def test_a_write_issued_while_etcd_is_down_is_retried_until_it_comes_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    etcd = EmbeddedEtcd(tmp_path / "etcd")
    url = await etcd.start()
    try:
        # A restart under load can outlast the outage gate's default 2 s (after which calls fail
        # fast, tests/storage/test_outage.py); this test is about retrying through a restart.
        async with EtcdStore(
            [url], prefix="/gpufed", retry_budget=30.0, tls=etcd.client_tls, outage_trip_after=30.0
        ) as store:
            await store.create("/pods/a", b"a1")
            await etcd.stop()
            with caplog.at_level("DEBUG", logger="controlplane.storage.etcd"):
                pending = asyncio.ensure_future(store.create("/pods/b", b"b1"))
                await asyncio.sleep(0.3)
                assert not pending.done()
                assert await etcd.start() == url
                written = await pending
            assert (await store.get("/pods/b")) == written
            retries = [r for r in caplog.records if r.getMessage() == "etcd call failed, retrying"]
            assert retries, "the failed first attempt is logged as the retry loop's first"
            assert [r.__dict__["attempt"] for r in retries][:2] == [1, 2][: len(retries)]
            assert all(r.__dict__["call"] == "create" for r in retries)
    finally:
        await etcd.stop()


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.ping(),
        lambda s: s.get("/pods/a"),
        lambda s: s.list("/pods/"),
        lambda s: s.create("/pods/a", b"v"),
        lambda s: s.update("/pods/a", b"v", expected_revision=2),
        lambda s: s.delete("/pods/a"),
        lambda s: s.current_revision(),
        lambda s: anext(s.watch("/pods/", from_revision=1)),
    ],
    ids=["ping", "get", "list", "create", "update", "delete", "current_revision", "watch"],
)
async def test_unreachable_etcd_raises_unavailable_naming_the_endpoint(
    call: Callable[[EtcdStore], Awaitable[object]],
) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    store = EtcdStore([endpoint], timeout=1.0, retry_budget=0.3)
    try:
        with pytest.raises(Unavailable, match=f"etcd at {endpoint} is unreachable: "):
            await call(store)
    finally:
        await store.close()


async def test_a_missing_etcd_socket_is_unavailable_naming_it(tmp_path: Path) -> None:
    endpoint = f"unix://{tmp_path}/etcd.sock:0"
    store = EtcdStore([endpoint], timeout=1.0, retry_budget=0.3)
    try:
        with pytest.raises(Unavailable, match=f"etcd at {endpoint} is unreachable: "):
            await store.get("/pods/a")
    finally:
        await store.close()


async def test_connect_to_unreachable_etcd_fails_with_the_original_error_chained() -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(Unavailable) as failure:
        async with EtcdStore([endpoint], retry_budget=0.3):
            pass
    assert failure.value.__cause__ is not None


async def test_prefixes_isolate_stores_on_one_etcd(etcd_endpoint: str) -> None:
    async with (
        EtcdStore([etcd_endpoint], prefix="/isolation") as narrow,
        EtcdStore([etcd_endpoint], prefix="/isolation-wide") as wide,
    ):
        await narrow.create("/a", b"narrow")
        await wide.create("/a", b"wide")
        assert [(kv.key, kv.value) for kv in (await narrow.list("")).items] == [("/a", b"narrow")]
        assert [(kv.key, kv.value) for kv in (await wide.list("")).items] == [("/a", b"wide")]


async def test_a_store_opens_its_watch_channel_only_to_watch(etcd_endpoint: str) -> None:
    """A twin that only renews a lease and reads a key (the leader's renewals) holds one gRPC
    channel; the watch channel comes with the first watch, and closing ends both."""
    async with EtcdStore([etcd_endpoint], prefix=f"/channels-{uuid.uuid4().hex}") as store:
        twin = store.twin()
        assert twin.open_channels == 0
        lease, _ttl = await twin.grant_lease(5)
        await twin.create("/leader", b"me", lease=lease)
        assert await twin.keep_alive_lease(lease) > 0
        stored = await twin.get("/leader")
        assert stored.value == b"me"
        assert twin.open_channels == 1
        # From the key's own revision: the shared etcd's earlier history may be compacted.
        events = twin.watch("/leader", from_revision=stored.mod_revision)
        assert [event.kv.value for event in await take(events, 1)] == [b"me"]
        assert twin.open_channels == 2
        await twin.revoke_lease(lease)
        await twin.close()
        assert twin.open_channels == 0


async def test_embedded_etcd_reports_why_it_did_not_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        etcd = EmbeddedEtcd(
            tmp_path / "etcd", client_port=port, peer_port=closed_port(), transport=EtcdClientTransport.TLS
        )
        with pytest.raises(EtcdStartError, match="address already in use"):
            await etcd.start()
    assert not etcd.running


@pytest.mark.parametrize(
    ("endpoints", "target"),
    [
        (["http://127.0.0.1:2379"], "127.0.0.1:2379"),
        (["https://127.0.0.1:2379"], "127.0.0.1:2379"),
        (["https://etcd.gpufed-system.svc"], "etcd.gpufed-system.svc:2379"),
        (["etcd.example:2379"], "etcd.example:2379"),
        (["http://etcd.example"], "etcd.example:2379"),
        (["http://[::1]:2379"], "[::1]:2379"),
        (["http://10.0.0.1:2379", "http://10.0.0.2:2379"], "ipv4:10.0.0.1:2379,10.0.0.2:2379"),
        (["http://[::1]:2379", "http://[::2]:2379"], "ipv6:[::1]:2379,[::2]:2379"),
        (["unix:///var/lib/gpufed/etcd/socket/etcd.sock:0"], "unix:/var/lib/gpufed/etcd/socket/etcd.sock:0"),
    ],
)
def test_grpc_target(endpoints: list[str], target: str) -> None:
    assert grpc_target(endpoints) == target


@pytest.mark.parametrize(
    ("endpoints", "message"),
    [
        ([], "at least one"),
        (["ftp://127.0.0.1:2379"], "only http://, https:// and unix://"),
        (["https://10.0.0.1:2379", "http://10.0.0.2:2379"], "mix schemes"),
        (["unix:///run/a.sock", "unix:///run/b.sock"], "cannot go with others"),
        (["unix://run/etcd.sock"], "an absolute path"),
        (["https://10.0.0.1:2379", "https://10.0.0.2:2379"], "one DNS name that resolves to every member"),
        (["http://a.example:2379", "http://b.example:2379"], "must be IP addresses"),
        (["http://10.0.0.1:2379", "http://[::1]:2379"], "mix IPv4 and IPv6"),
    ],
)
def test_grpc_target_rejects(endpoints: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grpc_target(endpoints)


async def test_a_collection_larger_than_one_response_is_listed_in_smaller_pages(etcd_endpoint: str) -> None:
    """40 values of 16 KiB do not fit one 256 KiB response, so even the default page of 500
    keys fails as one etcd range; the store halves the page until a response fits."""
    from controlplane.storage.paging import ResponseTooLarge

    prefix = f"/gpufed-test/{uuid.uuid4().hex}"
    async with EtcdStore([etcd_endpoint], prefix=prefix, max_response_bytes=256 * 1024) as store:
        keys = [f"/configmaps/big/cm{i:02d}" for i in range(40)]
        for key in keys:
            await store.create(key, b"x" * 16 * 1024)
        await store.create("/huge", b"y" * 300 * 1024)

        listed = await store.list("/configmaps/")
        assert [kv.key for kv in listed.items] == keys and not listed.more
        page = await store.list("/configmaps/", limit=30)
        assert len(page.items) == 30 and page.more
        rest = await store.list("/configmaps/", revision=page.revision, start_after=page.items[-1].key)
        assert [kv.key for kv in page.items + rest.items] == keys
        # One value over the limit cannot be read at all: a clear error, not a retry loop.
        with pytest.raises(ResponseTooLarge, match="response limit"):
            await store.get("/huge")


async def test_deletes_in_one_watch_response_each_carry_their_deleted_value(etcd_endpoint: str) -> None:
    """A lease's keys go in one revision, so one watch response holds several DELETE events:
    each carries the value it deleted (read at the revision before the delete)."""
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/{uuid.uuid4().hex}") as store:
        lease, _ = await store.grant_lease(60)
        created = [await store.create(f"/leased/k{i}", f"v{i}".encode(), lease=lease) for i in range(3)]
        events = store.watch("/leased/", from_revision=created[-1].mod_revision + 1)
        await store.revoke_lease(lease)
        deleted = await take(events, 3)
    assert [e.type for e in deleted] == [EventType.DELETE] * 3
    assert {e.kv.key: e.kv.value for e in deleted} == {
        "/leased/k0": b"v0", "/leased/k1": b"v1", "/leased/k2": b"v2"
    }
    assert {e.kv.key: e.kv.create_revision for e in deleted} == {
        f"/leased/k{i}": kv.create_revision for i, kv in enumerate(created)
    }
    assert len({e.kv.mod_revision for e in deleted}) == 1
