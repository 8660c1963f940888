"""Writes the simulated member's Events, as kube's event broadcaster does: off the caller's path.

:meth:`EventRecorder.record` never waits: it folds the occurrence into the
:class:`~simulator.events.EventBook` (same Event -> ``count`` + 1) and marks it to be
written. :meth:`EventRecorder.run` writes what is marked -- a create for a new Event, an
update for a repeated one (created again if it has been deleted meanwhile, as client-go
falls back to create) -- and deletes the Events past their TTL or over their
namespace's cap. Occurrences between two writes of one Event coalesce into one write.
Failing to write an Event is logged and never fails the caller.

In: the member's ObjectClient, the v1 Event resource type, a clock. Out: v1 Events in the
store. ``async run()`` until cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from controlplane.apis.events import EventType
from controlplane.objectclient import ObjectClient, ResourceType, errors
from simulator.clock import Clock
from simulator.events import EventAction, EventBook, EventKey, EventReason, EventRecord

logger = logging.getLogger(__name__)


class EventRecorder:
    """``record()`` from any loop; ``await run()`` in a task of the member."""

    def __init__(
        self, objects: ObjectClient, rt: ResourceType, *, clock: Clock, component: str, book: EventBook | None = None
    ) -> None:
        self.objects = objects
        self.rt = rt
        self.clock = clock
        self.component = component
        self.book = book if book is not None else EventBook()
        self._dirty: dict[EventKey, EventRecord] = {}
        self._written: set[EventKey] = set()
        self._wake = asyncio.Event()

    def record(
        self,
        involved: Mapping[str, Any],
        *,
        type: EventType,
        reason: EventReason,
        message: str,
        action: EventAction,
        component: str | None = None,
        host: str = "",
    ) -> None:
        """Note one occurrence; it is written soon (with later ones of the same Event folded in).
        ``component``/``host``: the Event's source when it is not this recorder's component
        (the kubelet of a node)."""
        record = self.book.observe(
            involved,
            component=component or self.component,
            type=type,
            reason=reason,
            message=message,
            action=action,
            now=self.clock.now(),
            host=host,
        )
        self._dirty[record.key] = record
        self._wake.set()

    async def load(self) -> None:
        """Take back the Events already in the store (a member restarted from its snapshot)."""
        listed = await self.objects.list(self.rt)
        for event in listed.items:
            record = self.book.load(event)
            if record is not None:
                self._written.add(record.key)
        self._wake.set()

    async def run(self) -> None:
        await self.load()
        while True:
            await self.clock.sleep_until(self.book.next_expiry(), self._wake)
            self._wake.clear()
            for record in self.book.expire(self.clock.now()):
                self._dirty.pop(record.key, None)
                if record.key in self._written:
                    self._written.discard(record.key)
                    await self._delete(record)
            dirty, self._dirty = self._dirty, {}
            for record in dirty.values():
                if self.book.records.get(record.key) is record:
                    await self._write(record)

    async def _write(self, record: EventRecord) -> None:
        manifest = record.to_manifest()
        try:
            if record.key in self._written:
                try:
                    await self.objects.update(self.rt, manifest)
                    return
                except errors.NotFound:
                    pass
            await self.objects.create(self.rt, manifest)
            self._written.add(record.key)
        except (errors.ApiError, errors.StorageError) as exc:
            logger.info(
                "could not record event %s on %s/%s: %s",
                manifest["reason"], record.namespace, manifest["involvedObject"].get("name"), exc,
            )

    async def _delete(self, record: EventRecord) -> None:
        try:
            await self.objects.delete(self.rt, namespace=record.namespace, name=record.name)
        except errors.NotFound:
            pass
        except (errors.ApiError, errors.StorageError) as exc:
            logger.info("could not delete expired event %s/%s: %s", record.namespace, record.name, exc)
