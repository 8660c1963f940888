"""Keeps the waste rollups in the hub's store, so a hub restart loses nothing.

In: an :class:`~controlplane.reports.accounting.Accumulator` and a
:class:`~controlplane.storage.interface.Store` (etcd in the hub, memory in tests). Out: the
accumulator's buckets and cursor as keys in the store (``save``), and an accumulator rebuilt
from them (``load``). This is the reports package's only I/O.

Key layout (one document per rollup bucket, plus the held sample)::

    <prefix>minute/<start epoch seconds, 12 digits>/<part, 3 digits>   fine buckets, kept 2,880
    <prefix>hour/<start epoch seconds, 12 digits>/<part, 3 digits>     kept 90 days
    <prefix>cursor/<part, 3 digits>                                    the held sample's rates

The fine buckets are a minute long unless the hub runs with another ``--waste-bucket-length``;
their documents then record their length (``seconds``). A hub loads only fine buckets of its
own length: the others (saved before the length changed) are dropped with one warning, and
deleted unless ``read_only``, as expired ones are; the hour buckets and the cursor do not depend
on the length and are kept, so the hour rollups still cover the time before the change.

A document is the bucket's JSON (:meth:`Accumulator.encode_bucket`) compressed with zlib, and
split into parts of at most ``max_value_bytes`` (default 768 KiB, under etcd's 1.5 MiB request
limit and the 1 MiB budget) -- a typical bucket is one part. ``save`` writes only the buckets
that changed since the last save (the current minute, the current hour and the cursor) and
deletes the documents of buckets that fell out of retention. Writes are compare-and-swap on the
revision last seen; on a conflict the key is re-read and written again (the hub runs one
accounting loop, so a conflict only means our revision cache was stale). A document whose parts
do not decode (a crash between two part writes of the same document) is skipped with a warning
at load: that one bucket is lost, the rest is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Awaitable
from typing import TypeVar

from controlplane.reports.accounting import Accumulator
from controlplane.reports.rollups import BucketId, BucketLengthMismatch
from controlplane.storage.interface import AlreadyExists, Conflict, KeyValue, NotFound, Store

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "/gpufed/reports/waste/"
DEFAULT_MAX_VALUE_BYTES = 768 * 1024
DEFAULT_TIMEOUT = 10.0
_LIST_PAGE = 500
_WRITE_ATTEMPTS = 3
_CURSOR = "cursor"

T = TypeVar("T")


class RollupStore:
    """Saves and loads an accumulator's rollups under ``prefix`` in ``store``."""

    def __init__(
        self,
        store: Store,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        if not prefix.endswith("/"):
            raise ValueError("prefix must end with '/'")
        if max_value_bytes <= 0:
            raise ValueError("max_value_bytes must be positive")
        self._store = store
        self._prefix = prefix
        self._timeout = timeout
        self._max_value_bytes = max_value_bytes
        #: Last known mod_revision per key written or read.
        self._revisions: dict[str, int] = {}
        #: Number of parts each document (by its key prefix) has in the store.
        self._parts: dict[str, int] = {}

    def _doc_prefix(self, bucket_id: BucketId | None) -> str:
        if bucket_id is None:
            return f"{self._prefix}{_CURSOR}/"
        resolution, start = bucket_id
        return f"{self._prefix}{resolution.value}/{start:012d}/"

    async def _call(self, operation: Awaitable[T]) -> T:
        async with asyncio.timeout(self._timeout):
            return await operation

    # -- loading -------------------------------------------------------------------------------

    async def _list_all(self) -> list[KeyValue]:
        items: list[KeyValue] = []
        start_after: str | None = None
        while True:
            page = await self._call(self._store.list(self._prefix, limit=_LIST_PAGE, start_after=start_after))
            items.extend(page.items)
            if not page.more or not page.items:
                return items
            start_after = page.items[-1].key

    async def load(self, accumulator: Accumulator | None = None, *, read_only: bool = False) -> Accumulator:
        """Restore every saved document into ``accumulator`` (a new default one when None).

        Buckets now outside the retention are dropped, and their documents deleted unless
        ``read_only`` (a replica that only serves reports must not write: the leader's sampler
        owns the rollups and removes them itself).
        """
        target = accumulator if accumulator is not None else Accumulator()
        documents: dict[str, list[KeyValue]] = {}
        for kv in await self._list_all():
            doc_prefix, _, part = kv.key.rpartition("/")
            if not part.isdigit():
                continue
            documents.setdefault(f"{doc_prefix}/", []).append(kv)
            self._revisions[kv.key] = kv.mod_revision
        mismatched: dict[int, int] = {}
        for doc_prefix, parts in sorted(documents.items()):
            parts.sort(key=lambda kv: kv.key)
            self._parts[doc_prefix] = len(parts)
            try:
                target.restore(zlib.decompress(b"".join(kv.value for kv in parts)))
            except BucketLengthMismatch as exc:
                mismatched[exc.stored] = mismatched.get(exc.stored, 0) + 1
            except (zlib.error, ValueError, KeyError, TypeError, IndexError) as exc:
                logger.warning("skipping unreadable waste rollup %s: %s", doc_prefix, exc)
        for stored, count in sorted(mismatched.items()):
            logger.warning(
                "dropping %d waste rollup buckets of %d s: this hub's buckets are %d s long"
                " (--waste-bucket-length); the hour rollups keep the time they covered",
                count,
                stored,
                target.bucket_seconds,
            )
        target.finish_restore()
        # Buckets finish_restore dropped as expired are not in the accumulator any more.
        retained = {self._doc_prefix(bucket_id) for bucket_id in target.bucket_ids()}
        retained.add(self._doc_prefix(None))
        stale = [doc_prefix for doc_prefix in documents if doc_prefix not in retained]
        for doc_prefix in [] if read_only else stale:
            await self._delete_document(doc_prefix)
        logger.info(
            "loaded %d waste rollup documents (%d expired ones %s)",
            len(documents) - len(stale),
            len(stale),
            "left to the leader" if read_only else "removed",
        )
        return target

    # -- saving --------------------------------------------------------------------------------

    async def save(self, accumulator: Accumulator) -> int:
        """Write what changed since the last save; return the number of documents written.

        On failure the changes stay pending in ``accumulator`` and the error propagates.
        """
        changes = accumulator.take_changes()
        written = 0
        try:
            for bucket_id in changes.expired:
                await self._delete_document(self._doc_prefix(bucket_id))
            for bucket_id in changes.updated:
                await self._write_document(self._doc_prefix(bucket_id), accumulator.encode_bucket(bucket_id))
                written += 1
            if changes.cursor:
                cursor = accumulator.encode_cursor()
                if cursor is not None:
                    await self._write_document(self._doc_prefix(None), cursor)
                    written += 1
        except BaseException:
            accumulator.requeue(changes)
            raise
        return written

    async def _known_parts(self, doc_prefix: str) -> int:
        known = self._parts.get(doc_prefix)
        if known is None:
            listed = await self._call(self._store.list(doc_prefix))
            for kv in listed.items:
                self._revisions[kv.key] = kv.mod_revision
            known = self._parts[doc_prefix] = len(listed.items)
        return known

    async def _write_document(self, doc_prefix: str, document: bytes) -> None:
        # In a thread (zlib lets go of the interpreter's lock): at 20,000 workloads a minute's
        # document took 0.8 s to compress, with the loop held.
        value = await asyncio.to_thread(zlib.compress, document)
        size = self._max_value_bytes
        parts = [value[i : i + size] for i in range(0, len(value), size)] or [b""]
        previous = await self._known_parts(doc_prefix)
        for index, part in enumerate(parts):
            await self._put(f"{doc_prefix}{index:03d}", part)
        for index in range(len(parts), previous):
            await self._delete(f"{doc_prefix}{index:03d}")
        self._parts[doc_prefix] = len(parts)

    async def _delete_document(self, doc_prefix: str) -> None:
        for index in range(await self._known_parts(doc_prefix)):
            await self._delete(f"{doc_prefix}{index:03d}")
        self._parts[doc_prefix] = 0

    async def _put(self, key: str, value: bytes) -> None:
        for _ in range(_WRITE_ATTEMPTS):
            revision = self._revisions.get(key)
            try:
                if revision is None:
                    kv = await self._call(self._store.create(key, value))
                else:
                    kv = await self._call(self._store.update(key, value, expected_revision=revision))
            except (AlreadyExists, Conflict, NotFound):
                try:
                    self._revisions[key] = (await self._call(self._store.get(key))).mod_revision
                except NotFound:
                    self._revisions.pop(key, None)
                continue
            self._revisions[key] = kv.mod_revision
            return
        raise Conflict(f"could not write {key} after {_WRITE_ATTEMPTS} attempts")

    async def _delete(self, key: str) -> None:
        with contextlib.suppress(NotFound):
            await self._call(self._store.delete(key))
        self._revisions.pop(key, None)


__all__ = ["DEFAULT_PREFIX", "RollupStore"]
