"""``python -m bench.startup_cpu [--runs N] [--out FILE]``: the CPU (user + system seconds) each
kind of gpufed process spends to start, as the end-to-end tests start them.

- ``hub``: `gpufed controlplane` (embedded etcd) until its kubeconfig exists and /readyz answers;
  the hub's own process, not its etcd's;
- ``member``: `gpufed sim-cluster` (e2e/fleets/two-clusters.yaml's onprem-a100) until it has
  written its kubeconfig and DCGM URL;
- ``agent``: `gpufed agent` joined to that hub and member, until its Cluster is Ready with a
  capacity report (the agent's first heartbeat and report included);
- ``token``: a whole `gpufed token create --print-join-command` against the hub;
- ``help``: a whole `gpufed --help`.

Each run starts a fresh hub and member; the figures are the medians over ``--runs`` runs. The
long-running processes are read from /proc/PID/stat when ready, the short ones from their rusage.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
from pathlib import Path

from e2e.harness import GPUFED, ProcessGroup, wait_for

FLEET = Path(__file__).resolve().parent.parent / "e2e" / "fleets" / "two-clusters.yaml"
CLUSTER = "onprem-a100"
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of the running process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _cpu_of_command(argv: list[str]) -> float:
    """User + system CPU seconds of running ``argv`` to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def one_run(root: Path) -> dict[str, float]:
    """Start a hub, a member and an agent in ``root``; each one's start-up CPU seconds."""
    figures: dict[str, float] = {}
    group = ProcessGroup(root)
    try:
        member_up = group.launch_member(FLEET, CLUSTER)
        hub_proc, hub = group.start_hub()
        figures["hub"] = _cpu_of(_pid(hub_proc.popen))
        member_proc, member, dcgm = member_up()
        figures["member"] = _cpu_of(_pid(member_proc.popen))
        join = group.join_command(hub)
        figures["token"] = _cpu_of_command(
            [GPUFED, "token", "create", "--kubeconfig", str(hub.kubeconfig), "--print-join-command"])
        agent = group.start_agent(hub, FLEET, CLUSTER, member, dcgm, join=join)

        def ready() -> bool:
            status = hub.json("get", "cluster", CLUSTER).get("status", {})
            return bool(status.get("nodeShapes")) and any(
                c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))

        wait_for(ready, timeout=120, what=f"cluster {CLUSTER} Ready with a capacity report")
        figures["agent"] = _cpu_of(_pid(agent.popen))
        figures["help"] = _cpu_of_command([GPUFED, "--help"])
    finally:
        group.stop_all()
    return figures


def _pid(popen: subprocess.Popen[bytes] | None) -> int:
    assert popen is not None
    return popen.pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, help="also write every run's figures here as JSON")
    args = parser.parse_args()
    runs: list[dict[str, float]] = []
    for number in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="gpufed-startup-") as root:
            runs.append(one_run(Path(root)))
        print(f"run {number + 1}: " + ", ".join(f"{name} {cpu:.2f}" for name, cpu in runs[-1].items()), flush=True)
    print("median CPU-s: " + ", ".join(f"{name} {statistics.median(run[name] for run in runs):.2f}" for name in runs[0]))
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
