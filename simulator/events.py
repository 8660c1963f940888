"""The simulated member's v1 Events as kube's event recorder keeps them: correlated and bounded.

``kubectl describe pod`` and ``kubectl get events`` on a real member show what its
scheduler said (``FailedScheduling``, ``Scheduled``). Kube's recorder (client-go
``tools/record``) does not write one Event per call: an Event with the same source,
involved object, type, reason and message as an earlier one is the same Event with
``count`` raised and ``lastTimestamp`` moved. The API server keeps Events for a TTL
(``--event-ttl``, 1 h) after their last write.

:class:`EventBook` is that bookkeeping, in memory and without I/O:

* :meth:`EventBook.observe` folds one occurrence in and returns the Event to write
  (new, named ``<object name>.<hex of the time in ns>`` as kube names them, or an
  existing one with ``count`` + 1);
* Events expire :data:`EVENT_TTL_SECONDS` of *simulated* time after their last
  occurrence (so a member at ``--time-scale 100`` keeps them 36 s of wall time), and a
  namespace keeps at most ``max_per_namespace`` (the least recently seen go first):
  :meth:`EventBook.expire` says which to delete;
* :meth:`EventBook.load` takes back Events already in the store (after a restart).

Out: Event manifests as core/v1 writes them (``source.component``,
``reportingComponent`` -- the core/v1 name of events.k8s.io's ``reportingController``
-- ``count``, ``firstTimestamp``, ``lastTimestamp``, ``action``); :mod:`simulator.recording`
does the writes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from controlplane.apis.events import EventType
from simulator.clock import parse_rfc3339, rfc3339

#: kube-apiserver's default ``--event-ttl``.
EVENT_TTL_SECONDS: Final = 3600.0
#: Events one namespace keeps at most (the least recently seen are deleted first).
MAX_EVENTS_PER_NAMESPACE: Final = 1000


class EventReason(StrEnum):
    SCHEDULED = "Scheduled"
    FAILED_SCHEDULING = "FailedScheduling"
    #: The kubelet's: a volume it cannot mount, a container it cannot configure.
    FAILED_MOUNT = "FailedMount"
    FAILED = "Failed"
    #: A workload controller's: the API refused a child it created.
    FAILED_CREATE = "FailedCreate"
    #: The PV controller's: a claim's volume cannot be provisioned (its StorageClass is missing).
    PROVISIONING_FAILED = "ProvisioningFailed"


class EventAction(StrEnum):
    """events.k8s.io ``action``: what the reporting controller was doing."""

    BINDING = "Binding"
    SCHEDULING = "Scheduling"
    STARTING = "Starting"
    CREATING = "Creating"
    PROVISIONING = "Provisioning"


#: (component, involved kind, namespace, name, uid, apiVersion, type, reason, message): kube's ``getEventKey``.
EventKey = tuple[str, str, str, str, str, str, str, str, str]


@dataclass(slots=True)
class EventRecord:
    """One Event as the book knows it (times in simulated epoch seconds)."""

    key: EventKey
    namespace: str
    name: str
    manifest: dict[str, Any]
    first: float
    last: float
    count: int = 1

    def to_manifest(self) -> dict[str, Any]:
        out = copy.deepcopy(self.manifest)
        out["count"] = self.count
        out["firstTimestamp"] = rfc3339(self.first)
        out["lastTimestamp"] = rfc3339(self.last)
        return out


def involved_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An ``involvedObject`` for ``obj`` (kube's ``ObjectReference``)."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion") or "v1",
        "kind": obj.get("kind") or "Pod",
        "namespace": meta.get("namespace") or "default",
        "name": meta.get("name"),
        "uid": meta.get("uid") or "",
        "resourceVersion": meta.get("resourceVersion") or "",
    }
    return {k: v for k, v in ref.items() if v != ""}


def event_key(component: str, involved: Mapping[str, Any], type_: str, reason: str, message: str) -> EventKey:
    return (
        component,
        str(involved.get("kind") or ""),
        str(involved.get("namespace") or ""),
        str(involved.get("name") or ""),
        str(involved.get("uid") or ""),
        str(involved.get("apiVersion") or ""),
        type_,
        reason,
        message,
    )


@dataclass(slots=True)
class EventBook:
    """Correlation and retention of one member's Events (see the module docstring)."""

    ttl: float = EVENT_TTL_SECONDS
    max_per_namespace: int = MAX_EVENTS_PER_NAMESPACE
    records: dict[EventKey, EventRecord] = field(default_factory=dict)
    _names: set[tuple[str, str]] = field(default_factory=set)
    _per_namespace: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.records)

    def observe(
        self,
        involved: Mapping[str, Any],
        *,
        component: str,
        type: EventType,
        reason: EventReason,
        message: str,
        action: EventAction,
        now: float,
        host: str = "",
    ) -> EventRecord:
        """Fold one occurrence in; the returned record is the Event to write. ``host``: the
        node of a component that runs on one (the kubelet), part of the Event's source."""
        ref = involved_reference(involved)
        key = event_key(_source_key(component, host), ref, str(type), str(reason), message)
        record = self.records.get(key)
        if record is not None:
            record.count += 1
            record.last = max(record.last, now)
            record.manifest["involvedObject"] = ref
            return record
        namespace = str(ref["namespace"])
        nanos = int(now * 1e9)
        name = f"{ref['name']}.{nanos:x}"
        while (namespace, name) in self._names:  # two Events of one object in the same instant
            nanos += 1
            name = f"{ref['name']}.{nanos:x}"
        manifest = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref,
            "reason": str(reason),
            "message": message,
            "type": str(type),
            "source": {"component": component, "host": host} if host else {"component": component},
            "reportingComponent": component,
            "reportingInstance": host or component,
            "action": str(action),
            "eventTime": None,
        }
        record = EventRecord(key, namespace, name, manifest, first=now, last=now)
        self._add(record)
        return record

    def load(self, event: Mapping[str, Any]) -> EventRecord | None:
        """Take back an Event already stored (None when it is not one this book could have written)."""
        meta = event.get("metadata") or {}
        involved = event.get("involvedObject") or {}
        source = event.get("source") or {}
        component = _source_key(
            str(source.get("component") or event.get("reportingComponent") or ""), str(source.get("host") or "")
        )
        if not meta.get("name") or not involved.get("name"):
            return None
        last = parse_rfc3339(event.get("lastTimestamp")) or parse_rfc3339(event.get("firstTimestamp"))
        if last is None:
            return None
        key = event_key(
            component, involved, str(event.get("type") or ""), str(event.get("reason") or ""),
            str(event.get("message") or ""),
        )
        manifest = {k: copy.deepcopy(v) for k, v in event.items() if k not in ("count", "firstTimestamp", "lastTimestamp")}
        manifest["metadata"] = {"name": meta["name"], "namespace": meta.get("namespace") or "default"}
        record = EventRecord(
            key,
            str(manifest["metadata"]["namespace"]),
            str(meta["name"]),
            manifest,
            first=parse_rfc3339(event.get("firstTimestamp")) or last,
            last=last,
            count=int(event.get("count") or 1),
        )
        previous = self.records.get(key)
        if previous is not None:
            if previous.last >= record.last:
                return None
            self._remove(previous)
        self._add(record)
        return record

    def expire(self, now: float) -> list[EventRecord]:
        """Drop and return the Events past their TTL, and the least recently seen of every
        namespace over its cap."""
        doomed = [r for r in self.records.values() if r.last + self.ttl <= now]
        for record in doomed:
            self._remove(record)
        over = {ns: n - self.max_per_namespace for ns, n in self._per_namespace.items() if n > self.max_per_namespace}
        if over:
            oldest = sorted(
                (r for r in self.records.values() if r.namespace in over), key=lambda r: (r.last, r.name)
            )
            for record in oldest:
                if over[record.namespace] > 0:
                    over[record.namespace] -= 1
                    self._remove(record)
                    doomed.append(record)
        return doomed

    def next_expiry(self) -> float | None:
        """When the next Event reaches its TTL (None: the book is empty)."""
        if not self.records:
            return None
        return min(r.last for r in self.records.values()) + self.ttl

    def over_cap(self) -> bool:
        return any(n > self.max_per_namespace for n in self._per_namespace.values())

    def forget(self, record: EventRecord) -> None:
        """The Event is gone from the store: the next occurrence starts a new one."""
        if self.records.get(record.key) is record:
            self._remove(record)

    def _add(self, record: EventRecord) -> None:
        self.records[record.key] = record
        self._names.add((record.namespace, record.name))
        self._per_namespace[record.namespace] = self._per_namespace.get(record.namespace, 0) + 1

    def _remove(self, record: EventRecord) -> None:
        self.records.pop(record.key, None)
        self._names.discard((record.namespace, record.name))
        left = self._per_namespace.get(record.namespace, 0) - 1
        if left > 0:
            self._per_namespace[record.namespace] = left
        else:
            self._per_namespace.pop(record.namespace, None)


def _source_key(component: str, host: str) -> str:
    """The source part of an Event's identity: its component, and its host when it has one
    (kube's ``getEventKey`` keys on both)."""
    return f"{component}@{host}" if host else component
