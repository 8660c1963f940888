"""``python -m bench [--only NAME,...] [--quick] [--out FILE]``: run gpufed's benchmarks,
print one table, write ``bench/results.json``.

Each benchmark runs in its own process (one that fails, hangs or eats memory cannot take
the others down; each starts from a cold interpreter with nothing left over from the
previous one), writes its figures as JSON to a file this runner names, and is killed
after its time limit. Output of every benchmark goes to a log file, named in the
progress lines on stderr. The table has one row per figure: benchmark, figure, value,
unit, target, and whether the target is met; results.json has the same figures plus
each benchmark's details and the machine they were measured on.

Benchmarks (in run order): scheduler (bench/bench_scheduler.py), agent
(bench/bench_agent_report.py, with bench/bench_sim_bind.py), api (bench/bench_api.py),
rbac (bench/bench_rbac.py), watch (bench/bench_watch.py), whatif (bench/bench_whatif.py), tenants
(bench/bench_whatif_tenants.py), placement (bench/bench_placement_quality.py), e2e (bench/bench_e2e_apply.py), scale (bench/bench_scale.py),
admission (bench/bench_admission.py), ledger (bench/bench_ledger.py), waste-classify
(bench/bench_waste_classify.py).

A module with ``run(size) -> BenchmarkResult | dict`` is run through the hidden
``--child NAME`` mode of this command; bench_scheduler.py is run through its own command
line and its JSON is read back.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    REPO_ROOT,
    BenchmarkResult,
    Figure,
    Size,
    Status,
    at_least,
    at_most,
    configure_logging,
    format_table,
    machine_info,
    table_rows,
    write_json,
)

log = logging.getLogger("bench")

DEFAULT_OUT = REPO_ROOT / "bench" / "results.json"
#: Seconds a stopped benchmark gets to clean up (stop the processes it started) before SIGKILL.
STOP_GRACE = 30.0
LOG_TAIL_LINES = 25


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    """How to run one benchmark in its own process and read its figures back."""

    name: str
    what: str
    #: The argv that runs it at ``size`` and writes its JSON to the given path.
    command: Callable[[Size, Path], list[str]]
    #: Turns that JSON into a result.
    parse: Callable[[Mapping[str, Any], Size], BenchmarkResult]
    #: Seconds before the process is stopped, by size.
    timeout: Mapping[Size, float]
    #: A reason the benchmark cannot run here (e.g. its module does not exist yet), or None.
    unavailable: Callable[[], str | None] = lambda: None


def _child_command(name: str) -> Callable[[Size, Path], list[str]]:
    def command(size: Size, out: Path) -> list[str]:
        return [sys.executable, "-m", "bench", "--child", name, "--size", size.value, "--out", str(out)]

    return command


def _parse_child(data: Mapping[str, Any], size: Size) -> BenchmarkResult:
    return BenchmarkResult.from_dict(data)


# --------------------------------------------------------------------- bench_scheduler.py

SCHEDULER_ARGS = {
    Size.TINY: ["--clusters", "4", "--nodes", "10", "--bindings", "40", "--report-every", "10"],
    Size.QUICK: ["--bindings", "1000"],
    Size.FULL: [],  # its defaults are the size: 100 clusters x 100 nodes x 8 GPUs, 5,000 bindings
}
SCHEDULER_P99_MS = 1.0
SCHEDULER_BINDINGS_PER_S = 2000.0


def _scheduler_command(size: Size, out: Path) -> list[str]:
    script = REPO_ROOT / "bench" / "bench_scheduler.py"
    return [sys.executable, str(script), *SCHEDULER_ARGS[size], "--json", str(out)]


def parse_scheduler(data: Mapping[str, Any], size: Size) -> BenchmarkResult:
    """Figures from bench_scheduler.py's ``{"scheduler": {...}}``."""
    raw = data["scheduler"]
    fleet = f"{raw['clusters']}x{raw['nodes_per_cluster']}x8"
    figures = [
        Figure(f"decision p50 ({fleet})", raw["p50_ms"], "ms"),
        Figure(f"decision p99 ({fleet})", raw["p99_ms"], "ms", at_most(SCHEDULER_P99_MS)),
        Figure("throughput", raw["bindings_per_s"], "bindings/s", at_least(SCHEDULER_BINDINGS_PER_S)),
        Figure("decision p99, CPU time", raw["cpu_p99_ms"], "ms", at_most(SCHEDULER_P99_MS)),
        Figure(
            "throughput, CPU time",
            raw["bindings_per_cpu_s"],
            "bindings/s",
            at_least(SCHEDULER_BINDINGS_PER_S),
        ),
    ]
    return BenchmarkResult(benchmark="scheduler", size=size, figures=figures, details=dict(raw))


# --------------------------------------------------------------------- bench_whatif.py


def _whatif_unavailable() -> str | None:
    path = REPO_ROOT / "bench" / "bench_whatif.py"
    if not path.exists():
        return "bench/bench_whatif.py does not exist yet"
    if "def run(" not in path.read_text(encoding="utf-8"):
        return "bench/bench_whatif.py has no run(size) function for the runner to call"
    return None


SPECS: tuple[BenchmarkSpec, ...] = (
    BenchmarkSpec(
        name="scheduler",
        what="hub scheduler decision latency and throughput, in process, 100 clusters x 100 nodes x 8 GPUs",
        command=_scheduler_command,
        parse=parse_scheduler,
        timeout={Size.TINY: 120, Size.QUICK: 180, Size.FULL: 300},
    ),
    BenchmarkSpec(
        name="agent",
        what="agent report size and compute time at 1,000 nodes x 8 GPUs; simulated pod-bind throughput",
        command=_child_command("agent"),
        parse=_parse_child,
        timeout={Size.TINY: 120, Size.QUICK: 240, Size.FULL: 300},
    ),
    BenchmarkSpec(
        name="api",
        what="hub create throughput vs raw etcd put (64 clients), GET and LIST latency",
        command=_child_command("api"),
        parse=_parse_child,
        timeout={Size.TINY: 120, Size.QUICK: 240, Size.FULL: 420},
    ),
    BenchmarkSpec(
        name="rbac",
        what="one RBAC authorization decision, in process, 500 team namespaces with their bindings",
        command=_child_command("rbac"),
        parse=_parse_child,
        timeout={Size.TINY: 60, Size.QUICK: 120, Size.FULL: 180},
    ),
    BenchmarkSpec(
        name="watch",
        what="watch fan-out to 100 and 1,000 watchers of Works, without and with the watch cache, in process",
        command=_child_command("watch"),
        parse=_parse_child,
        timeout={Size.TINY: 60, Size.QUICK: 180, Size.FULL: 300},
    ),
    BenchmarkSpec(
        name="whatif",
        what="default trace replay time per strategy",
        command=_child_command("whatif"),
        parse=_parse_child,
        timeout={Size.TINY: 180, Size.QUICK: 300, Size.FULL: 600},
        unavailable=_whatif_unavailable,
    ),
    BenchmarkSpec(
        name="tenants",
        what="what-if fairness table: default trace, 4 synthetic tenants under Kueue quotas, without and with fair sharing",
        command=_child_command("tenants"),
        parse=_parse_child,
        timeout={Size.TINY: 120, Size.QUICK: 180, Size.FULL: 600},
    ),
    BenchmarkSpec(
        name="placement",
        what="GPU allocation at 100 % demand, default trace + variants x splits x member scorings",
        command=_child_command("placement"),
        parse=_parse_child,
        timeout={Size.TINY: 300, Size.QUICK: 3600, Size.FULL: 21600},
    ),
    BenchmarkSpec(
        name="e2e",
        what="apply -> all replicas Running on the hub, 1,000 workloads over 10 simulated clusters",
        command=_child_command("e2e"),
        parse=_parse_child,
        timeout={Size.TINY: 240, Size.QUICK: 360, Size.FULL: 600},
    ),
    BenchmarkSpec(
        name="scale",
        what="hub under a hollow fleet (sim-fleet, real agents) joined by bootstrap tokens: RSS, CPU, latencies",
        command=_child_command("scale"),
        parse=_parse_child,
        timeout={Size.TINY: 300, Size.QUICK: 1200, Size.FULL: 14400},
    ),
    BenchmarkSpec(
        name="admission",
        what="fleet admission decisions per second, in process, 1,000 pending workloads over 50 ClusterQueues",
        command=_child_command("admission"),
        parse=_parse_child,
        timeout={Size.TINY: 60, Size.QUICK: 120, Size.FULL: 180},
    ),
    BenchmarkSpec(
        name="ledger",
        what="etcd writes, reads and decoded watch events per workload, apply -> Running (the write ledger)",
        command=_child_command("ledger"),
        parse=_parse_child,
        timeout={Size.TINY: 240, Size.QUICK: 300, Size.FULL: 300},
    ),
    BenchmarkSpec(
        name="waste-classify",
        what="CPU of one waste classification, in process, 100 clusters x 5,000 nodes x 8 GPUs, 2,000 pending demands",
        command=_child_command("waste-classify"),
        parse=_parse_child,
        timeout={Size.TINY: 120, Size.QUICK: 300, Size.FULL: 900},
    ),
)
SPECS_BY_NAME = {spec.name: spec for spec in SPECS}

#: --child NAME -> the module whose run(size) it calls.
CHILD_MODULES = {
    "agent": "bench.bench_agent_report",
    "api": "bench.bench_api",
    "rbac": "bench.bench_rbac",
    "watch": "bench.bench_watch",
    "whatif": "bench.bench_whatif",
    "tenants": "bench.bench_whatif_tenants",
    "placement": "bench.bench_placement_quality",
    "e2e": "bench.bench_e2e_apply",
    "ledger": "bench.bench_ledger",
    "scale": "bench.bench_scale",
    "admission": "bench.bench_admission",
    "waste-classify": "bench.bench_waste_classify",
}


# --------------------------------------------------------------------- one benchmark in a child


def result_from_run(name: str, size: Size, value: object) -> BenchmarkResult:
    """Accept what a module's ``run(size)`` returns: a BenchmarkResult, or a plain dict (either
    the BenchmarkResult JSON form, or ``{figure name: number}`` plus optional ``details``)."""
    if isinstance(value, BenchmarkResult):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{name}: run() returned {type(value).__name__}, not a dict")
    if "figures" in value and isinstance(value["figures"], list):
        return BenchmarkResult.from_dict({"benchmark": name, "size": size.value, **value})
    figures = [
        Figure(str(key), float(number))
        for key, number in value.items()
        if isinstance(number, int | float) and not isinstance(number, bool)
    ]
    details = value.get("details")
    return BenchmarkResult(
        benchmark=name,
        size=size,
        figures=figures,
        details=dict(details) if isinstance(details, Mapping) else {},
    )


def run_child(name: str, size: Size, out: Path) -> int:
    """Import the benchmark's module, call ``run(size)`` and write the result to ``out``."""
    module = importlib.import_module(CHILD_MODULES[name])
    started = time.perf_counter()
    try:
        # Size is a StrEnum: modules written against ``run(size: str)`` get "full", "quick", "tiny".
        result = result_from_run(name, size, module.run(size))
    except Exception as exc:
        log.exception("benchmark %s failed", name)
        result = BenchmarkResult(
            benchmark=name, size=size, status=Status.FAILED, reason=f"{type(exc).__name__}: {exc}"
        )
    if result.seconds is None:
        result.seconds = time.perf_counter() - started
    write_json(out, result.as_dict())
    print(format_table(table_rows([result])))
    return 0 if result.status is not Status.FAILED else 1


# --------------------------------------------------------------------- the runner


def _stream(pipe: Any, log_file: Any, tail: deque[str]) -> None:
    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        log_file.write(line)
        log_file.flush()
        tail.append(line.rstrip("\n"))
    pipe.close()


def run_benchmark(spec: BenchmarkSpec, size: Size, *, work_dir: Path) -> BenchmarkResult:
    """Run one benchmark in its own process group and read back its JSON."""
    reason = spec.unavailable()
    if reason is not None:
        return BenchmarkResult(benchmark=spec.name, size=size, status=Status.SKIPPED, reason=reason)
    out = work_dir / f"{spec.name}.json"
    log_path = work_dir / f"{spec.name}.log"
    argv = spec.command(size, out)
    timeout = spec.timeout[size]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    started = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as log_file:
        log_file.write("$ " + " ".join(argv) + "\n")
        process = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        reader = threading.Thread(target=_stream, args=(process.stdout, log_file, tail), daemon=True)
        reader.start()
        timed_out = False
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop(process)
        except KeyboardInterrupt:
            _stop(process)
            raise
        reader.join(timeout=10)
    elapsed = time.perf_counter() - started
    if timed_out:
        return BenchmarkResult(
            benchmark=spec.name,
            size=size,
            status=Status.TIMEOUT,
            reason=f"stopped after {timeout:.0f}s; log: {log_path}",
            details={"log_tail": list(tail)},
            seconds=elapsed,
        )
    try:
        data = json.loads(out.read_text(encoding="utf-8"))
        result = spec.parse(data, size)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return BenchmarkResult(
            benchmark=spec.name,
            size=size,
            status=Status.FAILED,
            reason=f"exit code {process.returncode}, no usable result ({exc}); log: {log_path}",
            details={"log_tail": list(tail)},
            seconds=elapsed,
        )
    if result.seconds is None:
        result.seconds = elapsed
    if result.status is Status.FAILED and "log_tail" not in result.details:
        result.details["log_tail"] = list(tail)
    return result


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the benchmark's process group (it stops what it started), then SIGKILL."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=STOP_GRACE)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        process.wait(timeout=10)


def select(only: str | None) -> list[BenchmarkSpec]:
    if not only:
        return list(SPECS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SPECS_BY_NAME]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(SPECS_BY_NAME)}")
    return [spec for spec in SPECS if spec.name in names]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--only", metavar="NAME,...", help=f"run only these ({', '.join(SPECS_BY_NAME)})")
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes, for a first look (minutes, not 15)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results file (default {DEFAULT_OUT})")
    parser.add_argument(
        "--logs", type=Path, help="directory for each benchmark's log (default: a new temp dir)"
    )
    parser.add_argument("--size", type=Size, choices=list(Size), help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=sorted(CHILD_MODULES), help=argparse.SUPPRESS)
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging("INFO")
    size = args.size or (Size.QUICK if args.quick else Size.FULL)
    if args.child:
        if args.out == DEFAULT_OUT:
            raise SystemExit("--child needs --out FILE")
        signal.signal(signal.SIGTERM, _raise_system_exit)
        return run_child(args.child, size, args.out)
    if args.list:
        for spec in SPECS:
            print(f"{spec.name:<10} {spec.what}")
        return 0
    specs = select(args.only)
    work_dir = args.logs or Path(tempfile.mkdtemp(prefix="gpufed-bench-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    started_at = machine["date"]
    results: list[BenchmarkResult] = []
    for index, spec in enumerate(specs, 1):
        print(f"[{index}/{len(specs)}] {spec.name}: {spec.what} ...", file=sys.stderr, flush=True)
        result = run_benchmark(spec, size, work_dir=work_dir)
        results.append(result)
        note = f" ({result.reason.splitlines()[0]})" if result.reason else ""
        print(
            f"[{index}/{len(specs)}] {spec.name}: {result.status.value} in {result.seconds or 0:.0f}s{note};"
            f" log: {work_dir / (spec.name + '.log')}",
            file=sys.stderr,
            flush=True,
        )
    payload = {
        "command": "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "size": size.value,
        "started": started_at,
        "finished": machine_info()["date"],
        "machine": machine,
        "benchmarks": {result.benchmark: result.as_dict() for result in results},
    }
    write_json(args.out, payload)
    print(format_table(table_rows(results)))
    print(f"\nresults: {args.out}  logs: {work_dir}")
    return 0 if all(r.status in (Status.OK, Status.SKIPPED) for r in results) else 1


def _raise_system_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
