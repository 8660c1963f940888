"""The write ledger: what the hub writes to its store, who wrote it and why, and who decoded it.

:class:`LedgerStore` wraps a :class:`~controlplane.storage.interface.Store` and counts, in a
:class:`WriteLedger`:

* every write (create, update, delete) by resource (``deployments.apps``, from the key),
  subresource (``status`` or empty), writer and verb;
* every watch event handed to a watcher (each one is decoded once by its watcher), by
  resource and watcher;
* every single-key read (``get``), by resource and reader.

The writer and the watcher are whoever is running: :data:`WRITER` is a context variable
that the API server sets per request (the caller's role: ``admin``, ``agent``, ...) and each
hub controller sets in its workers (``controller:binding``); anything else counts as
``hub``. The object layer sets :data:`WRITE_REASON` around each update (its subresource and,
lazily, the top-level fields it changes). All label values come from the hub's own code, so
the counters stay a bounded set.

With ``journal`` > 0 the ledger also keeps the last ``journal`` writes in full (revision,
key, writer, verb, subresource, changed fields): the hub serves them to admins at
``/debug/writes`` when started with ``--debug-write-journal N``.
"""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from controlplane.storage.interface import KeyValue, Progress, Store, WatchEvent
from controlplane.storage.wrapping import WrappedStore

T = TypeVar("T")

#: Who is writing (or watching) in this task: an API role or ``controller:<name>``.
WRITER: ContextVar[str] = ContextVar("gpufed_writer", default="hub")


@dataclass(frozen=True, slots=True)
class WriteReason:
    """Why the object layer writes: the subresource, and the changed fields (computed only
    when a journal asks)."""

    subresource: str = ""
    changed: Callable[[], list[str]] | None = None


WRITE_REASON: ContextVar[WriteReason | None] = ContextVar("gpufed_write_reason", default=None)


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The fields an update of object ``old`` to ``new`` changes, two levels deep
    (``status.conditions``, ``metadata.managedFields``, ``spec``): a write's :attr:`WriteReason.changed`."""
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict) and key in ("metadata", "status"):
            out.extend(
                f"{key}.{sub}"
                for sub in sorted(set(before) | set(after))
                if sub != "resourceVersion" and before.get(sub) != after.get(sub)
            )
        else:
            out.append(key)
    return out


@contextlib.contextmanager
def _bound(variable: ContextVar[T], value: T) -> Iterator[None]:
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)


def acting_as(writer: str) -> contextlib.AbstractContextManager[None]:
    """Count what this block writes and watches as ``writer``'s."""
    return _bound(WRITER, writer)


def writing_because(reason: WriteReason) -> contextlib.AbstractContextManager[None]:
    return _bound(WRITE_REASON, reason)


def resource_of(key: str) -> str:
    """``/registry/apps/deployments/ns/name`` -> ``deployments.apps`` (core kinds: the plural
    alone); other keys: their first two segments."""
    parts = key.split("/", 5)
    if len(parts) > 3 and parts[1] == "registry":
        group, plural = parts[2], parts[3]
        return f"{plural}.{group}" if group and group != "core" else plural
    return "/".join(parts[:3])


@dataclass(frozen=True, slots=True)
class JournalEntry:
    revision: int
    key: str
    writer: str
    verb: str
    subresource: str
    changed: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "key": self.key,
            "resource": resource_of(self.key),
            "writer": self.writer,
            "verb": self.verb,
            "subresource": self.subresource,
            "changed": list(self.changed),
        }


#: (resource, subresource, writer, verb)
WriteKey = tuple[str, str, str, str]
#: (resource, watcher)
EventKey = tuple[str, str]


class WriteLedger:
    """Counters of writes and decoded watch events; the last ``journal`` writes in full."""

    def __init__(self, *, journal: int = 0) -> None:
        self.writes: Counter[WriteKey] = Counter()
        self.events: Counter[EventKey] = Counter()
        self.reads: Counter[EventKey] = Counter()
        self.journal: deque[JournalEntry] | None = deque(maxlen=journal) if journal > 0 else None
        #: The highest revision the journal has recorded (writes may finish out of order).
        self.journal_revision = 0

    def record_write(self, key: str, verb: str, revision: int) -> None:
        reason = WRITE_REASON.get()
        subresource = reason.subresource if reason is not None else ""
        writer = WRITER.get()
        self.writes[(resource_of(key), subresource, writer, verb)] += 1
        if self.journal is not None:
            changed = reason.changed() if reason is not None and reason.changed is not None else []
            self.journal.append(JournalEntry(revision, key, writer, verb, subresource, tuple(changed)))
            self.journal_revision = max(self.journal_revision, revision)

    def record_read(self, key: str) -> None:
        self.reads[(resource_of(key), WRITER.get())] += 1

    def record_event(self, key: str, watcher: str) -> None:
        self.events[(resource_of(key), watcher)] += 1

    def snapshot(self, *, since: int = 0) -> dict[str, Any]:
        """The counters (and the journal's writes after revision ``since``, when kept, with the
        revision of its last write) as JSON-ready data."""
        out: dict[str, Any] = {
            "writes": [
                {"resource": r, "subresource": s, "writer": w, "verb": v, "count": n}
                for (r, s, w, v), n in sorted(self.writes.items())
            ],
            "watchEvents": [
                {"resource": r, "watcher": w, "count": n} for (r, w), n in sorted(self.events.items())
            ],
            "reads": [{"resource": r, "reader": w, "count": n} for (r, w), n in sorted(self.reads.items())],
        }
        if self.journal is not None:
            out["journal"] = [entry.as_dict() for entry in self.journal if entry.revision > since]
            out["journalRevision"] = self.journal_revision
        return out


class LedgerStore(WrappedStore):
    """``inner`` with every write, every single-key read and every delivered watch event
    counted in ``ledger``."""

    def __init__(self, inner: Store, ledger: WriteLedger) -> None:
        super().__init__(inner)
        self.ledger = ledger

    async def get(self, key: str) -> KeyValue:
        self.ledger.record_read(key)
        return await self.inner.get(key)

    async def create(self, key: str, value: bytes) -> KeyValue:
        kv = await self.inner.create(key, value)
        self.ledger.record_write(key, "create", kv.mod_revision)
        return kv

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        kv = await self.inner.update(key, value, expected_revision=expected_revision)
        self.ledger.record_write(key, "update", kv.mod_revision)
        return kv

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        kv = await self.inner.delete(key, expected_revision=expected_revision)
        self.ledger.record_write(key, "delete", kv.mod_revision)
        return kv

    def watch(
        self, prefix: str, *, from_revision: int, progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        watcher, record = WRITER.get(), self.ledger.record_event
        return self.watch_seeing(prefix, from_revision, lambda event: record(event.kv.key, watcher), progress)
