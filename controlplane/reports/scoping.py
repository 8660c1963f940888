"""A waste report as one namespace may see it: a team reads its own GPU time, not the fleet's.

The hub serves ``namespaces/<ns>/wastereports`` beside the fleet-wide ``wastereports``; RBAC
decides who may read each (``view``, ``edit`` and ``admin`` include ``wastereports``, so a
team bound to one of them in its namespace reads that namespace's report, and only a
cluster-wide binding reads the fleet's). :func:`for_namespace` keeps what belongs to the
namespace: its groups (the report is queried grouped by namespace too), totals summed over
them, its workloads and its never-fit requests. Fleet-wide parts — free and fragmented GPU
time, recommendations, opportunities, clusters without utilization data — name other teams'
capacity and are left out. Pure.
"""

from __future__ import annotations

from dataclasses import replace

from controlplane.reports.classify import STATES
from controlplane.reports.summary import Dimension, StateTotals, WasteReport


def with_namespace(by: tuple[Dimension, ...]) -> tuple[Dimension, ...]:
    """``by`` grouped by namespace too (``workload`` groups carry their namespace already)."""
    if Dimension.NAMESPACE in by or Dimension.WORKLOAD in by:
        return by
    return (Dimension.NAMESPACE, *by)


def for_namespace(report: WasteReport, namespace: str) -> WasteReport:
    """``report`` (queried with :func:`with_namespace`) restricted to ``namespace``."""
    groups = tuple(group for group in report.groups if group.key.get("namespace") == namespace)
    totals = StateTotals(
        gpu_hours={state: sum(g.totals.gpu_hours[state] for g in groups) for state in STATES},
        cost_usd={state: sum(g.totals.cost_usd[state] for g in groups) for state in STATES},
    )
    return replace(
        report,
        totals=totals,
        groups=groups,
        workloads=tuple(w for w in report.workloads if w.namespace == namespace),
        opportunities=(),
        recommendations=(),
        unmeasured=(),
        never_fit=tuple(n for n in report.never_fit if n.namespace == namespace),
        spot_reclaims=tuple(r for r in report.spot_reclaims if r.namespace == namespace),
        moves=tuple(m for m in report.moves if m.namespace == namespace),
    )
