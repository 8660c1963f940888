"""The object client: what every in-process consumer of the hub's (or a simulated member's)
objects calls — controllers, the scheduler controller, the waste sampler, the simulator.

:class:`ObjectClient` is the typed protocol of those calls (get, list, create, update,
update_status, delete, watch and the registry of kinds served); the values they take and
return are re-exported here, and the error types they raise are in :mod:`.errors`. The API
server's :class:`~controlplane.apiserver.objects.ObjectStore` implements it; only the
composition roots (``controlplane.hub``, the simulator's server, tests) build one. Consumers
import from this package only, never from ``controlplane.apiserver`` or ``controlplane.storage``
(import contracts in pyproject.toml hold that), so the object layer can change behind it.
:data:`WRITER` names who writes in the current task (``controller:<name>``) for the write ledger.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, Unpack

from controlplane.apiserver.admission import WebhookCalls
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.objects.values import (
    DeleteResult,
    ListArgs,
    ObjectEvent,
    ObjectList,
    Preconditions,
    WatchArgs,
    WatchEventType,
    WriteArgs,
    utc_now,
)
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.storage.ledger import WRITER

__all__ = [
    "WRITER",
    "DeleteResult",
    "DynamicRegistry",
    "ListArgs",
    "ObjectClient",
    "ObjectEvent",
    "ObjectList",
    "Preconditions",
    "Registry",
    "ResourceType",
    "WatchArgs",
    "WatchEventType",
    "WriteArgs",
    "utc_now",
]


class ObjectClient(Protocol):
    """Kubernetes object semantics for the kinds in :attr:`registry`, in process (no HTTP).

    Calls take and return object dicts; they raise the :mod:`.errors` tree (NotFound,
    Conflict, AlreadyExists, ...) exactly as the API server answers them over HTTP.
    """

    @property
    def registry(self) -> Registry: ...

    async def get(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, resource_version: str | None = None
    ) -> dict[str, Any]: ...

    async def get_latest_seen(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        """The object as this process last saw it (its writes, reads and watches), read only when
        it has not: for callers whose writes are compare-and-swaps on what they read."""
        ...

    async def list(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]
    ) -> ObjectList: ...

    async def create(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, **options: Unpack[WriteArgs]
    ) -> dict[str, Any]: ...

    async def update(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, name: str | None = None,
        subresource: str | None = None, **options: Unpack[WriteArgs],
    ) -> dict[str, Any]: ...

    async def update_status(self, rt: ResourceType, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]: ...

    async def update_with_status(
        self, rt: ResourceType, obj: dict[str, Any], *, status_of: Callable[[dict[str, Any]], Any] | None = None,
        **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        """``update`` and ``update_status`` as one write: one revision, one watch event."""
        ...

    async def delete(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, preconditions: Preconditions | None = None,
        propagation_policy: str | None = None, dry_run: bool = False, orphan_dependents: bool | None = None,
        webhooks: WebhookCalls | None = None,
    ) -> DeleteResult: ...

    def watch(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[WatchArgs]
    ) -> AsyncIterator[ObjectEvent]: ...
