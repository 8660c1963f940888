"""``preserveResourcesOnDeletion`` end to end: a workload deleted on the hub with kubectl keeps
running in its member, released from gpufed, while a cluster that merely left the placement
loses its copy; and ``schedulePriority`` takes a PriorityClass created on the hub with kubectl.
Real hub on embedded etcd, two simulated members, two agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "placement.yaml"
pytestmark = pytest.mark.e2e

PRIORITY_CLASS = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: serving-critical
value: 100000
description: inference that must be placed before batch work
"""

POLICY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: keep-serving
  namespace: ml
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: serving
  preserveResourcesOnDeletion: true
  schedulePriority:
    priorityClassSource: KubePriorityClass
    priorityClassName: serving-critical
  placement:
    clusterAffinity:
      clusterNames: [{clusters}]
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: serving
  namespace: ml
  labels: {app: serving}
spec:
  replicas: 1
  selector:
    matchLabels: {app: serving}
  template:
    metadata:
      labels: {app: serving}
    spec:
      containers:
        - name: server
          image: registry.example.com/ml/serving:1.0
          resources:
            limits: {nvidia.com/gpu: 1}
"""


def _start_fleet(processes: ProcessGroup) -> tuple[Kubectl, dict[str, Kubectl]]:
    return processes.start_fleet(FLEET, ("onprem-a100", "cloud-h100"))


def _running(member: Kubectl) -> int:
    pods = member.json("get", "pods", "-n", "ml", "-l", "app=serving", "--field-selector=status.phase=Running")
    return len(pods["items"])


def _member_deployment(member: Kubectl) -> dict[str, Any] | None:
    result = member.run("get", "deployment", "serving", "-n", "ml", "-o", "json", check=False)
    if result.returncode != 0:
        return None
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_deleting_a_preserved_workload_leaves_it_running_in_its_member(processes: ProcessGroup) -> None:
    hub, members = _start_fleet(processes)
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]
    hub.run("apply", "-f", "-", input_text=PRIORITY_CLASS)
    assert hub.json("get", "priorityclass", "serving-critical")["value"] == 100000
    hub.run("apply", "-f", "-", input_text=POLICY.replace("{clusters}", "onprem-a100, cloud-h100"))
    hub.run("apply", "-f", "-", input_text=DEPLOYMENT)

    # Duplicated (no replicaScheduling): one replica in each member.
    wait_for(lambda: _running(onprem) == 1 and _running(cloud) == 1, timeout=90,
             what="a Running replica in each member")
    binding = hub.json("get", "resourcebindings", "serving-deployment", "-n", "ml")
    assert binding["spec"]["preserveResourcesOnDeletion"] is True
    assert binding["spec"]["schedulePriority"] == {"priority": 100000}
    for work in hub.json("get", "works", "-A", "-l", "work.gpufed.io/binding=serving-deployment")["items"]:
        assert work["spec"]["preserveResourcesOnDeletion"] is True

    # The cloud leaves the placement: a rescheduling, not a deletion, so its copy goes.
    hub.run("apply", "-f", "-", input_text=POLICY.replace("{clusters}", "onprem-a100"))
    wait_for(lambda: _member_deployment(cloud) is None, timeout=60, what="the cloud copy to be deleted")
    assert _running(onprem) == 1

    # Deleting the workload on the hub: gone from the hub, still running on-prem, no longer gpufed's.
    hub.run("delete", "deployment", "serving", "-n", "ml")
    wait_for(lambda: hub.run("get", "deployment", "serving", "-n", "ml", check=False).returncode != 0,
             timeout=60, what="the hub Deployment to be gone")
    wait_for(lambda: hub.json("get", "works", "-A")["items"] == [], timeout=30, what="its Works to be deleted")

    def released() -> dict[str, Any] | None:
        live = _member_deployment(onprem)
        labels = ((live or {}).get("metadata") or {}).get("labels") or {}
        return live if live is not None and not any(k.startswith("work.gpufed.io/") for k in labels) else None

    live = wait_for(released, timeout=60, what="the on-prem Deployment released from gpufed")
    labels = live["metadata"]["labels"]
    assert labels.get("app") == "serving" and labels.get("app.kubernetes.io/managed-by") != "gpufed", labels
    assert live["spec"]["replicas"] == 1
    assert _running(onprem) == 1
    assert _member_deployment(cloud) is None
