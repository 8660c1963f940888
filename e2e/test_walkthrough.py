"""The README's five-minute walkthrough, run as written against `gpufed up`.

The commands are read from the README (between the walkthrough markers), so the README
cannot drift from what works. Each ``$ command`` runs exactly as printed in a fresh
``bash -lc`` whose environment holds only HOME and PATH (the virtualenv taken off the PATH, as
in a new terminal), after the session's earlier shell-state lines (``. .venv/bin/activate``,
``export …``), in a directory laid out as the repository is after ``make up``: ``.gpufed`` is
the fleet's state, ``policies`` and ``.venv`` are the repository's. Its output is checked
against the output the README shows, column by column where values legitimately differ
between runs (ages, timestamps, measured GPU-hours).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from e2e.harness import GPUFED, Process, ProcessGroup, wait_for

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
pytestmark = pytest.mark.e2e


@dataclass
class Step:
    command: str
    expected: list[str]


def walkthrough_steps() -> list[Step]:
    text = README.read_text()
    start, end = text.index("<!-- walkthrough:start -->"), text.index("<!-- walkthrough:end -->")
    steps: list[Step] = []
    in_block = False
    for line in text[start:end].splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            steps.append(Step(line[2:], []))
        elif steps:
            steps[-1].expected.append(line)
    return steps


def _columns(lines: list[str], count: int) -> list[list[str]]:
    return [line.split()[:count] for line in lines if line.strip()]


def _table_rows(lines: list[str]) -> dict[str, list[str]]:
    """Rows of a printed table keyed by their first cell; the table ends at the first blank line
    (``gpufed explain`` prints the workload's pods after it)."""
    rows: dict[str, list[str]] = {}
    for line in lines:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return rows


SHELL_STATE = (". ", "source ", "export ")
"""Lines that set up the walkthrough's shell; every later command runs after them."""


def clean_path() -> str:
    """The PATH of a new terminal: this test's PATH without the virtualenv's bin directory."""
    venv_bin = str(Path(GPUFED).parent)
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p and p != venv_bin)


@pytest.mark.slow
def test_walkthrough_matches_readme(processes: ProcessGroup, tmp_path: Path) -> None:
    steps = walkthrough_steps()
    commands = [s.command for s in steps]
    assert "export KUBECONFIG=.gpufed/hub.kubeconfig" in commands
    assert "kubectl apply -f policies/examples/on-prem-first-cloud-burst.yaml" in commands
    assert "gpufed waste --since 1h" in commands

    # The repository as `make up` leaves it: its .venv and policies, the fleet's state in .gpufed.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(Path(GPUFED).parent.parent)
    (checkout / "policies").symlink_to(ROOT / "policies")
    state = checkout / ".gpufed"
    up: Process = processes.start("up", "up", "--state-dir", str(state), "--port", "0",
                                  "--waste-sample-interval", "5")
    kubeconfig = state / "hub.kubeconfig"
    env = {"HOME": os.environ["HOME"], "PATH": clean_path()}
    session: list[str] = []  # the shell-state lines run so far

    def run(command: str) -> subprocess.CompletedProcess[str]:
        script = "\n".join(["set -e", *session, command])
        return subprocess.run(["bash", "-lc", script], cwd=checkout, env=env, capture_output=True, text=True,
                              timeout=60, check=False)

    wait_for(lambda: kubeconfig.exists() and "gpufed is up" in up.log(), timeout=120, what="gpufed up to be up")
    # What `make up` prints for a second terminal is what the README's first lines do.
    for line in (f". {Path(GPUFED).parent.absolute() / 'activate'}", f"export KUBECONFIG={kubeconfig.absolute()}"):
        assert line in up.log(), up.log()[-3000:]

    def clusters_ready(command: str) -> bool:
        out = run(command).stdout.splitlines()[1:]
        return len(out) == 3 and all(line.split()[1] == "True" for line in out)

    for step in steps:
        command, expected = step.command, step.expected
        if command.startswith(SHELL_STATE):
            result = run(command)
            assert result.returncode == 0 and not expected, (command, result.stderr)
            session.append(command)
        elif command.startswith("kubectl get clusters"):
            wait_for(lambda command=command: clusters_ready(command), timeout=120,
                     what="the demo fleet's three clusters Ready")
            result = run(command)
            # Name, readiness, provider, GPU totals and free GPUs (nothing runs yet); not AGE.
            assert _columns(result.stdout.splitlines(), 6) == _columns(expected, 6), result.stdout
        elif command.startswith(("kubectl apply", "kubectl scale")):
            result = run(command)
            assert result.returncode == 0, result.stderr
            assert result.stdout.splitlines() == expected
        elif command.startswith("kubectl get deployment"):
            want = _columns(expected, 4)

            def deployment_matches(command: str = command, want: list[list[str]] = want) -> bool:
                return _columns(run(command).stdout.splitlines(), 4) == want

            wait_for(deployment_matches, timeout=120, what=f"`{command}` to show {want}")
        elif command.startswith("kubectl get works"):
            want = _columns(expected, 4)

            def works_match(command: str = command, want: list[list[str]] = want) -> bool:
                return _columns(run(command).stdout.splitlines(), 4) == want

            wait_for(works_match, timeout=60, what=f"`{command}` to show {want}")
        elif command.startswith("gpufed explain"):
            head = [line for line in expected if ":" in line and not line.startswith(("CLUSTER", " "))]
            table = _table_rows(expected[expected.index(next(x for x in expected if x.startswith("CLUSTER"))):])

            def explained(command: str = command, head: list[str] = head,
                          table: dict[str, list[str]] = table) -> bool:
                out = run(command).stdout.splitlines()
                if not out or "CLUSTER" not in " ".join(out):
                    return False
                rows = _table_rows(out[next(i for i, x in enumerate(out) if x.startswith("CLUSTER")):])
                # cluster, chosen, replicas, tier, price per GPU-hour: exactly as documented.
                return {k: v[:5] for k, v in rows.items()} == {k: v[:5] for k, v in table.items()} and all(
                    line in out for line in head
                )

            wait_for(explained, timeout=60, what=f"`{command}` to explain the placement as the README does")
        elif command.startswith("gpufed waste"):
            def idle_reported(command: str = command) -> str | None:
                result = run(command)
                if result.returncode != 0 or "ml/llm-serving" not in result.stdout:
                    return None
                # GPU-hours print with one decimal: the first minutes of idling show as 0.0.
                idle = next((line for line in result.stdout.splitlines() if line.startswith("idle-allocated")), "")
                return result.stdout if idle and float(idle.split()[1]) > 0 else None

            out = wait_for(idle_reported, timeout=240, interval=5,
                           what="the waste report to list ml/llm-serving as idle, with idle GPU-hours above 0.0")
            # The window as the README prints it: an hour between two whole minutes (the hub's
            # default one-minute rollup buckets; `gpufed up` does not change them).
            window = re.compile(r"^GPU waste from (\S+):00Z to (\S+):00Z \(observed ")
            assert window.match(expected[0]), expected[0]
            shown = window.match(out.splitlines()[0])
            assert shown is not None, out
            start, end = (datetime.fromisoformat(f"{stamp}:00+00:00") for stamp in shown.groups())
            assert end - start == timedelta(hours=1), out
            states = [line.split()[0] for line in out.splitlines()
                      if re.match(r"^(busy|idle-allocated|unmeasured|free-\S+|unavailable)\s", line)]
            assert states == ["busy", "idle-allocated", "unmeasured", "free-needed", "free-fragmented", "free-spare",
                              "unavailable"]
            idle_line = next(line for line in out.splitlines() if line.startswith("idle-allocated"))
            assert float(idle_line.split()[1]) > 0, out
            assert "RECOMMENDATIONS" in out and "right-size" in out
            # The README says the demo's pods report almost no GPU utilization (the demo fleet's
            # setting): the report shows it, under the 10 % below which a GPU counts as idle.
            assert "demo's simulated pods report almost no GPU utilization" in " ".join(README.read_text().split())
            lines = out.splitlines()
            row = lines[lines.index(next(x for x in lines if x.startswith("WORKLOAD"))) + 1].split()
            mean_util = next(cell for cell in row if cell.endswith("%"))  # the MEAN UTIL column
            assert row[0] == "ml/llm-serving" and float(mean_util.rstrip("%")) < 10, out
        else:
            pytest.fail(f"the walkthrough has a command this test does not know how to check: {command}")

    up.popen.send_signal(signal.SIGINT)  # type: ignore[union-attr]
    assert up.popen.wait(timeout=60) == 0  # type: ignore[union-attr]
    sys.stderr.flush()
