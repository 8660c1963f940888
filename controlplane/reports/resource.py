"""The waste report as a read-only API object: ``reports.gpufed.io/v1alpha1`` ``WasteReport``.

In: a report request (the object's name and the query parameters), the accumulator's newest
sample time and "now"; an :class:`~controlplane.reports.accounting.Accumulator` to query.
Out: the WasteReport object (a JSON-ready dict), its optional time series, and the way back
from the JSON contract to a :class:`~controlplane.reports.summary.WasteReport` (what
``gpufed waste`` renders as a table or CSV). Pure: no I/O, no clock.

The object::

    apiVersion: reports.gpufed.io/v1alpha1
    kind: WasteReport
    metadata: {name: last-24h, creationTimestamp: <when computed>}
    spec:                       # what was asked
      since: 24h                # or from/to for the name "custom"
      by: [cluster]
      top: 10
      step: 5m                  # only when a series was asked for
    status:                     # the JSON contract of ``gpufed waste -o json``
      window: {from, to, observed_hours, unobserved_hours}
      by, totals, groups, top_idle_workloads, recommendations
      series:                   # only with ?step=: mean GPUs per state in each step
        - {from, to, observed_hours, gpus: {<state>: f}, cost_usd: {<state>: f}}

Names: ``last-<duration>`` (``last-1h``, ``last-24h``, ``last-7d``, ``last-1h30m``) is the window
of that length ending at the last complete bucket of accounting (the rollups' buckets are a
minute long unless the hub's ``--waste-bucket-length`` says otherwise: a bucket-aligned window
is exact, and asking again with the reported ``from``/``to`` gives the same numbers, as nothing
inside it changes any more), and ``custom`` takes ``from`` (required) and ``to`` (default: the
start of that same bucket) as query parameters, RFC 3339 times. Both take ``by`` (comma-separated dimensions, repeatable),
``top`` (how many idle workloads, default 10) and ``step`` (a duration of at least one bucket,
1m by default: add the time series; at most :data:`MAX_SERIES_POINTS` steps). Listing without a name returns the
windows of :data:`DEFAULT_WINDOWS`, or the one window that ``since`` or ``from``/``to`` asks for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from controlplane.apis.constants import REPORTS_GROUP
from controlplane.apis.spot import RecordedReclaim
from controlplane.apis.timestamps import format_time, parse_time
from controlplane.reports.accounting import Accumulator
from controlplane.reports.classify import STATES, WasteState
from controlplane.reports.moves import MoveRecord
from controlplane.reports.report import DEFAULT_TOP, to_json
from controlplane.reports.rollups import DEFAULT_BUCKET_SECONDS
from controlplane.reports.scoping import for_namespace, with_namespace
from controlplane.reports.summary import (
    Dimension,
    GroupTotals,
    NeverFitRequest,
    Recommendation,
    RecommendationKind,
    StateTotals,
    WasteReport,
    WorkloadUsage,
)
from controlplane.reports.totals import QueueOf

GROUP = REPORTS_GROUP
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "WasteReport"
LIST_KIND = f"{KIND}List"
PLURAL = "wastereports"
SINGULAR = "wastereport"
#: The API path of the collection.
COLLECTION_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


def namespaced_collection_path(namespace: str) -> str:
    """The collection of one namespace's reports (:mod:`controlplane.reports.scoping`)."""
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"


LAST_PREFIX = "last-"
CUSTOM = "custom"
DEFAULT_WINDOWS = ("last-1h", "last-24h", "last-7d", "last-30d")
MAX_SERIES_POINTS = 1000
MAX_TOP = 1000
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: The longest window or step a report takes: far beyond any retained history, and short
#: enough that ``now - since`` stays a valid date.
MAX_DURATION = timedelta(days=3660)


class QueryError(ValueError):
    """A report request that cannot be answered; ``field`` names the parameter at fault and
    ``not_found`` marks an unknown report name (HTTP 404 rather than 400)."""

    def __init__(self, message: str, *, field: str = "", not_found: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.not_found = not_found


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``24h``, ``7d``, ``2w``, ``1h30m`` -> a positive timedelta."""
    total = 0
    number = ""
    seen_unit = False
    for char in text.strip():
        if char.isdigit():
            number += char
        elif char in _DURATION_UNITS and number:
            total += int(number) * _DURATION_UNITS[char]
            number = ""
            seen_unit = True
        else:
            raise ValueError(f"invalid duration {text!r}: use forms like 90s, 15m, 24h, 7d or 1h30m")
    if number or not seen_unit or total <= 0:
        raise ValueError(f"invalid duration {text!r}: use forms like 90s, 15m, 24h, 7d or 1h30m")
    if total > MAX_DURATION.total_seconds():
        raise ValueError(f"duration {text!r} is longer than the maximum of {MAX_DURATION.days}d")
    return timedelta(seconds=total)


def format_duration(value: timedelta) -> str:
    """The shortest ``parse_duration`` spelling of a whole number of seconds (``1h30m``)."""
    seconds = int(value.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


@dataclass(frozen=True, slots=True)
class ReportQuery:
    """One report to compute: a fixed ``start``/``end`` or a length ``since`` ending at the
    newest sample, grouped ``by``, with ``top`` idle workloads and an optional series ``step``."""

    name: str
    since: timedelta | None = None
    start: datetime | None = None
    end: datetime | None = None
    by: tuple[Dimension, ...] = ()
    top: int = DEFAULT_TOP
    step: timedelta | None = None

    def window(
        self, *, newest: datetime | None, now: datetime, bucket_seconds: int = DEFAULT_BUCKET_SECONDS
    ) -> tuple[datetime, datetime]:
        """``[from, to)`` in UTC, whole seconds: ``to`` defaults to the start of the rollup bucket
        (``bucket_seconds`` long) of the newest accounted sample (of ``now`` when nothing was
        accounted yet) -- every bucket before it is complete, so the report is exact and asking
        again gives the same numbers -- and ``from`` to ``to - since``."""
        if self.end is not None:
            end = _floor_second(self.end)
        else:
            end = _floor_bucket(min(now, newest) if newest is not None else now, bucket_seconds)
        if self.start is not None:
            start = _floor_second(self.start)
        else:
            assert self.since is not None
            try:
                start = end - self.since
            except OverflowError:
                raise QueryError(
                    f"the window of {format_duration(self.since)} before {format_time(end)} starts before year 1",
                    field="to",
                ) from None
        if end <= start:
            raise QueryError(
                f"the window must end after it starts (from {format_time(start)} to {format_time(end)})",
                field="to",
            )
        if self.step is not None and (end - start) / self.step > MAX_SERIES_POINTS:
            raise QueryError(
                f"step {format_duration(self.step)} makes more than {MAX_SERIES_POINTS} points over this"
                " window: use a larger step",
                field="step",
            )
        return start, end

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.since is not None:
            out["since"] = format_duration(self.since)
        if self.start is not None:
            out["from"] = format_time(self.start)
        if self.end is not None:
            out["to"] = format_time(self.end)
        out["by"] = [d.value for d in self.by]
        out["top"] = self.top
        if self.step is not None:
            out["step"] = format_duration(self.step)
        return out


def _floor_bucket(moment: datetime, seconds: int) -> datetime:
    """The start of the ``seconds``-long bucket ``moment`` is in (buckets start at multiples of
    ``seconds`` since the epoch, as the accumulator's)."""
    stamp = int(_floor_second(moment).timestamp())
    return datetime.fromtimestamp(stamp - stamp % seconds, UTC)


def _floor_second(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(microsecond=0)


@dataclass(frozen=True, slots=True)
class QueryParams:
    """The query parameters of a report request (repeated ``by`` values already joined)."""

    since: str | None = None
    start: str | None = None
    end: str | None = None
    by: Sequence[str] = field(default_factory=tuple)
    top: str | None = None
    step: str | None = None


def comma_separated(values: Sequence[str]) -> list[str]:
    """The parts of repeated, comma-separated values (``by=cluster,model&by=cluster``, ``gpufed
    waste --by``): blanks dropped, each part once, in the order given."""
    out: list[str] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out


def _parse_by(values: Sequence[str]) -> tuple[Dimension, ...]:
    out: list[Dimension] = []
    for part in comma_separated(values):
        try:
            out.append(Dimension(part))
        except ValueError:
            allowed = ", ".join(d.value for d in Dimension)
            raise QueryError(f"by: unknown dimension {part!r} (one of: {allowed})", field="by") from None
    return tuple(out)


def _parse_time(value: str, name: str) -> datetime:
    try:
        return parse_time(value)
    except ValueError:
        raise QueryError(
            f"{name}: {value!r} is not an RFC 3339 time (e.g. 2024-05-01T10:00:00Z)", field=name
        ) from None


def _parse_positive_duration(value: str, name: str) -> timedelta:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise QueryError(f"{name}: {exc}", field=name) from None


def parse_query(
    name: str | None, params: QueryParams, *, bucket_seconds: int = DEFAULT_BUCKET_SECONDS
) -> ReportQuery:
    """The report a request asks for: by ``name`` (``last-<duration>`` or ``custom``), or for a
    list request (``name`` None) by ``since`` or ``from``/``to``; a ``step`` is at least one
    rollup bucket (``bucket_seconds``). Raises :class:`QueryError`."""
    by = _parse_by(params.by)
    top = DEFAULT_TOP
    if params.top is not None:
        try:
            top = int(params.top)
        except ValueError:
            raise QueryError(f"top: {params.top!r} is not a whole number", field="top") from None
        if not 0 <= top <= MAX_TOP:
            raise QueryError(f"top: must be between 0 and {MAX_TOP}, got {top}", field="top")
    step = None
    if params.step is not None:
        step = _parse_positive_duration(params.step, "step")
        bucket = timedelta(seconds=bucket_seconds)
        if step < bucket:
            raise QueryError(
                f"step: must be at least {format_duration(bucket)} (the length of the waste rollups' buckets),"
                f" got {params.step}",
                field="step",
            )
    start = _parse_time(params.start, "from") if params.start is not None else None
    end = _parse_time(params.end, "to") if params.end is not None else None
    since = _parse_positive_duration(params.since, "since") if params.since is not None else None

    if name is None:
        if since is not None and start is not None:
            raise QueryError("give either since or from/to, not both", field="since")
        if start is not None:
            name = CUSTOM
        elif since is not None:
            name = f"{LAST_PREFIX}{format_duration(since)}"
        elif end is not None:
            raise QueryError("to needs from (or use since)", field="from")
        else:
            raise QueryError("a report list without since or from/to lists the default windows", field="since")
    if name == CUSTOM:
        if start is None:
            raise QueryError(f"the {CUSTOM} report needs from (and optionally to)", field="from")
        if since is not None:
            raise QueryError("give either since or from/to, not both", field="since")
        return ReportQuery(name=name, start=start, end=end, by=by, top=top, step=step)
    if not name.startswith(LAST_PREFIX):
        raise QueryError(
            f'{PLURAL}.{GROUP} "{name}" not found: report names are {LAST_PREFIX}<duration>'
            f" (e.g. last-24h, last-7d) or {CUSTOM} (with from and to)",
            not_found=True,
        )
    try:
        named = parse_duration(name.removeprefix(LAST_PREFIX))
    except ValueError as exc:
        raise QueryError(
            f'{PLURAL}.{GROUP} "{name}" not found: {exc} (report names are e.g. last-90m, last-24h, last-7d)',
            not_found=True,
        ) from None
    if since is not None and since != named:
        raise QueryError(f"since={params.since} contradicts the report name {name}", field="since")
    if start is not None:
        raise QueryError(f"from/to apply to the {CUSTOM} report, not to {name}", field="from")
    return ReportQuery(name=name, since=named, end=end, by=by, top=top, step=step)


def default_queries(params: QueryParams, *, bucket_seconds: int = DEFAULT_BUCKET_SECONDS) -> list[ReportQuery]:
    """The reports a plain list returns: one per :data:`DEFAULT_WINDOWS`."""
    return [parse_query(name, params, bucket_seconds=bucket_seconds) for name in DEFAULT_WINDOWS]


# ---------------------------------------------------------------------------------------------
# Building the object
# ---------------------------------------------------------------------------------------------


def series(
    accumulator: Accumulator, start: datetime, end: datetime, step: timedelta
) -> list[dict[str, Any]]:
    """Mean GPU-equivalents and dollars per state in each ``step`` of ``[start, end)``.

    Steps are aligned to multiples of ``step`` since the epoch (so a step of whole buckets
    matches the rollups exactly); the first and last steps are clipped to the window.
    """
    size = step.total_seconds()
    first = math.floor(start.timestamp() / size) * size
    points: list[dict[str, Any]] = []
    cursor = first
    while cursor < end.timestamp():
        piece_start = max(datetime.fromtimestamp(cursor, UTC), start)
        piece_end = min(datetime.fromtimestamp(cursor + size, UTC), end)
        cursor += size
        if piece_end <= piece_start:
            continue
        report = accumulator.query(piece_start, piece_end)
        observed_hours = report.observed_seconds / 3600.0
        points.append(
            {
                "from": format_time(piece_start),
                "to": format_time(piece_end),
                "observed_hours": round(observed_hours, 6),
                "gpus": {
                    state.value: round(report.totals.gpu_hours[state] / observed_hours, 4)
                    if observed_hours > 0
                    else 0.0
                    for state in STATES
                },
                "cost_usd": {state.value: round(report.totals.cost_usd[state], 6) for state in STATES},
            }
        )
    return points


def report_object(
    query: ReportQuery,
    accumulator: Accumulator,
    *,
    now: datetime,
    namespace: str | None = None,
    queues: QueueOf | None = None,
) -> dict[str, Any]:
    """The WasteReport object ``query`` asks for, computed from ``accumulator``; with a
    ``namespace``, that namespace's share of it (no fleet-wide ``series``). ``queues``: the
    ClusterQueue of each queued workload, for ``by=clusterqueue``."""
    start, end = query.window(newest=accumulator.newest, now=now, bucket_seconds=accumulator.bucket_seconds)
    metadata: dict[str, Any] = {"name": query.name, "creationTimestamp": format_time(now)}
    if namespace is None:
        report = accumulator.query(start, end, by=query.by, queues=queues)
    else:
        report = for_namespace(accumulator.query(start, end, by=with_namespace(query.by), queues=queues), namespace)
        metadata["namespace"] = namespace
    status = to_json(report, top=query.top)
    if query.step is not None and namespace is None:
        status["series"] = series(accumulator, start, end, query.step)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": query.spec(),
        "status": status,
    }


def report_list(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": LIST_KIND,
        "metadata": {"resourceVersion": ""},
        "items": list(items),
    }


# ---------------------------------------------------------------------------------------------
# From the JSON contract back to a WasteReport (for table and CSV output in the CLI)
# ---------------------------------------------------------------------------------------------


def _state_map(raw: Any) -> dict[WasteState, float]:
    out: dict[WasteState, float] = {}
    if isinstance(raw, Mapping):
        known = {state.value: state for state in STATES}
        for key, value in raw.items():
            if key in known and isinstance(value, int | float):
                out[known[key]] = float(value)
    return out


def _totals(raw: Mapping[str, Any]) -> StateTotals:
    return StateTotals(_state_map(raw.get("gpu_hours")), _state_map(raw.get("cost_usd")))


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def report_from_json(doc: Mapping[str, Any]) -> WasteReport:
    """The :class:`WasteReport` behind a report's JSON (``status`` of a WasteReport object).

    Values are as rounded in the JSON; opportunities are not part of the contract (their
    sentences are, in ``recommendations``). Raises ValueError for a document that is not a report.
    """
    try:
        window = doc["window"]
        observed_hours = _float(window.get("observed_hours"))
        workloads = tuple(
            WorkloadUsage(
                namespace=str(w.get("namespace") or ""),
                workload=str(w.get("workload") or ""),
                allocated_gpus=_float(w.get("allocated_gpus")),
                mean_utilization=None if w.get("mean_utilization") is None else _float(w["mean_utilization"]),
                allocated_gpu_hours=(
                    _float(w["allocated_gpu_hours"])
                    if "allocated_gpu_hours" in w
                    else _float(w.get("allocated_gpus")) * observed_hours
                ),
                idle_gpu_hours=_float(w.get("idle_gpu_hours")),
                idle_cost_usd=_float(w.get("idle_cost_usd")),
                cost_usd=_float(w.get("cost_usd")),
                measured_gpu_hours=_float(w.get("measured_gpu_hours")),
                gpus_now=_float(w.get("gpus_now")),
            )
            for w in doc.get("top_idle_workloads") or []
        )
        return WasteReport(
            window_from=parse_time(str(window["from"])),
            window_to=parse_time(str(window["to"])),
            observed_seconds=observed_hours * 3600.0,
            unobserved_seconds=_float(window.get("unobserved_hours")) * 3600.0,
            by=tuple(Dimension(d) for d in doc.get("by") or []),
            totals=_totals(doc["totals"]),
            groups=tuple(
                GroupTotals(
                    key={str(k): None if v is None else str(v) for k, v in (g.get("key") or {}).items()},
                    totals=_totals(g),
                )
                for g in doc.get("groups") or []
            ),
            workloads=workloads,
            recommendations=tuple(
                Recommendation(
                    kind=RecommendationKind(r["kind"]),
                    text=str(r.get("text") or ""),
                    savings_usd_per_day=_float(r.get("savings_usd_per_day")),
                )
                for r in doc.get("recommendations") or []
            ),
            unmeasured=tuple(
                (str(u["cluster"]), _float(u.get("gpu_hours"))) for u in doc.get("unmeasured") or []
            ),
            never_fit=tuple(
                NeverFitRequest(
                    namespace=str(n.get("namespace") or ""),
                    workload=str(n.get("workload") or ""),
                    replicas=int(n.get("replicas") or 0),
                    requests={str(k): int(v) for k, v in (n.get("requests") or {}).items()},
                    message=str(n.get("message") or ""),
                )
                for n in doc.get("never_fit") or []
            ),
            spot_reclaims=tuple(
                RecordedReclaim(
                    namespace=str(r.get("namespace") or ""),
                    workload=str(r.get("workload") or ""),
                    cluster=str(r.get("cluster") or ""),
                    time=parse_time(str(r["time"])),
                    replicas=int(r.get("replicas") or 0),
                )
                for r in (doc.get("spot_reclaims") or {}).get("items") or []
            ),
            moves=tuple(MoveRecord.from_json(m) for m in (doc.get("moves") or {}).get("items") or []),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a waste report: missing or malformed {exc}") from exc


__all__ = [
    "API_VERSION",
    "COLLECTION_PATH",
    "CUSTOM",
    "DEFAULT_WINDOWS",
    "GROUP",
    "KIND",
    "PLURAL",
    "QueryError",
    "QueryParams",
    "ReportQuery",
    "default_queries",
    "parse_duration",
    "parse_query",
    "report_from_json",
    "report_list",
    "report_object",
    "series",
]
