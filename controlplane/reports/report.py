"""``gpufed waste`` output: a :class:`~controlplane.reports.summary.WasteReport` as JSON, a table or CSV.

In: a report from :meth:`controlplane.reports.accounting.Accumulator.query`. Out: strings (and,
for JSON, the dict), nothing else. Pure.

The JSON contract (``gpufed waste -o json``; fields may be added, never renamed)::

    {"window": {"from": RFC3339, "to": RFC3339, "observed_hours": f, "unobserved_hours": f},
     "by": [dimension, ...],
     "totals": {"gpu_hours": {<state>: f, ...}, "cost_usd": {<state>: f, ...}, "waste_pct": f,
                "gpu_hours_total": f, "cost_usd_total": f, "waste_gpu_hours": f, "waste_cost_usd": f},
     "unmeasured": [{"cluster", "gpu_hours"}],
     "groups": [{"key": {...}, "gpu_hours": {...}, "cost_usd": {...}, "waste_pct": f}],
     "top_idle_workloads": [{"namespace", "workload", "gpus_now", "allocated_gpu_hours",
                             "measured_gpu_hours", "allocated_gpus", "mean_utilization",
                             "idle_gpu_hours", "idle_cost_usd", "cost_usd"}],
     "recommendations": [{"kind", "text", "savings_usd_per_day"}],
     "spot_reclaims": {"reclaims": n, "replicas": n,
                       "items": [{"namespace", "workload", "cluster", "time", "replicas"}]},
     "never_fit": [{"namespace", "workload", "replicas", "requests": {<resource>: n}, "message"}],
     "moves": {"moves", "replicas_moved", "gpu_hours_shifted", "saved_usd",
               "items": [{"namespace", "workload", "time", "from", "to", "replicas", "gpus_per_replica",
                          "saving_usd_per_hour"}]}}

with every state of DESIGN.md's table present in each ``gpu_hours``/``cost_usd`` map (the
``unmeasured`` state is allocated GPU time with no utilization measured: neither busy nor idle,
and left out of ``waste_pct``'s denominator). ``unmeasured`` lists that time per cluster (largest
first). Per workload, ``gpus_now`` is what it holds in the newest sample, ``allocated_gpu_hours``
what it held over the window (``measured_gpu_hours`` of it with a utilization), and
``allocated_gpus`` the window's mean (GPU-hours / observed hours), not a GPU count.
``never_fit`` lists the pending requests no node of the fleet could ever hold (as of the latest
sample); they are in no state, so the GPUs they cannot use stay free-spare. ``spot_reclaims``
counts the spot reclaims within the window whose replicas the hub replaced elsewhere.
``moves`` counts the
moves back to cheaper tiers finished in the window (``moves``, ``replicas_moved``) and, for every
move finished before the window's end, the GPU-hours it shifted and the dollars it saved within
the window (:mod:`~controlplane.reports.moves`); ``items`` lists those moves.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from controlplane.apis.timestamps import format_time
from controlplane.reports.classify import STATES, WasteState
from controlplane.reports.recommend import describe_workload
from controlplane.reports.summary import StateTotals, WasteReport, WorkloadUsage

DEFAULT_TOP = 10
_HOURS_DIGITS = 4
_USD_DIGITS = 4
#: How many moves the table lists (the latest).
_MOVES_SHOWN = 5


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"


def _per_state(values: Mapping[WasteState, float], digits: int) -> dict[str, float]:
    return {state.value: round(values[state], digits) for state in STATES}


def _totals_json(totals: StateTotals) -> dict[str, Any]:
    return {
        "gpu_hours": _per_state(totals.gpu_hours, _HOURS_DIGITS),
        "cost_usd": _per_state(totals.cost_usd, _USD_DIGITS),
        "waste_pct": round(totals.waste_pct, 2),
    }


def top_idle_workloads(report: WasteReport, *, top: int = DEFAULT_TOP) -> list[WorkloadUsage]:
    """The workloads with the most idle-allocated GPU time (by cost, then hours)."""
    return [w for w in report.workloads if w.idle_gpu_hours > 0][:top]


def to_json(report: WasteReport, *, top: int = DEFAULT_TOP) -> dict[str, Any]:
    """The report in the JSON contract (see the module docstring)."""
    totals = _totals_json(report.totals)
    totals.update(
        {
            "gpu_hours_total": round(report.totals.total_gpu_hours, _HOURS_DIGITS),
            "cost_usd_total": round(report.totals.total_cost_usd, _USD_DIGITS),
            "waste_gpu_hours": round(report.totals.waste_gpu_hours, _HOURS_DIGITS),
            "waste_cost_usd": round(report.totals.waste_cost_usd, _USD_DIGITS),
        }
    )
    return {
        "unmeasured": [
            {"cluster": cluster, "gpu_hours": round(hours, _HOURS_DIGITS)} for cluster, hours in report.unmeasured
        ],
        "window": {
            "from": format_time(report.window_from),
            "to": format_time(report.window_to),
            "observed_hours": round(report.observed_seconds / 3600.0, _HOURS_DIGITS),
            "unobserved_hours": round(report.unobserved_seconds / 3600.0, _HOURS_DIGITS),
        },
        "by": [d.value for d in report.by],
        "totals": totals,
        "groups": [{"key": dict(group.key), **_totals_json(group.totals)} for group in report.groups],
        "top_idle_workloads": [
            {
                "namespace": w.namespace,
                "workload": w.workload,
                "gpus_now": round(w.gpus_now, 3),
                "allocated_gpu_hours": round(w.allocated_gpu_hours, _HOURS_DIGITS),
                "measured_gpu_hours": round(w.measured_gpu_hours, _HOURS_DIGITS),
                "allocated_gpus": round(w.allocated_gpus, 3),
                "mean_utilization": None if w.mean_utilization is None else round(w.mean_utilization, 4),
                "idle_gpu_hours": round(w.idle_gpu_hours, _HOURS_DIGITS),
                "idle_cost_usd": round(w.idle_cost_usd, _USD_DIGITS),
                "cost_usd": round(w.cost_usd, _USD_DIGITS),
            }
            for w in top_idle_workloads(report, top=top)
        ],
        "recommendations": [
            {"kind": r.kind.value, "text": r.text, "savings_usd_per_day": round(r.savings_usd_per_day, 2)}
            for r in report.recommendations
        ],
        "spot_reclaims": {
            "reclaims": len(report.spot_reclaims),
            "replicas": sum(r.replicas for r in report.spot_reclaims),
            "items": [
                {"namespace": r.namespace, "workload": r.workload, "cluster": r.cluster,
                 "time": format_time(r.time), "replicas": r.replicas}
                for r in report.spot_reclaims
            ],
        },
        "never_fit": [
            {
                "namespace": n.namespace,
                "workload": n.workload,
                "replicas": n.replicas,
                "requests": dict(n.requests),
                "message": n.message,
            }
            for n in report.never_fit
        ],
        "moves": _moves_json(report),
    }


def _moves_json(report: WasteReport) -> dict[str, Any]:
    summary = report.moves_summary
    return {
        "moves": summary.moves,
        "replicas_moved": summary.replicas_moved,
        "gpu_hours_shifted": round(summary.gpu_hours_shifted, _HOURS_DIGITS),
        "saved_usd": round(summary.saved_usd, _USD_DIGITS),
        "items": [m.to_json() for m in report.moves],
    }


def render_json(report: WasteReport, *, top: int = DEFAULT_TOP) -> str:
    return json.dumps(to_json(report, top=top), indent=2) + "\n"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, numeric_from: int = 1) -> list[str]:
    """Aligned columns: text left, numbers (columns from ``numeric_from``) right."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(width) if index >= numeric_from else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return [line(headers), *(line(row) for row in rows)]


def _hours(value: float) -> str:
    return f"{value:,.1f}"


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "-"


def _key_text(key: Mapping[str, str | None]) -> str:
    if "workload" in key:
        # namespace/Kind/name: the hub workload (a Deployment's pods are under their Deployment).
        rest = {k: v for k, v in key.items() if k not in ("namespace", "workload")}
        namespace, workload = key.get("namespace") or "", key.get("workload") or ""
        shown = "/".join(part for part in (namespace, workload) if part) or "(no workload)"
        return " ".join([*(_value_text(k, v) for k, v in rest.items()), shown])
    return " ".join(_value_text(k, v) for k, v in key.items())


def _value_text(name: str, value: str | None) -> str:
    if value:
        return value
    return "(whole GPU)" if name == "profile" else f"(no {name})"


def _count(value: float) -> str:
    """GPUs held: whole numbers as such, shares (MIG, time-slicing) with two decimals."""
    return str(round(value)) if abs(value - round(value)) < 0.005 else f"{value:.2f}"


def _unmeasured_lines(report: WasteReport) -> list[str]:
    """The header's warning that some allocated GPU time has no utilization (neither busy nor idle)."""
    if not report.unmeasured:
        return []
    hours = sum(h for _, h in report.unmeasured)
    clusters = ", ".join(cluster for cluster, _ in report.unmeasured)
    return [
        f"Utilization not measured for {hours:,.2f} GPU-hours on clusters {clusters}"
        " (no DCGM data): counted as unmeasured, neither busy nor idle"
    ]
def span_text(seconds: float) -> str:
    """A span of time as a person reads it: hours from one hour up, minutes below, seconds
    below a minute (a short window never reads "0.0 h")."""
    if seconds >= 3600.0:
        return f"{seconds / 3600.0:,.1f} h"
    if seconds >= 60.0:
        return f"{seconds / 60.0:.0f} min"
    return f"{seconds:.0f} s"


def render_table(report: WasteReport, *, top: int = DEFAULT_TOP) -> str:
    """A human-readable report: states, groups, top idle workloads and recommendations."""
    totals = report.totals
    out = [
        f"GPU waste from {format_time(report.window_from)} to {format_time(report.window_to)}"
        f" (observed {span_text(report.observed_seconds)}"
        + (f", unobserved {span_text(report.unobserved_seconds)}" if report.unobserved_seconds else "")
        + ")",
        *_unmeasured_lines(report),
        "",
    ]
    rows = [
        [
            state.value,
            _hours(totals.gpu_hours[state]),
            _usd(totals.cost_usd[state]),
            _pct(totals.gpu_hours[state], totals.total_gpu_hours),
        ]
        for state in STATES
    ]
    rows.append(
        [
            "total",
            _hours(totals.total_gpu_hours),
            _usd(totals.total_cost_usd),
            _pct(1, 1) if totals.total_gpu_hours else "-",
        ]
    )
    out += _table(["STATE", "GPU-HOURS", "COST", "SHARE"], rows)
    out += [
        "",
        f"Waste: {totals.waste_pct:.1f}% of available, measured GPU-hours ({_hours(totals.waste_gpu_hours)} GPU-hours,"
        f" {_usd(totals.waste_cost_usd)}: idle-allocated + free-needed + free-fragmented)",
    ]
    if report.groups:
        dims = ", ".join(d.value for d in report.by)
        out += ["", f"BY {dims.upper()}"]
        group_rows = [
            [
                _key_text(group.key),
                *(_hours(group.totals.gpu_hours[state]) for state in STATES),
                _usd(group.totals.total_cost_usd),
                f"{group.totals.waste_pct:.1f}%",
            ]
            for group in report.groups
        ]
        headers = ["GROUP", *(state.value.upper() for state in STATES), "COST", "WASTE"]
        out += _table(headers, group_rows)
        out.append("(GPU-hours per state)")
    idle = top_idle_workloads(report, top=top)
    if top:  # --top 0 asks for no list: no section, rather than "none" while a workload is idle
        out += ["", "TOP IDLE WORKLOADS"]
    if idle:
        out += _table(
            ["WORKLOAD", "GPUS NOW", "GPU-H", "MEAN UTIL", "IDLE GPU-H", "IDLE COST"],
            [
                [
                    describe_workload(w.namespace, w.workload),
                    _count(w.gpus_now),
                    _hours(w.allocated_gpu_hours),
                    "-" if w.mean_utilization is None else f"{w.mean_utilization:.0%}",
                    _hours(w.idle_gpu_hours),
                    _usd(w.idle_cost_usd),
                ]
                for w in idle
            ],
        )
    elif top:
        out.append("none")
    out += ["", "RECOMMENDATIONS"]
    if report.recommendations:
        out += [f"{index}. {r.text}" for index, r in enumerate(report.recommendations, start=1)]
    else:
        out.append("none")
    if report.moves:
        out += ["", "MOVES BACK TO CHEAPER TIERS", _moves_header(report)]
        out += [
            f"{m.time.isoformat().replace('+00:00', 'Z')}  {describe_workload(m.namespace, m.workload)}: "
            f"{m.replicas} replica(s) {m.source} \u2192 {m.target}, saves ${m.saving_per_hour:.2f}/h"
            for m in report.moves[-_MOVES_SHOWN:]
        ]
    if report.never_fit:
        out += ["", "REQUESTS THAT CAN NEVER FIT (not counted as free-needed or free-fragmented)"]
        out += [
            f"{describe_workload(n.namespace, n.workload)} ({n.replicas} pod(s) waiting): {n.message}"
            for n in report.never_fit
        ]
    if report.spot_reclaims:
        replicas = sum(r.replicas for r in report.spot_reclaims)
        out += ["", f"Spot reclaims survived: {len(report.spot_reclaims)} ({replicas} replica(s) replaced elsewhere)"]
    return "\n".join(out) + "\n"


def _moves_header(report: WasteReport) -> str:
    """The moves line: those finished in the window, and (when moves finished before it count
    too, from its start) how many moves the shifted GPU-hours and savings come from."""
    moves = report.moves_summary
    moved = f"{moves.replicas_moved} replica(s) moved in {moves.moves} move(s)"
    earlier = len(report.moves) - moves.moves
    if earlier:
        moved += f" in this window, {earlier} earlier move(s) still counting"
    return (
        f"{moved}; {moves.gpu_hours_shifted:.2f} GPU-hours shifted to cheaper tiers,"
        f" ${moves.saved_usd:.2f} saved"
        f" in this window{f' by these {len(report.moves)} move(s)' if earlier else ''}"
        f"{f' (the latest {_MOVES_SHOWN} below)' if len(report.moves) > _MOVES_SHOWN else ''}"
    )


def render_csv(report: WasteReport) -> str:
    """One row per group (one ``total`` row when ungrouped): GPU-hours and $ per state, waste %."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    key_fields: list[str] = []
    for group in report.groups:
        for name in group.key:
            if name not in key_fields:
                key_fields.append(name)
    state_columns = [f"gpu_hours_{s.value}" for s in STATES] + [f"cost_usd_{s.value}" for s in STATES]
    writer.writerow(["from", "to", *(key_fields or ["group"]), *state_columns, "waste_pct"])
    window = [format_time(report.window_from), format_time(report.window_to)]

    def values(totals: StateTotals) -> list[str]:
        hours = [f"{totals.gpu_hours[s]:.{_HOURS_DIGITS}f}" for s in STATES]
        dollars = [f"{totals.cost_usd[s]:.{_USD_DIGITS}f}" for s in STATES]
        return [*hours, *dollars, f"{totals.waste_pct:.2f}"]

    if report.groups:
        for group in report.groups:
            writer.writerow(
                [*window, *(group.key.get(name) or "" for name in key_fields), *values(group.totals)]
            )
    else:
        writer.writerow([*window, "total", *values(report.totals)])
    return buffer.getvalue()


def render(
    report: WasteReport, output: OutputFormat | str = OutputFormat.TABLE, *, top: int = DEFAULT_TOP
) -> str:
    """The report in ``output`` format (``table``, ``json`` or ``csv``)."""
    chosen = OutputFormat(output)
    if chosen is OutputFormat.JSON:
        return render_json(report, top=top)
    if chosen is OutputFormat.CSV:
        return render_csv(report)
    return render_table(report, top=top)
