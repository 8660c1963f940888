"""A Kubeflow Trainer TrainJob end to end (real hub on its embedded etcd, two simulated members,
two agents, kubectl): placed by what its runtime says, its TrainingRuntime sent along
(``propagateDeps``), its nodes run by the member's trainer, ``Complete`` back on the hub; then one
of a ClusterTrainingRuntime that a ClusterPropagationPolicy sends. Queued with Kueue's label, two
TrainJobs each asking the whole ClusterQueue run one after the other: the second waits suspended
(its Workload Pending) until the first completes, and each runs with its flavor's node label."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "two-clusters.yaml"
pytestmark = pytest.mark.e2e

#: The trainer step every runtime here has: one node container asking 1 GPU, running ``duration``.
NODE_JOB = """
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels: {{trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
            spec:
              template:
                metadata:
                  annotations: {{sim.gpufed.io/duration: {duration}}}
                spec:
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime
                      command: [torchrun, train.py]
                      resources:
                        limits: {{nvidia.com/gpu: 1}}
"""

#: Every TrainJob of namespace ml to either member, its TrainingRuntime along.
POLICY = """
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: training, namespace: ml}
spec:
  propagateDeps: true
  resourceSelectors:
    - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob}
  placement:
    clusterAffinity: {clusterNames: [onprem-a100, cloud-h100]}
"""

# The runtime's node asks 1 GPU; the TrainJob asks 2 nodes of 8 GPUs (resourcesPerNode), which only
# the cloud's two whole 8-GPU H100 nodes hold (on-prem has one whole 8-GPU node beside MIG ones).
MANIFESTS = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: torch-distributed, namespace: ml}
spec:
  mlPolicy: {numNodes: 1, torch: {numProcPerNode: auto}}
  podGroupPolicy: {coscheduling: {scheduleTimeoutSeconds: 120}}""" + NODE_JOB.format(duration="60s") + "---\n" + POLICY + """---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: ml}
spec:
  runtimeRef: {name: torch-distributed, kind: TrainingRuntime}
  trainer:
    numNodes: 2
    resourcesPerNode:
      limits: {nvidia.com/gpu: 8}
"""


# A ClusterTrainingRuntime is cluster-scoped: a ClusterPropagationPolicy sends it to every member.
CLUSTER_RUNTIME = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-small}
spec:
  mlPolicy: {numNodes: 1}""" + NODE_JOB.format(duration="30s") + """---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: training-runtimes}
spec:
  resourceSelectors:
    - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime}
  placement:
    clusterAffinity: {clusterNames: [onprem-a100, cloud-h100]}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: phi, namespace: ml}
spec:
  runtimeRef: {name: torch-small}
"""


def _condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or () if c.get("type") == ctype), None)


def _pods(member: Kubectl) -> list[dict[str, Any]]:
    return list(member.json("get", "pods", "-n", "ml", "-l", "jobset.sigs.k8s.io/jobset-name=llama")["items"])


def test_a_trainjob_runs_where_its_nodes_fit_with_its_runtime_and_completes(processes: ProcessGroup) -> None:
    hub, members = processes.start_fleet(FLEET, ("onprem-a100", "cloud-h100"))
    cloud, onprem = members["cloud-h100"], members["onprem-a100"]
    hub.run("apply", "-f", "-", input_text=MANIFESTS)

    binding = wait_for(lambda: (b := hub.json_or_none("get", "resourcebinding", "llama-trainjob", "-n", "ml"))
                       and b["spec"].get("clusters") and b, timeout=60, what="the TrainJob placed")
    assert binding["spec"]["clusters"] == [{"name": "cloud-h100", "replicas": 2}], binding["spec"]
    assert (binding["spec"]["replicas"], binding["spec"]["gang"]) == (2, True)
    assert binding["spec"]["replicaRequirements"]["resourceRequest"] == {"nvidia.com/gpu": "8"}

    # The runtime follows it, so the member's trainer resolves it and makes the two 8-GPU nodes.
    wait_for(lambda: cloud.json_or_none("get", "trainingruntime", "torch-distributed", "-n", "ml"), timeout=60,
             what="the TrainingRuntime in the cloud")
    assert onprem.json_or_none("get", "trainingruntime", "torch-distributed", "-n", "ml") is None
    pods = wait_for(lambda: len(found := _pods(cloud)) == 2 and found, timeout=60, what="the TrainJob's two nodes")
    assert sorted(p["metadata"]["name"] for p in pods) == ["llama-node-0-0", "llama-node-0-1"]
    for pod in pods:
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "llama"
    assert onprem.run("get", "trainjob", "llama", "-n", "ml", check=False).returncode != 0

    def complete() -> dict[str, Any] | None:
        job = hub.json("get", "trainjob", "llama", "-n", "ml")
        done = _condition(job, "Complete")
        return job if done and done["status"] == "True" else None

    job = wait_for(complete, timeout=120, what="the TrainJob Complete on the hub")
    assert (_condition(job, "Complete") or {}).get("reason") == "AllJobsCompleted"
    assert job["status"]["jobsStatus"] == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0,
                                            "suspended": 0}]
    assert (_condition(job, "Propagated") or {}).get("status") == "True"
    assert "Complete" in hub.run("get", "trainjob", "llama", "-n", "ml").stdout  # the State column

    # A TrainJob of a ClusterTrainingRuntime (the default kind): the runtime goes everywhere by its
    # own policy; the one-node TrainJob runs in one member and completes.
    hub.run("apply", "-f", "-", input_text=CLUSTER_RUNTIME)
    for member in members.values():
        wait_for(lambda m=member: m.json_or_none("get", "clustertrainingruntime", "torch-small"), timeout=60,
                 what="the ClusterTrainingRuntime in every member")

    def phi_complete() -> bool:
        done = _condition(hub.json("get", "trainjob", "phi", "-n", "ml"), "Complete")
        return bool(done and done["status"] == "True")

    wait_for(phi_complete, timeout=120, what="the TrainJob of the ClusterTrainingRuntime Complete on the hub")


# Kueue's queue of 8 cloud GPUs; each TrainJob asks one node of 8 GPUs, the whole quota.
QUEUED = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: cloud}
spec:
  nodeLabels: {tier: cloud, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: trainers}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: cloud
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: trainers, namespace: ml}
spec: {clusterQueue: trainers}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: torch-queued, namespace: ml}
spec:
  mlPolicy: {numNodes: 1}""" + NODE_JOB.format(duration="20s") + "---\n" + POLICY


def _queued_trainjob(name: str) -> str:
    return f"""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
  namespace: ml
  labels: {{kueue.x-k8s.io/queue-name: trainers}}
spec:
  runtimeRef: {{name: torch-queued, kind: TrainingRuntime}}
  trainer:
    resourcesPerNode:
      limits: {{nvidia.com/gpu: 8}}
"""


def test_queued_trainjobs_wait_for_kueue_quota_and_run_one_after_the_other(processes: ProcessGroup) -> None:
    hub, members = processes.start_fleet(FLEET, ("onprem-a100", "cloud-h100"))
    cloud = members["cloud-h100"]
    hub.run("apply", "-f", "-", input_text=QUEUED)
    hub.run("apply", "-f", "-", input_text=_queued_trainjob("first"))
    wait_for(lambda: hub.json("get", "trainjob", "first", "-n", "ml")["spec"].get("suspend") is False, timeout=60,
             what="the first TrainJob admitted and started")
    hub.run("apply", "-f", "-", input_text=_queued_trainjob("second"))

    def workload(job: str) -> dict[str, Any] | None:
        return hub.json_or_none("get", "workload", hub.workload_name("trainjob", job, "-n", "ml"), "-n", "ml")

    def pending() -> dict[str, Any] | None:
        reserved = _condition(workload("second"), "QuotaReserved")
        return reserved if reserved and reserved["status"] == "False" else None

    assert wait_for(pending, timeout=60, what="the second TrainJob waiting for quota")["reason"] == "Pending"
    second = hub.json("get", "trainjob", "second", "-n", "ml")
    assert second["spec"]["suspend"] is True
    assert hub.json_or_none("get", "resourcebinding", "second-trainjob", "-n", "ml") is None
    assert [(ps["name"], ps["count"]) for ps in (workload("first") or {})["spec"]["podSets"]] == [("node", 1)]

    # The first runs in the cloud, its node on the flavor's GPU product (Kueue's runtime patch).
    pods = wait_for(lambda: (found := list(cloud.json("get", "pods", "-n", "ml", "-l", "jobset.sigs.k8s.io/jobset-name=first")["items"]))
                    and found, timeout=60, what="the first TrainJob's node in the cloud")
    assert pods[0]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

    def complete(job: str) -> bool:
        done = _condition(hub.json("get", "trainjob", job, "-n", "ml"), "Complete")
        return bool(done and done["status"] == "True")

    wait_for(lambda: complete("first"), timeout=120, what="the first TrainJob Complete")
    wait_for(lambda: complete("second"), timeout=120, what="the second TrainJob admitted once the first finished, then Complete")
    assert (_condition(workload("second"), "Admitted") or {}).get("status") == "True"
    assert (_condition(workload("first"), "Finished") or {}).get("status") == "True"
