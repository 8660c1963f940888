"""Member clusters joined to a hub: a hub, two simulated clusters (A100s with a MIG mixed
layout; whole H100s) and two agents joined with the printed join command, all real
processes, checked with the real kubectl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "two-clusters.yaml"
MONITOR_GRACE_S = 6
pytestmark = pytest.mark.e2e

MIG_DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "mig-infer", "namespace": "team-a"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "mig-infer"}},
        "template": {
            "metadata": {"labels": {"app": "mig-infer"}},
            "spec": {"containers": [{
                "name": "server", "image": "registry.example.com/infer:1",
                "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}},
            }]},
        },
    },
}


def _summary(cluster: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {
        entry["resource"]: entry
        for entry in cluster.get("status", {}).get("gpuSummary", [])
    }


def _ready(cluster: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in cluster.get("status", {}).get("conditions", [])
    )


def _ready_status(cluster: dict[str, Any]) -> str | None:
    return next(
        (c["status"] for c in cluster.get("status", {}).get("conditions", []) if c["type"] == "Ready"), None
    )


def _fleet(processes: ProcessGroup) -> tuple[Kubectl, dict[str, tuple[Any, Kubectl, str]]]:
    launched = {name: processes.launch_member(FLEET, name) for name in ("onprem-a100", "cloud-h100")}
    _, hub = processes.start_hub()
    members = {}
    for name, up in launched.items():
        _sim, member, dcgm = up()
        agent = processes.start_agent(hub, FLEET, name, member, dcgm)
        members[name] = (agent, member, dcgm)
    return hub, members


def _clusters_ready(hub: Kubectl) -> dict[str, dict[str, Any]]:
    items = hub.json("get", "clusters")["items"]
    by_name = {c["metadata"]["name"]: c for c in items}
    if set(by_name) == {"onprem-a100", "cloud-h100"} and all(_ready(c) and _summary(c) for c in items):
        return by_name
    return {}


def test_members_join_report_gpus_and_run_a_work(processes: ProcessGroup, tmp_path: Path) -> None:
    hub, members = _fleet(processes)
    clusters = wait_for(lambda: _clusters_ready(hub), timeout=90, what="both clusters Ready with GPU reports")

    onprem = _summary(clusters["onprem-a100"])
    # 2 MIG nodes x 8 A100s x layout [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]; 1 node x 8 whole A100s.
    assert {r: (e["product"], e["capacity"]) for r, e in onprem.items()} == {
        "nvidia.com/mig-3g.40gb": ("NVIDIA-A100-SXM4-80GB", 16),
        "nvidia.com/mig-2g.20gb": ("NVIDIA-A100-SXM4-80GB", 16),
        "nvidia.com/mig-1g.10gb": ("NVIDIA-A100-SXM4-80GB", 32),
        "nvidia.com/gpu": ("NVIDIA-A100-SXM4-80GB", 8),
    }
    cloud = _summary(clusters["cloud-h100"])
    assert {r: (e["product"], e["capacity"]) for r, e in cloud.items()} == {
        "nvidia.com/gpu": ("NVIDIA-H100-80GB-HBM3", 16),
    }
    assert clusters["onprem-a100"]["spec"]["provider"] == "onprem"
    assert clusters["cloud-h100"]["spec"]["pricing"] == {"NVIDIA-H100-80GB-HBM3": 4.10}

    table = hub.run("get", "clusters").stdout
    assert table.splitlines()[0].split()[:3] == ["NAME", "READY", "PROVIDER"], table
    free_before = onprem["nvidia.com/mig-1g.10gb"]["capacity"] - onprem["nvidia.com/mig-1g.10gb"]["allocated"]

    # A Work created by hand in the first cluster's execution namespace.
    work = {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "team-a-mig-infer", "namespace": "gpufed-es-onprem-a100"},
        "spec": {"workload": {"manifests": [MIG_DEPLOYMENT]}},
    }
    work_file = tmp_path / "work.yaml"
    work_file.write_text(yaml.safe_dump(work))
    hub.run("create", "-f", str(work_file))

    _, onprem_member, _ = members["onprem-a100"]

    def pods_running() -> list[dict[str, Any]]:
        pods = onprem_member.json("get", "pods", "-n", "team-a", "--field-selector=status.phase=Running")["items"]
        return pods if len(pods) == 3 else []

    pods = wait_for(pods_running, timeout=60, what="3 Running pods in the member")
    mig_nodes = {
        n["metadata"]["name"] for n in onprem_member.json("get", "nodes")["items"]
        if n["metadata"]["labels"].get("nvidia.com/mig.strategy") == "mixed"
    }
    assert {p["spec"]["nodeName"] for p in pods} <= mig_nodes

    def work_ready() -> dict[str, Any] | None:
        status = hub.json("get", "work", "team-a-mig-infer", "-n", "gpufed-es-onprem-a100").get("status", {})
        manifests = status.get("manifestStatuses") or []
        if manifests and manifests[0].get("status", {}).get("readyReplicas") == 3:
            return status
        return None

    status = wait_for(work_ready, timeout=60, what="the Work's status to show 3 ready replicas")
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Applied"] == "True"
    assert status["manifestStatuses"][0]["health"] == "Healthy"

    def free_dropped() -> bool:
        entry = _summary(hub.json("get", "cluster", "onprem-a100"))["nvidia.com/mig-1g.10gb"]
        return entry["capacity"] - entry["allocated"] == free_before - 3

    wait_for(free_dropped, timeout=30, what="the cluster's free mig-1g.10gb count to drop by 3")

    # Least privilege: the first agent's own credential cannot read the second cluster's Works.
    agent_kubeconfig = _agent_kubeconfig(processes.root / "agent-onprem-a100", hub, tmp_path)
    agent = Kubectl(agent_kubeconfig)
    own = agent.run("get", "works", "-n", "gpufed-es-onprem-a100", check=False)
    assert own.returncode == 0, own.stderr
    other = agent.run("get", "works", "-n", "gpufed-es-cloud-h100", check=False)
    assert other.returncode != 0
    assert "forbidden" in other.stderr.lower(), other.stderr


def _agent_kubeconfig(state_dir: Path, hub: Kubectl, tmp_path: Path) -> Path:
    """A kubeconfig holding the credential the agent keeps in its state dir."""
    candidates = [p for p in state_dir.rglob("*") if p.is_file()]
    token = None
    for path in candidates:
        text = path.read_text(errors="ignore")
        try:
            data = json.loads(text)
        except ValueError:
            data = yaml.safe_load(text) if text.strip().startswith(("token", "apiVersion")) else None
        if isinstance(data, dict) and isinstance(data.get("token"), str):
            token = data["token"]
        elif isinstance(data, dict) and data.get("users"):
            token = data["users"][0]["user"].get("token")
        if token:
            break
    assert token, f"no agent credential found in {state_dir}: {[p.name for p in candidates]}"
    config = yaml.safe_load(hub.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = token
    target = tmp_path / "agent.kubeconfig"
    target.write_text(yaml.safe_dump(config))
    return target


def test_agent_restart_resumes_without_duplicates(processes: ProcessGroup, tmp_path: Path) -> None:
    # A short heartbeat grace, so that the hub marks the cluster Unknown soon after its agent goes.
    launched = processes.launch_member(FLEET, "cloud-h100")
    _, hub = processes.start_hub("hub", "--cluster-monitor-grace-period", str(MONITOR_GRACE_S))
    _sim, member, dcgm = launched()
    agent = processes.start_agent(hub, FLEET, "cloud-h100", member, dcgm)
    wait_for(lambda: _ready(hub.json("get", "cluster", "cloud-h100")), timeout=60, what="cloud-h100 Ready")

    deployment = json.loads(json.dumps(MIG_DEPLOYMENT))
    deployment["metadata"] = {"name": "h100-infer", "namespace": "team-b"}
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    work = {
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "team-b-h100-infer", "namespace": "gpufed-es-cloud-h100"},
        "spec": {"workload": {"manifests": [deployment]}},
    }
    (tmp_path / "work.yaml").write_text(yaml.safe_dump(work))
    hub.run("create", "-f", str(tmp_path / "work.yaml"))
    wait_for(lambda: len(member.json("get", "pods", "-n", "team-b")["items"]) == 3, timeout=60,
             what="3 pods in the member")
    lease_before = hub.json("get", "lease", "cloud-h100", "-n", "gpufed-cluster-lease")["spec"]["renewTime"]

    agent.stop()
    wait_for(lambda: _ready_status(hub.json("get", "cluster", "cloud-h100")) == "Unknown", timeout=60,
             what="the hub to see cloud-h100's agent gone (Ready Unknown)")
    # The member kept running its workload while the agent was away.
    assert len(member.json("get", "pods", "-n", "team-b")["items"]) == 3
    # Restart with the credential in the state dir (no new join token needed).
    agent = processes.start_agent(hub, FLEET, "cloud-h100", member, dcgm, join=_rejoin_argv(processes, hub))

    def lease_renewed() -> bool:
        lease = hub.json("get", "lease", "cloud-h100", "-n", "gpufed-cluster-lease")
        return bool(lease["spec"]["renewTime"] != lease_before)

    wait_for(lease_renewed, timeout=30, what="the Lease to be renewed after the restart")
    report_before = hub.json("get", "cluster", "cloud-h100")["status"]["lastReportTime"]
    wait_for(lambda: hub.json("get", "cluster", "cloud-h100")["status"]["lastReportTime"] != report_before,
             timeout=30, what="capacity reports to resume")
    wait_for(lambda: _ready(hub.json("get", "cluster", "cloud-h100")), timeout=30, what="cloud-h100 Ready again")
    deployments = member.json("get", "deployments", "-n", "team-b")["items"]
    assert [d["metadata"]["name"] for d in deployments] == ["h100-infer"]
    assert len(member.json("get", "pods", "-n", "team-b")["items"]) == 3
    assert agent.alive()


def _rejoin_argv(processes: ProcessGroup, hub: Kubectl) -> list[str]:
    """The join command again: an agent with a credential in its state dir ignores the
    bootstrap token, so a restart with the original command line works."""
    return processes.join_command(hub)
