"""A member whose API goes down while its agent lives on, end to end with real processes.

The agent keeps heartbeating and its caches keep the member's last view, so only its probe of
the member's ``/readyz`` and ``/livez`` can tell the hub. With the on-prem member's process
stopped (its API refuses connections):

* the agent reports the cluster ``Ready=False`` (``MemberAPIUnreachable``), the hub taints it
  ``cluster.gpufed.io/not-ready`` (NoSchedule + NoExecute);
* once the not-ready toleration runs out, the workload running there fails over to the cloud
  and runs there;
* a new workload whose policy divides it evenly between both clusters lands whole in the cloud
  and gets all its replicas ready (before, it was split and sat half ready);
* with the member started again on the same address and state, the cluster is ``Ready`` again,
  untainted, and the agent removes the copies that moved away.

Timings are shortened by flags: probe every 1 s, failure threshold 2 s, not-ready toleration
2 s, graceful eviction timeout 30 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e.harness import (
    Kubectl,
    Process,
    ProcessGroup,
    apply_overflow_policy_without_returns,
    free_port,
    wait_for,
)

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "failover.yaml"
MANIFESTS = HERE / "manifests" / "placement"
ONPREM, CLOUD = "onprem-a100", "cloud-h100"
NOT_READY = "cluster.gpufed.io/not-ready"
HUB_FLAGS = (
    "--cluster-monitor-grace-period", "10",
    "--default-not-ready-toleration-seconds", "2",
    "--graceful-eviction-timeout", "30",
)
AGENT_FLAGS = ("--member-probe-interval", "1", "--member-failure-threshold", "2")
pytestmark = pytest.mark.e2e

BURST = """
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: split-evenly, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: burst}
  placement:
    clusterAffinity: {clusterNames: [onprem-a100, cloud-h100]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [onprem-a100]}, weight: 1}
          - {targetCluster: {clusterNames: [cloud-h100]}, weight: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: burst, namespace: ml}
spec:
  replicas: 8
  selector: {matchLabels: {app: burst}}
  template:
    metadata: {labels: {app: burst}}
    spec:
      containers:
        - name: server
          image: registry.example.com/ml/burst:1.0
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def _ready(cluster: dict[str, Any]) -> tuple[str, str, str]:
    for cond in cluster.get("status", {}).get("conditions", []):
        if cond["type"] == "Ready":
            return str(cond["status"]), str(cond.get("reason")), str(cond.get("message"))
    return "", "", ""


def _taints(cluster: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in cluster.get("spec", {}).get("taints") or ()}


def _running(member: Kubectl, selector: str) -> int:
    pods = member.json("get", "pods", "-n", "ml", "-l", selector, "--field-selector=status.phase=Running")
    return len(pods["items"])


def _placement(hub: Kubectl, workload: str) -> dict[str, int]:
    binding = hub.json("get", "resourcebinding", f"{workload}-deployment", "-n", "ml")
    return {t["name"]: t["replicas"] for t in binding["spec"].get("clusters") or ()}


def _ready_replicas(hub: Kubectl, workload: str) -> int:
    return int(hub.json("get", "deployment", workload, "-n", "ml").get("status", {}).get("readyReplicas") or 0)


def test_member_api_outage_marks_the_cluster_not_ready_fails_over_and_recovers(processes: ProcessGroup) -> None:
    # Fixed addresses, so a member can be started again where its agent looks for it.
    listens = {name: ("--listen", f"127.0.0.1:{free_port()}", "--dcgm-listen", f"127.0.0.1:{free_port()}")
               for name in (ONPREM, CLOUD)}
    launched = {name: processes.launch_member(FLEET, name, time_scale=20.0, extra=listen)
                for name, listen in listens.items()}
    _, hub = processes.start_hub("hub", *HUB_FLAGS)
    members: dict[str, Kubectl] = {}
    sims: dict[str, Process] = {}
    agents: dict[str, Process] = {}
    for name, up in launched.items():
        sims[name], members[name], dcgm = up()
        agents[name] = processes.start_agent(hub, FLEET, name, members[name], dcgm, extra=AGENT_FLAGS)
    wait_for(lambda: [_ready(c)[0] for c in hub.json("get", "clusters")["items"]] == ["True", "True"],
             timeout=90, what="both clusters Ready")
    assert members[ONPREM].run("get", "--raw", "/readyz?verbose").stdout.endswith("readyz check passed\n")

    hub.run("apply", "-f", "-", input_text="apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n")
    apply_overflow_policy_without_returns(hub, MANIFESTS)  # this test counts where replicas run
    hub.run("apply", "-f", str(MANIFESTS / "infer.yaml"))
    onprem, cloud = members[ONPREM], members[CLOUD]
    wait_for(lambda: _running(onprem, "app=infer") == 6 and _running(cloud, "app=infer") == 4,
             timeout=90, what="6 Running on-prem and 4 in the cloud")

    # The on-prem member's API goes down; its agent stays up and keeps heartbeating.
    sims[ONPREM].stop()

    def not_ready_and_tainted() -> dict[str, Any] | None:
        cluster = hub.json("get", "cluster", ONPREM)
        status, reason, _ = _ready(cluster)
        tainted = {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")} <= _taints(cluster)
        return cluster if status == "False" and reason == "MemberAPIUnreachable" and tainted else None

    cluster = wait_for(not_ready_and_tainted, timeout=60, what=f"{ONPREM} NotReady (MemberAPIUnreachable) and tainted")
    message = _ready(cluster)[2]
    assert "has not answered" in message and "check that the API server runs" in message, message
    assert agents[ONPREM].alive()

    # The workload there fails over to the cloud ...
    wait_for(lambda: _placement(hub, "infer") == {CLOUD: 10}, timeout=60, what="infer rescheduled to the cloud")
    wait_for(lambda: _running(cloud, "app=infer") == 10, timeout=90, what="10 infer replicas Running in the cloud")
    # ... and a new workload divided evenly lands whole in the cloud and is fully ready.
    hub.run("apply", "-f", "-", input_text=BURST)
    wait_for(lambda: _placement(hub, "burst") == {CLOUD: 8}, timeout=60, what="burst placed only in the cloud")
    wait_for(lambda: _ready_replicas(hub, "burst") == 8, timeout=90, what="burst 8/8 ready")
    assert _ready(hub.json("get", "cluster", ONPREM))[:2] == ("False", "MemberAPIUnreachable")

    # The member comes back on the same address and state: Ready again, untainted.
    sims[ONPREM] = processes.start_raw(f"{sims[ONPREM].name}-again", sims[ONPREM].argv)

    def recovered() -> bool:
        cluster = hub.json("get", "cluster", ONPREM)
        return _ready(cluster)[:2] == ("True", "MemberHealthy") and not any(k == NOT_READY for k, _ in _taints(cluster))

    wait_for(recovered, timeout=90, what=f"{ONPREM} Ready again without the not-ready taints")
    # The copies that moved away are removed from the member; the cloud keeps running them.
    wait_for(lambda: _running(onprem, "app=infer") == 0, timeout=90, what="the stale on-prem infer copies to go")
    assert _placement(hub, "infer") == {CLOUD: 10}
    assert _running(cloud, "app=infer") == 10
