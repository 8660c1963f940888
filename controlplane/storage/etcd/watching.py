"""The etcd store's watches: one etcd watch stream per ``watch()``, reopened where it broke.

In: an :class:`~controlplane.storage.etcd.calls.EtcdCalls` (channels and call wrapper), the key
range to watch and the revision to start from. Out: :class:`WatchEvent` values in revision
order (DELETE events carry the deleted value, read at the revision before the delete), :class:`Gone` once the
start revision is compacted, and etcd's compacted revision when a read found one
(:func:`compacted_revision`, which etcd reports only to a watch).

The watch does not ask etcd for ``prev_kv``: etcd would then read every event's previous value
from its backend (one range per event and watcher) and send it along, while only a DELETE needs
it; those are rare, and their previous values are read here, one range each, when they come.

A stream that etcd ends or that drops on a transient failure is reopened from the last
delivered revision + 1 (or past the last progress notification). Events are handed over one at
a time and not kept once delivered, so a consumer that stops reading holds only what it has not
taken, and gRPC flow control stops the stream.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from aetcd import rpc
from aetcd.utils import prefix_range_end

from controlplane.storage.etcd.calls import EtcdCalls
from controlplane.storage.grpcerrors import RevisionError, StreamEnded, is_transient
from controlplane.storage.interface import (
    EventType,
    Gone,
    KeyValue,
    Progress,
    StorageError,
    Unavailable,
    WatchEvent,
)

logger = logging.getLogger(__name__)

#: At most this many reads of deleted values in flight per watch: a namespace deleted at once
#: brings thousands of DELETE events in a few responses, and each needs one read.
MAX_CONCURRENT_DELETED_READS = 32


def key_value(kv: Any, *, namespace: str) -> KeyValue:
    """An etcd ``KeyValue`` message as the store's, its key without the store's namespace."""
    return KeyValue(
        key=kv.key.decode()[len(namespace) :],
        value=kv.value,
        create_revision=kv.create_revision,
        mod_revision=kv.mod_revision,
    )


def watch_event(raw: Any, *, namespace: str, previous: Any = None) -> WatchEvent:
    """The store's event of etcd's ``raw``; ``previous``: a DELETE's deleted ``KeyValue`` (None:
    the value was compacted away)."""
    kv = raw.kv
    if raw.type == rpc.Event.DELETE:
        return WatchEvent(
            type=EventType.DELETE,
            kv=KeyValue(
                key=kv.key.decode()[len(namespace) :],
                value=previous.value if previous is not None else b"",
                create_revision=previous.create_revision if previous is not None else 0,
                mod_revision=kv.mod_revision,
            ),
        )
    return WatchEvent(
        type=EventType.PUT,
        kv=key_value(kv, namespace=namespace),
        created=kv.create_revision == kv.mod_revision,
    )


async def deleted_values(calls: EtcdCalls, events: Any) -> dict[int, Any]:
    """The value each DELETE among ``events`` deleted (by index), read at the revision before
    the delete; a value compacted away since is left out."""
    deletes = [(index, raw.kv) for index, raw in enumerate(events) if raw.type == rpc.Event.DELETE]
    if not deletes:
        return {}

    reading = asyncio.Semaphore(MAX_CONCURRENT_DELETED_READS)

    async def before(kv: Any) -> Any:
        request = rpc.RangeRequest(key=kv.key, revision=kv.mod_revision - 1)
        try:
            async with reading:
                response = await calls.kv("watch", "Range", request)
        except RevisionError:
            return None
        return response.kvs[0] if response.kvs else None

    found = await asyncio.gather(*(before(kv) for _, kv in deletes))
    return {index: value for (index, _), value in zip(deletes, found, strict=True) if value is not None}


async def watch_range(
    calls: EtcdCalls, prefix: str, *, start: bytes, end: bytes, from_revision: int, namespace: str,
    progress: Progress | None = None,
) -> AsyncIterator[WatchEvent]:
    """Every change to keys in ``[start, end)`` from ``from_revision`` on, until the store closes;
    ``progress`` is told the revision of each progress notification."""
    next_revision = max(from_revision, 1)
    while True:
        call: Any = None
        try:
            call, responses = await open_watch(calls, start, end, next_revision)
            async for response in responses:
                if response.compact_revision:
                    raise Gone(
                        f"watch on {prefix!r} from revision {next_revision}: history before "
                        f"{response.compact_revision} is compacted",
                        compacted_revision=response.compact_revision,
                    )
                if response.canceled:
                    raise StorageError(
                        f"etcd at {calls.endpoint} cancelled the watch on {prefix!r}: "
                        f"{response.cancel_reason or 'no reason given'}"
                    )
                if not response.events:
                    # A progress notification: etcd has sent every event up to
                    # header.revision, so a reconnect may start after it.
                    next_revision = max(next_revision, response.header.revision + 1)
                    if progress is not None:
                        progress(response.header.revision)
                previous = await deleted_values(calls, response.events)
                batch = deque(
                    watch_event(raw, namespace=namespace, previous=previous.get(index))
                    for index, raw in enumerate(response.events)
                )
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
                raise calls.storage_error("watch", exc) from exc
            if calls.closed:
                return
            logger.info(
                "etcd watch stream dropped; reopening",
                extra={"prefix": prefix, "revision": next_revision, "error": exc.details()},
            )
        except Unavailable:
            if calls.closed:
                return
            raise
        except asyncio.CancelledError:
            task = asyncio.current_task()
            # close() cancels the gRPC call, which surfaces here as CancelledError; a
            # cancellation of this task itself must propagate.
            if calls.closed and task is not None and not task.cancelling():
                return
            raise
        finally:
            if call is not None:
                calls.watch_calls.discard(call)
                call.cancel()
        if calls.closed:
            return
        # Do not spin if the server keeps dropping streams right after creating them.
        await asyncio.sleep(random.uniform(0.05, 0.2))


async def open_watch(calls: EtcdCalls, start: bytes, end: bytes, revision: int) -> tuple[Any, AsyncIterator[Any]]:
    """Open a watch stream at ``revision`` and wait for etcd to confirm it."""
    request = rpc.WatchRequest(
        create_request=rpc.WatchCreateRequest(
            key=start, range_end=end, start_revision=revision, progress_notify=True
        )
    )

    async def open_once() -> tuple[Any, AsyncIterator[Any]]:
        call = calls.watches.Watch()
        calls.watch_calls.add(call)
        try:
            async with asyncio.timeout(calls.timeout):
                await call.write(request)
                responses: AsyncIterator[Any] = aiter(call)
                first = await anext(responses)
        except StopAsyncIteration:
            calls.watch_calls.discard(call)
            raise StreamEnded(f"etcd at {calls.endpoint} closed a watch stream at once") from None
        except BaseException:
            calls.watch_calls.discard(call)
            call.cancel()
            raise
        if not first.created:
            calls.watch_calls.discard(call)
            call.cancel()
            raise StorageError(f"etcd at {calls.endpoint} answered a watch without creating it")
        return call, responses

    return await calls.call("watch", open_once)


async def compacted_revision(calls: EtcdCalls, start: bytes) -> int:
    """etcd's compacted revision, known to be > 1 (a read below it just failed).

    etcd has no call that reports it, but a watch from revision 1 is answered with it.
    """
    call, responses = await open_watch(calls, start, prefix_range_end(start), 1)
    try:
        async with asyncio.timeout(calls.timeout):
            async for response in responses:
                if response.compact_revision:
                    revision: int = response.compact_revision
                    return revision
    finally:
        calls.watch_calls.discard(call)
        call.cancel()
    raise StorageError(f"etcd at {calls.endpoint} did not report its compacted revision")
