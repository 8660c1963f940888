"""The hub's real :class:`~controlplane.storage.interface.Store`: etcd v3 over gRPC.

In: etcd client URLs (``https://127.0.0.1:2379``, or ``http://`` without TLS), the client
TLS settings for https URLs (:class:`EtcdClientTls`: a CA file and a client certificate
and key, kube-apiserver's ``--etcd-cafile/--etcd-certfile/--etcd-keyfile``), a key
prefix that namespaces every key this store touches (``/gpufed`` + ``/pods/ns/name``),
and opaque byte values.
Out: :class:`KeyValue` / :class:`ListResult` / :class:`WatchEvent` whose revisions are
etcd's own, so a key's ``mod_revision`` is directly the object's ``resourceVersion``.

The store speaks etcd's protocol through aetcd's generated gRPC stubs (``aetcd.rpc``)
rather than aetcd's convenience client, because the contract needs what that client
does not expose: ranges at a revision with a limit, transactions whose responses we read
(previous values, the current value on a failed compare), and one independent watch
stream per ``watch()`` call with a bounded buffer (gRPC flow control) instead of one
shared stream feeding unbounded queues.

Failure handling, in one place:

* Transient gRPC failures (``UNAVAILABLE`` or a stream reset by a stopping etcd;
  ``DEADLINE_EXCEEDED`` for reads) are retried with jittered exponential backoff for at
  most ``retry_budget`` seconds, then surface as
  :class:`Unavailable` naming the endpoint. Writes are retried only on ``UNAVAILABLE``;
  when a connection drops after a write was sent the retry may report ``AlreadyExists``,
  ``Conflict`` or ``NotFound`` for a write that did land -- callers re-read on those, as
  they must for any compare-and-swap.
* Once etcd has failed every call for a couple of seconds it counts as down
  (:class:`~controlplane.storage.outage.OutageGate`): calls then fail at once with
  :class:`Unavailable` (one trial call a second goes through) until etcd answers again.
* A compacted revision becomes :class:`Gone` carrying etcd's compacted revision.
* A watch whose stream drops reopens itself from the last delivered revision + 1.
* Settings that cannot work (an https URL without a CA, an unreadable or mismatched TLS
  file, mixed http and https URLs) are an :class:`EtcdConfigError` from the constructor,
  before any connection. A TLS handshake etcd or this client refuses (wrong CA, no or an
  untrusted client certificate) is not retried: it surfaces at once as
  :class:`Unavailable` saying which setting to check.

Every list reads etcd in pages (``page_size`` keys, 500 as kube's) pinned to the first
page's revision, halving a page whose response would exceed ``max_response_bytes``
(:mod:`controlplane.storage.paging`): no range response grows with the collection.

Beyond the Store contract (used by hub leader election, ``controlplane/leader``): writes
may carry :class:`WriteGuard` preconditions on another key (a failed guard raises
:class:`GuardFailed`, not Conflict), ``create`` may attach the key to an etcd lease, and
``grant_lease``/``keep_alive_lease``/``revoke_lease`` manage leases.

Every unary call carries a gRPC deadline (``timeout``). A watch stream is long-lived by
nature; its creation has a deadline and HTTP/2 keepalive pings detect a dead peer.

This module builds etcd requests and reads their responses; :mod:`.calls` holds the channels
and makes each call (retries, outage gate, error mapping), :mod:`.watching` the watch streams.
The hot requests (get, create, an unguarded update) are serialized by :mod:`.wire` and sent
through gRPC's call object by :mod:`.unary`, without protobuf objects or grpc.aio's per-call
task: about a seventh less CPU per lone call (docs/benchmarks.md, "The cost of one etcd call").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from aetcd import rpc
from aetcd.utils import prefix_range_end

from controlplane.lifecycle import Lifecycle
from controlplane.storage.connecting import EtcdClientTls
from controlplane.storage.etcd import wire
from controlplane.storage.etcd.calls import DEFAULT_MAX_RESPONSE_BYTES, EtcdCalls
from controlplane.storage.etcd.maintenance import EtcdMaintenance
from controlplane.storage.etcd.watching import compacted_revision, key_value, watch_range
from controlplane.storage.grpcerrors import RevisionError, StreamEnded
from controlplane.storage.interface import (
    AlreadyExists,
    Conflict,
    FutureRevision,
    Gone,
    KeyValue,
    ListResult,
    NotFound,
    Progress,
    StorageError,
    WatchEvent,
    check_key,
    check_list,
    check_prefix,
)
from controlplane.storage.outage import DEFAULT_TRIP_AFTER
from controlplane.storage.paging import DEFAULT_PAGE_SIZE, read_range


class GuardFailed(StorageError):
    """A write's :class:`WriteGuard` did not hold: the write was not made."""


@dataclass(frozen=True, slots=True)
class WriteGuard:
    """An extra precondition of a write: ``key`` exists with this ``create_revision``.

    Leader election uses it to fence a deposed leader: its writes name the leader key as
    created in its own term, so they fail once the key expired or another replica holds it.
    """

    key: str
    create_revision: int


class EtcdStore(Lifecycle):
    """A :class:`Store` on an etcd cluster; use ``async with`` or ``connect()``/``close()``."""

    def __init__(
        self,
        endpoints: list[str],
        *,
        prefix: str = "/gpufed",
        timeout: float = 10.0,
        retry_budget: float = 10.0,
        tls: EtcdClientTls | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        outage_trip_after: float = DEFAULT_TRIP_AFTER,
    ) -> None:
        self._twin: Callable[[], EtcdStore] = partial(
            EtcdStore,
            endpoints,
            prefix=prefix,
            timeout=timeout,
            retry_budget=retry_budget,
            tls=tls,
            page_size=page_size,
            max_response_bytes=max_response_bytes,
            outage_trip_after=outage_trip_after,
        )
        self._calls = EtcdCalls(
            endpoints,
            timeout=timeout,
            retry_budget=retry_budget,
            tls=tls,
            max_response_bytes=max_response_bytes,
            outage_trip_after=outage_trip_after,
        )
        self._namespace = prefix.rstrip("/")
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        self._page_size = page_size

    # -- lifecycle -----------------------------------------------------------------

    async def connect(self) -> None:
        """Open the channel and check that etcd answers; raise Unavailable if not."""
        self._calls.open()
        await self.ping()

    async def ping(self) -> None:
        """Raise Unavailable unless etcd serves a linearizable read (i.e. has quorum)."""
        await self._read_revision("ping")

    async def close(self) -> None:
        """End every watch and close the channels. Idempotent."""
        await self._calls.close()

    #: ``async with`` connects, and closes on the way out.
    start = connect
    shutdown = close

    def twin(self) -> EtcdStore:
        """An unopened store with this one's settings (endpoints, prefix, TLS, timeouts, limits)
        and a connection of its own. gRPC channels belong to the event loop that opens them:
        another thread's loop needs its twin, opened (on first call) and closed in that loop.
        Like any store, it opens its watch channel only with a first watch."""
        return self._twin()

    @property
    def maintenance(self) -> EtcdMaintenance:
        """etcd's Maintenance calls (sizes, defragmentation, alarms, snapshots) on this store's channel."""
        return EtcdMaintenance(self._calls)

    @property
    def open_channels(self) -> int:
        """How many gRPC channels to etcd this store has open: none before its first call,
        one for its calls, one more once it has watched."""
        return self._calls.open_channels

    # -- reads ---------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue:
        check_key(key)
        response = await self._calls.kv_encoded("get", "Range", wire.range_request(self._full(key)))
        if not response.kvs:
            raise NotFound(f"key {key!r} not found")
        return key_value(response.kvs[0], namespace=self._namespace)

    async def list(
        self,
        prefix: str,
        *,
        revision: int | None = None,
        limit: int = 0,
        start_after: str | None = None,
    ) -> ListResult:
        check_list(prefix, limit=limit)
        start, end = self._range(prefix)
        if start_after is not None:
            start = max(start, self._full(start_after) + b"\0")
        if start >= end:
            at = revision if revision is not None else await self.current_revision()
            return ListResult(items=[], revision=at, more=False)
        first = start

        async def read_page(after: str | None, page_limit: int, at: int) -> ListResult:
            key = first if after is None else max(first, self._full(after) + b"\0")
            request = rpc.RangeRequest(key=key, range_end=end, revision=at, limit=page_limit)
            try:
                response = await self._calls.kv("list", "Range", request)
            except RevisionError as exc:
                raise await self._revision_error(exc, at) from exc.__cause__
            items = [key_value(kv, namespace=self._namespace) for kv in response.kvs]
            more = bool(response.more)
            # etcd counts every key of the range, past the limit too.
            remaining = response.count - len(items) if more else None
            return ListResult(items=items, revision=response.header.revision, more=more, remaining=remaining)

        # Every list, bounded or not, reads etcd in pages pinned to one revision.
        return await read_range(
            read_page, limit=limit, revision=revision, start_after=start_after, page_size=self._page_size
        )

    async def current_revision(self) -> int:
        return await self._read_revision("current_revision")

    # -- writes --------------------------------------------------------------------

    async def create(
        self, key: str, value: bytes, *, lease: int = 0, guards: Sequence[WriteGuard] = ()
    ) -> KeyValue:
        """Store's ``create``; ``lease`` attaches the key to an etcd lease (it goes when the
        lease expires), ``guards`` add preconditions (GuardFailed when one does not hold)."""
        check_key(key)
        encoded = wire.create_txn(self._full(key), value, lease=lease, guards=self._wire_guards(guards))
        response = await self._calls.kv_encoded("create", "Txn", encoded, write=True)
        if not response.succeeded:
            self._raise_failed_guard(response, guards, offset=0)
            raise AlreadyExists(f"key {key!r} already exists")
        revision = response.header.revision
        return KeyValue(key=key, value=value, create_revision=revision, mod_revision=revision)

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, guards: Sequence[WriteGuard] = ()
    ) -> KeyValue:
        check_key(key)
        encoded = wire.update_txn(
            self._full(key), value, expected_revision=expected_revision, guards=self._wire_guards(guards)
        )
        response = await self._calls.kv_encoded("update", "Txn", encoded, write=True)
        if not response.succeeded:
            self._raise_failed_guard(response, guards, offset=1)
            self._raise_failed_compare(key, response, expected_revision)
        previous = response.responses[0].response_put.prev_kv
        return KeyValue(
            key=key,
            value=value,
            create_revision=previous.create_revision,
            mod_revision=response.header.revision,
        )

    async def delete(
        self, key: str, *, expected_revision: int | None = None, guards: Sequence[WriteGuard] = ()
    ) -> KeyValue:
        check_key(key)
        full = self._full(key)
        delete = rpc.DeleteRangeRequest(key=full, prev_kv=True)
        if expected_revision is None and not guards:
            deleted = await self._calls.kv("delete", "DeleteRange", delete, write=True)
            revision = deleted.header.revision
        else:
            own = (
                [rpc.Compare(key=full, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=expected_revision)]
                if expected_revision is not None
                else []
            )
            response = await self._guarded_txn(
                "delete",
                guards,
                compare=own,
                success=[rpc.RequestOp(request_delete_range=delete)],
                failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=full))],
            )
            if not response.succeeded:
                self._raise_failed_guard(response, guards, offset=1)
                self._raise_failed_compare(key, response, expected_revision or 0)
            deleted = response.responses[0].response_delete_range
            revision = response.header.revision
        if not deleted.deleted:
            raise NotFound(f"key {key!r} not found")
        previous = deleted.prev_kvs[0]
        return KeyValue(
            key=key,
            value=previous.value,
            create_revision=previous.create_revision,
            mod_revision=revision,
        )

    async def compact(self, revision: int, *, physical: bool = False) -> None:
        """Compact etcd's history before ``revision``; ``physical``: return once the compacted
        pages are free in the backend (what a defragmentation that follows needs).

        Compaction is cluster-wide: it also forgets history under other prefixes.
        """
        request = rpc.CompactionRequest(revision=revision, physical=physical)
        try:
            await self._calls.kv("compact", "Compact", request, write=True)
        except RevisionError as exc:
            if exc.compacted:
                return  # already compacted at or beyond ``revision``
            raise ValueError(f"cannot compact to revision {revision}: {exc}") from exc.__cause__

    # -- leases --------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> tuple[int, int]:
        """Grant an etcd lease of ``ttl`` seconds; return ``(lease id, granted ttl)``."""
        request = rpc.LeaseGrantRequest(TTL=ttl)
        response = await self._calls.lease("grant_lease", "LeaseGrant", request)
        if response.error:
            raise StorageError(f"etcd at {self._calls.endpoint} refused a lease: {response.error}")
        return int(response.ID), int(response.TTL)

    async def keep_alive_lease(self, lease_id: int) -> int:
        """Renew a lease once; return its remaining TTL in seconds (0: it has expired)."""

        async def once() -> int:
            call = self._calls.lease_stream()
            try:
                async with asyncio.timeout(self._calls.timeout):
                    await call.write(rpc.LeaseKeepAliveRequest(ID=lease_id))
                    response = await call.read()
            finally:
                call.cancel()
            if response is None or not hasattr(response, "TTL"):
                raise StreamEnded(f"etcd at {self._calls.endpoint} ended a lease keep-alive stream")
            return int(response.TTL)

        return await self._calls.call("keep_alive_lease", once)

    async def revoke_lease(self, lease_id: int) -> None:
        """Revoke a lease (its keys go at once); a lease already gone is fine."""
        request = rpc.LeaseRevokeRequest(ID=lease_id)
        try:
            await self._calls.lease("revoke_lease", "LeaseRevoke", request)
        except StorageError as exc:
            if "lease not found" not in str(exc):
                raise

    async def lease_ids(self) -> tuple[int, ...]:
        """Every lease etcd holds (``etcdctl lease list``), whoever granted it."""
        response = await self._calls.lease("lease_ids", "LeaseLeases", rpc.LeaseLeasesRequest())
        return tuple(int(lease.ID) for lease in response.leases)

    # -- watch ---------------------------------------------------------------------

    def watch(
        self, prefix: str, *, from_revision: int, progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        check_prefix(prefix)
        start, end = self._range(prefix)
        return watch_range(
            self._calls, prefix, start=start, end=end, from_revision=from_revision, namespace=self._namespace,
            progress=progress,
        )

    # -- internals -----------------------------------------------------------------

    async def _guarded_txn(
        self,
        op: str,
        guards: Sequence[WriteGuard],
        *,
        compare: Sequence[Any],
        success: Sequence[Any],
        failure: Sequence[Any] = (),
    ) -> Any:
        """Run a write transaction fenced by ``guards`` (a guarded delete; creates and updates
        are encoded by :mod:`.wire`): ``compare`` then one compare per guard;
        on failure ``failure`` then one read per guard (:meth:`_raise_failed_guard` reads them
        from ``offset=len(failure)``)."""
        request = rpc.TxnRequest(
            compare=[*compare, *self._guard_compares(guards)],
            success=list(success),
            failure=[*failure, *self._guard_reads(guards)],
        )
        return await self._calls.kv(op, "Txn", request, write=True)

    def _wire_guards(self, guards: Sequence[WriteGuard]) -> tuple[wire.Guard, ...]:
        """``guards`` as :mod:`.wire` encodes them (full keys)."""
        for guard in guards:
            check_key(guard.key)
        return tuple((self._full(guard.key), guard.create_revision) for guard in guards)

    def _guard_compares(self, guards: Sequence[WriteGuard]) -> tuple[Any, ...]:
        return tuple(
            rpc.Compare(key=key, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=revision)
            for key, revision in self._wire_guards(guards)
        )

    def _guard_reads(self, guards: Sequence[WriteGuard]) -> tuple[Any, ...]:
        """Failure-branch reads that tell a failed guard from a failed key compare."""
        return tuple(
            rpc.RequestOp(request_range=rpc.RangeRequest(key=key, keys_only=True)) for key, _ in self._wire_guards(guards)
        )

    def _raise_failed_guard(self, response: Any, guards: Sequence[WriteGuard], *, offset: int) -> None:
        for index, guard in enumerate(guards):
            kvs = response.responses[offset + index].response_range.kvs
            found = kvs[0].create_revision if kvs else 0
            if found != guard.create_revision:
                raise GuardFailed(
                    f"write guard failed: {guard.key!r} has create revision {found}, "
                    f"the write requires {guard.create_revision}"
                )

    def _full(self, key: str) -> bytes:
        return (self._namespace + key).encode()

    def _range(self, prefix: str) -> tuple[bytes, bytes]:
        # Every key starts with '/', so "" means "<namespace>/": it must not reach into a
        # sibling namespace such as "/gpufed-test".
        start = self._full(prefix or "/")
        return start, prefix_range_end(start)

    def _raise_failed_compare(self, key: str, response: Any, expected_revision: int) -> None:
        current = response.responses[0].response_range.kvs
        if not current:
            raise NotFound(f"key {key!r} not found")
        raise Conflict(f"key {key!r} is at revision {current[0].mod_revision}, expected {expected_revision}")

    async def _read_revision(self, what: str) -> int:
        # A count-only range on the namespace key itself: linearizable, returns no data.
        request = rpc.RangeRequest(key=self._full(""), count_only=True)
        response = await self._calls.kv(what, "Range", request)
        revision: int = response.header.revision
        return revision

    async def _revision_error(self, exc: RevisionError, revision: int) -> Exception:
        if not exc.compacted:
            current = await self._read_revision("current revision")
            return FutureRevision(
                f"revision {revision} is in the future: {exc}", revision=revision, current_revision=current
            )
        compacted = await compacted_revision(self._calls, self._full(""))
        return Gone(
            f"revision {revision} is compacted (compacted revision {compacted})",
            compacted_revision=compacted,
        )



__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "EtcdStore", "GuardFailed", "WriteGuard"]
