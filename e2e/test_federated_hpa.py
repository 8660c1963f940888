"""A Karmada FederatedHPA on the hub scales a Deployment on the GPU utilization its pods report
in the members: 90 % busy against a 50 % target scales it up (its Works follow), 10 % busy
scales it down, and ``kubectl get fhpa`` shows Karmada's columns. Real hub on embedded etcd
(syncing every second), two simulated members and their agents; each simulated pod's GPU
utilization is its ``sim.gpufed.io/gpu-utilization`` annotation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "placement.yaml"
CLUSTERS = ("onprem-a100", "cloud-h100")
pytestmark = pytest.mark.e2e

MANIFESTS = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: infer, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: infer}
  placement:
    clusterAffinity:
      clusterNames: [onprem-a100, cloud-h100]
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
metadata: {name: infer, namespace: ml}
spec:
  replicas: 2
  selector: {matchLabels: {app: infer}}
  template:
    metadata:
      labels: {app: infer}
      annotations: {sim.gpufed.io/gpu-utilization: "0.9"}
    spec:
      containers:
        - name: infer
          image: registry.example.com/ml/infer:1.0
          resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata: {name: infer, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: infer}
  minReplicas: 1
  maxReplicas: 4
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
  metrics:
    - type: Pods
      pods:
        metric: {name: DCGM_FI_DEV_GPU_UTIL}
        target: {type: AverageValue, averageValue: "50"}
"""


def _hub_replicas(hub: Kubectl) -> int:
    return int(hub.json("get", "deployment", "infer", "-n", "ml")["spec"]["replicas"])


def _work_replicas(hub: Kubectl) -> int:
    """The replicas the Works give the members, summed."""
    total = 0
    for cluster in CLUSTERS:
        works: dict[str, Any] = hub.json("get", "works", "-n", f"gpufed-es-{cluster}")
        for work in works["items"]:
            for manifest in work["spec"]["workload"]["manifests"]:
                if manifest.get("kind") == "Deployment" and manifest["metadata"]["name"] == "infer":
                    total += int(manifest["spec"].get("replicas", 0))
    return total


def test_a_federated_hpa_scales_on_the_fleets_gpu_utilization(processes: ProcessGroup) -> None:
    hub, _members = processes.start_fleet(FLEET, CLUSTERS, "--horizontal-pod-autoscaler-sync-period", "1")
    hub.run("apply", "-f", "-", input_text=MANIFESTS)

    # 2 pods 90 % busy against 50 %: 2 x 90 / 50 -> 4 (the maximum), divided over both members.
    wait_for(lambda: _hub_replicas(hub) == 4, timeout=120, what="infer scaled up to 4 on the hub")
    wait_for(lambda: _work_replicas(hub) == 4, timeout=60, what="the Works giving the members 4 replicas")
    out = hub.run("get", "fhpa", "-n", "ml").stdout
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "REFERENCE-KIND", "REFERENCE-NAME", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert row.split()[:4] == ["infer", "Deployment", "infer", "1"] and row.split()[4] == "4"
    events = hub.json("get", "events", "-n", "ml", "--field-selector", "reason=SuccessfulRescale")["items"]
    assert any(e["message"].startswith("New size: 4; reason: pods metric DCGM_FI_DEV_GPU_UTIL above target")
               for e in events)

    # The pods now report 10 %: the 0 s window lets it scale down to the minimum.
    hub.run("patch", "deployment", "infer", "-n", "ml", "--type", "merge", "-p",
            '{"spec": {"template": {"metadata": {"annotations": {"sim.gpufed.io/gpu-utilization": "0.1"}}}}}')
    wait_for(lambda: _hub_replicas(hub) == 1, timeout=180, what="infer scaled down to 1 on the hub")
    wait_for(lambda: _work_replicas(hub) == 1, timeout=60, what="the Works giving the members 1 replica")
    status = hub.json("get", "fhpa", "infer", "-n", "ml")["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["ScalingActive"] == "True"
