"""Kueue's ``PodsReady`` per integration, table-driven from hand-built hub statuses: each kind's
rule as Kueue's integration of it reads its status, and no rule (None) for a kind Kueue's
``waitForPodsReady`` has none for at the hub."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission.podsready import pod_group, pods_ready
from controlplane.apis.trainer_runtime import with_runtime


def obj(api_version: str, kind: str, spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w", "namespace": "ml"}, "spec": spec, "status": status}


def jobset(replicas: list[int], statuses: list[dict[str, int]]) -> dict[str, Any]:
    spec = {"replicatedJobs": [{"name": f"r{i}", "replicas": n, "template": {"spec": {"parallelism": 4}}}
                               for i, n in enumerate(replicas)]}
    status = {"replicatedJobsStatus": [{"name": f"r{i}", **s} for i, s in enumerate(statuses)]}
    return obj("jobset.x-k8s.io/v1alpha2", "JobSet", spec, status)


TRAINER = "trainer.kubeflow.org/v1alpha1"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def trainjob(statuses: dict[str, dict[str, int]], *, resolved: bool = True, initializer_replicas: int = 1) -> dict[str, Any]:
    """A TrainJob of 4 nodes whose runtime runs a dataset initializer, then the trainer Job."""
    runtime = {"apiVersion": TRAINER, "kind": "ClusterTrainingRuntime", "metadata": {"name": "torch"}, "spec": {
        "mlPolicy": {"numNodes": 4},
        "template": {"spec": {"replicatedJobs": [
            {"name": "dataset-initializer", "replicas": initializer_replicas, "template": {"spec": {"template": {"spec": {}}}}},
            {"name": "node", "template": {"metadata": {"labels": {ANCESTOR: "trainer"}}, "spec": {"template": {"spec": {}}}}},
        ]}}}}
    job = obj(TRAINER, "TrainJob", {"runtimeRef": {"name": "torch"}},
              {"jobsStatus": [{"name": name, **counts} for name, counts in statuses.items()]})
    return with_runtime(job, runtime) if resolved else job


def running(status: str) -> dict[str, Any]:
    return {"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": status}]}


def ray_cluster(state: str | None) -> dict[str, Any]:
    return obj("ray.io/v1", "RayCluster", {"headGroupSpec": {}}, {"state": state} if state is not None else {})


def pod(status: dict[str, Any]) -> dict[str, Any]:
    return obj("v1", "Pod", {"containers": [{"name": "a"}, {"name": "b"}]}, status)


READY_POD = {"phase": "Running", "containerStatuses": [{"name": "a", "ready": True}, {"name": "b", "ready": True}]}
HALF_READY_POD = {"phase": "Running", "containerStatuses": [{"name": "a", "ready": True}, {"name": "b", "ready": False}]}


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        # batch/v1 Job: ready + succeeded against parallelism, capped by completions.
        (obj("batch/v1", "Job", {"parallelism": 4}, {"ready": 3}), False),
        (obj("batch/v1", "Job", {"parallelism": 4}, {"ready": 3, "succeeded": 1}), True),
        (obj("batch/v1", "Job", {"parallelism": 4, "completions": 2}, {"ready": 2}), True),
        (obj("batch/v1", "Job", {}, {}), False),
        # Deployment, StatefulSet: readyReplicas against replicas.
        (obj("apps/v1", "Deployment", {"replicas": 2}, {"readyReplicas": 2}), True),
        (obj("apps/v1", "StatefulSet", {"replicas": 2}, {"readyReplicas": 1}), False),
        # JobSet: the ready and succeeded Jobs of every replicated Job equal the Jobs it runs.
        (jobset([2, 1], [{"ready": 2}, {"ready": 0, "succeeded": 1}]), True),
        (jobset([2, 1], [{"ready": 2, "active": 3}]), False),  # one replicated Job not reported yet
        (jobset([2, 1], [{"ready": 1, "active": 2}, {"ready": 1}]), False),
        (jobset([2], [{"ready": 1, "succeeded": 2}]), False),  # Kueue asks for equality, not "at least"
        (jobset([2], []), False),
        (obj("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": [{"name": "r"}]}, {"replicatedJobsStatus": [{"name": "r", "ready": 1}]}), True),
        # TrainJob: its child Jobs ready or succeeded (the initializers' counted) against its runtime's Jobs.
        (trainjob({"dataset-initializer": {"succeeded": 1}, "node": {"ready": 1, "active": 1}}), True),
        (trainjob({"dataset-initializer": {"succeeded": 0, "active": 1}, "node": {}}), False),
        (trainjob({"node": {"ready": 1, "active": 1}}), False),  # the initializer's Job not counted
        (trainjob({"dataset-initializer": {"succeeded": 1}, "node": {"ready": 0, "active": 1}}), False),
        (trainjob({"dataset-initializer": {"succeeded": 2}, "node": {"ready": 1}}, initializer_replicas=2), True),
        (trainjob({"dataset-initializer": {"succeeded": 1}, "node": {"ready": 1}}, initializer_replicas=2), False),
        (trainjob({"dataset-initializer": {"succeeded": 1}, "node": {"ready": 1, "succeeded": 1}}), False),  # equality
        (trainjob({"dataset-initializer": {"succeeded": 1}, "node": {"ready": 1}}, resolved=False), False),  # no runtime
        # Kubeflow jobs: the training operator's Running condition.
        (obj("kubeflow.org/v1", "PyTorchJob", {}, running("True")), True),
        (obj("kubeflow.org/v1", "PyTorchJob", {}, running("False")), False),
        (obj("kubeflow.org/v1", "PyTorchJob", {}, {"conditions": [{"type": "Created", "status": "True"}]}), False),
        (obj("kubeflow.org/v2beta1", "MPIJob", {}, running("True")), True),
        (obj("kubeflow.org/v2beta1", "MPIJob", {}, {}), False),
        *((obj("kubeflow.org/v1", kind, {}, running(value)), value == "True")
          for kind in ("TFJob", "XGBoostJob", "PaddleJob", "JAXJob") for value in ("True", "False")),
        (obj("kubeflow.org/v1", "TFJob", {}, {"conditions": [{"type": "Created", "status": "True"}]}), False),
        # RayCluster: its state; RayJob: its cluster's state.
        (ray_cluster("ready"), True),
        (ray_cluster("suspended"), False),
        (ray_cluster(None), False),
        (obj("ray.io/v1", "RayJob", {}, {"jobDeploymentStatus": "Running", "rayClusterStatus": {"state": "ready"}}), True),
        (obj("ray.io/v1", "RayJob", {}, {"jobDeploymentStatus": "Initializing", "rayClusterStatus": {}}), False),
        (obj("ray.io/v1", "RayJob", {}, {}), False),
        # LeaderWorkerSet: every group (its leader and workers) ready.
        (obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"replicas": 3}, {"replicas": 3, "readyReplicas": 3}), True),
        (obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"replicas": 3}, {"replicas": 3, "readyReplicas": 2}), False),
        (obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {}, {}), False),
        # Pod: its Ready condition, else (the hub's folded status) Running with every container ready.
        (pod(READY_POD), True),
        (pod(HALF_READY_POD), False),
        (pod({"phase": "Pending"}), False),
        (pod({"phase": "Succeeded", "containerStatuses": [{"name": "a", "ready": False}]}), False),
        (pod({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}], **{"containerStatuses": READY_POD["containerStatuses"]}}), False),
        (pod({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}), True),
        # Kinds with no rule are not timed.
        (obj("kubeflow.org/v1", "MXJob", {}, running("False")), None),
        (obj("v1", "ConfigMap", {}, {}), None),
    ],
)
def test_pods_ready_by_kind(workload: dict[str, Any], expected: bool | None) -> None:
    assert pods_ready(workload) is expected


def test_a_pod_group_is_ready_once_every_pod_is() -> None:
    assert pod_group([pod(READY_POD), pod(READY_POD)]) is True
    assert pod_group([pod(READY_POD), pod(HALF_READY_POD)]) is False
    assert pod_group([pod(READY_POD), pod({"phase": "Succeeded", "containerStatuses": [{"name": "a", "ready": False}]})]) is True
    assert pod_group([pod(READY_POD), pod({"phase": "Failed"})]) is False
    assert pod_group([]) is False
