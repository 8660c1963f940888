"""A hub killed outright (SIGKILL, the OOM killer) does not leave its embedded etcd running.

The etcd runs in a session of its own (so Ctrl-C reaches the hub first); without the
parent-death signal it would outlive a killed hub and hold the data directory and ports.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux only"),
]

PATIENCE = 60.0

HUB_LIKE = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from controlplane.storage import EmbeddedEtcd

    async def main() -> None:
        root = Path(sys.argv[1])
        etcd = EmbeddedEtcd(root / "etcd", log_file=root / "etcd.log", unsafe_no_fsync=True)
        await etcd.start()
        assert etcd.pid is not None
        (root / "etcd.pid").write_text(str(etcd.pid))
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat); None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rpartition(")")[2].split()
    if fields[0] == "Z":  # a zombie has ended; only its exit status is left
        return None
    return int(fields[19])


def test_a_sigkilled_hub_takes_its_embedded_etcd_along(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    hub = subprocess.Popen(
        [sys.executable, "-c", HUB_LIKE, str(tmp_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, start_new_session=True,
    )
    pid_file = tmp_path / "etcd.pid"
    etcd_pid: int | None = None
    try:
        deadline = time.monotonic() + PATIENCE
        while not (pid_file.exists() and pid_file.read_text()):
            assert hub.poll() is None, f"the hub-like process exited with {hub.returncode}"
            assert time.monotonic() < deadline, "etcd did not start"
            time.sleep(0.05)
        etcd_pid = int(pid_file.read_text())
        started = _start_ticks(etcd_pid)
        assert started is not None and os.getsid(etcd_pid) == etcd_pid  # its own session
        hub.send_signal(signal.SIGKILL)
        hub.wait(timeout=PATIENCE)
        deadline = time.monotonic() + PATIENCE
        while _start_ticks(etcd_pid) == started and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _start_ticks(etcd_pid) != started, "etcd outlived the hub that started it"
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.wait()
        if etcd_pid is not None and _start_ticks(etcd_pid) is not None:
            os.kill(etcd_pid, signal.SIGKILL)
