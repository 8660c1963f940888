"""Kueue's ``ReclaimablePods`` of a Job, a JobSet and a TrainJob, from the status the hub
aggregates from the members, and the Workload status that carries them."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission import objects as adm
from controlplane.admission import reclaimable
from controlplane.apis.trainer_runtime import with_runtime

GPU = "nvidia.com/gpu"


def job(*, succeeded: int | None = None, **spec: int) -> dict[str, Any]:
    status = {} if succeeded is None else {"succeeded": succeeded}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": dict(spec), "status": status}


@pytest.mark.parametrize(("spec", "succeeded", "expected"), [
    ({"completions": 4, "parallelism": 2}, 3, [{"name": "main", "count": 1}]),  # 1 completion left, 2 pods ran
    ({"completions": 4, "parallelism": 2}, 4, [{"name": "main", "count": 2}]),
    ({"completions": 4, "parallelism": 2}, 2, []),  # 2 completions left: both pods run again
    ({"completions": 4, "parallelism": 2}, 0, []),
    ({"completions": 4, "parallelism": 2}, None, []),
    ({"completions": 3, "parallelism": 1}, 3, []),  # Kueue: a Job of parallelism 1 reclaims nothing
    ({"completions": 3}, 3, []),  # parallelism defaults to 1
    ({"parallelism": 1}, 1, []),
    ({"parallelism": 3}, 1, [{"name": "main", "count": 1}]),  # completions default to parallelism
    ({"completions": 10, "parallelism": 4}, 7, [{"name": "main", "count": 1}]),
])
def test_a_jobs_reclaimable_pods_are_those_that_will_not_run_again(
    spec: dict[str, int], succeeded: int | None, expected: list[dict[str, Any]],
) -> None:
    assert reclaimable.of(job(succeeded=succeeded, **spec)) == expected


def jobset(statuses: list[dict[str, Any]]) -> dict[str, Any]:
    def replicated(name: str, replicas: int, **spec: int) -> dict[str, Any]:
        return {"name": name, "replicas": replicas, "template": {"spec": {**spec, "template": {"spec": {}}}}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
        "spec": {"replicatedJobs": [replicated("Driver", 1), replicated("workers", 3, parallelism=4, completions=2)]},
        "status": {"replicatedJobsStatus": statuses},
    }


@pytest.mark.parametrize(("statuses", "expected"), [
    ([], []),
    ([{"name": "workers", "succeeded": 2, "active": 1}], [{"name": "workers", "count": 4}]),  # 2 Jobs of 2 pods
    ([{"name": "Driver", "succeeded": 1}, {"name": "workers", "succeeded": 0}], [{"name": "driver", "count": 1}]),
    ([{"name": "workers", "succeeded": 4}], []),  # more than its replicas: Kueue reports none
    ([{"name": "gone", "succeeded": 1}], []),
])
def test_a_jobsets_reclaimable_pods_are_the_pods_of_its_succeeded_jobs(
    statuses: list[dict[str, Any]], expected: list[dict[str, Any]],
) -> None:
    assert reclaimable.of(jobset(statuses)) == expected


def trainjob(statuses: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A TrainJob of 3 nodes; its runtime: a warmup of 2 Jobs of 1 Pod (no step label: the trainer
    keeps its replicas), a model initializer the runtime gives 2 Jobs (the trainer runs it as one),
    the trainer step."""
    ancestor = "trainer.kubeflow.org/trainjob-ancestor-step"

    def replicated(name: str, replicas: int, step: str | None) -> dict[str, Any]:
        labels = {"labels": {ancestor: step}} if step else {}
        return {"name": name, "replicas": replicas, "template": {"metadata": labels, "spec": {"template": {"spec": {}}}}}
    runtime = {"spec": {"mlPolicy": {"numNodes": 2}, "template": {"spec": {"replicatedJobs": [
        replicated("warmup", 2, None), replicated("model-initializer", 2, "model-initializer"),
        replicated("node", 2, "trainer")]}}}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"},
            "spec": {"trainer": {"numNodes": 3}}, "status": {"jobsStatus": statuses}}, runtime


@pytest.mark.parametrize(("statuses", "expected"), [
    ([], []),
    ([{"name": "warmup", "succeeded": 1, "active": 1}], [{"name": "warmup", "count": 1}]),
    ([{"name": "warmup", "succeeded": 2}, {"name": "node", "succeeded": 1}],
     [{"name": "warmup", "count": 2}, {"name": "node", "count": 3}]),  # the node Job runs the 3 nodes
    ([{"name": "warmup", "succeeded": 3}], []),  # more than its replicas: Kueue reports none
    ([{"name": "model-initializer", "succeeded": 1}], [{"name": "model-initializer", "count": 1}]),
    ([{"name": "model-initializer", "succeeded": 2}], []),  # one Job, whatever the runtime's replicas
    ([{"name": "node", "succeeded": 2}], []),  # the trainer step too
    ([{"name": "node", "active": 1}], []),
])
def test_a_trainjobs_reclaimable_pods_are_the_pods_of_its_runtimes_succeeded_jobs(
    statuses: list[dict[str, Any]], expected: list[dict[str, Any]],
) -> None:
    obj, runtime = trainjob(statuses)
    assert reclaimable.of(with_runtime(obj, runtime)) == expected


def test_a_trainjob_read_without_its_runtime_changes_nothing_once_it_has_child_jobs() -> None:
    obj, _ = trainjob([{"name": "node", "succeeded": 1}])
    assert reclaimable.of(obj) is None
    assert reclaimable.status_with({"status": {"reclaimablePods": [{"name": "node", "count": 3}]}}, obj) is None
    assert reclaimable.of(trainjob([])[0]) == []


@pytest.mark.parametrize("kind", [("kubeflow.org/v1", "PyTorchJob"), ("ray.io/v1", "RayJob"), ("apps/v1", "Deployment")])
def test_kinds_whose_kueue_integration_reports_none_have_none(kind: tuple[str, str]) -> None:
    source = {"apiVersion": kind[0], "kind": kind[1], "metadata": {"name": "x"}, "status": {"succeeded": 3}}
    assert reclaimable.of(source) is None
    assert reclaimable.status_with({"status": {}}, source) is None


def workload(reclaim: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "count": 2, "flavors": {GPU: "onprem"}, "resourceUsage": {GPU: "2"}}]}}
    if reclaim is not None:
        status["reclaimablePods"] = reclaim
    return {"metadata": {"name": "w", "namespace": "default"},
            "spec": {"podSets": [{"name": "main", "count": 2}]}, "status": status}


def test_the_workload_status_carries_them_and_its_admitted_quota_shrinks() -> None:
    running = job(succeeded=3, completions=4, parallelism=2)
    status = reclaimable.status_with(workload(), running)
    assert status is not None and status["reclaimablePods"] == [{"name": "main", "count": 1}]
    assert status["admission"] == workload()["status"]["admission"]
    admitted = adm.admitted_of({**workload(), "status": status})
    assert admitted is not None and admitted.usage == {("onprem", GPU): 1}
    assert reclaimable.status_with({**workload(), "status": status}, running) is None  # unchanged: no write


def test_none_left_removes_the_field() -> None:
    status = reclaimable.with_pods(workload([{"name": "main", "count": 1}]), [])
    assert status is not None and "reclaimablePods" not in status
    assert reclaimable.with_pods(workload(), []) is None
