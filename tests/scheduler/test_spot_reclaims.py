"""Replacing replicas spot reclaims took: which are new, which clusters are spot, the history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.spot import ANNOTATION_SPOT_RECLAIMS, recorded_reclaims
from controlplane.reports.accounting import Accumulator
from controlplane.reports.fleet import FleetSample
from controlplane.reports.report import render_table, to_json
from controlplane.reports.resource import report_from_json
from controlplane.reports.scoping import for_namespace
from controlplane.scheduler.controller.reclaims import (
    History,
    Reclaimed,
    is_spot_cluster,
    new_pods,
    reclaimed_of,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("reclaimed", "acted", "expected"),
    [
        (Reclaimed(3, ("a",), "2026-01-01T00:00:00Z"), None, 3),
        (Reclaimed(3, ("a",), "2026-01-01T00:00:00Z"), "2026-01-01T00:00:00Z/3", 0),  # acted on
        (Reclaimed(5, ("a", "b"), "2026-01-01T00:00:09Z"), "2026-01-01T00:00:00Z/3", 2),  # grew in the window
        (Reclaimed(2, ("c",), "2026-01-01T01:00:00Z"), "2026-01-01T00:00:00Z/3", 2),  # a new window
        (Reclaimed(2, ("c",), "2025-12-31T00:00:00Z"), "2026-01-01T00:00:00Z/3", 0),  # older than acted
    ],
)
def test_only_replicas_not_replaced_yet_are_due(reclaimed: Reclaimed, acted: str | None, expected: int) -> None:
    assert new_pods(reclaimed, acted) == expected


def test_a_work_reports_its_largest_reclaim() -> None:
    work = {"status": {"manifestStatuses": [
        {"identifier": {"kind": "ConfigMap"}},
        {"identifier": {"kind": "Deployment"}, "reclaimed": {"pods": 2, "nodes": ["n1"], "time": "2026-01-01T00:00:00Z"}},
    ]}}
    assert reclaimed_of(work) == Reclaimed(2, ("n1",), "2026-01-01T00:00:00Z")
    assert reclaimed_of({"status": {}}) is None


@pytest.mark.parametrize(
    ("summary", "spot"),
    [({"total": 3, "ready": 3, "spot": 3}, True), ({"total": 3, "ready": 3, "spot": 2}, False),
     ({"total": 3, "ready": 3}, False), ({"total": 0, "ready": 0, "spot": 0}, False)],
)
def test_a_cluster_is_spot_when_all_its_nodes_are(summary: dict[str, int], spot: bool) -> None:
    assert is_spot_cluster({"status": {"nodeSummary": summary}}) is spot


def _binding(recent: list[dict[str, Any]], namespace: str = "ml") -> dict[str, Any]:
    annotation = json.dumps({"count": len(recent), "recent": recent, "acted": {"spot": "x/1"}})
    return {
        "metadata": {"name": "infer-deployment", "namespace": namespace, "annotations": {ANNOTATION_SPOT_RECLAIMS: annotation}},
        "spec": {"resource": {"kind": "Deployment", "name": "infer"}},
    }


def test_history_counts_reclaims_in_the_window() -> None:
    binding = _binding([{"time": "2026-01-01T00:00:00Z", "cluster": "spot", "replicas": 2},
                        {"time": "2026-01-01T00:50:00Z", "cluster": "spot", "replicas": 1}])
    history = History.of(binding)
    assert history.count == 2 and history.acted == {"spot": "x/1"}
    now = T0 + timedelta(minutes=55)
    assert history.within(timedelta(hours=1), now=now) == 2
    assert history.within(timedelta(minutes=10), now=now) == 1
    assert History.of({"metadata": {"annotations": {ANNOTATION_SPOT_RECLAIMS: "not json"}}}) == History()


def test_the_waste_report_counts_reclaims_in_its_window_and_namespace() -> None:
    bindings = [
        _binding([{"time": "2026-01-01T00:00:30Z", "cluster": "spot", "replicas": 2},
                  {"time": "2026-01-01T00:05:00Z", "cluster": "spot", "replicas": 1}]),
        _binding([{"time": "2026-01-01T00:01:00Z", "cluster": "spot", "replicas": 4}], namespace="other"),
    ]
    reclaims = tuple(r for b in bindings for r in recorded_reclaims(b))
    assert reclaims[0].workload == "Deployment/infer" and reclaims[0].replicas == 2
    accumulator = Accumulator()
    accumulator.add(FleetSample(time=T0, spot_reclaims=reclaims))
    accumulator.add(FleetSample(time=T0 + timedelta(minutes=2), spot_reclaims=reclaims))
    report = accumulator.query(T0, T0 + timedelta(minutes=2))
    counted = to_json(report)["spot_reclaims"]
    assert (counted["reclaims"], counted["replicas"]) == (2, 6)
    assert counted["items"][0] == {"namespace": "ml", "workload": "Deployment/infer", "cluster": "spot",
                                   "time": "2026-01-01T00:00:30Z", "replicas": 2}
    # The command renders its table from the JSON: the line survives the round trip.
    assert "Spot reclaims survived: 2 (6 replica(s) replaced elsewhere)" in render_table(report_from_json(to_json(report)))
    ml = to_json(for_namespace(report, "ml"))["spot_reclaims"]
    assert (ml["reclaims"], ml["replicas"]) == (1, 2)
    assert to_json(accumulator.query(T0, T0 + timedelta(seconds=10)))["spot_reclaims"]["reclaims"] == 0
