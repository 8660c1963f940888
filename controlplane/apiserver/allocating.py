"""Values a kind draws from a shared pool when it is written (kube's ``BeginCreate`` and
``BeginUpdate`` hooks): a Service's cluster IPs and node ports.

The object layer asks its :class:`Allocations` once a create or update has its final object
(defaulted, validated, admitted) and before it is stored; the answer may fill fields in the
object and has taken what it filled in. The layer then stores the object and calls
:meth:`Reserved.commit` (which frees what the write gave up, such as the address of a Service
turned ExternalName), or :meth:`Reserved.revert` when the write failed (which frees what was
taken for it). After a delete, :meth:`Allocations.on_delete` frees what the object held.
A dry run fills the fields and takes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

from controlplane.apiserver.errors import ApiError, InternalError, ServiceUnavailable, Timeout
from controlplane.apiserver.resources import ResourceType
from controlplane.storage.interface import StorageError, Unavailable

T = TypeVar("T")
_UNKNOWN_OUTCOME = (Unavailable, ServiceUnavailable, Timeout, InternalError)


class Reserved(Protocol):
    async def commit(self) -> None:
        """The write was stored: free what it gave up."""
        ...

    async def revert(self) -> None:
        """The write failed: free what was taken for it."""
        ...


class Allocations(Protocol):
    async def on_create(self, rt: ResourceType, obj: dict[str, Any], *, dry_run: bool) -> Reserved:
        """Fill and take ``obj``'s allocated values; raise an ``ApiError`` to refuse it."""
        ...

    async def on_update(
        self, rt: ResourceType, old: dict[str, Any], new: dict[str, Any], *, dry_run: bool
    ) -> Reserved:
        """Fill and take the values ``new`` holds that ``old`` did not."""
        ...

    async def on_delete(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """``obj`` was deleted: free what it held."""
        ...


class _NothingReserved:
    async def commit(self) -> None:
        return None

    async def revert(self) -> None:
        return None


NOTHING_RESERVED: Reserved = _NothingReserved()


class NoAllocations:
    """The object layer's allocations where no kind draws from a pool (simulated members)."""

    async def on_create(self, rt: ResourceType, obj: dict[str, Any], *, dry_run: bool) -> Reserved:
        return NOTHING_RESERVED

    async def on_update(
        self, rt: ResourceType, old: dict[str, Any], new: dict[str, Any], *, dry_run: bool
    ) -> Reserved:
        return NOTHING_RESERVED

    async def on_delete(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        return None


async def stored_with(reserved: Reserved, write: Awaitable[T]) -> T:
    """Await the store's ``write`` of an object ``reserved`` was taken for, then commit it; revert
    it when the write surely failed. When the outcome is unknown (the store unreachable, a
    timeout, a cancelled request) what was taken stays taken: the repair frees it if the write
    did not land, where freeing it now would free values a stored object holds."""
    try:
        result = await write
    except (ApiError, StorageError) as exc:
        if not isinstance(exc, _UNKNOWN_OUTCOME):
            await reserved.revert()
        raise
    await reserved.commit()
    return result
