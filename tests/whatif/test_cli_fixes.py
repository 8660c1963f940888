"""`gpufed whatif run` fixes: untimed openb lists, early --plot checks, scoring in the output,
no replay figures without a replay, progress off a terminal, the zoomed allocation panel."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from gpufed.cli import main
from gpufed.commands.whatif import _Progress
from simulator.whatif.plot import zoom
from tests.whatif.fleets import t4_cluster

UNTIMED = """name,cpu_milli,memory_mib,num_gpu,gpu_milli
p0,4000,8192,1,1000
p1,2000,4096,1,500
p2,8000,16384,2,1000
p3,1000,1024,0,0
"""


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"clusters": [t4_cluster("a", nodes=2, gpus=2)]}))
    return path


@pytest.fixture
def untimed(tmp_path: Path) -> Path:
    path = tmp_path / "openb_pod_list_multigpu50.csv"
    path.write_text(UNTIMED)
    return path


def run(fleet: Path, trace: Path, *args: str) -> int:
    return main(["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), *args])


def test_untimed_openb_list_fills_with_no_replay(
    fleet: Path, untimed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fleet, untimed, "--no-replay", "-o", "json", "--compare", "pooled,pooled-fgd") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trace"] == {"jobs": 4, "path": str(untimed), "format": "openb-untimed"}
    pooled = out["strategies"]["pooled"]
    assert pooled["allocation_pct_at_100"] > 0
    # nothing was replayed: no waits, costs or GPU-hours that look measured
    assert pooled["wait_mean_s"] is None and pooled["cost_usd"] is None and pooled["gpu_hours"] is None
    # the scoring each strategy ran with: the clusters' own for pooled, FGD for pooled-fgd
    assert pooled["member_scoring"] == "best-fit"  # the fleet file's simulation.scoring
    assert out["strategies"]["pooled-fgd"]["member_scoring"] == "fgd"


def test_untimed_openb_list_needs_no_replay(fleet: Path, untimed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fleet, untimed) == 1
    err = capsys.readouterr().err
    assert "no creation_time/deletion_time columns" in err and "--no-replay" in err


def test_table_without_replay_shows_dashes(fleet: Path, untimed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fleet, untimed, "--no-replay", "--compare", "pooled-best-fit", "--member-scoring", "fgd") == 0
    lines = capsys.readouterr().out.splitlines()
    row = lines[1].split()
    assert row[0] == "pooled-best-fit" and row[4:] == ["-"] * (len(row) - 4)
    assert "member scoring: pooled-best-fit best-fit" in lines
    assert any("were not measured" in line for line in lines)


def test_plot_into_a_missing_directory_fails_before_the_run(
    fleet: Path, untimed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nope" / "out.png"
    assert run(fleet, untimed, "--no-replay", "--plot", str(target)) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [f"error: --plot {target}: directory {target.parent} does not exist"]
    assert captured.out == ""


def test_progress_off_a_terminal_is_a_line_per_tenth() -> None:
    stream = io.StringIO()
    progress = _Progress(stream)
    for done in range(0, 101, 5):
        progress("pooled fill", done, 100)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "whatif: pooled fill 10/100 (10 %)"
    assert lines[-1] == "whatif: pooled fill 100/100 (100 %)"
    assert len(lines) == 10 and "\r" not in stream.getvalue()


def test_zoom_starts_where_the_curves_part() -> None:
    same = [[m, float(m)] for m in range(0, 60)]
    strategies = {
        "a": {"allocation_curve": [*same, [60, 59.0], [70, 62.0]]},
        "b": {"allocation_curve": [*same, [60, 60.0], [70, 66.0]]},
    }
    assert zoom(strategies) == (55.0, 70.0, 53.0, 68.0)
    assert zoom({"a": {"allocation_curve": same}, "b": {"allocation_curve": same}}) is None
