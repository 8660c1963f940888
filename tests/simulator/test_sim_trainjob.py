"""The simulated member's TrainJob controller (simulator.controllers.trainjob): the trainer step's
pods from the runtime, the trainer's status conditions."""

from __future__ import annotations

import random
from typing import Any

from simulator.controllers.registry import CONTROLLERS, trainjob_runtime
from simulator.controllers.trainjob import reconcile_trainjob

API = "trainer.kubeflow.org/v1alpha1"
NOW = "2026-01-01T00:00:00Z"


def runtime(*, gang: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "mlPolicy": {"numNodes": 2},
        "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"metadata": {"annotations": {"sim.gpufed.io/duration": "60s"}}, "spec": {"containers": [
                {"name": "node", "image": "pytorch", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}}]}},
    }
    if gang:
        spec["podGroupPolicy"] = {"coscheduling": {}}
    return {"apiVersion": API, "kind": "TrainingRuntime", "metadata": {"name": "torch", "namespace": "ml"}, "spec": spec}


def trainjob(**trainer: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "TrainJob",
            "metadata": {"name": "llama", "namespace": "ml", "uid": "u1"},
            "spec": {"runtimeRef": {"name": "torch", "kind": "TrainingRuntime"}, **({"trainer": trainer} if trainer else {})}}


def pod(name: str, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ml"}, "status": {"phase": phase}}


def conditions(status: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (status or {}).get("conditions") or ()}


def test_the_trainer_nodes_are_made_from_the_runtime_with_resources_per_node() -> None:
    job = trainjob(numNodes=3, resourcesPerNode={"limits": {"nvidia.com/gpu": 4}})
    changes = reconcile_trainjob(job, [], now=NOW, rng=random.Random(0), runtime=runtime())
    assert [p["metadata"]["name"] for p in changes.create] == ["llama-node-0-0", "llama-node-0-1", "llama-node-0-2"]
    first = changes.create[0]
    assert first["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 4}}
    assert first["spec"]["restartPolicy"] == "OnFailure"
    assert first["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "llama"  # a gang of 3
    assert first["metadata"]["annotations"]["scheduling.x-k8s.io/min-member"] == "3"
    assert first["metadata"]["annotations"]["sim.gpufed.io/duration"] == "60s"
    assert conditions(changes.status) == {"Created": ("True", "JobsCreationSucceeded")}
    alone = reconcile_trainjob(trainjob(), [], now=NOW, rng=random.Random(0), runtime=runtime(gang=False))
    assert len(alone.create) == 2 and "scheduling.x-k8s.io/pod-group" not in alone.create[0]["metadata"]["labels"]


def test_complete_once_every_node_succeeded_and_no_new_pod_after() -> None:
    job = trainjob()
    pods = [pod("llama-node-0-0", "Succeeded"), pod("llama-node-0-1", "Running")]
    running = reconcile_trainjob(job, pods, now=NOW, rng=random.Random(0), runtime=runtime())
    assert running.status is not None and running.status["jobsStatus"][0]["active"] == 1
    assert "Complete" not in conditions(running.status)
    pods[1] = pod("llama-node-0-1", "Succeeded")
    done = reconcile_trainjob({**job, "status": running.status}, pods, now=NOW, rng=random.Random(0), runtime=runtime())
    assert conditions(done.status)["Complete"] == ("True", "AllJobsCompleted")
    assert done.status is not None and done.status["jobsStatus"][0]["succeeded"] == 1
    after = reconcile_trainjob({**job, "status": done.status}, [], now=NOW, rng=random.Random(0), runtime=runtime())
    assert after.create == []


def test_failed_when_a_node_failed() -> None:
    pods = [pod("llama-node-0-0", "Failed")]
    changes = reconcile_trainjob(trainjob(), pods, now=NOW, rng=random.Random(0), runtime=runtime())
    assert conditions(changes.status)["Failed"] == ("True", "FailedJobs")
    assert changes.create == []


def test_the_controller_reads_the_runtime_the_trainjob_names() -> None:
    controller = CONTROLLERS[(API, "TrainJob")]
    assert controller.reads is trainjob_runtime
    namespaced = trainjob_runtime(trainjob())
    assert (namespaced.kind, namespaced.namespace, namespaced.name) == ("TrainingRuntime", "ml", "torch")
    cluster = trainjob_runtime({"metadata": {"namespace": "ml"}, "spec": {"runtimeRef": {"name": "torch"}}})
    assert (cluster.kind, cluster.namespace) == ("ClusterTrainingRuntime", None)


def with_initializers(base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with a dataset initializer before the trainer and a model initializer after it, which
    the runtime gives 2 Jobs but the trainer runs as one, and an unlabelled ``warmup`` of 2 Jobs."""
    def initializer(name: str, replicas: int) -> dict[str, Any]:
        return {"name": name, "replicas": replicas, "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": name}},
            "spec": {"template": {"spec": {"containers": [{"name": name, "image": "init"}]}}}}}
    jobs = base["spec"]["template"]["spec"]["replicatedJobs"]
    warmup = {"name": "warmup", "replicas": 2, "template": {"spec": {"template": {"spec": {"containers": [
        {"name": "warmup", "image": "init"}]}}}}}
    base["spec"]["template"]["spec"]["replicatedJobs"] = [initializer("dataset-initializer", 1), *jobs,
                                                          initializer("model-initializer", 2), warmup]
    return base


def test_jobs_status_has_every_replicated_job_of_the_runtime_the_initializers_as_succeeded_jobs() -> None:
    rt = with_initializers(runtime())
    held = reconcile_trainjob({**trainjob(), "spec": {**trainjob()["spec"], "suspend": True}}, [], now=NOW,
                              rng=random.Random(0), runtime=rt)
    assert held.status is not None
    assert [(e["name"], e["succeeded"], e["suspended"]) for e in held.status["jobsStatus"]] == [
        ("dataset-initializer", 0, 1), ("node", 0, 1), ("model-initializer", 0, 1), ("warmup", 0, 2)]
    pods = [pod("llama-node-0-0", "Running"), pod("llama-node-0-1", "Running")]
    running = reconcile_trainjob(trainjob(), pods, now=NOW, rng=random.Random(0), runtime=rt)
    assert running.create == [] and running.status is not None
    assert running.status["jobsStatus"] == [
        {"name": "dataset-initializer", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
        {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0},
        {"name": "model-initializer", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
        {"name": "warmup", "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0},
    ]
