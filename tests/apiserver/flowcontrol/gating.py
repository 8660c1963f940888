"""The object layer with its ConfigMap lists held on purpose (a slow LIST), and a store whose
ConfigMap reads are held once armed (a watch's slow initial list), for the APF tests."""

from __future__ import annotations

import asyncio
from typing import Unpack

from controlplane.apiserver.objects import EncodedList, ListArgs, ObjectList, ObjectStore
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.storage import Store
from controlplane.storage.interface import ListResult
from controlplane.storage.wrapping import WrappedStore


class GatedObjects(ObjectStore):
    """ConfigMap lists wait for ``gate``: every one, or the first ``hold_at_most``; ``all_held`` is
    set once ``signal_at`` of them wait."""

    def __init__(self, store: Store, registry: Registry, *, signal_at: int, hold_at_most: int | None = None) -> None:
        super().__init__(store, registry)
        self.gate = asyncio.Event()
        self.held = 0
        self.all_held = asyncio.Event()
        self._signal_at = signal_at
        self._hold_at_most = hold_at_most

    async def _hold(self, rt: ResourceType) -> None:
        if rt.plural == "configmaps" and (self._hold_at_most is None or self.held < self._hold_at_most):
            self.held += 1
            if self.held == self._signal_at:
                self.all_held.set()
            await self.gate.wait()

    async def list(self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]) -> ObjectList:
        await self._hold(rt)
        return await super().list(rt, namespace=namespace, **options)

    async def list_encoded(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]
    ) -> EncodedList:
        await self._hold(rt)
        return await super().list_encoded(rt, namespace=namespace, **options)


class GatedStore(WrappedStore):
    """``inner``, its lists of ConfigMaps waiting for ``gate`` once ``armed`` (``held`` set then)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.armed = False
        self.gate = asyncio.Event()
        self.held = asyncio.Event()

    async def list(
        self, prefix: str, *, revision: int | None = None, limit: int = 0, start_after: str | None = None
    ) -> ListResult:
        if self.armed and "/configmaps/" in prefix:
            self.held.set()
            await self.gate.wait()
        return await super().list(prefix, revision=revision, limit=limit, start_after=start_after)
