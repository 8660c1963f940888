"""A store that hands every call to another: the base of the hub's store wrappers (the write
ledger, the recent values), which override the calls they watch and inherit the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from controlplane.storage.interface import KeyValue, ListResult, Progress, Store, WatchEvent


class WrappedStore:
    """``inner``'s calls, unchanged; :meth:`watch_seeing` passes each event to a callback."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    async def get(self, key: str) -> KeyValue:
        return await self.inner.get(key)

    async def list(
        self, prefix: str, *, revision: int | None = None, limit: int = 0, start_after: str | None = None
    ) -> ListResult:
        return await self.inner.list(prefix, revision=revision, limit=limit, start_after=start_after)

    async def create(self, key: str, value: bytes) -> KeyValue:
        return await self.inner.create(key, value)

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        return await self.inner.update(key, value, expected_revision=expected_revision)

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        return await self.inner.delete(key, expected_revision=expected_revision)

    def watch(
        self, prefix: str, *, from_revision: int, progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        return self.inner.watch(prefix, from_revision=from_revision, progress=progress)

    async def watch_seeing(
        self, prefix: str, from_revision: int, seen: Callable[[WatchEvent], None], progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        """``inner``'s watch, calling ``seen`` with each event before it is handed on."""
        events = self.inner.watch(prefix, from_revision=from_revision, progress=progress)
        try:
            async for event in events:
                seen(event)
                yield event
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()
