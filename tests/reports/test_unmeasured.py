"""Allocated GPUs whose utilization nobody measured (an agent without a DCGM source) are their own
state, "unmeasured": neither busy nor idle, carried through the accounting totals (every GPU's
states still add up to its hours), the JSON, the table's header and the Prometheus metrics."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controlplane.apis.timestamps import format_time
from controlplane.metrics import HubMetrics
from controlplane.reports.accounting import Accumulator
from controlplane.reports.classify import WasteState, classify
from controlplane.reports.report import render_table, to_json
from controlplane.reports.resource import report_from_json
from controlplane.reports.snapshot import sample_from_cluster_statuses

from .fleetobjects import A100, T0, cluster_status, device, k8s_node, k8s_pod

S = WasteState


def cluster(name: str, status: dict[str, Any], price: float) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"provider": "onprem", "pricing": {A100: price}}, "status": status}


def fleet_objects(minute: int) -> list[dict[str, Any]]:
    """"measured": 2 A100s, one pod idle at 2 %, one busy at 90 %, with DCGM. "blind": 4 A100s,
    3 held by pods, and its agent has no DCGM source (no utilization at all)."""
    now = T0 + timedelta(minutes=minute)
    measured = cluster_status(
        [k8s_node("n1", 2)],
        [k8s_pod("idle-0", "n1", 1, deployment="idle"), k8s_pod("busy-0", "n1", 1, deployment="busy")],
        {"n1": [device(0, pod="idle-0", utilization=0.02), device(1, pod="busy-0", utilization=0.9)]},
        now=now,
    )
    blind = cluster_status(
        [k8s_node("m1", 4)], [k8s_pod(f"train-{i}", "m1", 1, deployment="train") for i in range(3)], {}, now=now
    )
    return [cluster("measured", measured, 2.0), cluster("blind", blind, 3.0)]


def test_gpus_without_utilization_are_unmeasured_in_totals_json_text_and_metrics() -> None:
    accumulator = Accumulator()
    metrics = HubMetrics(registry=CollectorRegistry(), process_collectors=False)
    for minute in range(0, 61):
        now = T0 + timedelta(minutes=minute)
        sample = sample_from_cluster_statuses(fleet_objects(minute), [], [], now=now)
        assert accumulator.add(sample)
        metrics.record_fleet(classify(sample), time=now)
    report = accumulator.query(T0, T0 + timedelta(hours=1))

    hours = report.totals.gpu_hours
    assert hours[S.UNMEASURED] == pytest.approx(3.0)  # 3 GPUs held for 1 h in "blind"
    assert hours[S.BUSY] == pytest.approx(1.0)  # only the measured busy pod
    assert hours[S.IDLE_ALLOCATED] == pytest.approx(1.0)
    assert hours[S.FREE_SPARE] == pytest.approx(1.0)
    assert report.totals.total_gpu_hours == pytest.approx(6.0)  # 6 GPUs x 1 h: the states add up
    assert report.totals.cost_usd[S.UNMEASURED] == pytest.approx(9.0)
    # Waste is measured waste: the idle GPU among the 3 measured, available GPU-hours.
    assert report.totals.waste_pct == pytest.approx(100 / 3)
    assert report.unmeasured == (("blind", pytest.approx(3.0)),)

    doc = to_json(report)
    assert doc["totals"]["gpu_hours"]["unmeasured"] == pytest.approx(3.0)
    assert doc["unmeasured"] == [{"cluster": "blind", "gpu_hours": pytest.approx(3.0)}]
    text = render_table(report_from_json(doc))  # what `gpufed waste` prints from the API's JSON
    header = text.splitlines()[:3]
    assert "Utilization not measured for 3.00 GPU-hours on clusters blind" in "\n".join(header), text
    assert any(line.split()[:2] == ["unmeasured", "3.0"] for line in text.splitlines()), text

    labels = {"cluster": "blind", "model": A100}
    assert metrics.registry.get_sample_value("gpufed_gpus", {"state": "unmeasured", **labels}) == 3.0
    assert metrics.registry.get_sample_value("gpufed_gpus", {"state": "busy", **labels}) is None
    unmeasured_hours = metrics.registry.get_sample_value("gpufed_gpu_hours_total", {"state": "unmeasured", **labels})
    assert unmeasured_hours == pytest.approx(3.0)


def test_a_fully_measured_report_has_no_unmeasured_line() -> None:
    accumulator = Accumulator()
    for minute in range(0, 11):
        now = T0 + timedelta(minutes=minute)
        accumulator.add(sample_from_cluster_statuses(fleet_objects(minute)[:1], [], [], now=now))
    report = accumulator.query(T0, T0 + timedelta(minutes=10))
    assert report.unmeasured == ()
    assert to_json(report)["unmeasured"] == []
    assert "not measured" not in render_table(report)
    assert format_time(report.window_from) == format_time(T0)
