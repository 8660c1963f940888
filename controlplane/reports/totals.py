"""Report values from rollup cells: the totals, groups, workloads and opportunities of a window.

Why this module exists: :meth:`controlplane.reports.accounting.Accumulator.query` adds up the
buckets a window covers into cells of GPU-seconds and dollars; turning those cells into the
:class:`~controlplane.reports.summary.WasteReport` parts (totals per state, groups per
dimension, per-workload usage, unmeasured hours per cluster, opportunity totals) is a separate
concern with its own rules, kept here. In: cells and opportunity entries keyed as
:mod:`controlplane.reports.rollups` defines them, and the held sample's per-second rates. Out:
the report's value objects. No I/O happens here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controlplane.reports.classify import ALLOCATED_STATES, MEASURED_STATES, WasteState
from controlplane.reports.rollups import (
    CELL_GPU,
    CELL_KNOWN,
    CELL_USD,
    CELL_UTIL,
    OPP_GPU,
    OPP_SAVED,
    OPP_UNITS,
    CellKey,
    OpportunityKey,
)
from controlplane.reports.summary import (
    Dimension,
    GroupTotals,
    OpportunityTotal,
    StateTotals,
    WorkloadUsage,
)

SECONDS_PER_DAY = 86400.0


NO_QUEUE = "-"
"""The ClusterQueue group of GPU time no queue admitted (free GPUs, workloads not queued)."""
QueueOf = Mapping[tuple[str, str], str]
"""(namespace, ``Kind/name``) of a hub workload → the ClusterQueue that admitted it."""


def _group_key(
    dimensions: Sequence[Dimension], cell: CellKey, queues: QueueOf
) -> tuple[tuple[str, str | None], ...]:
    _, cluster, product, profile, namespace, workload = cell
    parts: dict[str, str | None] = {}
    for dimension in dimensions:
        if dimension is Dimension.CLUSTER_QUEUE:
            parts["clusterqueue"] = queues.get((namespace, workload), NO_QUEUE)
        elif dimension is Dimension.CLUSTER:
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


def state_totals(cells: Iterable[tuple[CellKey, list[float]]]) -> StateTotals:
    """GPU-hours and dollars per waste state."""
    hours: dict[WasteState, float] = {}
    dollars: dict[WasteState, float] = {}
    for key, values in cells:
        state = WasteState(key[0])
        hours[state] = hours.get(state, 0.0) + values[CELL_GPU] / 3600.0
        dollars[state] = dollars.get(state, 0.0) + values[CELL_USD]
    return StateTotals(hours, dollars)


def group_totals(
    cells: Mapping[CellKey, list[float]], dimensions: Sequence[Dimension], *, queues: QueueOf | None = None
) -> tuple[GroupTotals, ...]:
    """State totals per group of ``dimensions``, costliest first (``queues``: which ClusterQueue
    admitted each workload, for :attr:`Dimension.CLUSTER_QUEUE`)."""
    if not dimensions:
        return ()
    grouped: dict[tuple[tuple[str, str | None], ...], list[tuple[CellKey, list[float]]]] = {}
    for key, values in cells.items():
        grouped.setdefault(_group_key(dimensions, key, queues or {}), []).append((key, values))
    groups = [GroupTotals(dict(key), state_totals(members)) for key, members in grouped.items()]
    groups.sort(
        key=lambda g: (
            -g.totals.total_cost_usd,
            -g.totals.total_gpu_hours,
            sorted((k, v or "") for k, v in g.key.items()),
        )
    )
    return tuple(groups)


def workload_usage(
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
        slot[0] += values[CELL_GPU]
        slot[1] += values[CELL_UTIL]
        slot[2] += values[CELL_KNOWN]
        slot[5] += values[CELL_USD]
        if state == WasteState.IDLE_ALLOCATED:
            slot[3] += values[CELL_GPU]
            slot[4] += values[CELL_USD]
        if WasteState(state) in MEASURED_STATES:
            slot[6] += values[CELL_GPU]
    held: dict[tuple[str, str], list[float]] = {}
    for (state, _, _, _, namespace, workload), rates in now.items():
        if WasteState(state) in ALLOCATED_STATES and (namespace or workload):
            holding = held.setdefault((namespace, workload), [0.0, 0.0])
            holding[0] += rates[CELL_GPU]
            holding[1] += rates[CELL_USD] * 3600.0
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


def unmeasured_hours(cells: Mapping[CellKey, list[float]]) -> tuple[tuple[str, float], ...]:
    """GPU-hours allocated with no utilization measured, per cluster, largest first."""
    hours: dict[str, float] = {}
    for (state, cluster, *_), values in cells.items():
        if state == WasteState.UNMEASURED and values[CELL_GPU] > 0:
            hours[cluster] = hours.get(cluster, 0.0) + values[CELL_GPU] / 3600.0
    return tuple(sorted(hours.items(), key=lambda item: (-item[1], item[0])))


def opportunity_totals(
    opportunities: Mapping[OpportunityKey, list[float]],
    observed: float,
    *,
    now: Mapping[OpportunityKey, Sequence[float]],
) -> tuple[OpportunityTotal, ...]:
    """Opportunity totals over the window, with what each is worth in the newest sample (``now``)."""
    if observed <= 0:
        return ()
    zero = (0.0, 0.0, 0.0)
    out = [
        OpportunityTotal(
            kind=key[0],
            key=key[1:],
            mean_units=values[OPP_UNITS] / observed,
            mean_gpus=values[OPP_GPU] / observed,
            savings_usd=values[OPP_SAVED],
            savings_usd_per_day=values[OPP_SAVED] / observed * SECONDS_PER_DAY,
            units_now=now.get(key, zero)[OPP_UNITS],
            gpus_now=now.get(key, zero)[OPP_GPU],
            savings_usd_per_hour_now=now.get(key, zero)[OPP_SAVED] * 3600.0,
        )
        for key, values in opportunities.items()
    ]
    out.sort(key=lambda o: (-o.savings_usd, o.kind, o.key))
    return tuple(out)
