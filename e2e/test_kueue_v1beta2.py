"""Kueue's v1beta2 YAML, end to end (real hub on its embedded etcd, the on-prem member with its
agent, kubectl): a ResourceFlavor, a ClusterQueue with ``cohortName`` and ``MayStopSearch`` and a
LocalQueue written as Kueue 0.15+'s docs write them apply unchanged; a Job queued in them is
admitted and Running in the member; ``kubectl get`` shows the objects at v1beta2 (the preferred
version) and at v1beta1, and ``gpufed queues`` reads the quota and its usage."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import GPUFED, Kubectl, ProcessGroup, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "placement.yaml"
pytestmark = pytest.mark.e2e

# As Kueue's docs write a single-cluster setup at v1beta2 (administer_cluster_quotas.md), with
# the flavor naming the fleet's on-prem tier.
QUEUES_V1BETA2 = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: "default-flavor"
spec:
  nodeLabels:
    tier: onprem
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  cohortName: "research"
  flavorFungibility:
    whenCanBorrow: MayStopSearch
    whenCanPreempt: TryNextFlavor
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
      - name: "nvidia.com/gpu"
        nominalQuota: 2
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: "ml"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
---
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: jobs
  namespace: ml
spec:
  resourceSelectors:
    - apiVersion: batch/v1
      kind: Job
  placement:
    clusterAffinity:
      clusterNames: [onprem-a100]
"""

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
    "spec": {"template": {
        "metadata": {"annotations": {"sim.gpufed.io/duration": "7200s"}},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "train", "image": "registry.example.com/ml/train:0.3",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
        }]},
    }},
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    with ProcessGroup.running_fleet(tmp_path_factory.mktemp("kueue-v1beta2"), FLEET, ("onprem-a100",)) as fleet:
        yield fleet


def _admitted(hub: Kubectl) -> dict[str, Any] | None:
    wl = hub.json_or_none("get", "workload", "job-train", "-n", "ml")
    conds = {c["type"]: c for c in ((wl or {}).get("status") or {}).get("conditions") or ()}
    return wl if conds.get("Admitted", {}).get("status") == "True" else None


def _running(member: Kubectl) -> int:
    items = member.json("get", "pods", "-n", "ml", "-l", "job-name=train")["items"]
    return sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running")


def test_kueue_v1beta2_queues_admit_a_job(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    out = hub.run("apply", "-f", "-", input_text=QUEUES_V1BETA2).stdout
    assert out.splitlines()[:3] == [
        "resourceflavor.kueue.x-k8s.io/default-flavor created", "clusterqueue.kueue.x-k8s.io/cluster-queue created",
        "localqueue.kueue.x-k8s.io/user-queue created",
    ]
    hub.run("apply", "-f", "-", input_text=json.dumps(JOB))
    wait_for(lambda: _admitted(hub) is not None, timeout=60, what="the Job's Workload admitted by cluster-queue")
    wait_for(lambda: _running(members["onprem-a100"]) == 1, timeout=120, what="the Job Running on-prem")

    workload = _admitted(hub)
    assert workload is not None and workload["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert workload["status"]["admission"]["clusterQueue"] == "cluster-queue"
    assert workload["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "default-flavor"
    assert hub.json("get", "job", "train", "-n", "ml")["spec"]["suspend"] is False

    served = hub.json("get", "clusterqueue", "cluster-queue")
    assert (served["apiVersion"], served["spec"]["cohortName"]) == ("kueue.x-k8s.io/v1beta2", "research")
    assert served["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    stored = hub.json("get", "clusterqueues.v1beta1.kueue.x-k8s.io", "cluster-queue")
    assert (stored["apiVersion"], stored["spec"]["cohort"]) == ("kueue.x-k8s.io/v1beta1", "research")
    assert stored["status"]["admittedWorkloads"] == 1
    rows = hub.run("get", "clusterqueues").stdout.splitlines()
    assert rows[1].split()[:4] == ["cluster-queue", "research", "0", "1"]

    queues = subprocess.run(
        [GPUFED, "queues", "--kubeconfig", str(hub.kubeconfig), "-o", "json"], capture_output=True, text=True, check=True, timeout=60
    )
    gpu = next(r for r in json.loads(queues.stdout) if r["resource"] == "nvidia.com/gpu")
    assert (gpu["clusterQueue"], gpu["flavor"], gpu["usage"]) == ("cluster-queue", "default-flavor", "1")
