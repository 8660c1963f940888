"""client-go's ``EventCorrelator`` (``tools/record/events_cache.go``): what a recorded Event
becomes before it is written, so a repeated Event is one Event whose count grows.

In: each Event about to be recorded (a ``v1`` Event dict) and the time. Out: :class:`Correlated`
-- the Event to write and whether it updates one already written (its name, ``count`` + 1, its
``firstTimestamp`` kept, ``lastTimestamp`` now) -- as client-go's aggregator and logger decide:

* an Event identical to one recorded before (source, involved object, type, reason and
  message) updates that one;
* once 10 Events of one source, object, type and reason but different messages came within
  10 minutes of each other, the next is ``(combined from similar events): <message>``, one
  Event updated by each further one.

Each memory holds the :data:`CACHE_SIZE` most recently used keys, as client-go's LRU caches do.
client-go's spam filter (25 Events per object, then one per 5 minutes) is not applied: the hub's
controllers record an Event when their decision changes. Pure; no I/O.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Generic, TypeVar

from controlplane.apis.timestamps import format_time

#: client-go's ``maxLruCacheEntries``.
CACHE_SIZE: Final = 4096
#: client-go's ``defaultAggregateMaxEvents``.
AGGREGATE_MAX_EVENTS: Final = 10
#: client-go's ``defaultAggregateIntervalInSeconds``.
AGGREGATE_INTERVAL: Final = timedelta(seconds=600)
COMBINED_PREFIX: Final = "(combined from similar events): "

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass(slots=True)
class _Aggregate:
    messages: set[str] = field(default_factory=set)
    last: datetime | None = None


@dataclass(frozen=True, slots=True)
class _Observation:
    count: int
    first_timestamp: Any
    name: str


@dataclass(frozen=True, slots=True)
class Correlated:
    event: dict[str, Any]
    """The Event to write."""
    key: tuple[str, ...]
    """What identifies it in the correlator (for :meth:`EventCorrelator.written`)."""
    updates: bool
    """Whether it updates the Event of that name already written (else it is created)."""


def _involved(event: Mapping[str, Any]) -> tuple[str, ...]:
    source, involved = event.get("source") or {}, event.get("involvedObject") or {}
    return (str(source.get("component") or ""), str(source.get("host") or ""), str(involved.get("kind") or ""),
            str(involved.get("namespace") or ""), str(involved.get("name") or ""))


def event_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's ``getEventKey``: what makes two Events the same."""
    involved = event.get("involvedObject") or {}
    return (*_involved(event), str(involved.get("fieldPath") or ""), str(involved.get("uid") or ""),
            str(involved.get("apiVersion") or ""), str(event.get("type") or ""), str(event.get("reason") or ""),
            str(event.get("message") or ""))


def aggregate_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's ``EventAggregatorByReasonFunc``: what makes two Events similar (all but the message)."""
    involved = event.get("involvedObject") or {}
    return (*_involved(event), str(involved.get("uid") or ""), str(involved.get("apiVersion") or ""),
            str(event.get("type") or ""), str(event.get("reason") or ""), str(event.get("reportingComponent") or ""),
            str(event.get("reportingInstance") or ""))


class EventCorrelator:
    """See the module docstring. Owned by whoever records Events (one per controller manager)."""

    def __init__(self, *, size: int = CACHE_SIZE, max_events: int = AGGREGATE_MAX_EVENTS,
                 interval: timedelta = AGGREGATE_INTERVAL) -> None:
        self._aggregates: _Lru[tuple[str, ...], _Aggregate] = _Lru(size)
        self._observed: _Lru[tuple[str, ...], _Observation] = _Lru(size)
        self._max_events = max_events
        self._interval = interval

    def correlate(self, event: Mapping[str, Any], *, now: datetime) -> Correlated:
        """What ``event`` (named, with ``count`` 1 and both timestamps now) becomes."""
        out, key = self._aggregate(event, now=now)
        seen = self._observed.get(key)
        updates = seen is not None
        if seen is not None:
            out["metadata"] = {**out["metadata"], "name": seen.name}
            out.update(count=seen.count + 1, firstTimestamp=seen.first_timestamp)
        self._observed.put(key, _Observation(int(out["count"]), out["firstTimestamp"], str(out["metadata"]["name"])))
        return Correlated(out, key, updates)

    def written(self, correlated: Correlated, stored: Mapping[str, Any]) -> None:
        """Follow what the server stored (client-go's ``UpdateState``)."""
        name = str((stored.get("metadata") or {}).get("name") or correlated.event["metadata"]["name"])
        self._observed.put(correlated.key, _Observation(int(stored.get("count") or 1), stored.get("firstTimestamp"), name))

    def _aggregate(self, event: Mapping[str, Any], *, now: datetime) -> tuple[dict[str, Any], tuple[str, ...]]:
        """client-go's ``EventAggregate``: the Event (or the combined one) and its key."""
        group = aggregate_key(event)
        record = self._aggregates.get(group)
        if record is None or record.last is None or now - record.last > self._interval:
            record = _Aggregate()
        record.messages.add(str(event.get("message") or ""))
        record.last = now
        self._aggregates.put(group, record)
        if len(record.messages) < self._max_events:
            return copy.deepcopy(dict(event)), event_key(event)
        record.messages.pop()
        combined = copy.deepcopy(dict(event))
        stamp = format_time(now)
        combined.update(message=COMBINED_PREFIX + str(event.get("message") or ""), count=1,
                        firstTimestamp=stamp, lastTimestamp=stamp)
        return combined, ("combined", *group)


__all__ = ["AGGREGATE_INTERVAL", "AGGREGATE_MAX_EVENTS", "CACHE_SIZE", "COMBINED_PREFIX", "Correlated",
           "EventCorrelator", "aggregate_key", "event_key"]
