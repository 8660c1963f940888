"""Draw a what-if comparison: allocation as demand grows, and GPU-hours by waste state.

Left panel: GPU allocation (% of capacity) against arrived GPU demand (% of capacity) from
the fill pass, one line per strategy, with the 100 % and 130 % marks, zoomed to where the
curves part (they run together while demand is low). Right panel: the
replay's GPU-hours per waste state, stacked per strategy, free-spare (usually most of a
fleet's hours) named in the title instead of drawn (left out when no replay ran).

In: the JSON form of :class:`~simulator.whatif.engine.Comparison`. Out: a PNG, SVG or PDF
file (the format follows the file's extension). Uses matplotlib without a display.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from controlplane.reports.classify import WasteState
from simulator.whatif.metrics import MARKS

FORMATS = frozenset({".png", ".svg", ".pdf"})
STATE_COLORS = {
    WasteState.BUSY: "#2b8a3e",
    WasteState.IDLE_ALLOCATED: "#f08c00",
    WasteState.UNMEASURED: "#74a9cf",
    WasteState.FREE_NEEDED: "#c92a2a",
    WasteState.FREE_FRAGMENTED: "#862e9c",
    WasteState.FREE_SPARE: "#adb5bd",
    WasteState.UNAVAILABLE: "#495057",
}


def check_target(path: str | Path) -> Path:
    """Check before a run that the figure can be written: a known extension, an existing directory."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"--plot {path}: use a .png, .svg or .pdf file name")
    parent = path.parent
    if not parent.is_dir():
        raise ValueError(f"--plot {path}: directory {parent} does not exist")
    return path


def zoom(strategies: Mapping[str, Mapping[str, Any]]) -> tuple[float, float, float, float] | None:
    """(x0, x1, y0, y1) around where the allocation curves part (None when they never do)."""
    curves = [dict(map(tuple, r.get("allocation_curve") or [])) for r in strategies.values()]
    curves = [c for c in curves if c]
    if len(curves) < 2:
        return None
    marks = sorted(set.intersection(*(set(c) for c in curves)))
    apart = [m for m in marks if max(c[m] for c in curves) - min(c[m] for c in curves) > 0.5]
    if not apart:
        return None
    x0 = max(apart[0] - 5, 0)
    x1 = max(max(c) for c in curves)
    shown = [v for c in curves for m, v in c.items() if m >= x0]
    return float(x0), float(x1), max(min(shown) - 2, 0.0), min(max(shown) + 2, 105.0)


def render(comparison: Mapping[str, Any], path: str | Path) -> Path:
    """Write the figure to ``path``; raises ValueError for an unknown extension."""
    path = check_target(path)
    strategies: Mapping[str, Mapping[str, Any]] = comparison["strategies"]
    hours = {name: r.get("gpu_hours") or {} for name, r in strategies.items()}
    with_replay = any(any(v for v in h.values()) for h in hours.values())
    figure = Figure(figsize=(12 if with_replay else 7, 4.8), layout="constrained")
    axes = figure.subplots(1, 2 if with_replay else 1, squeeze=False)[0]
    curve_ax = axes[0]
    top = 0
    for name, result in strategies.items():
        points = result.get("allocation_curve") or []
        if points:
            xs, ys = zip(*points, strict=True)
            curve_ax.plot(xs, ys, label=name, linewidth=1.6)
            top = max(top, max(xs))
    curve_ax.plot([0, top], [0, top], color="#ced4da", linestyle=":", linewidth=1, label="demand")
    for mark in MARKS:
        curve_ax.axvline(mark, color="#868e96", linestyle="--", linewidth=0.8)
    curve_ax.set_xlabel("arrived GPU demand (% of capacity)")
    curve_ax.set_ylabel("GPUs allocated (% of capacity)")
    window = zoom(strategies)
    if window is None:
        curve_ax.set_ylim(0, 105)
    else:
        curve_ax.set_xlim(window[0], window[1])
        curve_ax.set_ylim(window[2], window[3])
    curve_ax.set_title("GPU allocation as demand arrives")
    curve_ax.legend(loc="lower right")
    curve_ax.grid(alpha=0.3)
    if with_replay:
        bar_ax = axes[1]
        names = list(strategies)
        bottoms = [0.0] * len(names)
        for state in WasteState:
            if state is WasteState.FREE_SPARE:
                continue  # usually dwarfs the rest; its total goes in the title
            values = [float(hours[n].get(str(state), 0.0)) for n in names]
            bar_ax.bar(names, values, bottom=bottoms, label=str(state), color=STATE_COLORS[state])
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
        spare = max(float(hours[n].get(str(WasteState.FREE_SPARE), 0.0)) for n in names)
        bar_ax.set_ylabel("GPU-hours")
        bar_ax.set_title(f"GPU-hours by state in the trace replay\n(free-spare not drawn: up to {spare:,.0f})")
        bar_ax.legend(fontsize="small")
    figure.savefig(path)
    return path
