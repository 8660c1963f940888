"""Who holds each allocated cluster IP and node port: one key per value in the hub's store.

``/registry/ranges/serviceips/10.96.0.10`` and ``/registry/ranges/servicenodeports/30080``
each name the Service that holds the value (namespace, name, uid). A value is taken with the
store's create-if-absent, so two API servers (or two requests) racing for one value cannot
both win, whatever process they run in; the record outlives a restart of the hub or of etcd.
It is written before the Service and removed after it (:mod:`.allocator`); what a crash
between the two leaves behind is found and freed by :mod:`.repair`. A range's records grow
with the Services that hold values, never with the size of the range.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Final

from controlplane.storage import interface as storage

log = logging.getLogger(__name__)

SERVICE_IPS_PREFIX: Final = "/registry/ranges/serviceips/"
SERVICE_NODE_PORTS_PREFIX: Final = "/registry/ranges/servicenodeports/"
#: Records read per list call when a range is read whole.
_PAGE: Final = 1000
#: Takes of one value that find it freed in between before it counts as taken.
_CLAIM_ATTEMPTS: Final = 3


@dataclass(frozen=True, slots=True)
class Owner:
    """The Service a value is allocated to (its uid tells a re-created Service apart)."""

    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Owner:
        meta = obj.get("metadata") or {}
        return cls(str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or ""))

    def encode(self) -> bytes:
        return json.dumps({"namespace": self.namespace, "name": self.name, "uid": self.uid}).encode()

    @classmethod
    def decode(cls, value: bytes) -> Owner | None:
        try:
            data = json.loads(value)
            return cls(str(data["namespace"]), str(data["name"]), str(data["uid"]))
        except (ValueError, KeyError, TypeError):
            return None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Record:
    value: str
    owner: Owner | None
    revision: int


class Records:
    """The records of one range under ``prefix`` in ``store``."""

    def __init__(self, store: storage.Store, prefix: str) -> None:
        self._store = store
        self.prefix = prefix

    def key(self, value: str | int) -> str:
        return f"{self.prefix}{value}"

    async def claim(self, value: str | int, owner: Owner) -> bool:
        """Take ``value`` for ``owner``: True when it is now (or was already) theirs."""
        for _attempt in range(_CLAIM_ATTEMPTS):
            try:
                await self._store.create(self.key(value), owner.encode())
                return True
            except storage.AlreadyExists:
                pass
            try:
                kv = await self._store.get(self.key(value))
            except storage.NotFound:
                continue  # freed in between: try again
            return Owner.decode(kv.value) == owner
        return False

    async def held(self, value: str | int) -> bool:
        try:
            await self._store.get(self.key(value))
        except storage.NotFound:
            return False
        return True

    async def release(self, value: str | int, owner: Owner) -> None:
        """Free ``value`` if ``owner`` holds it (a value another Service took since stays)."""
        try:
            kv = await self._store.get(self.key(value))
            if Owner.decode(kv.value) == owner:
                await self._store.delete(kv.key, expected_revision=kv.mod_revision)
        except (storage.NotFound, storage.Conflict):
            pass

    async def remove(self, record: Record) -> bool:
        """Delete ``record`` if it is unchanged since it was read (the repair's free)."""
        try:
            await self._store.delete(self.key(record.value), expected_revision=record.revision)
        except (storage.NotFound, storage.Conflict):
            return False
        return True

    async def read_all(self) -> list[Record]:
        """Every record of the range, page by page."""
        out: list[Record] = []
        start_after: str | None = None
        while True:
            page = await self._store.list(self.prefix, limit=_PAGE, start_after=start_after)
            out.extend(
                Record(kv.key[len(self.prefix):], Owner.decode(kv.value), kv.mod_revision) for kv in page.items
            )
            if not page.more or not page.items:
                return out
            start_after = page.items[-1].key
