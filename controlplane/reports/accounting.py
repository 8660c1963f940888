"""GPU-seconds and dollars per state over time, in bounded rollups.

In: consecutive :class:`~controlplane.reports.fleet.FleetSample` snapshots (``add``). Out:
a :class:`~controlplane.reports.summary.WasteReport` for any window (``query``), and the
rollups as bytes for persistence (``dump``/``load``, and per bucket for
:mod:`controlplane.reports.persistence`). Pure: no I/O, no clock -- time comes from samples.

Integration rules, exactly:

* A sample describes the fleet from its own time until the next sample: when sample *k+1*
  arrives, sample *k*'s states are integrated over ``[t_k, t_k+1)``. The newest sample is held
  (the *cursor*) until its successor arrives, so a report lags by at most one interval.
* An interval is capped at ``max_interval`` (default 5 min). Beyond it nobody observed the
  fleet (the hub was down, the sampler stalled): the rest of the gap is accounted as
  **unavailable** for the devices of the last sample (same cluster, product and profile, cost
  kept, holder dropped) and counted as unobserved time, so the fleet's GPU-hours still
  reconcile with its GPU count x time, and the gap is visible instead of silently missing.
* A sample older than or equal to the cursor is ignored (``add`` returns False).
* Every device contributes ``share`` GPU-seconds per second and ``share x price / 3600``
  dollars per second, keyed by (state, cluster, GPU model, MIG profile, namespace, workload);
  allocated devices with a known utilization also add ``share x utilization`` so reports can
  show mean utilization. Opportunities (:mod:`controlplane.reports.recommend`) integrate the
  same way.
* Rollups: every interval is split at bucket boundaries and added both to per-minute buckets
  (kept ``minute_retention``, default 48 h) and to per-hour buckets (kept ``hour_retention``,
  default 90 days); older buckets are dropped as time advances, so memory is bounded by
  (2880 + 2160) buckets whatever the uptime. Only the retained part of an interval is written.
* Requests that can never fit (no node of the fleet could hold one of their pods) take no part
  in the states; the latest sample's are kept (not persisted) and every report lists them apart.
* ``query(from, to)`` reads hour buckets for the part of the window older than the minute
  retention (starting at the first whole hour inside it) and minute buckets for the rest. A
  bucket partly inside the window counts in proportion to its overlap (exact for
  minute-aligned windows in the last 48 h, an approximation at the edges of older windows).
"""

from __future__ import annotations

import json
import logging
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from controlplane.reports.classify import (
    ALLOCATED_STATES,
    DEFAULT_THRESHOLD,
    MEASURED_STATES,
    DeviceState,
    WasteState,
    classify_fleet,
)
from controlplane.reports.fleet import FleetSample
from controlplane.reports.recommend import Opportunity, find_opportunities, recommend
from controlplane.reports.summary import (
    Dimension,
    GroupTotals,
    NeverFitRequest,
    OpportunityTotal,
    StateTotals,
    WasteReport,
    WorkloadUsage,
)

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
DEFAULT_MAX_INTERVAL = timedelta(minutes=5)
DEFAULT_MINUTE_RETENTION = timedelta(hours=48)
DEFAULT_HOUR_RETENTION = timedelta(days=90)
SECONDS_PER_DAY = 86400.0


class Resolution(StrEnum):
    MINUTE = "minute"
    HOUR = "hour"

    @property
    def seconds(self) -> int:
        return 60 if self is Resolution.MINUTE else 3600


BucketId = tuple[Resolution, int]
"""A rollup bucket: its resolution and its start (epoch seconds, aligned to the resolution)."""

#: (state, cluster, product, profile or "", namespace or "", workload or "")
CellKey = tuple[str, str, str, str, str, str]
#: (kind, *opportunity key)
OpportunityKey = tuple[str, ...]

# Value slots of a cell: GPU-seconds, dollars, utilization x GPU-seconds, GPU-seconds with known utilization.
_GPU, _USD, _UTIL, _KNOWN = 0, 1, 2, 3
# Value slots of an opportunity: unit-seconds, GPU-seconds, dollars saved.
_UNITS, _OPP_GPU, _SAVED = 0, 1, 2


@dataclass(slots=True)
class _Bucket:
    start: int
    observed: float = 0.0
    unobserved: float = 0.0
    cells: dict[CellKey, list[float]] = field(default_factory=dict)
    opportunities: dict[OpportunityKey, list[float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Rates:
    """One sample's per-second rates, held until the next sample arrives."""

    time: float
    cells: Mapping[CellKey, tuple[float, ...]]
    opportunities: Mapping[OpportunityKey, tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class RollupChanges:
    """What changed since the last :meth:`Accumulator.take_changes`."""

    updated: tuple[BucketId, ...] = ()
    expired: tuple[BucketId, ...] = ()
    cursor: bool = False


def _cell_rates(states: Iterable[DeviceState]) -> dict[CellKey, tuple[float, ...]]:
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
        values[_GPU] += s.share
        values[_USD] += s.cost_per_hour / 3600.0
        if s.state in ALLOCATED_STATES and s.utilization is not None:
            values[_UTIL] += s.share * s.utilization
            values[_KNOWN] += s.share
    return {key: tuple(values) for key, values in rates.items()}


def _opportunity_rates(opportunities: Iterable[Opportunity]) -> dict[OpportunityKey, tuple[float, ...]]:
    rates: dict[OpportunityKey, list[float]] = {}
    for o in opportunities:
        values = rates.setdefault((o.kind.value, *o.key), [0.0, 0.0, 0.0])
        values[_UNITS] += o.units
        values[_OPP_GPU] += o.gpus
        values[_SAVED] += o.savings_per_hour / 3600.0
    return {key: tuple(values) for key, values in rates.items()}


def _unavailable(cells: Mapping[CellKey, tuple[float, ...]]) -> dict[CellKey, tuple[float, ...]]:
    out: dict[CellKey, list[float]] = {}
    for (_, cluster, product, profile, _, _), values in cells.items():
        slot = out.setdefault(
            (WasteState.UNAVAILABLE.value, cluster, product, profile, "", ""), [0.0, 0.0, 0.0, 0.0]
        )
        slot[_GPU] += values[_GPU]
        slot[_USD] += values[_USD]
    return {key: tuple(values) for key, values in out.items()}


def _add_into(target: dict[Any, list[float]], rates: Mapping[Any, Sequence[float]], seconds: float) -> None:
    for key, values in rates.items():
        slot = target.get(key)
        if slot is None:
            target[key] = [v * seconds for v in values]
        else:
            for index, value in enumerate(values):
                slot[index] += value * seconds


def _timestamp(moment: datetime) -> float:
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return moment.timestamp()


def _group_key(dimensions: Sequence[Dimension], cell: CellKey) -> tuple[tuple[str, str | None], ...]:
    _, cluster, product, profile, namespace, workload = cell
    parts: dict[str, str | None] = {}
    for dimension in dimensions:
        if dimension is Dimension.CLUSTER:
            parts["cluster"] = cluster
        elif dimension is Dimension.MODEL:
            parts["model"] = product
        elif dimension is Dimension.PROFILE:
            parts["profile"] = profile or None
        elif dimension is Dimension.NAMESPACE:
            parts["namespace"] = namespace or None
        else:
            parts["namespace"] = namespace or None
            parts["workload"] = workload or None
    return tuple(parts.items())


class Accumulator:
    """Integrates fleet samples into per-minute and per-hour rollups of GPU-seconds and dollars."""

    def __init__(
        self,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        max_interval: timedelta = DEFAULT_MAX_INTERVAL,
        minute_retention: timedelta = DEFAULT_MINUTE_RETENTION,
        hour_retention: timedelta = DEFAULT_HOUR_RETENTION,
        cap_needed_by_demand: bool = True,
    ) -> None:
        if max_interval <= timedelta(0):
            raise ValueError("max_interval must be positive")
        self.threshold = threshold
        self.max_interval = max_interval
        self.minute_retention = minute_retention
        self.hour_retention = hour_retention
        self.cap_needed_by_demand = cap_needed_by_demand
        # OrderedDict: dropping the oldest bucket and peeking at the next oldest are O(1).
        self._buckets: dict[Resolution, OrderedDict[int, _Bucket]] = {r: OrderedDict() for r in Resolution}
        self._cursor: _Rates | None = None
        self._newest: float | None = None
        self._dirty: set[BucketId] = set()
        self._expired: set[BucketId] = set()
        self._cursor_dirty = False
        self._never_fit: tuple[NeverFitRequest, ...] = ()

    # -- feeding -------------------------------------------------------------------------------

    def add(self, sample: FleetSample) -> bool:
        """Account ``sample``; False (and nothing changes) when it is not newer than the last one."""
        now = _timestamp(sample.time)
        if self._cursor is not None and now <= self._cursor.time:
            logger.warning(
                "ignoring a fleet sample at %s: not newer than the last one at %s",
                sample.time.isoformat(),
                datetime.fromtimestamp(self._cursor.time, UTC).isoformat(),
            )
            return False
        classification = classify_fleet(
            sample, threshold=self.threshold, cap_needed_by_demand=self.cap_needed_by_demand
        )
        rates = _Rates(
            time=now,
            cells=_cell_rates(classification.states),
            opportunities=_opportunity_rates(find_opportunities(sample, classification)),
        )
        if self._cursor is not None:
            self._integrate(self._cursor, until=now)
        self._cursor = rates
        self._cursor_dirty = True
        self._never_fit = tuple(
            NeverFitRequest(d.namespace, d.workload, d.replicas, dict(d.gpu_requests or d.requests), d.message)
            for d in classification.never_fit
        )
        self._newest = now if self._newest is None else max(self._newest, now)
        self._prune()
        return True

    def _integrate(self, held: _Rates, *, until: float) -> None:
        held_until = min(until, held.time + self.max_interval.total_seconds())
        self._newest = until if self._newest is None else max(self._newest, until)
        self._spread(held.time, held_until, held.cells, held.opportunities, observed=True)
        if held_until < until:
            self._spread(held_until, until, _unavailable(held.cells), {}, observed=False)

    def _retention(self, resolution: Resolution) -> float:
        retention = self.minute_retention if resolution is Resolution.MINUTE else self.hour_retention
        return retention.total_seconds()

    def _spread(
        self,
        start: float,
        end: float,
        cells: Mapping[CellKey, tuple[float, ...]],
        opportunities: Mapping[OpportunityKey, tuple[float, ...]],
        *,
        observed: bool,
    ) -> None:
        assert self._newest is not None
        for resolution in Resolution:
            size = resolution.seconds
            buckets = self._buckets[resolution]
            piece = max(start, self._newest - self._retention(resolution))
            while piece < end:
                bucket_start = math.floor(piece / size) * size
                piece_end = min(end, bucket_start + size)
                seconds = piece_end - piece
                bucket = buckets.get(bucket_start)
                if bucket is None:
                    bucket = buckets[bucket_start] = _Bucket(bucket_start)
                if observed:
                    bucket.observed += seconds
                else:
                    bucket.unobserved += seconds
                _add_into(bucket.cells, cells, seconds)
                _add_into(bucket.opportunities, opportunities, seconds)
                self._dirty.add((resolution, bucket_start))
                piece = piece_end

    def _prune(self) -> None:
        if self._newest is None:
            return
        for resolution in Resolution:
            buckets = self._buckets[resolution]
            cutoff = self._newest - self._retention(resolution)
            # Buckets are created (and re-ordered on load) in time order.
            while buckets:
                start = next(iter(buckets))
                if start + resolution.seconds > cutoff:
                    break
                buckets.popitem(last=False)
                self._dirty.discard((resolution, start))
                self._expired.add((resolution, start))

    # -- reading -------------------------------------------------------------------------------

    @property
    def newest(self) -> datetime | None:
        """Time of the newest sample accounted (None before the first)."""
        return None if self._newest is None else datetime.fromtimestamp(self._newest, UTC)

    def bucket_counts(self) -> dict[Resolution, int]:
        return {resolution: len(buckets) for resolution, buckets in self._buckets.items()}

    def _parts(self, start: float, end: float) -> list[tuple[Resolution, float, float]]:
        if self._newest is None:
            return []
        minute_floor = self._newest - self.minute_retention.total_seconds()
        split = math.ceil(minute_floor / 3600.0) * 3600.0
        parts = []
        if start < min(end, split):
            parts.append((Resolution.HOUR, start, min(end, split)))
        if max(start, split) < end:
            parts.append((Resolution.MINUTE, max(start, split), end))
        return parts

    def query(self, start: datetime, end: datetime, *, by: Iterable[Dimension | str] = ()) -> WasteReport:
        """The waste report for ``[start, end)``, grouped by ``by`` (any of :class:`Dimension`)."""
        window_start, window_end = _timestamp(start), _timestamp(end)
        if window_end <= window_start:
            raise ValueError("the report window must end after it starts")
        dimensions = tuple(dict.fromkeys(Dimension(d) for d in by))
        cells: dict[CellKey, list[float]] = {}
        opportunities: dict[OpportunityKey, list[float]] = {}
        observed = unobserved = 0.0
        for resolution, part_start, part_end in self._parts(window_start, window_end):
            size = resolution.seconds
            for bucket in self._buckets[resolution].values():
                overlap = min(part_end, bucket.start + size) - max(part_start, bucket.start)
                if overlap <= 0:
                    continue
                fraction = overlap / size
                observed += bucket.observed * fraction
                unobserved += bucket.unobserved * fraction
                _add_into(cells, bucket.cells, fraction)
                _add_into(opportunities, bucket.opportunities, fraction)
        now = self._cursor
        report = WasteReport(
            window_from=start.astimezone(UTC),
            window_to=end.astimezone(UTC),
            observed_seconds=observed,
            unobserved_seconds=unobserved,
            by=dimensions,
            totals=_totals(cells.items()),
            groups=_groups(cells, dimensions),
            workloads=_workloads(cells, observed, now=now.cells if now else {}),
            opportunities=_opportunity_totals(opportunities, observed, now=now.opportunities if now else {}),
            unmeasured=_unmeasured(cells),
            never_fit=self._never_fit,
        )
        return replace(report, recommendations=tuple(recommend(report)))

    # -- persistence ---------------------------------------------------------------------------

    def take_changes(self) -> RollupChanges:
        """Buckets written or dropped (and whether the cursor moved) since the last call."""
        changes = RollupChanges(
            updated=tuple(sorted(self._dirty)),
            expired=tuple(sorted(self._expired)),
            cursor=self._cursor_dirty,
        )
        self._dirty.clear()
        self._expired.clear()
        self._cursor_dirty = False
        return changes

    def requeue(self, changes: RollupChanges) -> None:
        """Mark ``changes`` unsaved again (after a failed save)."""
        for bucket_id in changes.updated:
            if bucket_id[1] in self._buckets[bucket_id[0]]:
                self._dirty.add(bucket_id)
        self._expired.update(changes.expired)
        self._cursor_dirty = self._cursor_dirty or changes.cursor

    def bucket_ids(self) -> list[BucketId]:
        return [(resolution, start) for resolution in Resolution for start in self._buckets[resolution]]

    def encode_bucket(self, bucket_id: BucketId) -> bytes:
        """One bucket as JSON bytes (the unit persistence stores); KeyError when not retained."""
        resolution, start = bucket_id
        return _json(_bucket_doc(resolution, self._buckets[resolution][start]))

    def encode_cursor(self) -> bytes | None:
        """The held sample's rates as JSON bytes, None before the first sample."""
        return None if self._cursor is None else _json(_cursor_doc(self._cursor, self._newest))

    def restore(self, data: bytes) -> None:
        """Load one document written by :meth:`encode_bucket` or :meth:`encode_cursor`.

        Buckets outside the retention are ignored; call :meth:`finish_restore` after the last.
        """
        doc = json.loads(data)
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported rollup format version {doc.get('version')!r}")
        if doc.get("type") == "cursor":
            self._cursor = _cursor_from_doc(doc)
            newest = float(doc.get("newest") or self._cursor.time)
            self._newest = newest if self._newest is None else max(self._newest, newest)
            return
        bucket = _bucket_from_doc(doc)
        self._buckets[Resolution(doc["resolution"])][bucket.start] = bucket

    def finish_restore(self) -> None:
        """Re-order restored buckets by time and drop the ones outside the retention."""
        for resolution in Resolution:
            self._buckets[resolution] = OrderedDict(sorted(self._buckets[resolution].items()))
        if self._newest is None:
            for resolution in Resolution:
                for start in self._buckets[resolution]:
                    end = float(start + resolution.seconds)
                    self._newest = end if self._newest is None else max(self._newest, end)
        self._prune()
        self._dirty.clear()
        self._cursor_dirty = False

    def dump(self) -> bytes:
        """Everything (configuration, cursor, every retained bucket) as JSON bytes."""
        doc = {
            "version": FORMAT_VERSION,
            "config": {
                "threshold": self.threshold,
                "maxIntervalSeconds": self.max_interval.total_seconds(),
                "minuteRetentionSeconds": self.minute_retention.total_seconds(),
                "hourRetentionSeconds": self.hour_retention.total_seconds(),
                "capNeededByDemand": self.cap_needed_by_demand,
            },
            "newest": self._newest,
            "cursor": None if self._cursor is None else _cursor_doc(self._cursor, self._newest),
            "buckets": [
                _bucket_doc(resolution, bucket)
                for resolution in Resolution
                for bucket in self._buckets[resolution].values()
            ],
        }
        return _json(doc)

    @classmethod
    def load(cls, data: bytes) -> Accumulator:
        """The accumulator :meth:`dump` wrote."""
        doc = json.loads(data)
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported rollup format version {doc.get('version')!r}")
        config = doc["config"]
        accumulator = cls(
            threshold=float(config["threshold"]),
            max_interval=timedelta(seconds=float(config["maxIntervalSeconds"])),
            minute_retention=timedelta(seconds=float(config["minuteRetentionSeconds"])),
            hour_retention=timedelta(seconds=float(config["hourRetentionSeconds"])),
            cap_needed_by_demand=bool(config["capNeededByDemand"]),
        )
        for bucket_doc in doc["buckets"]:
            accumulator._buckets[Resolution(bucket_doc["resolution"])][int(bucket_doc["start"])] = (
                _bucket_from_doc(bucket_doc)
            )
        if doc.get("cursor") is not None:
            accumulator._cursor = _cursor_from_doc(doc["cursor"])
        accumulator._newest = None if doc.get("newest") is None else float(doc["newest"])
        accumulator.finish_restore()
        return accumulator


# ---------------------------------------------------------------------------------------------
# Report assembly
# ---------------------------------------------------------------------------------------------


def _totals(cells: Iterable[tuple[CellKey, list[float]]]) -> StateTotals:
    hours: dict[WasteState, float] = {}
    dollars: dict[WasteState, float] = {}
    for key, values in cells:
        state = WasteState(key[0])
        hours[state] = hours.get(state, 0.0) + values[_GPU] / 3600.0
        dollars[state] = dollars.get(state, 0.0) + values[_USD]
    return StateTotals(hours, dollars)


def _groups(cells: Mapping[CellKey, list[float]], dimensions: Sequence[Dimension]) -> tuple[GroupTotals, ...]:
    if not dimensions:
        return ()
    grouped: dict[tuple[tuple[str, str | None], ...], list[tuple[CellKey, list[float]]]] = {}
    for key, values in cells.items():
        grouped.setdefault(_group_key(dimensions, key), []).append((key, values))
    groups = [GroupTotals(dict(key), _totals(members)) for key, members in grouped.items()]
    groups.sort(
        key=lambda g: (
            -g.totals.total_cost_usd,
            -g.totals.total_gpu_hours,
            sorted((k, v or "") for k, v in g.key.items()),
        )
    )
    return tuple(groups)


def _workloads(
    cells: Mapping[CellKey, list[float]],
    observed: float,
    *,
    now: Mapping[CellKey, Sequence[float]],
) -> tuple[WorkloadUsage, ...]:
    """Per-workload usage over the window (``cells``), with what each holds in the newest
    sample (``now``, the held sample's per-second rates)."""
    usage: dict[tuple[str, str], list[float]] = {}
    for (state, _, _, _, namespace, workload), values in cells.items():
        if WasteState(state) not in ALLOCATED_STATES or not (namespace or workload):
            continue
        # allocated GPU-s, util x GPU-s, known GPU-s, idle GPU-s, idle $, $, measured GPU-s
        slot = usage.setdefault((namespace, workload), [0.0] * 7)
        slot[0] += values[_GPU]
        slot[1] += values[_UTIL]
        slot[2] += values[_KNOWN]
        slot[5] += values[_USD]
        if state == WasteState.IDLE_ALLOCATED:
            slot[3] += values[_GPU]
            slot[4] += values[_USD]
        if WasteState(state) in MEASURED_STATES:
            slot[6] += values[_GPU]
    held: dict[tuple[str, str], list[float]] = {}
    for (state, _, _, _, namespace, workload), rates in now.items():
        if WasteState(state) in ALLOCATED_STATES and (namespace or workload):
            holding = held.setdefault((namespace, workload), [0.0, 0.0])
            holding[0] += rates[_GPU]
            holding[1] += rates[_USD] * 3600.0
    out = [
        WorkloadUsage(
            namespace=namespace,
            workload=workload,
            allocated_gpus=gpu_seconds / observed if observed > 0 else 0.0,
            mean_utilization=util / known if known > 0 else None,
            allocated_gpu_hours=gpu_seconds / 3600.0,
            idle_gpu_hours=idle / 3600.0,
            idle_cost_usd=idle_usd,
            cost_usd=usd,
            measured_gpu_hours=measured / 3600.0,
            gpus_now=held.get((namespace, workload), [0.0, 0.0])[0],
            cost_usd_per_hour_now=held.get((namespace, workload), [0.0, 0.0])[1],
        )
        for (namespace, workload), (gpu_seconds, util, known, idle, idle_usd, usd, measured) in usage.items()
    ]
    out.sort(key=lambda w: (-w.idle_cost_usd, -w.idle_gpu_hours, w.namespace, w.workload))
    return tuple(out)


def _unmeasured(cells: Mapping[CellKey, list[float]]) -> tuple[tuple[str, float], ...]:
    """GPU-hours allocated with no utilization measured, per cluster, largest first."""
    hours: dict[str, float] = {}
    for (state, cluster, *_), values in cells.items():
        if state == WasteState.UNMEASURED and values[_GPU] > 0:
            hours[cluster] = hours.get(cluster, 0.0) + values[_GPU] / 3600.0
    return tuple(sorted(hours.items(), key=lambda item: (-item[1], item[0])))


def _opportunity_totals(
    opportunities: Mapping[OpportunityKey, list[float]],
    observed: float,
    *,
    now: Mapping[OpportunityKey, Sequence[float]],
) -> tuple[OpportunityTotal, ...]:
    if observed <= 0:
        return ()
    zero = (0.0, 0.0, 0.0)
    out = [
        OpportunityTotal(
            kind=key[0],
            key=key[1:],
            mean_units=values[_UNITS] / observed,
            mean_gpus=values[_OPP_GPU] / observed,
            savings_usd=values[_SAVED],
            savings_usd_per_day=values[_SAVED] / observed * SECONDS_PER_DAY,
            units_now=now.get(key, zero)[_UNITS],
            gpus_now=now.get(key, zero)[_OPP_GPU],
            savings_usd_per_hour_now=now.get(key, zero)[_SAVED] * 3600.0,
        )
        for key, values in opportunities.items()
    ]
    out.sort(key=lambda o: (-o.savings_usd, o.kind, o.key))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Encoding: JSON with a per-document string table, so repeated names cost one small integer
# ---------------------------------------------------------------------------------------------


def _json(doc: Mapping[str, Any]) -> bytes:
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


def _bucket_doc(resolution: Resolution, bucket: _Bucket) -> dict[str, Any]:
    strings = _Strings()
    cells = _encode_entries(strings, bucket.cells)
    opportunities = _encode_entries(strings, bucket.opportunities)
    return {
        "version": FORMAT_VERSION,
        "type": "bucket",
        "resolution": resolution.value,
        "start": bucket.start,
        "observed": bucket.observed,
        "unobserved": bucket.unobserved,
        "strings": strings.table,
        "cells": cells,
        "opportunities": opportunities,
    }


def _bucket_from_doc(doc: Mapping[str, Any]) -> _Bucket:
    table = [str(s) for s in doc["strings"]]
    return _Bucket(
        start=int(doc["start"]),
        observed=float(doc["observed"]),
        unobserved=float(doc["unobserved"]),
        cells={_cell_key(key): values for key, values in _decode_entries(table, doc["cells"])},
        opportunities=dict(_decode_entries(table, doc["opportunities"])),
    )


def _cursor_doc(cursor: _Rates, newest: float | None) -> dict[str, Any]:
    strings = _Strings()
    cells = _encode_entries(strings, cursor.cells)
    opportunities = _encode_entries(strings, cursor.opportunities)
    return {
        "version": FORMAT_VERSION,
        "type": "cursor",
        "time": cursor.time,
        "newest": newest,
        "strings": strings.table,
        "cells": cells,
        "opportunities": opportunities,
    }


def _cursor_from_doc(doc: Mapping[str, Any]) -> _Rates:
    table = [str(s) for s in doc["strings"]]
    return _Rates(
        time=float(doc["time"]),
        cells={_cell_key(key): tuple(values) for key, values in _decode_entries(table, doc["cells"])},
        opportunities={key: tuple(values) for key, values in _decode_entries(table, doc["opportunities"])},
    )
