"""The waste accounting's rollups: what a bucket holds, one sample's rates, and their encoding.

Why this module exists: the :class:`~controlplane.reports.accounting.Accumulator` integrates
per-second rates into time buckets, and the buckets are what persistence stores and reports
read. This module is that data: the bucket resolutions and keys, one cell per (state,
cluster, GPU model, MIG profile, namespace, workload) and one per opportunity, the rates of
one classified sample (:func:`cell_rates`, :func:`opportunity_rates`), and the JSON encoding
of buckets and of the held sample (compact: a per-document string table, so repeated names
cost one small integer).

In: the classifier's :class:`~controlplane.reports.classify.DeviceState` values and the
recommender's :class:`~controlplane.reports.recommend.Opportunity` values, or stored JSON.
Out: per-second rates, buckets, and JSON bytes. No I/O happens here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controlplane.reports.classify import ALLOCATED_STATES, DeviceState, Steps, WasteState, finish
from controlplane.reports.recommend import Opportunity

#: ``version`` of every rollup document.
FORMAT_VERSION = 1


#: The length of the fine rollups' buckets unless the hub is told otherwise (``--waste-bucket-length``).
DEFAULT_BUCKET_SECONDS = 60
#: The bucket lengths a hub may use: those that divide a minute, so every report step of whole
#: minutes (the dashboard's, ``step=1m``) is a whole number of buckets and the hour rollups start
#: on a bucket boundary.
BUCKET_LENGTHS = tuple(seconds for seconds in range(1, 61) if 60 % seconds == 0)
#: The length of an hour bucket.
HOUR_SECONDS = 3600


class Resolution(StrEnum):
    """The two rollups: fine buckets (a minute long by default, the store's ``minute`` keys
    whatever their length) and hour buckets."""

    MINUTE = "minute"
    HOUR = "hour"


BucketId = tuple[Resolution, int]
"""A rollup bucket: its resolution and its start (epoch seconds, aligned to the resolution)."""


class BucketLengthMismatch(ValueError):
    """A stored fine bucket of another length than the accumulator's: read as this length, its
    GPU-seconds would land in the wrong buckets, so it is not read."""

    def __init__(self, stored: int, expected: int) -> None:
        super().__init__(f"its buckets are {stored} s long, this hub's are {expected} s")
        self.stored = stored
        self.expected = expected


def check_bucket_seconds(value: int) -> int:
    """``value`` when it is a bucket length a hub may use (:data:`BUCKET_LENGTHS`); else a
    ValueError that says which lengths are."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in BUCKET_LENGTHS:
        allowed = ", ".join(str(seconds) for seconds in BUCKET_LENGTHS[:-1])
        raise ValueError(
            f"the waste rollups' bucket length must be a whole number of seconds that divides a minute"
            f" ({allowed} or {BUCKET_LENGTHS[-1]}), got {value!r}"
        )
    return value

#: (state, cluster, product, profile or "", namespace or "", workload or "")
CellKey = tuple[str, str, str, str, str, str]
#: (kind, *opportunity key)
OpportunityKey = tuple[str, ...]

# Value slots of a cell: GPU-seconds, dollars, utilization x GPU-seconds, GPU-seconds with known utilization.
CELL_GPU, CELL_USD, CELL_UTIL, CELL_KNOWN = 0, 1, 2, 3
# Value slots of an opportunity: unit-seconds, GPU-seconds, dollars saved.
OPP_UNITS, OPP_GPU, OPP_SAVED = 0, 1, 2


@dataclass(slots=True)
class Bucket:
    """One rollup bucket: seconds observed and not, and the cells and opportunities added up."""

    start: int
    observed: float = 0.0
    unobserved: float = 0.0
    cells: dict[CellKey, list[float]] = field(default_factory=dict)
    opportunities: dict[OpportunityKey, list[float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rates:
    """One sample's per-second rates, held until the next sample arrives."""

    time: float
    cells: Mapping[CellKey, tuple[float, ...]]
    opportunities: Mapping[OpportunityKey, tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class RollupChanges:
    """What changed since the last :meth:`~controlplane.reports.accounting.Accumulator.take_changes`."""

    updated: tuple[BucketId, ...] = ()
    expired: tuple[BucketId, ...] = ()
    cursor: bool = False


def cell_rates(states: Iterable[DeviceState]) -> dict[CellKey, tuple[float, ...]]:
    """One sample's per-second cell values, from its classified devices."""
    rates: dict[CellKey, list[float]] = {}
    for s in states:
        key: CellKey = (
            s.state.value,
            s.cluster,
            s.product,
            s.profile or "",
            s.namespace or "",
            s.workload or "",
        )
        values = rates.setdefault(key, [0.0, 0.0, 0.0, 0.0])
        values[CELL_GPU] += s.share
        values[CELL_USD] += s.cost_per_hour / 3600.0
        if s.state in ALLOCATED_STATES and s.utilization is not None:
            values[CELL_UTIL] += s.share * s.utilization
            values[CELL_KNOWN] += s.share
    return {key: tuple(values) for key, values in rates.items()}


class CellRatesMemo:
    """The cell rates of each part of a classification (a cluster's device states), kept while
    the part is the same tuple (:attr:`~controlplane.reports.classify.Classification.parts`):
    an unchanged cluster's cells are not summed again, device by device, every sample."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[tuple[DeviceState, ...], dict[CellKey, tuple[float, ...]]]] = {}

    def warm(self, part: tuple[DeviceState, ...]) -> bool:
        """Sum ``part``'s cells ahead of :meth:`rates` unless they are known; True when summed."""
        entry = self._entries.get(id(part))
        if entry is not None and entry[0] is part:
            return False
        self._entries[id(part)] = (part, cell_rates(part))
        return True

    def rates(self, parts: Sequence[tuple[DeviceState, ...]]) -> dict[CellKey, tuple[float, ...]]:
        """:func:`cell_rates` of the states of every part, in order."""
        return finish(self.rates_steps(parts))

    def rates_steps(self, parts: Sequence[tuple[DeviceState, ...]]) -> Steps[dict[CellKey, tuple[float, ...]]]:
        """:meth:`rates` in steps: one after each part whose cells were summed anew."""
        entries: dict[int, tuple[tuple[DeviceState, ...], dict[CellKey, tuple[float, ...]]]] = {}
        out: dict[CellKey, tuple[float, ...]] = {}
        for part in parts:
            entry = self._entries.get(id(part))
            if entry is not None and entry[0] is part:
                cells = entry[1]
            else:
                cells = cell_rates(part)
                yield
            entries[id(part)] = (part, cells)
            for key, values in cells.items():
                held = out.get(key)
                out[key] = values if held is None else tuple(a + b for a, b in zip(held, values, strict=True))
        self._entries = entries
        return out


def opportunity_rates(opportunities: Iterable[Opportunity]) -> dict[OpportunityKey, tuple[float, ...]]:
    """One sample's per-second opportunity values."""
    rates: dict[OpportunityKey, list[float]] = {}
    for o in opportunities:
        values = rates.setdefault((o.kind.value, *o.key), [0.0, 0.0, 0.0])
        values[OPP_UNITS] += o.units
        values[OPP_GPU] += o.gpus
        values[OPP_SAVED] += o.savings_per_hour / 3600.0
    return {key: tuple(values) for key, values in rates.items()}


def unavailable_rates(cells: Mapping[CellKey, tuple[float, ...]]) -> dict[CellKey, tuple[float, ...]]:
    """The same devices as unavailable (holder dropped, cost kept), for unobserved time."""
    out: dict[CellKey, list[float]] = {}
    for (_, cluster, product, profile, _, _), values in cells.items():
        slot = out.setdefault(
            (WasteState.UNAVAILABLE.value, cluster, product, profile, "", ""), [0.0, 0.0, 0.0, 0.0]
        )
        slot[CELL_GPU] += values[CELL_GPU]
        slot[CELL_USD] += values[CELL_USD]
    return {key: tuple(values) for key, values in out.items()}


def add_into(target: dict[Any, list[float]], rates: Mapping[Any, Sequence[float]], seconds: float) -> None:
    """Add ``rates`` x ``seconds`` into ``target``, key by key."""
    for key, values in rates.items():
        slot = target.get(key)
        if slot is None:
            target[key] = [v * seconds for v in values]
        else:
            for index, value in enumerate(values):
                slot[index] += value * seconds


# ---------------------------------------------------------------------------------------------
# Encoding: JSON with a per-document string table, so repeated names cost one small integer
# ---------------------------------------------------------------------------------------------


def encode_json(doc: Mapping[str, Any]) -> bytes:
    """Compact JSON bytes of a rollup document."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


class _Strings:
    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.index)
        return found

    @property
    def table(self) -> list[str]:
        return list(self.index)


def _encode_entries(strings: _Strings, entries: Mapping[Any, Sequence[float]]) -> list[list[Any]]:
    return [[[strings(part) for part in key], *values] for key, values in entries.items()]


def _decode_entries(
    table: Sequence[str], rows: Iterable[Sequence[Any]]
) -> list[tuple[tuple[str, ...], list[float]]]:
    return [(tuple(table[i] for i in row[0]), [float(v) for v in row[1:]]) for row in rows]


def _cell_key(parts: tuple[str, ...]) -> CellKey:
    if len(parts) != 6:
        raise ValueError(f"a rollup cell key has 6 parts, got {len(parts)}")
    WasteState(parts[0])
    return (parts[0], parts[1], parts[2], parts[3], parts[4], parts[5])


def _entries_to_doc(
    cells: Mapping[Any, Sequence[float]], opportunities: Mapping[Any, Sequence[float]]
) -> dict[str, Any]:
    """``strings``, ``cells`` and ``opportunities`` of a document: keys as indexes into ``strings``."""
    strings = _Strings()
    encoded_cells = _encode_entries(strings, cells)
    encoded_opportunities = _encode_entries(strings, opportunities)
    return {"strings": strings.table, "cells": encoded_cells, "opportunities": encoded_opportunities}


def _entries_from_doc(
    doc: Mapping[str, Any],
) -> tuple[list[tuple[CellKey, list[float]]], list[tuple[tuple[str, ...], list[float]]]]:
    """The cells and opportunities :func:`_entries_to_doc` wrote."""
    table = [str(s) for s in doc["strings"]]
    cells = [(_cell_key(key), values) for key, values in _decode_entries(table, doc["cells"])]
    return cells, _decode_entries(table, doc["opportunities"])


def bucket_to_doc(resolution: Resolution, bucket: Bucket, *, seconds: int = DEFAULT_BUCKET_SECONDS) -> dict[str, Any]:
    """The JSON document of one bucket; a fine bucket of another length than the default
    records its ``seconds`` (the default's documents are as they always were)."""
    doc: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "type": "bucket",
        "resolution": resolution.value,
        "start": bucket.start,
    }
    if resolution is Resolution.MINUTE and seconds != DEFAULT_BUCKET_SECONDS:
        doc["seconds"] = seconds
    doc.update(observed=bucket.observed, unobserved=bucket.unobserved)
    doc.update(_entries_to_doc(bucket.cells, bucket.opportunities))
    return doc


def bucket_from_doc(doc: Mapping[str, Any], *, seconds: int = DEFAULT_BUCKET_SECONDS) -> Bucket:
    """The bucket :func:`bucket_to_doc` wrote; :class:`BucketLengthMismatch` when it is a fine
    bucket of another length than ``seconds``."""
    if Resolution(doc["resolution"]) is Resolution.MINUTE:
        stored = int(doc.get("seconds", DEFAULT_BUCKET_SECONDS))
        if stored != seconds:
            raise BucketLengthMismatch(stored, seconds)
    cells, opportunities = _entries_from_doc(doc)
    return Bucket(
        start=int(doc["start"]),
        observed=float(doc["observed"]),
        unobserved=float(doc["unobserved"]),
        cells=dict(cells),
        opportunities=dict(opportunities),
    )


def cursor_to_doc(cursor: Rates, newest: float | None) -> dict[str, Any]:
    """The JSON document of the held sample's rates."""
    return {
        "version": FORMAT_VERSION,
        "type": "cursor",
        "time": cursor.time,
        "newest": newest,
        **_entries_to_doc(cursor.cells, cursor.opportunities),
    }


def cursor_from_doc(doc: Mapping[str, Any]) -> Rates:
    """The rates :func:`cursor_to_doc` wrote."""
    cells, opportunities = _entries_from_doc(doc)
    return Rates(
        time=float(doc["time"]),
        cells={key: tuple(values) for key, values in cells},
        opportunities={key: tuple(values) for key, values in opportunities},
    )
