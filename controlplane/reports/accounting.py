"""GPU-seconds and dollars per state over time, in bounded rollups.

In: consecutive :class:`~controlplane.reports.fleet.FleetSample` snapshots (``add``). Out:
a :class:`~controlplane.reports.summary.WasteReport` for any window (``query``), and the
rollups as bytes for persistence (``dump``/``load``, and per bucket for
:mod:`controlplane.reports.persistence`). Pure: no I/O, no clock -- time comes from samples.
The rollups' data and encoding are :mod:`controlplane.reports.rollups`; turning a window's
cells into the report's values is :mod:`controlplane.reports.totals`.

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
* Rollups: every interval is split at bucket boundaries and added both to fine buckets of
  ``bucket_seconds`` (default a minute; kept ``minute_retention``, default 2,880 buckets: 48 h
  of minutes) and to per-hour buckets (kept ``hour_retention``, default 90 days); older buckets
  are dropped as time advances, so memory is bounded by (2880 + 2160) buckets whatever the
  uptime. Only the retained part of an interval is written.
* Requests that can never fit (no node of the fleet could hold one of their pods) take no part
  in the states; the latest sample's are kept (not persisted) and every report lists them apart.
* ``query(from, to)`` reads hour buckets for the part of the window older than the fine
  retention (starting at the first whole hour inside it), or than the hour of the oldest fine
  bucket when that is later (fine buckets of another length were dropped), and fine buckets for
  the rest. A bucket partly inside the window counts in proportion to its overlap (exact for
  bucket-aligned windows inside the fine retention, an approximation at the edges of older
  windows).
"""

from __future__ import annotations

import json
import logging
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from controlplane.apis.spot import RecordedReclaim
from controlplane.reports.classify import (
    DEFAULT_THRESHOLD,
    Classification,
    ClassificationMemo,
    Steps,
    classify_fleet_steps,
    finish,
)
from controlplane.reports.fleet import ClusterSample, FleetSample
from controlplane.reports.moves import MoveRecord, in_window
from controlplane.reports.recommend import find_opportunities, recommend
from controlplane.reports.rollups import (
    DEFAULT_BUCKET_SECONDS,
    FORMAT_VERSION,
    HOUR_SECONDS,
    Bucket,
    BucketId,
    CellKey,
    CellRatesMemo,
    OpportunityKey,
    Rates,
    Resolution,
    RollupChanges,
    add_into,
    bucket_from_doc,
    bucket_to_doc,
    check_bucket_seconds,
    cursor_from_doc,
    cursor_to_doc,
    encode_json,
    opportunity_rates,
    unavailable_rates,
)
from controlplane.reports.summary import Dimension, NeverFitRequest, WasteReport
from controlplane.reports.totals import (
    QueueOf,
    group_totals,
    opportunity_totals,
    state_totals,
    unmeasured_hours,
    workload_usage,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_INTERVAL = timedelta(minutes=5)
#: How many fine buckets are kept by default, whatever their length (48 h of minutes).
DEFAULT_FINE_BUCKETS = 2880
DEFAULT_MINUTE_RETENTION = timedelta(seconds=DEFAULT_FINE_BUCKETS * DEFAULT_BUCKET_SECONDS)
DEFAULT_HOUR_RETENTION = timedelta(days=90)


@dataclass(frozen=True, slots=True)
class PassMemos:
    """What a pass keeps of the last one (per cluster: classified states, cell rates). Not part
    of the accounting's state: a new accumulator (a new leadership term restoring the rollups)
    may take over the last one's, so the fleet is not classified from scratch again."""

    classification: ClassificationMemo = field(default_factory=ClassificationMemo)
    cells: CellRatesMemo = field(default_factory=CellRatesMemo)


@dataclass(frozen=True, slots=True)
class PreparedSample:
    """A sample classified, with its rates (:meth:`Accumulator.prepare`), not yet accounted."""

    sample: FleetSample
    classification: Classification
    rates: Rates


def _timestamp(moment: datetime) -> float:
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return moment.timestamp()


class Accumulator:
    """Integrates fleet samples into fine (``bucket_seconds``, a minute by default) and per-hour
    rollups of GPU-seconds and dollars. ``minute_retention`` (the fine rollups') defaults to
    :data:`DEFAULT_FINE_BUCKETS` buckets of ``bucket_seconds``."""

    def __init__(
        self,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        max_interval: timedelta = DEFAULT_MAX_INTERVAL,
        minute_retention: timedelta | None = None,
        hour_retention: timedelta = DEFAULT_HOUR_RETENTION,
        cap_needed_by_demand: bool = True,
        bucket_seconds: int = DEFAULT_BUCKET_SECONDS,
    ) -> None:
        if max_interval <= timedelta(0):
            raise ValueError("max_interval must be positive")
        self.bucket_seconds = check_bucket_seconds(bucket_seconds)
        self.threshold = threshold
        self.max_interval = max_interval
        self.minute_retention = (
            timedelta(seconds=DEFAULT_FINE_BUCKETS * bucket_seconds) if minute_retention is None else minute_retention
        )
        self.hour_retention = hour_retention
        self.cap_needed_by_demand = cap_needed_by_demand
        # OrderedDict: dropping the oldest bucket and peeking at the next oldest are O(1).
        self._buckets: dict[Resolution, OrderedDict[int, Bucket]] = {r: OrderedDict() for r in Resolution}
        self._cursor: Rates | None = None
        self._newest: float | None = None
        self._dirty: set[BucketId] = set()
        self._expired: set[BucketId] = set()
        self._cursor_dirty = False
        self._never_fit: tuple[NeverFitRequest, ...] = ()
        self._spot_reclaims: tuple[RecordedReclaim, ...] = ()
        self._moves: tuple[MoveRecord, ...] = ()
        self.memos = PassMemos()

    # -- feeding -------------------------------------------------------------------------------

    def add(self, sample: FleetSample) -> bool:
        """Account ``sample``; False (and nothing changes) when it is not newer than the last one."""
        return self.commit(self.prepare(sample))

    def warm(self, cluster: ClusterSample) -> bool:
        """Classify ``cluster``'s devices (before matching) and sum their cells ahead of
        :meth:`prepare`, unless the last classification's still hold; True when work was done.
        A caller on an event loop calls it cluster by cluster, with a turn for the loop between."""
        before = self.memos.classification.misses
        part = self.memos.classification.base_states(cluster, self.threshold)
        return self.memos.cells.warm(part) or self.memos.classification.misses > before

    def prepare(self, sample: FleetSample) -> PreparedSample:
        """The costly half of :meth:`add`: classify ``sample`` and work out its rates; it changes
        nothing the reports read (only the per-cluster memos of the previous sample)."""
        return finish(self.prepare_steps(sample))

    def prepare_steps(self, sample: FleetSample) -> Steps[PreparedSample]:
        """:meth:`prepare` in steps (:func:`~controlplane.reports.classify.classify_fleet_steps`,
        then one per cluster whose cells are summed anew), for a caller on an event loop to give
        the loop a turn between them."""
        classification = yield from classify_fleet_steps(
            sample,
            threshold=self.threshold,
            cap_needed_by_demand=self.cap_needed_by_demand,
            memo=self.memos.classification,
        )
        cells = yield from self.memos.cells.rates_steps(classification.parts)
        rates = Rates(
            time=_timestamp(sample.time),
            cells=cells,
            opportunities=opportunity_rates(find_opportunities(sample, classification)),
        )
        return PreparedSample(sample, classification, rates)

    def commit(self, prepared: PreparedSample) -> bool:
        """Account a sample :meth:`prepare` classified; False (and nothing changes) when it is not
        newer than the last one."""
        sample, classification, rates = prepared.sample, prepared.classification, prepared.rates
        now = rates.time
        if self._cursor is not None and now <= self._cursor.time:
            logger.warning(
                "ignoring a fleet sample at %s: not newer than the last one at %s",
                sample.time.isoformat(),
                datetime.fromtimestamp(self._cursor.time, UTC).isoformat(),
            )
            return False
        if self._cursor is not None:
            self._integrate(self._cursor, until=now)
        self._cursor = rates
        self._cursor_dirty = True
        self._never_fit = tuple(
            NeverFitRequest(d.namespace, d.workload, d.replicas, dict(d.gpu_requests or d.requests), d.message)
            for d in classification.never_fit
        )
        self._spot_reclaims = sample.spot_reclaims
        self._moves = sample.moves
        self._newest = now if self._newest is None else max(self._newest, now)
        self._prune()
        return True

    def _integrate(self, held: Rates, *, until: float) -> None:
        held_until = min(until, held.time + self.max_interval.total_seconds())
        self._newest = until if self._newest is None else max(self._newest, until)
        self._spread(held.time, held_until, held.cells, held.opportunities, observed=True)
        if held_until < until:
            self._spread(held_until, until, unavailable_rates(held.cells), {}, observed=False)

    def bucket_length(self, resolution: Resolution) -> int:
        """Seconds in one bucket of ``resolution``."""
        return self.bucket_seconds if resolution is Resolution.MINUTE else HOUR_SECONDS

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
            size = self.bucket_length(resolution)
            buckets = self._buckets[resolution]
            piece = max(start, self._newest - self._retention(resolution))
            while piece < end:
                bucket_start = math.floor(piece / size) * size
                piece_end = min(end, bucket_start + size)
                seconds = piece_end - piece
                bucket = buckets.get(bucket_start)
                if bucket is None:
                    bucket = buckets[bucket_start] = Bucket(bucket_start)
                if observed:
                    bucket.observed += seconds
                else:
                    bucket.unobserved += seconds
                add_into(bucket.cells, cells, seconds)
                add_into(bucket.opportunities, opportunities, seconds)
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
                if start + self.bucket_length(resolution) > cutoff:
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
        split = math.ceil(minute_floor / HOUR_SECONDS) * HOUR_SECONDS
        fine = self._buckets[Resolution.MINUTE]
        if fine:
            # The hours before the oldest fine bucket's are the hour rollups' even inside the fine
            # retention: fine buckets of another length were dropped there (none were ever kept
            # before a hub's first sample, and its hour buckets are empty then too).
            split = max(split, math.floor(next(iter(fine)) / HOUR_SECONDS) * HOUR_SECONDS)
        parts = []
        if start < min(end, split):
            parts.append((Resolution.HOUR, start, min(end, split)))
        if max(start, split) < end:
            parts.append((Resolution.MINUTE, max(start, split), end))
        return parts

    def query(
        self, start: datetime, end: datetime, *, by: Iterable[Dimension | str] = (), queues: QueueOf | None = None
    ) -> WasteReport:
        """The waste report for ``[start, end)``, grouped by ``by`` (any of :class:`Dimension`;
        ``queues`` says which ClusterQueue admitted each workload, for ``clusterqueue``)."""
        window_start, window_end = _timestamp(start), _timestamp(end)
        if window_end <= window_start:
            raise ValueError("the report window must end after it starts")
        dimensions = tuple(dict.fromkeys(Dimension(d) for d in by))
        cells: dict[CellKey, list[float]] = {}
        opportunities: dict[OpportunityKey, list[float]] = {}
        observed = unobserved = 0.0
        for resolution, part_start, part_end in self._parts(window_start, window_end):
            size = self.bucket_length(resolution)
            for bucket in self._buckets[resolution].values():
                overlap = min(part_end, bucket.start + size) - max(part_start, bucket.start)
                if overlap <= 0:
                    continue
                fraction = overlap / size
                observed += bucket.observed * fraction
                unobserved += bucket.unobserved * fraction
                add_into(cells, bucket.cells, fraction)
                add_into(opportunities, bucket.opportunities, fraction)
        now = self._cursor
        report = WasteReport(
            window_from=start.astimezone(UTC),
            window_to=end.astimezone(UTC),
            observed_seconds=observed,
            unobserved_seconds=unobserved,
            by=dimensions,
            totals=state_totals(cells.items()),
            groups=group_totals(cells, dimensions, queues=queues),
            workloads=workload_usage(cells, observed, now=now.cells if now else {}),
            opportunities=opportunity_totals(opportunities, observed, now=now.opportunities if now else {}),
            unmeasured=unmeasured_hours(cells),
            never_fit=self._never_fit,
            spot_reclaims=tuple(r for r in self._spot_reclaims if start <= r.time < end),
            moves=in_window(self._moves, end.astimezone(UTC)),
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
        return encode_json(bucket_to_doc(resolution, self._buckets[resolution][start], seconds=self.bucket_seconds))

    def encode_cursor(self) -> bytes | None:
        """The held sample's rates as JSON bytes, None before the first sample."""
        return None if self._cursor is None else encode_json(cursor_to_doc(self._cursor, self._newest))

    def restore(self, data: bytes) -> None:
        """Load one document written by :meth:`encode_bucket` or :meth:`encode_cursor`.

        Buckets outside the retention are ignored; call :meth:`finish_restore` after the last.
        A fine bucket of another length than :attr:`bucket_seconds` (saved by a hub with another
        ``--waste-bucket-length``) raises :class:`~controlplane.reports.rollups.BucketLengthMismatch`
        and is not loaded.
        """
        doc = json.loads(data)
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported rollup format version {doc.get('version')!r}")
        if doc.get("type") == "cursor":
            self._cursor = cursor_from_doc(doc)
            newest = float(doc.get("newest") or self._cursor.time)
            self._newest = newest if self._newest is None else max(self._newest, newest)
            return
        bucket = bucket_from_doc(doc, seconds=self.bucket_seconds)
        self._buckets[Resolution(doc["resolution"])][bucket.start] = bucket

    def finish_restore(self) -> None:
        """Re-order restored buckets by time and drop the ones outside the retention."""
        for resolution in Resolution:
            self._buckets[resolution] = OrderedDict(sorted(self._buckets[resolution].items()))
        if self._newest is None:
            for resolution in Resolution:
                for start in self._buckets[resolution]:
                    end = float(start + self.bucket_length(resolution))
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
                "bucketSeconds": self.bucket_seconds,
            },
            "newest": self._newest,
            "cursor": None if self._cursor is None else cursor_to_doc(self._cursor, self._newest),
            "buckets": [
                bucket_to_doc(resolution, bucket, seconds=self.bucket_seconds)
                for resolution in Resolution
                for bucket in self._buckets[resolution].values()
            ],
        }
        return encode_json(doc)

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
            bucket_seconds=int(config.get("bucketSeconds", DEFAULT_BUCKET_SECONDS)),
        )
        for bucket_doc in doc["buckets"]:
            accumulator._buckets[Resolution(bucket_doc["resolution"])][int(bucket_doc["start"])] = (
                bucket_from_doc(bucket_doc, seconds=accumulator.bucket_seconds)
            )
        if doc.get("cursor") is not None:
            accumulator._cursor = cursor_from_doc(doc["cursor"])
        accumulator._newest = None if doc.get("newest") is None else float(doc["newest"])
        accumulator.finish_restore()
        return accumulator
