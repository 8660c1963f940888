"""Fencing: a deposed leader's writes fail, even before it notices it was deposed.

In: the hub's :class:`~controlplane.storage.interface.Store`, the leader key and the
term the writer was elected in (the key's ``create_revision`` when this replica created
it). Out: :class:`FencedStore`, a Store whose reads pass straight through and whose
writes (create, update, delete) succeed only while the leader key still exists with that
create revision -- so once the lease behind the key expired or another replica holds it,
every write raises :class:`Fenced` and nothing is half-written.

On an :class:`~controlplane.storage.etcd.EtcdStore` the check is part of the write's own
etcd transaction (a :class:`~controlplane.storage.etcd.WriteGuard`), hence atomic. On
another store (the in-memory one, for unit tests) the key is read just before the write;
the in-memory store never suspends inside an operation, so check and write are not
interleaved with other tasks there either. Once a write was fenced, the term is over for
good (a new term has a new revision): later writes fail without asking the store.

The hub builds its controllers' ObjectStore over a FencedStore and its API server's over
the plain store, so the API keeps serving on every replica.
"""

from __future__ import annotations

import logging

from controlplane.storage.etcd import EtcdStore, GuardFailed, WriteGuard
from controlplane.storage.interface import Fenced, KeyValue, NotFound, Store
from controlplane.storage.wrapping import WrappedStore

log = logging.getLogger(__name__)


class FencedStore(WrappedStore):
    """A :class:`Store` whose writes hold only while ``guard_key`` has ``create_revision == term``;
    reads (get, list, watch, the current revision) pass straight through."""

    def __init__(self, store: Store, *, guard_key: str, term: int) -> None:
        if term <= 0:
            raise ValueError(f"a leadership term is a positive etcd revision, got {term}")
        super().__init__(store)
        self._guard = WriteGuard(key=guard_key, create_revision=term)
        self._fenced = False

    @property
    def term(self) -> int:
        return self._guard.create_revision

    @property
    def fenced(self) -> bool:
        """True once a write found the term over."""
        return self._fenced

    async def compact(self, revision: int) -> None:
        await self._check_term()
        await self.inner.compact(revision)

    async def close(self) -> None:
        """Nothing to release: the wrapped store belongs to its creator."""

    # -- fenced writes -----------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        store = self.inner
        if isinstance(store, EtcdStore):
            self._check_not_fenced()
            try:
                return await store.create(key, value, guards=(self._guard,))
            except GuardFailed as exc:
                raise self._deposed() from exc
        await self._check_term()
        return await store.create(key, value)

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        store = self.inner
        if isinstance(store, EtcdStore):
            self._check_not_fenced()
            try:
                return await store.update(key, value, expected_revision=expected_revision, guards=(self._guard,))
            except GuardFailed as exc:
                raise self._deposed() from exc
        await self._check_term()
        return await store.update(key, value, expected_revision=expected_revision)

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        store = self.inner
        if isinstance(store, EtcdStore):
            self._check_not_fenced()
            try:
                return await store.delete(key, expected_revision=expected_revision, guards=(self._guard,))
            except GuardFailed as exc:
                raise self._deposed() from exc
        await self._check_term()
        return await store.delete(key, expected_revision=expected_revision)

    # -- internals ---------------------------------------------------------------------

    def _check_not_fenced(self) -> None:
        if self._fenced:
            raise Fenced(self._message())

    async def _check_term(self) -> None:
        self._check_not_fenced()
        try:
            holder = await self.inner.get(self._guard.key)
        except NotFound as exc:
            raise self._deposed() from exc
        if holder.create_revision != self._guard.create_revision:
            raise self._deposed()

    def _deposed(self) -> Fenced:
        if not self._fenced:
            log.warning("leadership term %d is over: refusing this replica's writes", self.term)
        self._fenced = True
        return Fenced(self._message())

    def _message(self) -> str:
        return (
            f"this hub replica's leadership term {self.term} is over (leader key {self._guard.key!r} "
            "expired or is held by another replica): write refused"
        )
