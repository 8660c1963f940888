"""The hub's embedded etcd, as a user starts it: the hub log names the etcd binary and
version it chose, and the running etcd has etcd's data-corruption checks on."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _cmdline(pid: int) -> list[str]:
    return [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]


def test_hub_reports_its_etcd_binary_and_runs_it_with_corruption_checks(processes) -> None:
    proc, _ = processes.start_hub()
    assert proc.popen is not None
    etcd = [argv for argv in map(_cmdline, _children(proc.popen.pid)) if argv and Path(argv[0]).name == "etcd"]
    assert len(etcd) == 1, f"no etcd child of the hub: {etcd}"
    argv = etcd[0]
    assert "--experimental-initial-corrupt-check=true" in argv
    assert "--experimental-corrupt-check-time=5m" in argv
    log = proc.log()
    assert f"etcd binary: {argv[0]} (etcd " in log, log[-3000:]
