"""Process supervision for `gpufed up`, with real child processes (sh), and the pure pieces of
its status display."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import pytest

from controlplane.processes import Backoff
from gpufed.commands.up.board import format_uptime, render_table
from gpufed.commands.up.polling import ClusterView
from gpufed.commands.up.ports import DEFAULT_HUB_PORT, choose_hub_port
from gpufed.supervising import (
    ProcessSpec,
    ProcessState,
    SupervisedProcess,
    Supervisor,
    descendants,
    read_process_table,
)

FAST = Backoff(initial=0.05, cap=0.2, jitter=0.01, stable_after=60)


@pytest.mark.parametrize(
    ("table", "root", "expected"),
    [
        ({2: (1, 10), 3: (2, 11), 4: (3, 12), 5: (1, 13)}, 2, [3, 4]),
        ({2: (1, 10), 3: (2, 11), 4: (2, 12)}, 2, [3, 4]),
        ({2: (1, 10)}, 2, []),
        ({2: (1, 10), 3: (9, 11)}, 9, [3]),
    ],
)
def test_descendants(table: dict[int, tuple[int, int]], root: int, expected: list[int]) -> None:
    found = descendants(root, table)
    assert [info.pid for info in found] == expected
    assert all(info.start_ticks == table[info.pid][1] for info in found)


async def test_a_crashing_process_is_restarted_until_stopped(tmp_path: Path) -> None:
    states: list[ProcessState] = []
    async with Supervisor(backoff=FAST, on_change=lambda p: states.append(p.state)) as supervisor:
        crasher = supervisor.launch(ProcessSpec(name="crasher", argv=("sh", "-c", "echo run; exit 3"),
                                               log_path=tmp_path / "crasher.log"))
        for _ in range(200):
            if crasher.restarts >= 3:
                break
            await asyncio.sleep(0.05)
        await crasher.stop()
    assert crasher.restarts >= 3
    assert crasher.last_exit_code == 3
    assert ProcessState.RESTARTING in states and states[-1] is ProcessState.EXITED
    assert (tmp_path / "crasher.log").read_text().count("run") >= 3


async def test_stop_kills_what_ignores_sigterm_and_what_it_left_behind(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    # The grandchild leaves the process group (setsid), as the hub's embedded etcd does.
    script = (
        f"setsid sleep 300 & echo $! > {marker}; trap '' TERM; "
        "while true; do sleep 0.1; done"
    )
    spec = ProcessSpec(name="stubborn", argv=("sh", "-c", script), log_path=tmp_path / "s.log", stop_timeout=0.5)
    async with Supervisor(backoff=FAST) as supervisor:
        process = supervisor.launch(spec)
        await asyncio.wait_for(process.wait_ready(), 10)
        for _ in range(100):
            if marker.exists() and marker.read_text().strip():
                break
            await asyncio.sleep(0.05)
        grandchild = int(marker.read_text())
        pid = process.pid
        assert pid is not None and grandchild in read_process_table()
        await process.stop()
        assert process.state is ProcessState.EXITED or process.state is ProcessState.STOPPING
    # A killed process stays in /proc until its parent (init, for the setsid grandchild) reaps it.
    for _ in range(50):
        table = read_process_table()
        if pid not in table and grandchild not in table:
            break
        await asyncio.sleep(0.1)
    assert pid not in table
    assert grandchild not in table


async def test_readiness_probe_and_prepared_environment(tmp_path: Path) -> None:
    flag = tmp_path / "ready"

    async def probe(started_at: float) -> bool:
        return flag.exists()

    async def prepare() -> dict[str, str]:
        return {"JOIN_TOKEN": "fresh"}

    spec = ProcessSpec(name="waiter", argv=("sh", "-c", f'sleep 0.3; echo "$JOIN_TOKEN" > {flag}; sleep 30'),
                       log_path=tmp_path / "w.log", ready=probe, prepare=prepare)
    async with Supervisor(backoff=FAST) as supervisor:
        process: SupervisedProcess = supervisor.launch(spec)
        await asyncio.sleep(0.1)
        assert process.state is ProcessState.STARTING
        await asyncio.wait_for(process.wait_ready(), 10)
        assert process.state is ProcessState.READY
        assert flag.read_text().strip() == "fresh"
    assert process.state is ProcessState.EXITED


def test_hub_port_falls_back_when_taken() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        port, note = choose_hub_port(requested=taken, remembered=0)
        assert port != taken
        assert note is not None and str(taken) in note and str(port) in note
    port, note = choose_hub_port(requested=taken, remembered=0)
    assert (port, note) == (taken, None)


def test_hub_port_0_is_a_free_one_not_the_default() -> None:
    """`gpufed up --port 0` (it listened on 6443, or the remembered port, as if not given)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        remembered = holder.getsockname()[1]
        port, note = choose_hub_port(requested=0, remembered=remembered)
    assert port not in (0, remembered, DEFAULT_HUB_PORT) and note is None


@pytest.mark.parametrize(
    ("seconds", "text"), [(None, "-"), (5.9, "5s"), (75, "1m15s"), (3600 * 2 + 60 * 3, "2h03m")]
)
def test_format_uptime(seconds: float | None, text: str) -> None:
    assert format_uptime(seconds) == text


def test_cluster_view_sums_whole_gpus_and_mig_slices() -> None:
    view = ClusterView.from_object({
        "metadata": {"name": "onprem-a100"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "lastReportTime": "2026-01-01T00:00:00Z",
            "gpuSummary": [
                {"resource": "nvidia.com/gpu", "capacity": 16, "allocatable": 16, "allocated": 3},
                {"resource": "nvidia.com/mig-1g.10gb", "capacity": 32, "allocatable": 32, "allocated": 2},
                {"resource": "nvidia.com/mig-3g.40gb", "capacity": 16, "allocatable": 16},
            ],
        },
    })
    assert view.gpus == (("gpu", 3, 16), ("mig", 2, 48))
    assert view.describe() == "Ready    gpu 3/16 used  mig 2/48 used"
    assert view.last_report == 1767225600.0


def test_render_table_aligns_and_truncates() -> None:
    lines = render_table([["A", "BB"], ["long-name", "x"]], width=12)
    assert lines == ["A          B", "long-name  x"]


def test_children_inherit_no_terminal_session(tmp_path: Path) -> None:
    # A Ctrl-C in the terminal reaches `gpufed up` only: children run in their own session.
    async def main() -> int:
        async with Supervisor(backoff=FAST) as supervisor:
            process = supervisor.launch(ProcessSpec(name="s", argv=("sleep", "30"), log_path=tmp_path / "s.log"))
            await asyncio.wait_for(process.wait_ready(), 10)
            assert process.pid is not None
            return os.getsid(process.pid)

    assert asyncio.run(main()) != os.getsid(0)
    assert sys.platform.startswith("linux")
