"""Cost follows capacity, end to end: burst replicas come home when on-prem frees, without ever
showing fewer ready replicas, a Karmada WorkloadRebalancer applied with kubectl re-places
its workloads, and replicas that fell over to a later clusterAffinities term come back to the first. Real hub on real etcd, the README's demo fleet (on-prem A100s, cloud H100s)
as simulated members with their agents."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import GPUFED, KUBECTL, Kubectl, ProcessGroup, wait_for
from gpufed.fleets import __file__ as fleets_init

HERE = Path(__file__).parent
DEMO_FLEET = Path(fleets_init).parent / "demo.yaml"
MANIFESTS = HERE / "manifests" / "rebalance"
pytestmark = pytest.mark.e2e


def _replicas(member: Kubectl, name: str) -> int | None:
    result = member.run("get", "deployment", name, "-n", "ml", "-o", "jsonpath={.spec.replicas}", check=False)
    return int(result.stdout) if result.returncode == 0 and result.stdout else None


def _running(member: Kubectl, app: str) -> int:
    pods = member.json("get", "pods", "-n", "ml", "-l", f"app={app}", "--field-selector=status.phase=Running")
    return len(pods["items"])


def _ready_on_hub(hub: Kubectl, name: str) -> int:
    deploy = hub.json_or_none("get", "deployment", name, "-n", "ml") or {}
    return int((deploy.get("status") or {}).get("readyReplicas") or 0)


def _events(hub: Kubectl, reason: str) -> list[str]:
    events = hub.json("get", "events", "-n", "ml", "--field-selector", f"reason={reason}")["items"]
    return [str(e.get("message")) for e in events]


def _free_gpus(hub: Kubectl, cluster: str) -> int:
    shapes = (hub.json("get", "cluster", cluster).get("status") or {}).get("nodeShapes") or []
    return sum(int(s.get("count", 0)) * int((s.get("free") or {}).get("nvidia.com/gpu", 0)) for s in shapes)


def _watched_ready(log: Path) -> list[int]:
    # One line per event; kubectl prints an empty line when readyReplicas is absent (none ready).
    return [int(line) if line.strip() else 0 for line in log.read_text().splitlines() if line.strip().isdigit() or not line.strip()]


@pytest.mark.slow
def test_burst_replicas_come_home_and_a_rebalancer_re_places(processes: ProcessGroup) -> None:
    hub, members = processes.start_fleet(DEMO_FLEET, ("onprem-a100", "cloud-h100"), "--waste-sample-interval", "1")
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]
    hub.run("apply", "-f", str(MANIFESTS / "workloads.yaml"))
    wait_for(lambda: _running(onprem, "filler") == 8, timeout=120, what="filler Running on-prem")

    # 16 one-GPU replicas with 8 whole A100s left on-prem: 8 burst to the cloud.
    hub.run("apply", "-f", str(MANIFESTS / "serve.yaml"))
    wait_for(lambda: _replicas(onprem, "serve") == 8 and _replicas(cloud, "serve") == 8,
             timeout=120, what="serve split 8 on-prem / 8 in the cloud")
    wait_for(lambda: _ready_on_hub(hub, "serve") == 16, timeout=120, what="16 ready replicas on the hub")
    # batch finds no room on-prem either, and its policy keeps it where it lands.
    hub.run("apply", "-f", str(MANIFESTS / "batch.yaml"))
    wait_for(lambda: _replicas(cloud, "batch") == 4, timeout=120, what="batch in the cloud")

    # A watch on the hub's Deployment records every readyReplicas it shows from here on.
    watch_log = processes.root / "serve-watch.log"
    watcher = processes.start_raw("serve-watch", [
        KUBECTL, "--kubeconfig", str(hub.kubeconfig), "get", "deployment", "serve", "-n", "ml",
        "--watch", "-o", "jsonpath={.status.readyReplicas}{\"\\n\"}",
    ])
    wait_for(lambda: 16 in _watched_ready(watch_log), timeout=60, what="the watch to see 16 ready")

    # On-prem frees 8 GPUs: within the policy's 5 s interval plus a report, serve comes home.
    hub.run("delete", "deployment", "filler", "-n", "ml")
    wait_for(lambda: _replicas(cloud, "serve") is None and _running(onprem, "serve") == 16,
             timeout=180, what="16 serve replicas Running on-prem and the cloud copy gone")
    wait_for(lambda: _ready_on_hub(hub, "serve") == 16, timeout=60, what="16 ready on the hub after the move")
    assert watcher.alive()
    seen = _watched_ready(watch_log)
    assert seen and min(seen) >= 16, seen
    moved = [m for m in _events(hub, "ReplicasMoved") if m.startswith("moved 8 replicas cloud-h100")]
    assert moved == ["moved 8 replicas cloud-h100 \u2192 onprem-a100: saves $23.20/h"], _events(hub, "ReplicasMoved")
    assert _replicas(cloud, "batch") == 4  # its policy turned automatic returns off

    def moves_in_report() -> dict[str, Any] | None:
        # A window ending now: "--since" ends at the last complete minute, which leaves out a
        # move made in the current one for up to a minute.
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        result = subprocess.run([GPUFED, "waste", "--from", "1h", "--to", now, "-o", "json",
                                 "--kubeconfig", str(hub.kubeconfig)],
                                capture_output=True, text=True, timeout=60, check=False)
        moves = json.loads(result.stdout).get("moves") if result.returncode == 0 else None
        return moves if moves and moves["replicas_moved"] == 8 and moves["saved_usd"] > 0 else None

    moves = wait_for(moves_in_report, timeout=60, what="the waste report counting the move")
    assert moves["items"][0]["from"] == "cloud-h100" and moves["items"][0]["to"] == "onprem-a100"

    # Room for batch on-prem, then a WorkloadRebalancer applied with kubectl re-places it.
    hub.run("scale", "deployment", "serve", "-n", "ml", "--replicas", "12")
    wait_for(lambda: _replicas(onprem, "serve") == 12, timeout=60, what="serve scaled down to 12 on-prem")
    # A fresh placement is decided once, on what the hub knows: wait for the report showing the room.
    wait_for(lambda: _free_gpus(hub, "onprem-a100") >= 4, timeout=60, what="on-prem reporting 4 free GPUs")
    hub.run("apply", "-f", str(MANIFESTS / "rebalancer.yaml"))
    wait_for(lambda: _replicas(cloud, "batch") is None and _replicas(onprem, "batch") == 4,
             timeout=180, what="batch re-placed on-prem by the rebalancer")

    def results() -> dict[str, Any] | None:
        status = (hub.json("get", "workloadrebalancer", "batch-home").get("status")) or {}
        return status if status.get("finishTime") else None

    status = wait_for(results, timeout=60, what="the rebalancer's results")
    observed = {w["workload"]["name"]: (w["result"], w.get("reason")) for w in status["observedWorkloads"]}
    assert observed == {"batch": ("Successful", None), "gone": ("Failed", "ReferencedBindingNotFound")}, json.dumps(status)
    table = hub.run("get", "workloadrebalancers").stdout.splitlines()
    assert table[1].split()[:2] == ["batch-home", "1/2"], table

    # On-prem is full again (serve 12, batch 4): steady falls over to its second affinity term.
    hub.run("apply", "-f", str(MANIFESTS / "steady.yaml"))
    wait_for(lambda: _running(cloud, "steady") == 2, timeout=120, what="steady Running in the cloud (term burst)")
    # Two GPUs free on-prem: steady comes back to its first term, added there before the cloud copy goes.
    hub.run("scale", "deployment", "serve", "-n", "ml", "--replicas", "10")
    wait_for(lambda: _replicas(cloud, "steady") is None and _running(onprem, "steady") == 2,
             timeout=180, what="steady back on-prem and its cloud copy gone")
    home = [m for m in _events(hub, "ReplicasMoved") if m.startswith("moved 2 replicas")]
    assert home == ["moved 2 replicas cloud-h100 \u2192 onprem-a100: back to clusterAffinities term home, saves $5.80/h"]
    binding = hub.json("get", "resourcebinding", "steady-deployment", "-n", "ml")
    assert binding["status"]["schedulerObservingAffinityName"] == "home"
