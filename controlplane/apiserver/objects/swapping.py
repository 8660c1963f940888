"""Compare-and-swap writes of a stored object, as the writer and the deleter both make them.

Every update or delete of a stored object names the revision it read; :func:`swap_call` turns a
store that refuses it (a concurrent write won) into :class:`LostRace`, which the callers catch to
re-read and retry, and any other storage error into the API's error for the object.
:func:`delete_stored` is the delete itself, with what follows it: the object's allocated values
freed and its namespace told it lost content.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.allocating import Allocations
from controlplane.apiserver.objects.namespaces import NamespaceLifecycle
from controlplane.apiserver.resources import ResourceType
from controlplane.storage import interface as storage


class LostRace(errors.Conflict):
    """A compare-and-swap lost against a concurrent write (patches re-read and retry)."""


async def swap_call(rt: ResourceType, name: str, awaitable: Awaitable[storage.KeyValue]) -> storage.KeyValue:
    """Await a compare-and-swap store call on ``rt``'s object ``name``: :class:`LostRace` (with
    kube's Conflict message) when a concurrent write won, the API's error for any other."""
    try:
        return await awaitable
    except storage.Conflict as exc:
        raise LostRace(errors.conflict_modified(plural=rt.plural, group=rt.group, name=name).message) from exc
    except storage.StorageError as exc:
        raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group, name=name) from exc


async def delete_stored(
    store: storage.Store,
    rt: ResourceType,
    kv: storage.KeyValue,
    obj: dict[str, Any],
    *,
    allocations: Allocations,
    namespaces: NamespaceLifecycle,
) -> None:
    """Delete ``obj``, stored as ``kv``, if its revision is still ``kv``'s; its
    ``resourceVersion`` becomes the delete's. Then free what it held and tell its namespace."""
    meta = obj["metadata"]
    deleted = await swap_call(rt, meta["name"], store.delete(kv.key, expected_revision=kv.mod_revision))
    meta["resourceVersion"] = str(deleted.mod_revision)
    await allocations.on_delete(rt, obj)
    if rt.namespaced:
        await namespaces.content_deleted(meta["namespace"])
