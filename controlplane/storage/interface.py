"""The one storage contract every gpufed store implements.

The hub keeps every object in etcd; unit tests and simulated member clusters keep
them in memory. Both implement :class:`Store`, and both pass the same contract tests
(``tests/storage/test_contract.py``). Values are opaque bytes (the API server stores
JSON); a key's ``mod_revision`` is the object's ``resourceVersion``.

Errors form one tree rooted at :class:`StorageError`; the API server maps each to a
Kubernetes ``Status`` in one place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable


class StorageError(Exception):
    """Base of every error a store raises."""


class NotFound(StorageError):
    """The key does not exist (or did not at the requested revision)."""


class AlreadyExists(StorageError):
    """create() found the key already present."""


class Conflict(StorageError):
    """A compare-and-swap precondition (expected revision) did not hold."""


class Gone(StorageError):
    """The requested revision has been compacted away; the caller must relist."""

    def __init__(self, message: str, *, compacted_revision: int) -> None:
        super().__init__(message)
        self.compacted_revision = compacted_revision


class Unavailable(StorageError):
    """The backing store cannot be reached (after retries)."""


class FutureRevision(StorageError, ValueError):
    """A read named a revision (``revision``) the store has not reached yet (``current_revision``)."""

    def __init__(self, message: str, *, revision: int, current_revision: int) -> None:
        super().__init__(message)
        self.revision = revision
        self.current_revision = current_revision


class TooLarge(StorageError):
    """The store refused a write because the value (or the request) is over its size limit."""


class NoSpace(StorageError):
    """The store refused a write because its database reached its space quota (etcd's NOSPACE
    alarm is raised); reads and deletes still work. The message is the store's own."""


class Fenced(StorageError):
    """A leader-only write was refused because the writer's leadership term is over.

    Nothing was written. Raised by the fenced store the controllers write through.
    """


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int


@dataclass(frozen=True, slots=True)
class ListResult:
    items: list[KeyValue]
    #: The store revision the list was read at (use it as the list's resourceVersion).
    revision: int
    #: True when ``limit`` cut the list short; continue with ``start_after=items[-1].key``.
    more: bool
    #: When ``more``: how many keys under the prefix come after ``items`` at ``revision`` (kube's
    #: ``remainingItemCount``, from the etcd range's own ``count``); None otherwise.
    remaining: int | None = None


class EventType(StrEnum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    #: For PUT the new value; for DELETE the last value before deletion,
    #: with ``mod_revision`` set to the revision of the delete.
    kv: KeyValue
    #: True when a PUT created the key (no previous value).
    created: bool = False


def check_key(key: str) -> None:
    """Raise ValueError unless ``key`` is a storage key: every key starts with ``/`` (in every
    store alike, so code tested on one does not fail on another)."""
    if not key.startswith("/"):
        raise ValueError(f"storage keys start with '/', got {key!r}")


def check_prefix(prefix: str) -> None:
    """Raise ValueError unless ``prefix`` is empty (every key) or starts with ``/``."""
    if prefix and not prefix.startswith("/"):
        raise ValueError(f"storage key prefixes are empty or start with '/', got {prefix!r}")


def check_list(prefix: str, *, limit: int) -> None:
    """Raise ValueError unless ``list``'s arguments are: a prefix as :func:`check_prefix` wants
    and a ``limit`` of 0 (none) or more."""
    check_prefix(prefix)
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")


#: Told a store revision up to which a watch has handed over every event (see :meth:`Store.watch`).
Progress = Callable[[int], None]


@runtime_checkable
class Store(Protocol):
    async def get(self, key: str) -> KeyValue:
        """Return the current value; raise NotFound."""
        ...

    async def list(
        self,
        prefix: str,
        *,
        revision: int | None = None,
        limit: int = 0,
        start_after: str | None = None,
    ) -> ListResult:
        """Keys under ``prefix`` in key order, as of ``revision`` (None: now).

        ``limit`` 0 means no limit. ``start_after`` skips keys <= it (pagination).
        A ``revision`` older than the compacted revision raises Gone.
        """
        ...

    async def create(self, key: str, value: bytes) -> KeyValue:
        """Write only if absent; raise AlreadyExists."""
        ...

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        """Compare-and-swap on mod_revision; raise Conflict (or NotFound if absent)."""
        ...

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        """Delete, optionally only at ``expected_revision``; return the deleted value
        with ``mod_revision`` set to the delete's revision. Raise NotFound / Conflict."""
        ...

    def watch(
        self, prefix: str, *, from_revision: int, progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        """Events for keys under ``prefix`` with revision >= ``from_revision``, in order.

        Raises Gone (when iterated) if ``from_revision`` is compacted. The iterator
        runs until the caller stops iterating (``aclose()``) or the store closes.
        ``progress``, when given, is called with a revision up to which every event under
        ``prefix`` has been handed over, when the store moves on without one there (etcd's
        progress notifications): a watch of a quiet prefix learns how far the store is.
        """
        ...

    async def current_revision(self) -> int: ...

    async def compact(self, revision: int) -> None:
        """Forget history before ``revision`` (watches/lists older than it get Gone)."""
        ...

    async def close(self) -> None: ...
