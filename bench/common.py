"""What every gpufed benchmark shares: sizes, figures with targets, percentiles, machine
facts, the results table and the JSON writer, and the command line of one benchmark.

A benchmark module exposes ``run(size: Size) -> BenchmarkResult`` and calls
:func:`benchmark_main` from ``__main__``; ``python -m bench`` (bench/__main__.py) runs each
one in its own process and merges what they write.

In: raw measurements (lists of latencies, counts, seconds). Out: :class:`Figure` values
(name, value, unit, optional target) and the JSON/table forms of a run. Targets are
reported, never asserted: a missed target is a row marked ``no`` in the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn

log = logging.getLogger(__name__)

#: The repository root (bench/ lives directly under it).
REPO_ROOT = Path(__file__).resolve().parent.parent


class Size(StrEnum):
    """How big a run is: ``full`` measures the issue's sizes, ``quick`` a cut-down run for a
    first look, ``tiny`` only proves the benchmark works (the smoke tests use it)."""

    TINY = "tiny"
    QUICK = "quick"
    FULL = "full"


class Comparison(StrEnum):
    AT_MOST = "<="
    AT_LEAST = ">="


class Status(StrEnum):
    """How one benchmark ended."""

    OK = "ok"
    SKIPPED = "skipped"
    FAILED = "failed"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class Target:
    """A bound a figure should meet, e.g. ``Target(Comparison.AT_MOST, 1.0)`` for p99 <= 1 ms."""

    comparison: Comparison
    bound: float

    def met(self, value: float) -> bool:
        if self.comparison is Comparison.AT_MOST:
            return value <= self.bound
        return value >= self.bound

    def __str__(self) -> str:
        return f"{self.comparison.value} {format_number(self.bound)}"


def at_most(bound: float) -> Target:
    return Target(Comparison.AT_MOST, bound)


def at_least(bound: float) -> Target:
    return Target(Comparison.AT_LEAST, bound)


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured number as it appears in the table and in results.json."""

    name: str
    value: float | None
    unit: str = ""
    target: Target | None = None

    @property
    def ok(self) -> bool | None:
        """Whether the target is met; None when there is no target or no value."""
        if self.target is None or self.value is None or math.isnan(self.value):
            return None
        return self.target.met(self.value)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "value": self.value, "unit": self.unit}
        if self.target is not None:
            out["target"] = {"comparison": self.target.comparison.value, "bound": self.target.bound}
        out["ok"] = self.ok
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Figure:
        raw_target = data.get("target")
        target = None
        if isinstance(raw_target, Mapping):
            target = Target(Comparison(raw_target["comparison"]), float(raw_target["bound"]))
        value = data.get("value")
        return cls(
            name=str(data["name"]),
            value=None if value is None else float(value),
            unit=str(data.get("unit", "")),
            target=target,
        )


@dataclass(slots=True)
class BenchmarkResult:
    """What one benchmark reports: its figures, free-form details, and how it ended."""

    benchmark: str
    size: Size
    figures: list[Figure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    status: Status = Status.OK
    #: Why a benchmark was skipped or failed.
    reason: str = ""
    seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "benchmark": self.benchmark,
            "size": self.size.value,
            "status": self.status.value,
            "figures": [f.as_dict() for f in self.figures],
            "details": self.details,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.seconds is not None:
            out["seconds"] = round(self.seconds, 1)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkResult:
        seconds = data.get("seconds")
        return cls(
            benchmark=str(data["benchmark"]),
            size=Size(data.get("size", Size.FULL)),
            figures=[Figure.from_dict(f) for f in data.get("figures") or []],
            details=dict(data.get("details") or {}),
            status=Status(data.get("status", Status.OK)),
            reason=str(data.get("reason", "")),
            seconds=None if seconds is None else float(seconds),
        )


# ----------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``: a value that was
    actually observed, so a p99 over 1,000 samples is the 10th largest, never an
    interpolation between two."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} is not in (0, 100]")
    ordered = sorted(values)
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def median_ms_figures(
    seconds: Mapping[str, Sequence[float]], name: Callable[[str], str]
) -> tuple[list[Figure], dict[str, list[float]]]:
    """Figures of the median of each series of CPU seconds, in milliseconds (named by ``name``
    from the series' key), and every series in milliseconds for a result's details."""
    figures = [Figure(name(key), round(statistics.median(values) * 1000, 3), "ms") for key, values in seconds.items()]
    return figures, {key: [round(v * 1000, 4) for v in values] for key, values in seconds.items()}


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p99/max/mean of latencies given in seconds, in milliseconds (4 decimals)."""
    if not seconds:
        return {"count": 0}
    return {
        "count": len(seconds),
        "p50_ms": round(percentile(seconds, 50) * 1000, 4),
        "p99_ms": round(percentile(seconds, 99) * 1000, 4),
        "max_ms": round(max(seconds) * 1000, 4),
        "mean_ms": round(sum(seconds) / len(seconds) * 1000, 4),
    }


def format_number(value: float | None) -> str:
    """Compact human form: 0.4321 -> '0.432', 2050.7 -> '2,051', 12.5 -> '12.5', 60.0 -> '60'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    magnitude = abs(value)
    if value == int(value) and magnitude < 1e15:
        return f"{int(value):,}"
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1 or magnitude == 0:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


# ----------------------------------------------------------------------------- machine


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine_info() -> dict[str, Any]:
    """Where the figures were measured: CPU, cores, memory, Python, OS, load, commit, date."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 0
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": platform.platform(),
        "load_average": [round(x, 2) for x in load] if load else None,
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "date": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
    }


# ----------------------------------------------------------------------------- CPU use of processes

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds used by processes (by pid, from /proc) and by this process."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids

    @staticmethod
    def _proc_cpu(pid: int) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        # Fields after the command: state is [0]; utime and stime are [11] and [12].
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def sample(self) -> dict[str, float]:
        out = {name: self._proc_cpu(pid) for name, pid in self.pids.items()}
        out["client"] = time.process_time()
        return out

    @staticmethod
    def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {name: after[name] - before.get(name, 0.0) for name in after}


def etcd_pid(data_dir: Path) -> int | None:
    """The pid of the etcd serving ``data_dir`` (the hub starts it in its own session)."""
    wanted = f"--data-dir={data_dir}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if wanted in cmdline.split(b"\0"):
            return int(entry.name)
    return None


# ----------------------------------------------------------------------------- output

TABLE_HEADER = ("benchmark", "figure", "value", "unit", "target", "ok?")


def table_rows(results: Sequence[BenchmarkResult]) -> list[tuple[str, ...]]:
    """One row per figure; a benchmark without figures (skipped, failed) gets one row saying why."""
    rows: list[tuple[str, ...]] = []
    for result in results:
        if result.status is not Status.OK and not result.figures:
            reason = result.reason.splitlines()[0] if result.reason else ""
            rows.append((result.benchmark, result.status.value.upper(), reason[:90], "", "", ""))
            continue
        for figure in result.figures:
            ok = figure.ok
            rows.append(
                (
                    result.benchmark,
                    figure.name,
                    format_number(figure.value),
                    figure.unit,
                    str(figure.target) if figure.target else "",
                    "" if ok is None else ("yes" if ok else "NO"),
                )
            )
    return rows


def format_table(rows: Sequence[Sequence[str]], header: Sequence[str] = TABLE_HEADER) -> str:
    """A plain fixed-width table; numbers (and the ok column) right-aligned."""
    all_rows = [tuple(header), *[tuple(r) for r in rows]]
    widths = [max(len(row[i]) for row in all_rows) for i in range(len(header))]
    right = {2, 5}
    lines = []
    for index, row in enumerate(all_rows):
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: Path, payload: Mapping[str, Any]) -> None:
    """Write ``payload`` as indented JSON, atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    partial.replace(path)


# ----------------------------------------------------------------------------- one benchmark's CLI


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def benchmark_main(
    run: Callable[[Size], BenchmarkResult],
    argv: Sequence[str] | None = None,
    *,
    description: str,
    parents: Sequence[argparse.ArgumentParser] = (),
) -> int:
    """``python -m bench.<module> [--size tiny|quick|full] [--json FILE]``: run, print, write;
    ``parents`` add a benchmark's own options (its ``__main__`` reads them and binds ``run``)."""
    parser = argparse.ArgumentParser(description=description, parents=list(parents))
    parser.add_argument("--size", type=Size, choices=list(Size), default=Size.FULL)
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    # A runner stops a benchmark with SIGTERM: unwind, so `finally` blocks stop the
    # processes the benchmark started.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    result = run(args.size)
    print(format_table(table_rows([result])))
    if result.status is Status.SKIPPED:
        print(f"skipped: {result.reason}")
    if args.json is not None:
        write_json(args.json, result.as_dict())
    return 1 if result.status is Status.FAILED else 0


def script_main(run: Callable[[Size], BenchmarkResult], doc: str | None, *, name: str) -> NoReturn:
    """A benchmark module's ``if __name__ == "__main__":`` body: :func:`benchmark_main` over the
    command line, described by the first line of the module's docstring."""
    sys.exit(benchmark_main(run, sys.argv[1:], description=(doc or name).splitlines()[0]))


def failed_run(name: str, size: Size, exc: Exception, *, logs: str, started: float) -> BenchmarkResult:
    """The result of a benchmark whose run raised ``exc`` (logged with its traceback): the
    error and the tail of the processes' logs, for the report."""
    log.error("the %s benchmark failed", name, exc_info=exc)
    return BenchmarkResult(
        benchmark=name,
        size=size,
        status=Status.FAILED,
        reason=f"{type(exc).__name__}: {exc}",
        details={"logs": logs},
        seconds=time.perf_counter() - started,
    )


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)
