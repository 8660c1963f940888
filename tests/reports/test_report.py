"""``gpufed waste`` renderings: the JSON contract, the table and CSV."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest

from controlplane.reports.accounting import Accumulator
from controlplane.reports.fleet import FleetSample, PendingReason
from controlplane.reports.report import OutputFormat, render, render_csv, render_table, to_json
from controlplane.reports.resource import report_from_json
from controlplane.reports.summary import WasteReport

from .builders import A100, GPU, T0, at, cluster, demand, fleet, gpu, node, pod

STATES = ["busy", "idle-allocated", "unmeasured", "free-needed", "free-fragmented", "free-spare", "unavailable"]


def sample(minutes: float) -> FleetSample:
    return fleet(
        cluster(
            "dc1",
            [node("a1", [gpu(0, pod("train"), 0.9), gpu(1, pod("idle"), 0.02), gpu(2), gpu(3)])],
            pricing={A100: 2.0},
        ),
        pending=[demand({GPU: 1})],
        time=at(minutes),
    )


@pytest.fixture
def report() -> WasteReport:
    accumulator = Accumulator()
    for minute in range(0, 61):
        accumulator.add(sample(minute))
    return accumulator.query(T0, at(60), by=["cluster"])


def test_json_contract_keys_and_values(report: WasteReport) -> None:
    doc = json.loads(render(report, "json"))
    assert {"window", "totals", "groups", "top_idle_workloads", "recommendations"} <= set(doc)
    assert doc["window"]["from"] == "2024-05-01T00:00:00Z"
    assert doc["window"]["to"] == "2024-05-01T01:00:00Z"
    assert list(doc["totals"]["gpu_hours"]) == STATES
    assert list(doc["totals"]["cost_usd"]) == STATES
    assert doc["totals"]["gpu_hours"] == {
        "busy": 1.0,
        "idle-allocated": 1.0,
        "unmeasured": 0.0,
        "free-needed": 1.0,
        "free-fragmented": 0.0,
        "free-spare": 1.0,
        "unavailable": 0.0,
    }
    assert doc["totals"]["cost_usd"]["idle-allocated"] == 2.0
    assert doc["totals"]["waste_pct"] == 50.0
    [group] = doc["groups"]
    assert group["key"] == {"cluster": "dc1"}
    assert set(group) >= {"key", "gpu_hours", "cost_usd"}
    assert list(group["gpu_hours"]) == STATES
    [idle] = doc["top_idle_workloads"]
    assert idle["workload"] == "Deployment/idle"
    assert idle["allocated_gpus"] == 1.0
    assert (idle["gpus_now"], idle["allocated_gpu_hours"], idle["measured_gpu_hours"]) == (1.0, 1.0, 1.0)
    assert idle["mean_utilization"] == 0.02
    assert idle["idle_cost_usd"] == 2.0
    [rec] = doc["recommendations"]
    assert set(rec) >= {"text", "savings_usd_per_day"}
    assert rec["savings_usd_per_day"] == 48.0
    assert doc == to_json(report)


def test_top_0_leaves_the_idle_workloads_section_out(report: WasteReport) -> None:
    """`gpufed waste --top 0` asked for no list: no section, not "none" while a workload idles."""
    assert "TOP IDLE WORKLOADS\nWORKLOAD " in render_table(report)
    assert "TOP IDLE WORKLOADS" not in render_table(report_from_json(to_json(report, top=0)), top=0)
    assert "TOP IDLE WORKLOADS\nnone" in render_table(replace(report, workloads=()))


def test_table_shows_states_waste_idle_workloads_and_recommendations(report: WasteReport) -> None:
    text = render_table(report)
    lines = text.splitlines()
    assert lines[0] == "GPU waste from 2024-05-01T00:00:00Z to 2024-05-01T01:00:00Z (observed 1.0 h)"
    state_lines = {line.split()[0]: line.split()[1:] for line in lines[3:11]}
    assert state_lines["idle-allocated"] == ["1.0", "$2.00", "25.0%"]
    assert state_lines["total"] == ["4.0", "$8.00", "100.0%"]
    assert "Waste: 50.0% of available, measured GPU-hours" in text
    assert "ml/idle" in text
    assert "1. ml/idle holds 1 GPU now; over the window 1.00 of its 1.00 measured GPU-hours were idle" in text
    # columns line up: every row of the state table has its numbers ending at the same column
    widths = {len(line) for line in lines[2:11]}
    assert len(widths) == 1


def test_csv_has_one_row_per_group(report: WasteReport) -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(report))))
    [row] = rows
    assert row["cluster"] == "dc1"
    assert float(row["gpu_hours_free-needed"]) == 1.0
    assert float(row["cost_usd_busy"]) == 2.0
    assert float(row["waste_pct"]) == 50.0


def test_csv_without_grouping_has_a_total_row() -> None:
    accumulator = Accumulator()
    for minute in range(0, 11):
        accumulator.add(sample(minute))
    rows = list(csv.DictReader(io.StringIO(render(accumulator.query(T0, at(10)), OutputFormat.CSV))))
    assert [row["group"] for row in rows] == ["total"]
    assert sum(float(rows[0][f"gpu_hours_{s}"]) for s in STATES) == pytest.approx(4 * 10 / 60, abs=1e-3)


def test_unknown_output_format_is_rejected(report: WasteReport) -> None:
    with pytest.raises(ValueError):
        render(report, "yaml")


def test_requests_that_can_never_fit_are_listed_apart_and_waste_nothing() -> None:
    """A 64-GPU-per-pod request next to 4 free GPUs: they stay free-spare (0 % waste), and the
    request has its own entry in JSON and its own heading in the table."""
    message = "can never fit: needs 64 nvidia.com/gpu in one pod; the largest node in the fleet has 4"
    huge = replace(demand({GPU: 64}, replicas=2, workload="Deployment/huge"),
                       reason=PendingReason.NEVER_FITS, message=message)
    accumulator = Accumulator()
    for minute in range(0, 11):
        accumulator.add(fleet(cluster("dc1", [node("a1", [gpu(i) for i in range(4)])], pricing={A100: 2.0}),
                              pending=[huge], time=at(minute)))
    report = accumulator.query(T0, at(10))
    doc = to_json(report)
    hours = doc["totals"]["gpu_hours"]
    assert hours["free-fragmented"] == 0 and hours["free-needed"] == 0 and hours["free-spare"] > 0
    assert doc["totals"]["waste_pct"] == 0
    assert doc["never_fit"] == [
        {"namespace": "ml", "workload": "Deployment/huge", "replicas": 2, "requests": {GPU: 64}, "message": message}
    ]
    table = render_table(report)
    assert "REQUESTS THAT CAN NEVER FIT" in table
    assert f"ml/huge (2 pod(s) waiting): {message}" in table
