"""A `gpufed up` killed with SIGKILL takes its children (and theirs) with it, on Linux.

Real processes throughout: a supervisor process runs :class:`~gpufed.supervising.Supervisor`
with real children, the test SIGKILLs it and watches ``/proc`` until every recorded pid is
gone (pids are matched with their start time, so a reused pid does not count as a survivor).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.processes import CANNOT_RUN, ORPHANED_AT_START, dying_with_parent
from gpufed.supervising import ProcInfo, kill_if_alive, read_process_table

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux only"),
]

#: Generous: the machine is shared; the test only needs "eventually", never "fast".
PATIENCE = 60.0

# The supervisor process: two children, one of which starts a grandchild the way the hub starts
# its etcd (its own session, a parent-death signal), then writes every pid and waits forever.
SUPERVISOR = textwrap.dedent(
    """
    import asyncio, json, subprocess, sys
    from pathlib import Path
    from gpufed.supervising import ProcessSpec, Supervisor

    OUT = Path(sys.argv[1])
    HUB_LIKE = '''
    import subprocess, sys, time
    from controlplane.processes import dying_with_parent
    etcd = subprocess.Popen(dying_with_parent(["sleep", "300"]), start_new_session=True)
    open(sys.argv[1], "w").write(str(etcd.pid))
    time.sleep(300)
    '''

    async def main() -> None:
        async with Supervisor() as supervisor:
            plain = supervisor.launch(ProcessSpec(
                name="plain", argv=("sleep", "300"), log_path=OUT.parent / "plain.log"))
            hub = supervisor.launch(ProcessSpec(
                name="hub-like", argv=(sys.executable, "-c", HUB_LIKE, str(OUT.parent / "grandchild")),
                log_path=OUT.parent / "hub.log"))
            await asyncio.gather(plain.wait_ready(), hub.wait_ready())
            grandchild = OUT.parent / "grandchild"
            while not grandchild.exists() or not grandchild.read_text():
                await asyncio.sleep(0.05)
            OUT.write_text(json.dumps([plain.pid, hub.pid, int(grandchild.read_text())]))
            await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def _wait_for(path: Path, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the supervisor exited with {process.returncode}"
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


def _alive(processes: list[ProcInfo]) -> list[ProcInfo]:
    table = read_process_table()
    return [info for info in processes if table.get(info.pid, (0, -1))[1] == info.start_ticks]


@pytest.fixture
def recorded() -> Iterator[list[ProcInfo]]:
    processes: list[ProcInfo] = []
    yield processes
    kill_if_alive(processes)  # whatever a failing test left behind


def test_sigkilled_supervisor_takes_children_and_grandchildren_along(
    tmp_path: Path, recorded: list[ProcInfo]
) -> None:
    pids_file = tmp_path / "pids.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, str(pids_file)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, start_new_session=True,
    )
    try:
        pids = json.loads(_wait_for(pids_file, supervisor))
        table = read_process_table()
        recorded.extend(ProcInfo(pid, table[pid][1]) for pid in pids)
        assert len(recorded) == 3
        # Each runs in a session of its own: no terminal signal would reach them.
        assert all(os.getsid(pid) == pid for pid in pids)
        supervisor.send_signal(signal.SIGKILL)
        supervisor.wait(timeout=PATIENCE)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()

    deadline = time.monotonic() + PATIENCE
    while _alive(recorded) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(recorded) == []


def test_a_child_whose_parent_is_already_gone_does_not_start(tmp_path: Path) -> None:
    # The signal is armed after the child starts; a parent that died in between is caught by
    # comparing the parent pid. Here the command line is built in this process but started by
    # a child of it, so the trampoline sees another parent and must not run its command.
    marker = tmp_path / "ran"
    argv = dying_with_parent(["touch", str(marker)])
    script = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"
    result = subprocess.run([sys.executable, "-c", script, *argv], timeout=PATIENCE, check=False)
    assert result.returncode == ORPHANED_AT_START
    assert not marker.exists()


def test_the_command_runs_with_the_trampolines_pid_and_the_signal_armed(tmp_path: Path) -> None:
    # The trampoline execs the command: the pid the parent knows is the command's own.
    # PR_GET_PDEATHSIG (2) reads back the signal the command will get when this process dies.
    script = (
        "import ctypes, os; armed = ctypes.c_int(); "
        "ctypes.CDLL(None).prctl(2, ctypes.byref(armed), 0, 0, 0); print(os.getpid(), armed.value)"
    )
    process = subprocess.Popen(dying_with_parent([sys.executable, "-c", script]), stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=PATIENCE)
    pid, armed = (int(word) for word in out.split())
    assert process.returncode == 0
    assert pid == process.pid
    assert armed == signal.SIGTERM


def test_a_command_that_cannot_run_is_one_line_and_exit_127(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-etcd"
    result = subprocess.run(dying_with_parent([str(missing), "--flag"]), capture_output=True, text=True,
                            timeout=PATIENCE, check=False)
    assert result.returncode == CANNOT_RUN
    assert result.stderr == f"cannot run {missing}: No such file or directory\n"
