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
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from aetcd import rpc
from aetcd.utils import prefix_range_end
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_delay,
    wait_random_exponential,
)

from controlplane.storage.connecting import EtcdClientTls, EtcdConfigError, endpoint_scheme, grpc_target
from controlplane.storage.grpcerrors import (
    RevisionError,
    StreamEnded,
    is_transient,
    storage_error,
)
from controlplane.storage.interface import (
    AlreadyExists,
    Conflict,
    EventType,
    FutureRevision,
    Gone,
    KeyValue,
    ListResult,
    NotFound,
    StorageError,
    Unavailable,
    WatchEvent,
)
from controlplane.storage.outage import DEFAULT_TRIP_AFTER, OutageGate
from controlplane.storage.paging import DEFAULT_PAGE_SIZE, read_range

logger = logging.getLogger(__name__)

T = TypeVar("T")


#: gRPC channel options: reconnect quickly after an etcd restart and notice dead peers on
#: idle watch streams (etcd refuses pings more often than every 5 s). The receive limit
#: (``max_response_bytes``) is added per store.
_CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
]
#: The largest etcd response the hub accepts by default (gRPC's own 4 MiB default is a
#: few thousand pods). etcd itself sends up to 2 GiB; lists are read in pages that shrink
#: to fit under this (:mod:`controlplane.storage.paging`).
DEFAULT_MAX_RESPONSE_BYTES = 512 * 1024 * 1024
#: Watch streams get a channel of their own without gRPC's bandwidth-delay probing: with it,
#: the receive window of a stream grows to megabytes on a fast link, and every watch whose
#: consumer stops reading (a stalled API client) would hold that much of etcd's events in
#: memory. At the default 64 KiB window a paused stream holds next to nothing, while ranges
#: and other unary calls keep the probing (and the throughput) on the main channel.
_WATCH_CHANNEL_OPTIONS: list[tuple[str, int]] = [("grpc.http2.bdp_probe", 0)]




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


def _check_key(key: str) -> None:
    if not key.startswith("/"):
        raise ValueError(f"storage keys start with '/', got {key!r}")


def _check_prefix(prefix: str) -> None:
    if prefix and not prefix.startswith("/"):
        raise ValueError(f"storage key prefixes are empty or start with '/', got {prefix!r}")


class EtcdStore:
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
        self._target = grpc_target(endpoints)
        self._endpoint = ",".join(endpoints)
        scheme = endpoint_scheme(endpoints)
        if scheme == "https" and tls is None:
            raise EtcdConfigError(
                f"etcd endpoint {self._endpoint} is https:// but no CA was given: pass --etcd-cafile "
                "(and --etcd-certfile/--etcd-keyfile when etcd checks client certificates)"
            )
        if scheme == "http" and tls is not None:
            raise EtcdConfigError(
                f"etcd TLS files were given but the endpoint {self._endpoint} is http://; use https://"
            )
        self._credentials: Any = tls.channel_credentials() if tls is not None else None
        self._namespace = prefix.rstrip("/")
        self._timeout = timeout
        self._retry_budget = retry_budget
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        self._page_size = page_size
        self._channel_options = [*_CHANNEL_OPTIONS, ("grpc.max_receive_message_length", max_response_bytes)]
        self._channel: Any = None
        self._watch_channel: Any = None
        self._kv: Any = None
        self._watch_stub: Any = None
        self._lease_stub: Any = None
        self._watch_calls: set[Any] = set()
        self._closed = False
        self._gate = OutageGate(trip_after=outage_trip_after)

    # -- lifecycle -----------------------------------------------------------------

    async def connect(self) -> None:
        """Open the channel and check that etcd answers; raise Unavailable if not."""
        self._stubs()
        await self.ping()

    async def ping(self) -> None:
        """Raise Unavailable unless etcd serves a linearizable read (i.e. has quorum)."""
        await self._read_revision("ping")

    async def close(self) -> None:
        """End every watch and close the channel. Idempotent."""
        self._closed = True
        for call in list(self._watch_calls):
            call.cancel()
        self._watch_calls.clear()
        channels = (self._channel, self._watch_channel)
        self._channel = self._watch_channel = None
        self._kv = self._watch_stub = self._lease_stub = None
        for channel in channels:
            if channel is not None:
                await channel.close()

    async def __aenter__(self) -> EtcdStore:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- reads ---------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue:
        _check_key(key)
        request = rpc.RangeRequest(key=self._full(key))
        response = await self._call("get", lambda: self._kv.Range(request, timeout=self._timeout))
        if not response.kvs:
            raise NotFound(f"key {key!r} not found")
        return self._key_value(response.kvs[0])

    async def list(
        self,
        prefix: str,
        *,
        revision: int | None = None,
        limit: int = 0,
        start_after: str | None = None,
    ) -> ListResult:
        _check_prefix(prefix)
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
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
                response = await self._call("list", lambda: self._kv.Range(request, timeout=self._timeout))
            except RevisionError as exc:
                raise await self._revision_error(exc, at) from exc.__cause__
            items = [self._key_value(kv) for kv in response.kvs]
            return ListResult(items=items, revision=response.header.revision, more=bool(response.more))

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
        _check_key(key)
        full = self._full(key)
        request = rpc.TxnRequest(
            compare=[
                rpc.Compare(key=full, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=0),
                *self._guard_compares(guards),
            ],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=full, value=value, lease=lease))],
            failure=[*self._guard_reads(guards)],
        )
        response = await self._write("create", lambda: self._kv.Txn(request, timeout=self._timeout))
        if not response.succeeded:
            self._raise_failed_guard(response, guards, offset=0)
            raise AlreadyExists(f"key {key!r} already exists")
        revision = response.header.revision
        return KeyValue(key=key, value=value, create_revision=revision, mod_revision=revision)

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, guards: Sequence[WriteGuard] = ()
    ) -> KeyValue:
        _check_key(key)
        full = self._full(key)
        request = rpc.TxnRequest(
            compare=[
                # A missing key has mod_revision 0; never let an update create it.
                rpc.Compare(key=full, target=rpc.Compare.VERSION, result=rpc.Compare.GREATER, version=0),
                rpc.Compare(
                    key=full,
                    target=rpc.Compare.MOD,
                    result=rpc.Compare.EQUAL,
                    mod_revision=expected_revision,
                ),
                *self._guard_compares(guards),
            ],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=full, value=value, prev_kv=True))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=full)), *self._guard_reads(guards)],
        )
        response = await self._write("update", lambda: self._kv.Txn(request, timeout=self._timeout))
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
        _check_key(key)
        full = self._full(key)
        delete = rpc.DeleteRangeRequest(key=full, prev_kv=True)
        if expected_revision is None and not guards:
            deleted = await self._write("delete", lambda: self._kv.DeleteRange(delete, timeout=self._timeout))
            revision = deleted.header.revision
        else:
            compare = self._guard_compares(guards)
            if expected_revision is not None:
                own = rpc.Compare(
                    key=full, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=expected_revision
                )
                compare = (own, *compare)
            request = rpc.TxnRequest(
                compare=compare,
                success=[rpc.RequestOp(request_delete_range=delete)],
                failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=full)), *self._guard_reads(guards)],
            )
            response = await self._write("delete", lambda: self._kv.Txn(request, timeout=self._timeout))
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

    async def compact(self, revision: int) -> None:
        """Compact etcd's history before ``revision``.

        Compaction is cluster-wide: it also forgets history under other prefixes.
        """
        request = rpc.CompactionRequest(revision=revision, physical=False)
        try:
            await self._write("compact", lambda: self._kv.Compact(request, timeout=self._timeout))
        except RevisionError as exc:
            if exc.compacted:
                return  # already compacted at or beyond ``revision``
            raise ValueError(f"cannot compact to revision {revision}: {exc}") from exc.__cause__

    # -- leases --------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> tuple[int, int]:
        """Grant an etcd lease of ``ttl`` seconds; return ``(lease id, granted ttl)``."""
        request = rpc.LeaseGrantRequest(TTL=ttl)
        response = await self._write("grant_lease", lambda: self._leases().LeaseGrant(request, timeout=self._timeout))
        if response.error:
            raise StorageError(f"etcd at {self._endpoint} refused a lease: {response.error}")
        return int(response.ID), int(response.TTL)

    async def keep_alive_lease(self, lease_id: int) -> int:
        """Renew a lease once; return its remaining TTL in seconds (0: it has expired)."""

        async def once() -> int:
            call = self._leases().LeaseKeepAlive()
            try:
                async with asyncio.timeout(self._timeout):
                    await call.write(rpc.LeaseKeepAliveRequest(ID=lease_id))
                    response = await call.read()
            finally:
                call.cancel()
            if response is None or not hasattr(response, "TTL"):
                raise StreamEnded(f"etcd at {self._endpoint} ended a lease keep-alive stream")
            return int(response.TTL)

        return await self._call("keep_alive_lease", once)

    async def revoke_lease(self, lease_id: int) -> None:
        """Revoke a lease (its keys go at once); a lease already gone is fine."""
        request = rpc.LeaseRevokeRequest(ID=lease_id)
        try:
            await self._write("revoke_lease", lambda: self._leases().LeaseRevoke(request, timeout=self._timeout))
        except StorageError as exc:
            if "lease not found" not in str(exc):
                raise

    # -- watch ---------------------------------------------------------------------

    def watch(self, prefix: str, *, from_revision: int) -> AsyncIterator[WatchEvent]:
        _check_prefix(prefix)
        return self._watch(prefix, from_revision)

    async def _watch(self, prefix: str, from_revision: int) -> AsyncIterator[WatchEvent]:
        start, end = self._range(prefix)
        next_revision = max(from_revision, 1)
        while True:
            call: Any = None
            try:
                call, responses = await self._open_watch(start, end, next_revision)
                async for response in responses:
                    if response.compact_revision:
                        raise Gone(
                            f"watch on {prefix!r} from revision {next_revision}: history before "
                            f"{response.compact_revision} is compacted",
                            compacted_revision=response.compact_revision,
                        )
                    if response.canceled:
                        raise StorageError(
                            f"etcd at {self._endpoint} cancelled the watch on {prefix!r}: "
                            f"{response.cancel_reason or 'no reason given'}"
                        )
                    if not response.events:
                        # A progress notification: etcd has sent every event up to
                        # header.revision, so a reconnect may start after it.
                        next_revision = max(next_revision, response.header.revision + 1)
                    batch = deque(self._watch_event(raw) for raw in response.events)
                    # Keep neither the response nor a delivered event while the consumer is
                    # busy: a watcher that stops reading then holds only what it has not taken.
                    del response
                    while batch:
                        next_revision = batch[0].kv.mod_revision + 1
                        yield batch.popleft()
                # The server ended the stream cleanly (it does so when shutting down).
                logger.info(
                    "etcd ended a watch stream; reopening",
                    extra={"prefix": prefix, "revision": next_revision},
                )
            except rpc.AioRpcError as exc:
                if not is_transient(exc, idempotent=True):
                    raise self._storage_error("watch", exc) from exc
                if self._closed:
                    return
                logger.info(
                    "etcd watch stream dropped; reopening",
                    extra={"prefix": prefix, "revision": next_revision, "error": exc.details()},
                )
            except Unavailable:
                if self._closed:
                    return
                raise
            except asyncio.CancelledError:
                task = asyncio.current_task()
                # close() cancels the gRPC call, which surfaces here as CancelledError; a
                # cancellation of this task itself must propagate.
                if self._closed and task is not None and not task.cancelling():
                    return
                raise
            finally:
                if call is not None:
                    self._watch_calls.discard(call)
                    call.cancel()
            if self._closed:
                return
            # Do not spin if the server keeps dropping streams right after creating them.
            await asyncio.sleep(random.uniform(0.05, 0.2))

    async def _open_watch(self, start: bytes, end: bytes, revision: int) -> tuple[Any, AsyncIterator[Any]]:
        """Open a watch stream at ``revision`` and wait for etcd to confirm it."""
        request = rpc.WatchRequest(
            create_request=rpc.WatchCreateRequest(
                key=start, range_end=end, start_revision=revision, prev_kv=True, progress_notify=True
            )
        )

        async def open_once() -> tuple[Any, AsyncIterator[Any]]:
            call = self._stubs()[1].Watch()
            self._watch_calls.add(call)
            try:
                async with asyncio.timeout(self._timeout):
                    await call.write(request)
                    responses: AsyncIterator[Any] = aiter(call)
                    first = await anext(responses)
            except StopAsyncIteration:
                self._watch_calls.discard(call)
                raise StreamEnded(f"etcd at {self._endpoint} closed a watch stream at once") from None
            except BaseException:
                self._watch_calls.discard(call)
                call.cancel()
                raise
            if not first.created:
                self._watch_calls.discard(call)
                call.cancel()
                raise StorageError(f"etcd at {self._endpoint} answered a watch without creating it")
            return call, responses

        return await self._call("watch", open_once)

    # -- internals -----------------------------------------------------------------

    def _stubs(self) -> tuple[Any, Any]:
        if self._closed:
            raise Unavailable(f"the etcd store for {self._endpoint} is closed")
        if self._channel is None:
            self._channel = self._open_channel(self._channel_options)
            self._watch_channel = self._open_channel([*self._channel_options, *_WATCH_CHANNEL_OPTIONS])
            self._kv = rpc.KVStub(self._channel)
            self._watch_stub = rpc.WatchStub(self._watch_channel)
            self._lease_stub = rpc.LeaseStub(self._channel)
        return self._kv, self._watch_stub

    def _open_channel(self, options: Sequence[tuple[str, int]]) -> Any:
        if self._credentials is not None:
            return rpc.secure_channel(self._target, self._credentials, options=options)
        return rpc.insecure_channel(self._target, options=options)

    def _leases(self) -> Any:
        self._stubs()
        return self._lease_stub

    def _guard_compares(self, guards: Sequence[WriteGuard]) -> tuple[Any, ...]:
        for guard in guards:
            _check_key(guard.key)
        return tuple(
            rpc.Compare(
                key=self._full(guard.key),
                target=rpc.Compare.CREATE,
                result=rpc.Compare.EQUAL,
                create_revision=guard.create_revision,
            )
            for guard in guards
        )

    def _guard_reads(self, guards: Sequence[WriteGuard]) -> tuple[Any, ...]:
        """Failure-branch reads that tell a failed guard from a failed key compare."""
        return tuple(
            rpc.RequestOp(request_range=rpc.RangeRequest(key=self._full(g.key), keys_only=True)) for g in guards
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

    def _key_value(self, kv: Any) -> KeyValue:
        return KeyValue(
            key=kv.key.decode()[len(self._namespace) :],
            value=kv.value,
            create_revision=kv.create_revision,
            mod_revision=kv.mod_revision,
        )

    def _watch_event(self, raw: Any) -> WatchEvent:
        kv = raw.kv
        key = kv.key.decode()[len(self._namespace) :]
        if raw.type == rpc.Event.DELETE:
            # prev_kv is absent only if the previous version was compacted already.
            previous = raw.prev_kv
            return WatchEvent(
                type=EventType.DELETE,
                kv=KeyValue(
                    key=key,
                    value=previous.value,
                    create_revision=previous.create_revision,
                    mod_revision=kv.mod_revision,
                ),
            )
        return WatchEvent(
            type=EventType.PUT,
            kv=KeyValue(
                key=key,
                value=kv.value,
                create_revision=kv.create_revision,
                mod_revision=kv.mod_revision,
            ),
            created=kv.create_revision == kv.mod_revision,
        )

    def _raise_failed_compare(self, key: str, response: Any, expected_revision: int) -> None:
        current = response.responses[0].response_range.kvs
        if not current:
            raise NotFound(f"key {key!r} not found")
        raise Conflict(f"key {key!r} is at revision {current[0].mod_revision}, expected {expected_revision}")

    async def _read_revision(self, what: str) -> int:
        # A count-only range on the namespace key itself: linearizable, returns no data.
        request = rpc.RangeRequest(key=self._full(""), count_only=True)
        response = await self._call(what, lambda: self._kv.Range(request, timeout=self._timeout))
        revision: int = response.header.revision
        return revision

    async def _revision_error(self, exc: RevisionError, revision: int) -> Exception:
        if not exc.compacted:
            current = await self._read_revision("current revision")
            return FutureRevision(f"revision {revision} is in the future: {exc}", current_revision=current)
        compacted = await self._compacted_revision()
        return Gone(
            f"revision {revision} is compacted (compacted revision {compacted})",
            compacted_revision=compacted,
        )

    async def _compacted_revision(self) -> int:
        """etcd's compacted revision, known to be > 1 (a read below it just failed).

        etcd has no call that reports it, but a watch from revision 1 is answered with it.
        """
        start = self._full("")
        call, responses = await self._open_watch(start, prefix_range_end(start), 1)
        try:
            async with asyncio.timeout(self._timeout):
                async for response in responses:
                    if response.compact_revision:
                        revision: int = response.compact_revision
                        return revision
        finally:
            self._watch_calls.discard(call)
            call.cancel()
        raise StorageError(f"etcd at {self._endpoint} did not report its compacted revision")

    async def _write(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        return await self._call(what, attempt, idempotent=False)

    async def _call(self, what: str, attempt: Callable[[], Awaitable[T]], *, idempotent: bool = True) -> T:
        """Run one RPC with retries on transient failures; map the final error.

        The first attempt calls the stub directly: building tenacity's retry state costs
        about as much as a fast etcd call, and almost every call succeeds at once. Only a
        transient failure enters the retry loop, which replays that failure as its own
        first attempt (same logging, backoff and total budget as retrying from the start).
        """
        self._stubs()
        trial = self._gate.admit()
        started = time.monotonic()
        try:
            result = await attempt()
        except rpc.AioRpcError as exc:
            if not is_transient(exc, idempotent=idempotent):
                raise self._storage_error(what, exc) from exc
            first_failure: BaseException = exc
        except (TimeoutError, StreamEnded) as exc:
            if not is_transient(exc, idempotent=idempotent):
                raise Unavailable(
                    f"etcd at {self._endpoint} did not answer {what} within {self._timeout:g}s"
                ) from exc
            first_failure = exc
        else:
            self._gate.succeeded()
            return result
        finally:
            if trial:
                self._gate.end_trial()
        if self._gate.failed() or trial:
            # etcd is known to be down: fail now rather than retry for the whole budget.
            raise self._gate.unavailable() from first_failure
        return await self._retry(
            what, attempt, idempotent=idempotent, first_failure=first_failure,
            budget=self._retry_budget - (time.monotonic() - started),
        )

    async def _retry(
        self,
        what: str,
        attempt: Callable[[], Awaitable[T]],
        *,
        idempotent: bool,
        first_failure: BaseException,
        budget: float,
    ) -> T:
        """The retry loop after ``first_failure``, within what is left of the budget."""
        replayed: list[BaseException] = [first_failure]

        async def trial_call() -> T:
            if replayed:
                raise replayed.pop()
            if self._gate.down:  # another call found etcd down meanwhile
                raise self._gate.unavailable()
            try:
                result = await attempt()
            except Exception as exc:
                if is_transient(exc, idempotent=idempotent) and self._gate.failed():
                    raise self._gate.unavailable() from exc
                raise
            self._gate.succeeded()
            return result

        def log_retry(state: RetryCallState) -> None:
            # DEBUG: every caller retries during a blip, and an outage long enough to matter is
            # logged once, as a warning, by the outage gate (one line per call would flood the log).
            error = state.outcome.exception() if state.outcome is not None else None
            logger.debug(
                "etcd call failed, retrying",
                extra={
                    "call": what,
                    "endpoint": self._endpoint,
                    "attempt": state.attempt_number,
                    "error": str(error),
                },
            )

        try:
            async for trial in AsyncRetrying(
                stop=stop_after_delay(max(budget, 0.0)),
                wait=wait_random_exponential(multiplier=0.05, max=1.0),
                retry=retry_if_exception(lambda exc: is_transient(exc, idempotent=idempotent)),
                before_sleep=log_retry,
                reraise=True,
            ):
                with trial:
                    return await trial_call()
        except rpc.AioRpcError as exc:
            raise self._storage_error(what, exc) from exc
        except (TimeoutError, StreamEnded) as exc:
            raise Unavailable(
                f"etcd at {self._endpoint} did not answer {what} within {self._timeout:g}s"
            ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _storage_error(self, what: str, exc: Any) -> Exception:
        return storage_error(what, exc, endpoint=self._endpoint, timeout=self._timeout)
