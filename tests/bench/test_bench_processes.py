"""The benchmarks that start real processes (a hub with its etcd; a hub, members and
agents), run at their tiny size: they finish, stop what they started, and report the
figures the table and docs/benchmarks.md expect. Speed is not asserted."""

from __future__ import annotations

import pytest

from bench import bench_api, bench_e2e_apply
from bench.common import Size, Status

pytestmark = pytest.mark.e2e


def _hub_processes_left(marker: str) -> list[str]:
    from pathlib import Path

    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                left.append(cmdline)
    return left


@pytest.mark.timeout(180)
def test_api_benchmark_measures_hub_against_raw_etcd() -> None:
    result = bench_api.run(Size.TINY)
    assert result.status is Status.OK, result.reason
    figures = {f.name: f for f in result.figures}
    assert set(figures) == {
        "hub create / raw etcd put ratio",
        "hub creates (8 clients)",
        "raw aetcd puts (8 concurrent)",
        "floor creates (8 clients)",
        "floor create / raw etcd put ratio",
        "hub create / floor create ratio",
        "hub CPU per create",
        "floor server CPU per create",
        "create latency p99",
        "GET p50",
        "GET p99",
        "LIST 120 objects p50",
        "LIST 120 objects p99",
    }
    ratio = figures["hub create / raw etcd put ratio"]
    assert ratio.target is not None and ratio.target.bound == 0.5
    hub, raw = figures["hub creates (8 clients)"].value, figures["raw aetcd puts (8 concurrent)"].value
    assert hub and raw and ratio.value == pytest.approx(hub / raw, rel=0.01)
    floor = figures["floor creates (8 clients)"].value
    assert floor and figures["floor create / raw etcd put ratio"].value == pytest.approx(floor / raw, rel=0.01)
    assert figures["hub create / floor create ratio"].value == pytest.approx(hub / floor, rel=0.01)
    assert result.details["list_objects"] == result.details["floor_objects_stored"] == 120
    assert [p["kind"] for p in result.details["phases"]] == ["raw put", "hub create", "floor create"] * 2
    for kind in ("hub create", "floor create"):
        assert sum(p["ops"] for p in result.details["phases"] if p["kind"] == kind) == 120
        assert sum(p["errors"] for p in result.details["phases"] if p["kind"] == kind) == 0
    # The floor server is its own process, measured as the hub is.
    assert figures["floor server CPU per create"].value == result.details["cpu_ms_per_op"]["floor create"]["floor"] > 0
    assert result.details["cpu_ms_per_op"]["hub create"]["floor"] < result.details["cpu_ms_per_op"]["floor create"]["floor"]
    assert not _hub_processes_left("gpufed-bench-api-")


@pytest.mark.timeout(300)
def test_e2e_benchmark_drives_hub_members_and_agents() -> None:
    result = bench_e2e_apply.run(Size.TINY)
    assert not _hub_processes_left("gpufed-bench-e2e-")
    if result.status is Status.SKIPPED:
        pytest.skip(result.reason)
    assert result.status is Status.OK, result.reason
    figures = {f.name: f for f in result.figures}
    assert {
        "workloads Running (of 4)",
        "apply -> Running p50",
        "apply -> Running p99",
        "apply -> Running max",
        "workloads Running per second",
        "create request p99",
        "hub CPU per placed workload",
        "etcd CPU per placed workload",
    } <= set(figures)
    assert figures["apply -> Running p99"].target is not None
    hub_ms = figures["hub CPU per placed workload"]
    assert hub_ms.target is not None and hub_ms.value is not None and hub_ms.value > 0
    done = figures["workloads Running (of 4)"].value
    assert hub_ms.value == round(result.details["cpu_seconds_by_role"]["hub"] * 1000 / done, 1)  # type: ignore[operator]
    assert figures["apply -> Running p50"].value <= figures["apply -> Running p99"].value  # type: ignore[operator]
    assert result.details["workloads"] == 4
    assert set(result.details["cpu_seconds_by_role"]) >= {"hub", "sim", "agent", "client"}
    # The slowest workloads, slowest first, each where its binding placed it.
    slowest = result.details["slowest"]
    assert 1 <= len(slowest) <= bench_e2e_apply.SLOWEST
    assert [s["seconds"] for s in slowest] == sorted((s["seconds"] for s in slowest), reverse=True)
    assert slowest[0]["seconds"] == figures["apply -> Running max"].value
    assert all(sum(s["clusters"].values()) >= 1 and s["name"].startswith("w-") for s in slowest), slowest
