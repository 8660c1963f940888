"""The etcd store's line to etcd: its gRPC channels and stubs, and how one call is made.

In: etcd client URLs, the client TLS settings (:class:`EtcdClientTls`), a per-call deadline, a
retry budget and the outage gate's trip time. Out: :class:`EtcdCalls`, which opens the channels
on first use (a main channel for unary calls and, with the first watch, one without
bandwidth-delay probing for watch streams), hands out the KV, Watch and Lease stubs, and runs
each call through :meth:`EtcdCalls.call`: transient failures are retried with jittered backoff within the budget,
an etcd known to be down fails at once (:class:`~controlplane.storage.outage.OutageGate`), and
the final failure becomes the storage error tree (:mod:`controlplane.storage.grpcerrors`).

:class:`~controlplane.storage.etcd.EtcdStore` builds requests and reads responses; this module
owns everything between a built request and its response.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from aetcd import rpc
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_delay,
    wait_random_exponential,
)

from controlplane.storage.connecting import EtcdClientTls, EtcdConfigError, endpoint_scheme, grpc_target
from controlplane.storage.etcd.unary import Unary, direct_unary
from controlplane.storage.grpcerrors import StreamEnded, is_transient, storage_error
from controlplane.storage.interface import Unavailable
from controlplane.storage.outage import DEFAULT_TRIP_AFTER, OutageGate

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


class EtcdCalls:
    """The channels, stubs and call wrapper of one :class:`EtcdStore`."""

    def __init__(
        self,
        endpoints: list[str],
        *,
        timeout: float,
        retry_budget: float,
        tls: EtcdClientTls | None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        outage_trip_after: float = DEFAULT_TRIP_AFTER,
    ) -> None:
        self._target = grpc_target(endpoints)
        self.endpoint = ",".join(endpoints)
        scheme = endpoint_scheme(endpoints)
        if scheme == "https" and tls is None:
            raise EtcdConfigError(
                f"etcd endpoint {self.endpoint} is https:// but no CA was given: pass --etcd-cafile "
                "(and --etcd-certfile/--etcd-keyfile when etcd checks client certificates)"
            )
        if scheme in ("http", "unix") and tls is not None:
            raise EtcdConfigError(
                f"etcd TLS files were given but the endpoint {self.endpoint} is {scheme}://; use https://"
            )
        self._credentials: Any = tls.channel_credentials() if tls is not None else None
        self.timeout = timeout
        self._retry_budget = retry_budget
        self._channel_options = [*_CHANNEL_OPTIONS, ("grpc.max_receive_message_length", max_response_bytes)]
        self._channel: Any = None
        self._watch_channel: Any = None
        self._kv: Any = None
        #: KV methods that take requests already serialized (:mod:`.wire`), by method name.
        self._kv_encoded: dict[str, Unary] = {}
        self._watch_stub: Any = None
        self._lease_stub: Any = None
        self._maintenance_stub: Any = None
        #: Open watch streams, cancelled by :meth:`close`.
        self.watch_calls: set[Any] = set()
        self.closed = False
        self._gate = OutageGate(trip_after=outage_trip_after)

    # -- channels and stubs ----------------------------------------------------------

    def open(self) -> None:
        """Open the main channel (once); raise Unavailable after :meth:`close`. The watch
        channel opens with the first watch (:attr:`watches`): a store that never watches (the
        leader's lease renewals) has no use for it."""
        if self.closed:
            raise Unavailable(f"the etcd store for {self.endpoint} is closed")
        if self._channel is None:
            self._channel = self._open_channel(self._channel_options)
            self._kv = rpc.KVStub(self._channel)
            self._kv_encoded = {
                method: direct_unary(self._channel, f"/etcdserverpb.KV/{method}", response)
                for method, response in (("Txn", rpc.TxnResponse), ("Range", rpc.RangeResponse))
            }
            self._lease_stub = rpc.LeaseStub(self._channel)
            self._maintenance_stub = rpc.MaintenanceStub(self._channel)

    @property
    def watches(self) -> Any:
        """The Watch stub, on the watch channel (opened on first use)."""
        self.open()
        if self._watch_channel is None:
            self._watch_channel = self._open_channel([*self._channel_options, *_WATCH_CHANNEL_OPTIONS])
            self._watch_stub = rpc.WatchStub(self._watch_channel)
        return self._watch_stub

    @property
    def open_channels(self) -> int:
        """How many gRPC channels are open (0, 1 or 2)."""
        return sum(channel is not None for channel in (self._channel, self._watch_channel))

    def _open_channel(self, options: Sequence[tuple[str, int]]) -> Any:
        if self._credentials is not None:
            return rpc.secure_channel(self._target, self._credentials, options=options)
        return rpc.insecure_channel(self._target, options=options)

    async def close(self) -> None:
        """End every watch and close the channels. Idempotent."""
        self.closed = True
        for call in list(self.watch_calls):
            call.cancel()
        self.watch_calls.clear()
        channels = (self._channel, self._watch_channel)
        self._channel = self._watch_channel = None
        self._kv = self._watch_stub = self._lease_stub = self._maintenance_stub = None
        self._kv_encoded = {}
        for channel in channels:
            if channel is not None:
                await channel.close()

    # -- calls -------------------------------------------------------------------------

    async def kv(self, what: str, method: str, request: Any, *, write: bool = False) -> Any:
        """Call the KV service's ``method`` (``Range``, ``Txn``, ...) with ``request``."""

        def attempt() -> Awaitable[Any]:
            call: Callable[..., Awaitable[Any]] = getattr(self._kv, method)
            return call(request, timeout=self.timeout)

        return await self.call(what, attempt, idempotent=not write)

    async def kv_encoded(self, what: str, method: str, request: bytes, *, write: bool = False) -> Any:
        """:meth:`kv` for ``Txn`` and ``Range`` requests serialized by :mod:`.wire`."""

        def attempt() -> Awaitable[Any]:
            return self._kv_encoded[method](request, timeout=self.timeout)

        return await self.call(what, attempt, idempotent=not write)

    async def lease(self, what: str, method: str, request: Any) -> Any:
        """Call the Lease service's ``method`` with ``request`` (not retried once sent)."""

        def attempt() -> Awaitable[Any]:
            call: Callable[..., Awaitable[Any]] = getattr(self._lease_stub, method)
            return call(request, timeout=self.timeout)

        return await self.call(what, attempt, idempotent=False)

    async def maintenance(self, what: str, method: str, request: Any, *, deadline: float | None = None) -> Any:
        """Call the Maintenance service's ``method`` (``Status``, ``Defragment``, ``Alarm``) with
        ``request``, under a gRPC ``deadline`` in seconds (default: the per-call one); retried like a read."""

        def attempt() -> Awaitable[Any]:
            call: Callable[..., Awaitable[Any]] = getattr(self._maintenance_stub, method)
            return call(request, timeout=deadline or self.timeout)

        return await self.call(what, attempt, idempotent=True)

    def snapshot_stream(self) -> Any:
        """A new Snapshot stream: etcd's whole backend, in chunks (no deadline: it may be large)."""
        self.open()
        return self._maintenance_stub.Snapshot(rpc.SnapshotRequest())

    def lease_stream(self) -> Any:
        """A new LeaseKeepAlive stream."""
        self.open()
        return self._lease_stub.LeaseKeepAlive()

    async def call(self, what: str, attempt: Callable[[], Awaitable[T]], *, idempotent: bool = True) -> T:
        """Run one RPC with retries on transient failures; map the final error.

        The first attempt calls the stub directly: building tenacity's retry state costs
        about as much as a fast etcd call, and almost every call succeeds at once. Only a
        transient failure enters the retry loop, which replays that failure as its own
        first attempt (same logging, backoff and total budget as retrying from the start).
        """
        self.open()
        trial = self._gate.admit()
        started = time.monotonic()
        try:
            result = await attempt()
        except rpc.AioRpcError as exc:
            if not is_transient(exc, idempotent=idempotent):
                raise self.storage_error(what, exc) from exc
            first_failure: BaseException = exc
        except (TimeoutError, StreamEnded) as exc:
            if not is_transient(exc, idempotent=idempotent):
                raise self._timed_out(what) from exc
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
            self.open()  # Unavailable once the store is closed
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
                    "endpoint": self.endpoint,
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
            raise self.storage_error(what, exc) from exc
        except (TimeoutError, StreamEnded) as exc:
            raise self._timed_out(what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _timed_out(self, what: str) -> Unavailable:
        return Unavailable(f"etcd at {self.endpoint} did not answer {what} within {self.timeout:g}s")

    def storage_error(self, what: str, exc: Any) -> Exception:
        return storage_error(what, exc, endpoint=self.endpoint, timeout=self.timeout)
