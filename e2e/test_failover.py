"""Cluster health, cordon and a highly available hub, end to end with real processes.

* An agent that stops heartbeating turns its cluster Unknown and tainted unreachable
  (NoSchedule + NoExecute) after the grace period; restarted, the cluster is Ready again
  and the taints are gone.
* `gpufed cordon` keeps new work off a cluster while what runs there stays.
* Two hub replicas on one etcd: both serve kubectl; kill -9 the leader and the other one
  takes over (the gpufed-system/gpufed-controllers Lease names it) and runs the controllers.

Timings are shortened by flags (grace period 6 s, agent heartbeat 2 s, leader lease 3 s).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import GPUFED, Kubectl, ProcessGroup, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "placement.yaml"
MANIFESTS = HERE / "manifests" / "placement"
UNREACHABLE = "cluster.gpufed.io/unreachable"
CORDONED = "cluster.gpufed.io/unschedulable"
pytestmark = pytest.mark.e2e


def _ready(cluster: dict[str, Any]) -> str:
    for cond in cluster.get("status", {}).get("conditions", []):
        if cond["type"] == "Ready":
            return str(cond["status"])
    return ""


def _taints(cluster: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in cluster.get("spec", {}).get("taints") or ()}


def _running(member: Kubectl, selector: str) -> int:
    pods = member.json("get", "pods", "-n", "ml", "-l", selector, "--field-selector=status.phase=Running")
    return len(pods["items"])


def _gpufed(hub: Kubectl, *args: str) -> str:
    result = subprocess.run([GPUFED, *args, "--kubeconfig", str(hub.kubeconfig)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_silent_agent_goes_unknown_and_cordon_keeps_running_work(processes: ProcessGroup) -> None:
    _, hub = processes.start_hub("hub", "--cluster-monitor-grace-period", "6")
    members: dict[str, Kubectl] = {}
    agents = {}
    dcgms = {}
    for name in ("onprem-a100", "cloud-h100"):
        _, member, dcgm = processes.start_member(FLEET, name, time_scale=20.0)
        agents[name] = processes.start_agent(hub, FLEET, name, member, dcgm)
        members[name], dcgms[name] = member, dcgm
    wait_for(lambda: [_ready(c) for c in hub.json("get", "clusters")["items"]] == ["True", "True"],
             timeout=90, what="both clusters Ready")
    hub.run("apply", "-f", "-", input_text="apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n")
    hub.run("apply", "-f", str(MANIFESTS / "overflow-policy.yaml"))
    hub.run("apply", "-f", str(MANIFESTS / "infer.yaml"))
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]
    wait_for(lambda: _running(onprem, "app=infer") == 6 and _running(cloud, "app=infer") == 4,
             timeout=90, what="6 Running on-prem and 4 in the cloud")

    # Cordon the cloud: it is tainted, what runs there stays; more replicas do not go there.
    assert _gpufed(hub, "cordon", "cloud-h100") == "cluster/cloud-h100 cordoned"
    assert (CORDONED, "NoSchedule") in _taints(hub.json("get", "cluster", "cloud-h100"))
    hub.run("scale", "deployment", "infer", "-n", "ml", "--replicas", "12")

    def binding_clusters() -> dict[str, int]:
        binding = hub.json("get", "resourcebinding", "infer-deployment", "-n", "ml")
        return {t["name"]: t["replicas"] for t in binding["spec"].get("clusters") or ()}

    wait_for(lambda: sum(binding_clusters().values()) >= 10 and binding_clusters().get("cloud-h100") == 4,
             timeout=60, what="the binding to keep 4 in the cordoned cloud")
    assert binding_clusters().get("cloud-h100") == 4
    assert _running(cloud, "app=infer") == 4
    assert _gpufed(hub, "uncordon", "cloud-h100") == "cluster/cloud-h100 uncordoned"
    hub.run("scale", "deployment", "infer", "-n", "ml", "--replicas", "10")

    # Stop the on-prem agent: after the grace period its cluster is Unknown and tainted.
    agents["onprem-a100"].stop()

    def unknown_and_tainted() -> bool:
        cluster = hub.json("get", "cluster", "onprem-a100")
        return _ready(cluster) == "Unknown" and {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= _taints(cluster)

    wait_for(unknown_and_tainted, timeout=60, what="onprem-a100 Unknown and tainted unreachable")
    # The member keeps its pods while the agent is away.
    assert _running(onprem, "app=infer") > 0

    agents["onprem-a100"] = processes.start_agent(
        hub, FLEET, "onprem-a100", onprem, dcgms["onprem-a100"], join=processes.join_command(hub)
    )

    def recovered() -> bool:
        cluster = hub.json("get", "cluster", "onprem-a100")
        return _ready(cluster) == "True" and not any(key == UNREACHABLE for key, _ in _taints(cluster))

    wait_for(recovered, timeout=60, what="onprem-a100 Ready again without the unreachable taints")


def test_killing_the_leader_hands_the_controllers_to_the_other_replica(processes: ProcessGroup) -> None:
    _, etcd_url = processes.start_etcd()
    common = ("--etcd-endpoints", etcd_url, "--leader-lease-ttl", "3")
    first, hub_a = processes.start_hub("hub-a", *common, "--identity", "hub-a")
    second, hub_b = processes.start_hub("hub-b", *common, "--identity", "hub-b")
    replicas = {"hub-a": (first, hub_a), "hub-b": (second, hub_b)}

    def holder(via: Kubectl) -> str:
        lease = via.json("get", "lease", "gpufed-controllers", "-n", "gpufed-system")
        return str(lease["spec"]["holderIdentity"])

    leader_name = wait_for(lambda: holder(hub_b), timeout=60, what="a leader")
    leader_proc, _ = replicas[leader_name]
    other_name = "hub-b" if leader_name == "hub-a" else "hub-a"
    _, other = replicas[other_name]
    assert holder(hub_a) == holder(hub_b) == leader_name

    leader_proc.stop(kill=True)
    wait_for(lambda: holder(other) == other_name, timeout=60, what=f"{other_name} to take over")
    # The new leader's controllers act: a new cluster gets its execution namespace.
    cluster = (
        "apiVersion: cluster.gpufed.io/v1alpha1\nkind: Cluster\nmetadata: {name: late-joiner}\n"
        "spec: {provider: onprem}\n"
    )
    other.run("apply", "-f", "-", input_text=cluster)
    wait_for(lambda: other.run("get", "namespace", "gpufed-es-late-joiner", check=False).returncode == 0,
             timeout=60, what="the new leader to create the execution namespace")
