"""`python -m bench`: each benchmark in its own process, one table, one results file; a
benchmark that fails or hangs is reported as such and the others still run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import BenchmarkSpec, _parse_child, run_benchmark
from bench.common import REPO_ROOT, BenchmarkResult, Figure, Size, Status, write_json

SCHEDULER_FIGURES = {
    "decision p50 (4x10x8)",
    "decision p99 (4x10x8)",
    "throughput",
    "decision p99, CPU time",
    "throughput, CPU time",
}
AGENT_FIGURES = {
    "report size (24 nodes x 8 GPUs)",
    "  of which nodeShapes",
    "  of which utilization",
    "report compute p50 (summarize)",
    "pod-bind least-allocated (24 nodes)",
    "pod-bind most-allocated (24 nodes)",
    "pod-bind best-fit (24 nodes)",
    "pod-bind random (24 nodes)",
}


@pytest.mark.timeout(300)
def test_runner_writes_one_results_file_with_machine_and_figures(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--only",
            "scheduler,agent",
            "--size",
            "tiny",
            "--out",
            str(out),
            "--logs",
            str(tmp_path / "logs"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["size"] == "tiny"
    assert {"cpu_model", "cores", "python", "date", "git_commit"} <= set(results["machine"])
    assert results["machine"]["cores"] >= 1
    assert list(results["benchmarks"]) == ["scheduler", "agent"]

    scheduler = results["benchmarks"]["scheduler"]
    assert scheduler["status"] == "ok"
    assert {f["name"] for f in scheduler["figures"]} == SCHEDULER_FIGURES
    p99 = next(f for f in scheduler["figures"] if f["name"] == "decision p99 (4x10x8)")
    assert p99["target"] == {"comparison": "<=", "bound": 1.0}
    assert p99["value"] > 0 and p99["ok"] is (p99["value"] <= 1.0)

    agent = results["benchmarks"]["agent"]
    assert agent["status"] == "ok"
    names = {f["name"] for f in agent["figures"]}
    assert names >= AGENT_FIGURES
    assert any(name.startswith("DCGM page parse p50") for name in names)
    assert all(f["value"] > 0 for f in agent["figures"])
    assert agent["details"]["nodes"] == 24 and agent["details"]["pods"] > 0

    table = done.stdout.splitlines()
    assert table[0].split() == ["benchmark", "figure", "value", "unit", "target", "ok?"]
    assert sum(line.startswith("scheduler") for line in table) == len(SCHEDULER_FIGURES)
    assert (tmp_path / "logs" / "agent.log").read_text().startswith("$ ")


@pytest.mark.timeout(300)
def test_runner_runs_the_admission_and_tenants_benchmarks_at_tiny_size(tmp_path: Path) -> None:
    """The admission core (bench_admission.py, on tests/admission/builders.py) and the what-if
    fairness table (bench_whatif_tenants.py, 500 tasks of the default trace) at their smallest size."""
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--only",
            "admission,tenants",
            "--size",
            "tiny",
            "--out",
            str(out),
            "--logs",
            str(tmp_path / "logs"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["size"] == "tiny"
    assert list(results["benchmarks"]) == ["tenants", "admission"]  # the runner's order, not --only's

    admission = results["benchmarks"]["admission"]
    assert admission["status"] == "ok", admission.get("reason")
    rates = [f for f in admission["figures"] if f["unit"] == "workloads/s"]
    assert len(rates) == 3  # one cycle, with fair sharing, the next cycle with preemption tried
    assert rates[0]["name"].startswith("workloads decided/s, 200 pending over 10 ClusterQueues")
    for rate in rates:
        assert rate["value"] > 0, rate
        assert rate["target"] == {"comparison": ">=", "bound": 1000.0}
        assert rate["ok"] is (rate["value"] >= 1000.0)
    details = admission["details"]
    assert (details["pending"], details["queues"]) == (200, 10)
    assert details["admitted"] > 0 and details["admitted"] + details["waiting"] == details["pending"]
    assert all(seconds > 0 for seconds in details["cycle_seconds"])

    tenants = results["benchmarks"]["tenants"]
    assert tenants["status"] == "ok", tenants.get("reason")
    assert tenants["details"]["tasks"] == 500
    figures = {f["name"]: f["value"] for f in tenants["figures"]}
    for mode, key in (("plain", "without_fair_sharing"), ("fair sharing", "with_fair_sharing")):
        table = tenants["details"][key]
        assert table["fair_sharing"] is (mode == "fair sharing")
        jain = table["jain_index"]
        assert jain is not None and 0 < jain <= 1, (mode, jain)
        assert figures[f"Jain's index ({mode})"] == jain
        assert set(table["tenants"]) == {"team-1", "team-2", "team-3", "team-4"}
        for tenant, row in table["tenants"].items():
            assert row["jobs"] > 0 and row["wait_mean_s"] >= 0, (mode, tenant, row)
            assert figures[f"{tenant} wait mean ({mode})"] == row["wait_mean_s"]
        assert sum(row["jobs"] for row in table["tenants"].values()) == 500
        assert figures[f"wait mean, all ({mode})"] >= 0
        assert figures[f"replay ({mode}, cpu)"] > 0

    lines = done.stdout.splitlines()
    assert sum(line.startswith("admission") for line in lines) == len(admission["figures"])
    assert sum(line.startswith("tenants") for line in lines) == len(tenants["figures"])


def _spec(name: str, code: str, *, timeout: float = 60.0) -> BenchmarkSpec:
    def command(size: Size, out: Path) -> list[str]:
        return [sys.executable, "-c", code, str(out)]

    return BenchmarkSpec(
        name=name, what=name, command=command, parse=_parse_child, timeout={size: timeout for size in Size}
    )


def test_a_failing_benchmark_is_reported_with_its_exit_code_and_output(tmp_path: Path) -> None:
    spec = _spec("broken", "import sys; print('boom: no etcd'); sys.exit(3)")
    result = run_benchmark(spec, Size.TINY, work_dir=tmp_path)
    assert result.status is Status.FAILED
    assert "exit code 3" in result.reason
    assert "boom: no etcd" in result.details["log_tail"]


def test_a_hanging_benchmark_is_stopped_at_its_time_limit(tmp_path: Path) -> None:
    spec = _spec("hangs", "import time; time.sleep(120)", timeout=1.0)
    result = run_benchmark(spec, Size.TINY, work_dir=tmp_path)
    assert result.status is Status.TIMEOUT
    assert result.seconds is not None and result.seconds < 60


def test_a_benchmark_result_written_by_the_child_is_read_back(tmp_path: Path) -> None:
    written = BenchmarkResult(benchmark="fake", size=Size.TINY, figures=[Figure("x", 2.0, "s")])
    source = tmp_path / "source.json"
    write_json(source, written.as_dict())
    code = f"import shutil, sys; shutil.copy({str(source)!r}, sys.argv[1])"
    result = run_benchmark(_spec("fake", code), Size.TINY, work_dir=tmp_path)
    assert result.status is Status.OK
    assert result.figures == [Figure("x", 2.0, "s")]


def test_an_unavailable_benchmark_is_skipped_without_running(tmp_path: Path) -> None:
    spec = BenchmarkSpec(
        name="missing",
        what="missing",
        command=lambda size, out: ["false"],
        parse=_parse_child,
        timeout={size: 1.0 for size in Size},
        unavailable=lambda: "bench/bench_missing.py does not exist yet",
    )
    result = run_benchmark(spec, Size.TINY, work_dir=tmp_path)
    assert (result.status, result.reason) == (Status.SKIPPED, "bench/bench_missing.py does not exist yet")
    assert not (tmp_path / "missing.log").exists()
