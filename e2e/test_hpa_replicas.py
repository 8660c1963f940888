"""An HPA propagated with its Deployment scales each member's copy without the hub undoing it:
the hub labels the Deployment ``resourcetemplate.karmada.io/retain-replicas: "true"``, a Work
rewritten after a member's scaling keeps that member's replicas, the hub's status sums the
members' real counts, and deleting the HPA gives the members the hub's replicas again.
Real hub on embedded etcd, two simulated members, two agents; the simulators run no HPA
controller, so the test scales a member's Deployment through its kubeconfig as an HPA would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "placement.yaml"
RETAIN = "resourcetemplate.karmada.io/retain-replicas"
MARKED_BY_HPA = "gpufed.io/retain-replicas-by-hpa"
pytestmark = pytest.mark.e2e

MANIFESTS = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: web}
    - {apiVersion: autoscaling/v2, kind: HorizontalPodAutoscaler, name: web}
  placement:
    clusterAffinity:
      clusterNames: [onprem-a100, cloud-h100]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: registry.example.com/shop/web:1.0
          resources: {requests: {cpu: 100m}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 5
"""


def _deployment(cluster: Kubectl) -> dict[str, Any]:
    found: dict[str, Any] = cluster.json("get", "deployment", "web", "-n", "shop")
    return found


def _label(cluster: Kubectl, key: str) -> str | None:
    return (_deployment(cluster)["metadata"].get("labels") or {}).get(key)


def _wait_label(cluster: Kubectl, key: str, value: str, *, what: str) -> None:
    wait_for(lambda: _label(cluster, key) == value, timeout=90, what=what)


def test_a_members_hpa_scaling_survives_a_work_rewrite(processes: ProcessGroup) -> None:
    hub, members = processes.start_fleet(FLEET, ("onprem-a100", "cloud-h100"))
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]
    hub.run("create", "namespace", "shop")
    hub.run("apply", "-f", "-", input_text=MANIFESTS)

    # Duplicated to both members, labelled on the hub and so in each member's copy.
    wait_for(lambda: _label(hub, RETAIN) == "true", timeout=60, what="the hub Deployment labelled retain-replicas")
    for member in (onprem, cloud):
        _wait_label(member, RETAIN, "true", what="the member's copy labelled")
        # The hub's note that it set the label stays on the hub.
        assert MARKED_BY_HPA not in (_deployment(member)["metadata"].get("annotations") or {})
    assert (_deployment(hub)["metadata"].get("annotations") or {}).get(MARKED_BY_HPA) == "true"

    onprem.run("scale", "deployment", "web", "-n", "shop", "--replicas=3")  # as the member's HPA would
    hub.run("label", "deployment", "web", "-n", "shop", "tier=front")  # every Work is rewritten
    for member in (onprem, cloud):
        _wait_label(member, "tier", "front", what="the rewritten Work applied")
    assert _deployment(onprem)["spec"]["replicas"] == 3
    assert _deployment(cloud)["spec"]["replicas"] == 1
    # The hub shows what runs: the members' counts summed.
    wait_for(lambda: _deployment(hub).get("status", {}).get("replicas") == 4, timeout=90,
             what="the hub's status.replicas summing 3 and 1")

    # No HPA any more: the label goes, and the members take the hub's replicas again.
    hub.run("delete", "hpa", "web", "-n", "shop")
    wait_for(lambda: _label(hub, RETAIN) is None, timeout=60, what="the hub Deployment unlabelled")
    wait_for(lambda: _deployment(onprem)["spec"]["replicas"] == 1, timeout=90, what="on-prem back to 1 replica")
