"""The waste report's "moves": replicas moved back to cheaper tiers, GPU-hours shifted, dollars saved."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.constants import ANNOTATION_MOVES
from controlplane.reports.accounting import Accumulator
from controlplane.reports.moves import MoveRecord, moves_of_binding, summarize
from controlplane.reports.report import render_table, to_json
from controlplane.reports.resource import report_from_json
from controlplane.reports.scoping import for_namespace
from controlplane.reports.snapshot import sample_from_cluster_statuses

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def move(minutes: float, *, replicas: int = 8, saving: float = 23.2, namespace: str = "ml") -> MoveRecord:
    return MoveRecord(namespace, "serve", T0 + timedelta(minutes=minutes), "cloud-h100", "onprem-a100", replicas, 1.0, saving)


@pytest.mark.parametrize(
    ("moves", "start", "end", "expected"),
    [
        # one move at the window's start: 8 GPUs for 1 h shifted, $23.20 saved
        ([move(0)], 0, 60, (1, 8, 8.0, 23.2)),
        # a move before the window saves in it, but is not counted as moved in it
        ([move(-30)], 0, 60, (0, 0, 8.0, 23.2)),
        # a move half-way through: half the hours
        ([move(30, replicas=4, saving=11.6)], 0, 60, (1, 4, 2.0, 5.8)),
        # after the window: nothing
        ([move(90)], 0, 60, (0, 0, 0.0, 0.0)),
        ([move(0), move(30, replicas=4, saving=11.6)], 0, 60, (2, 12, 10.0, 29.0)),
        ([], 0, 60, (0, 0, 0.0, 0.0)),
    ],
)
def test_summarize(moves: list[MoveRecord], start: float, end: float, expected: tuple[int, int, float, float]) -> None:
    summary = summarize(moves, T0 + timedelta(minutes=start), T0 + timedelta(minutes=end))
    assert (summary.moves, summary.replicas_moved) == expected[:2]
    assert summary.gpu_hours_shifted == pytest.approx(expected[2])
    assert summary.saved_usd == pytest.approx(expected[3])


def binding(moves: Any) -> dict[str, Any]:
    return {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "ResourceBinding",
        "metadata": {"name": "serve-deployment", "namespace": "ml", "annotations": {ANNOTATION_MOVES: json.dumps(moves)}},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml", "name": "serve"}, "replicas": 16},
    }


RECORDED = {
    "time": "2026-01-01T12:00:00Z", "message": "moved 8 replicas cloud-h100 \u2192 onprem-a100: saves $23.20/h",
    "source": "cloud-h100", "target": "onprem-a100", "replicas": 8, "gpusPerReplica": 1.0, "savingPerHour": 23.2,
}


def test_moves_are_read_from_the_bindings_annotation() -> None:
    assert moves_of_binding(binding([RECORDED])) == [move(0)]
    assert moves_of_binding(binding("not a list")) == []
    assert moves_of_binding(binding([{"time": "yesterday"}, RECORDED])) == [move(0)]
    assert moves_of_binding({"metadata": {}}) == []


def test_the_report_counts_moves_and_keeps_them_through_json() -> None:
    accumulator = Accumulator()
    for minutes in (0, 60):
        accumulator.add(sample_from_cluster_statuses([], [binding([RECORDED])], [], now=T0 + timedelta(minutes=minutes)))
    report = accumulator.query(T0, T0 + timedelta(hours=1))
    doc = to_json(report)
    assert {k: v for k, v in doc["moves"].items() if k != "items"} == {
        "moves": 1, "replicas_moved": 8, "gpu_hours_shifted": 8.0, "saved_usd": 23.2,
    }
    assert doc["moves"]["items"][0]["from"] == "cloud-h100"
    again = report_from_json(doc)
    assert again.moves == report.moves
    table = render_table(again)
    assert "MOVES BACK TO CHEAPER TIERS" in table
    assert "8 replica(s) moved in 1 move(s); 8.00 GPU-hours shifted to cheaper tiers, $23.20 saved in this window" in table
    assert for_namespace(report, "other").moves == ()


def test_the_tables_moves_line_says_which_moves_its_totals_come_from() -> None:
    """Moves finished before the window count in it from its start: the line says so, and how
    many moves it sums, rather than totals from 4 moves under a count of 2."""
    accumulator = Accumulator()
    for minutes in (0, 60):
        accumulator.add(sample_from_cluster_statuses([], [], [], now=T0 + timedelta(minutes=minutes)))
    report = accumulator.query(T0, T0 + timedelta(hours=1))
    moves = (move(-60, replicas=4), move(-30, replicas=4), move(30, replicas=6), move(45, replicas=2))
    report = replace(report, moves=moves)
    line = render_table(report).split("MOVES BACK TO CHEAPER TIERS\n")[1].splitlines()[0]
    assert line == (
        "8 replica(s) moved in 2 move(s) in this window, 2 earlier move(s) still counting; 11.50 GPU-hours "
        "shifted to cheaper tiers, $63.80 saved in this window by these 4 move(s)"
    )
    many = replace(report, moves=tuple(move(m) for m in (-50, -40, -30, -20, -10, 10)))
    assert render_table(many).count("cloud-h100 \u2192 onprem-a100") == 5
    assert "saved in this window by these 6 move(s) (the latest 5 below)" in render_table(many)
