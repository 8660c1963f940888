"""Placement end to end: workloads and policies applied to the hub with kubectl end up
Running in the right member clusters, split by real GPU capacity, with a reason for
every decision. Real hub on real etcd, two simulated members, two agents."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import GPUFED, Kubectl, ProcessGroup, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "placement.yaml"
MANIFESTS = HERE / "manifests" / "placement"
pytestmark = pytest.mark.e2e


def _start_fleet(processes: ProcessGroup) -> tuple[Kubectl, dict[str, Kubectl]]:
    return processes.start_fleet(FLEET, ("onprem-a100", "cloud-h100"))


def _running(member: Kubectl, selector: str) -> int:
    pods = member.json("get", "pods", "-n", "ml", "-l", selector, "--field-selector=status.phase=Running")
    return len(pods["items"])


def _deployment_replicas(member: Kubectl, name: str) -> int | None:
    result = member.run("get", "deployment", name, "-n", "ml", "-o", "jsonpath={.spec.replicas}", check=False)
    return int(result.stdout) if result.returncode == 0 and result.stdout else None


def _explain(hub: Kubectl, target: str) -> str:
    result = subprocess.run(
        [GPUFED, "explain", target, "-n", "ml", "--kubeconfig", str(hub.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_onprem_first_overflow_scale_down_and_gangs(processes: ProcessGroup) -> None:
    hub, members = _start_fleet(processes)
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]
    hub.run("apply", "-f", str(MANIFESTS / "overflow-policy.yaml"))
    hub.run("apply", "-f", str(MANIFESTS / "infer.yaml"))

    # 10 replicas x 1 GPU with 6 whole GPUs free on-prem: 6 on-prem, 4 in the cloud.
    wait_for(lambda: _running(onprem, "app=infer") == 6 and _running(cloud, "app=infer") == 4,
             timeout=90, what="6 Running on-prem and 4 Running in the cloud")
    assert _deployment_replicas(onprem, "infer") == 6
    assert _deployment_replicas(cloud, "infer") == 4

    def hub_ready() -> bool:
        deploy = hub.json("get", "deployment", "infer", "-n", "ml")
        return bool(deploy.get("status", {}).get("readyReplicas") == 10)

    wait_for(hub_ready, timeout=60, what="the hub Deployment to show 10 ready replicas")
    table = hub.run("get", "deployment", "infer", "-n", "ml").stdout
    assert table.splitlines()[1].split()[1] == "10/10", table

    explanation = _explain(hub, "deployment/infer")
    assert "onprem-first" in explanation
    assert "onprem-a100" in explanation and "cloud-h100" in explanation

    # Scale down to 4: the expensive cloud copy goes first.
    hub.run("scale", "deployment", "infer", "-n", "ml", "--replicas", "4")
    wait_for(lambda: _deployment_replicas(cloud, "infer") is None and _running(onprem, "app=infer") == 4,
             timeout=60, what="4 on-prem and the cloud copy gone")
    assert _deployment_replicas(onprem, "infer") == 4

    # A 1 master + 3 workers x 8 GPU gang: only the cloud (4 x 8 H100) can hold it whole.
    hub.run("apply", "-f", str(MANIFESTS / "train.yaml"))
    wait_for(lambda: _running(cloud, "training.kubeflow.org/job-name=train") == 4, timeout=90,
             what="the whole PyTorchJob Running in the cloud")
    assert onprem.run("get", "pytorchjob", "train", "-n", "ml", check=False).returncode != 0

    # A second identical gang cannot fit anywhere: it waits, never half-placed, and says why.
    second = (MANIFESTS / "train.yaml").read_text().replace("name: train\n", "name: train-2\n", 1)
    hub.run("apply", "-f", "-", input_text=second)

    def waiting() -> dict[str, Any] | None:
        binding = hub.json("get", "resourcebindings", "-n", "ml")["items"]
        for item in binding:
            if item["spec"]["resource"]["name"] == "train-2":
                scheduled = [c for c in item.get("status", {}).get("conditions", []) if c["type"] == "Scheduled"]
                if scheduled and scheduled[0]["status"] == "False" and item["status"].get("explanation"):
                    return item
        return None

    binding = wait_for(waiting, timeout=60, what="train-2 to be reported unschedulable")
    assert not binding["spec"].get("clusters"), binding["spec"]
    for member in (onprem, cloud):
        assert member.run("get", "pytorchjob", "train-2", "-n", "ml", check=False).returncode != 0
    # Its Master alone needs 8 GPUs on one node: the cloud's 4 nodes are full with the first gang,
    # on-prem has 2 whole GPUs per node (2 of the 6 left after the 4 inference replicas; on one
    # node or two, as the member scaled down) and none on the MIG node.
    scheduled = next(c for c in binding["status"]["conditions"] if c["type"] == "Scheduled")
    assert (scheduled["reason"], scheduled["message"]) == (
        "Unschedulable", "0/2 clusters are available: 2 rejected by GpuFeasibility."
    ), scheduled
    gang = "GpuFeasibility: gang does not fit: Master needs 1 pod(s), 0 fit even alone"
    reasons = {e["cluster"]: e["reasons"] for e in binding["status"]["explanation"]}
    assert set(reasons) == {"onprem-a100", "cloud-h100"}, reasons
    assert reasons["cloud-h100"] == [
        gang, "GpuFeasibility: insufficient nvidia.com/gpu: need 8, 0 free (most on one node; 4 node(s) short)"
    ], reasons
    assert reasons["onprem-a100"][0] == gang and len(reasons["onprem-a100"]) == 2, reasons
    assert re.fullmatch(
        r"GpuFeasibility: insufficient nvidia\.com/gpu: need 8, [12] free \(most on one node; 4 node\(s\) short\)",
        reasons["onprem-a100"][1],
    ), reasons
    why = _explain(hub, "pytorchjob/train-2")
    for cluster, tier, price in (("onprem-a100", 0, "1.20"), ("cloud-h100", 1, "4.10")):
        row = rf"^{cluster}\s+no\s+0\s+{tier}\s+{price}\s+{re.escape(gang)}$"
        assert re.search(row, why, re.MULTILINE), why
        for reason in reasons[cluster][1:]:
            assert re.search(rf"^\s+{re.escape(reason)}$", why, re.MULTILINE), why


def test_karmada_policy_override_and_delete(processes: ProcessGroup) -> None:
    hub, members = _start_fleet(processes)
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]
    hub.run("apply", "-f", str(MANIFESTS / "karmada-policy.yaml"))
    hub.run("apply", "-f", str(MANIFESTS / "cloud-override.yaml"))
    hub.run("apply", "-f", str(MANIFESTS / "batch.yaml"))

    # Karmada's static weights 1:1 over 4 replicas: 2 and 2.
    wait_for(lambda: _running(onprem, "app=batch") == 2 and _running(cloud, "app=batch") == 2,
             timeout=90, what="2 Running replicas in each cluster")
    policy = hub.json("get", "propagationpolicies.policy.karmada.io", "batch-weighted", "-n", "ml")
    assert policy["apiVersion"] == "policy.karmada.io/v1alpha1"

    def image(member: Kubectl) -> str:
        deploy = member.json("get", "deployment", "batch", "-n", "ml")
        return str(deploy["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image(onprem) == "registry.example.com/ml/batch:1.0"
    assert image(cloud) == "mirror.us-east-1.example.com/ml/batch:1.0"

    hub.run("delete", "-f", str(MANIFESTS / "batch.yaml"))
    wait_for(lambda: _deployment_replicas(onprem, "batch") is None and _deployment_replicas(cloud, "batch") is None,
             timeout=60, what="the Deployment to disappear from both members")
    wait_for(lambda: hub.run("get", "deployment", "batch", "-n", "ml", check=False).returncode != 0,
             timeout=30, what="the hub Deployment to be gone")
    assert hub.json("get", "works", "-A")["items"] == []
