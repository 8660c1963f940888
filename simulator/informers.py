"""The simulated member's informers: caches of its objects fed by watches, indexed by owner.

In: the member's ``ObjectClient`` and a resource type. Out: a hub
:class:`~controlplane.controllers.informing.Informer` with the :data:`INDEX_OWNER` index (children
by the uid of their controller owner) whose handler calls a plain :data:`Listener`
``(event, old, new)`` (new is None on DELETED), and the ``namespace/name`` keys the loops of
:mod:`simulator.cluster` and :mod:`simulator.controlling` queue objects by.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, Final

from controlplane.controllers.informing import Informer
from controlplane.objectclient import ObjectClient, ResourceType, WatchEventType
from simulator.controllers.base import controller_uid

#: Informer index: the uid of an object's controller owner.
INDEX_OWNER: Final = "owner"

Listener = Callable[[WatchEventType, dict[str, Any] | None, dict[str, Any] | None], None]
Handler = Callable[[WatchEventType, dict[str, Any], dict[str, Any] | None], Awaitable[None]]


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def cached(informer: Informer, key: str) -> dict[str, Any] | None:
    """The informer's object under an :func:`object_key`, None when it has none."""
    namespace, _, name = key.rpartition("/")
    return informer.get(namespace or None, name)


def _owner_index(obj: dict[str, Any]) -> Iterable[Hashable]:
    uid = controller_uid(obj)
    return (uid,) if uid else ()


def as_handler(listener: Listener) -> Handler:
    """An informer handler calling ``listener(event, old, new)`` (new is None on DELETED)."""

    async def handle(event: WatchEventType, obj: dict[str, Any], previous: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED:
            listener(event, obj, None)
        else:
            listener(event, previous, obj)

    return handle


def owned_informer(
    objects: ObjectClient, rt: ResourceType, listener: Listener, *, label_selector: str | None = None
) -> Informer:
    """An informer of ``rt`` (those ``label_selector`` selects) indexed by controller owner,
    telling ``listener`` of every change."""
    informer = Informer(objects, rt, label_selector=label_selector)
    informer.add_index(INDEX_OWNER, _owner_index)
    informer.add_handler(as_handler(listener))
    return informer
