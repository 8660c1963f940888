"""Kueue's TrainJob integration, pure: a TrainJob's Workload pod sets come from the JobSet its
runtime makes (one per replicated Job, the trainer step counting its nodes and asking
``resourcesPerNode``, an initializer one pod), and its start and stop write Kueue's runtime patch
(the flavor's node labels, the checks' ``podSetUpdates``) rather than a pod template it does not
have."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.admission import objects as adm
from controlplane.admission import podsets
from controlplane.apis import kueue_jobs
from controlplane.apis.trainer_runtime import KUEUE_MANAGER, trainer_nodes, with_runtime

GPU = "nvidia.com/gpu"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
SPOT = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}


def replicated(name: str, step: str, container: str, resources: dict[str, Any], **job: Any) -> dict[str, Any]:
    return {"name": name, "replicas": 1, "template": {"metadata": {"labels": {ANCESTOR: step}}, "spec": {**job, "template": {
        "metadata": {"labels": {"app": name}},
        "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}],
                 "containers": [{"name": container, "image": "train:1", "resources": resources}]}}}}}


def runtime(*, initializer: bool = True) -> dict[str, Any]:
    jobs = [replicated("dataset-initializer", "dataset-initializer", "dataset-initializer", {"requests": {"cpu": "2"}})] if initializer else []
    jobs.append(replicated("node", "trainer", "node", {"limits": {GPU: "1"}}))
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": {"name": "torch"},
            "spec": {"mlPolicy": {"numNodes": 3}, "template": {"spec": {"replicatedJobs": jobs}}}}


def trainjob(trainer: dict[str, Any] | None = None, patches: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch"}, "suspend": True}
    if trainer:
        spec["trainer"] = trainer
    if patches is not None:
        spec["runtimePatches"] = patches
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "llama", "namespace": "default", "uid": "u1", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": spec}


def summary(pod_sets: list[dict[str, Any]] | None) -> list[tuple[str, int, dict[str, Any]]]:
    assert pod_sets is not None
    return [(ps["name"], ps["count"], ps["template"]["spec"]["containers"][0]["resources"]["requests"]) for ps in pod_sets]


def test_a_trainjob_read_without_its_runtime_gets_no_workload() -> None:
    assert adm.queued_kind(trainjob())
    assert adm.pod_sets(trainjob()) is None


def test_one_pod_set_per_replicated_job_the_trainer_step_counting_its_nodes() -> None:
    """The runtime's numNodes (3), one GPU a node; the dataset initializer one pod of its own."""
    pod_sets = adm.pod_sets(with_runtime(trainjob(), runtime()))
    assert summary(pod_sets) == [("dataset-initializer", 1, {"cpu": "2"}), ("node", 3, {GPU: "1"})]
    assert pod_sets is not None
    # The Workload keeps each template's own labels and tolerations, which a stop gives back.
    assert pod_sets[1]["template"]["metadata"] == {"labels": {"app": "node"}}
    assert pod_sets[1]["template"]["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]


def test_the_trainjobs_num_nodes_and_resources_per_node_win() -> None:
    job = trainjob({"numNodes": 2, "resourcesPerNode": {"limits": {GPU: "8"}, "requests": {"cpu": "16"}}})
    assert summary(adm.pod_sets(with_runtime(job, runtime(initializer=False)))) == [("node", 2, {GPU: "8", "cpu": "16"})]


def test_an_initializer_with_parallelism_counts_its_pods_and_the_workload_names_the_trainjob() -> None:
    rt = runtime()
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 3
    assert [ps["count"] for ps in adm.pod_sets(with_runtime(trainjob(), rt)) or ()] == [3, 3]
    assert adm.workload_name_of(trainjob()).startswith("trainjob-llama-")


def test_the_trainer_runs_its_steps_as_one_job_each_whatever_replicas_the_runtime_gives() -> None:
    """Kueue counts the JobSet the trainer builds (replicas x pods per replica), and the trainer's
    jobset builder writes ``replicas: 1`` on the trainer step and the labelled initializers: the
    node count (3) and one initializer Job of 2 pods, however many Jobs the runtime asks. A
    replicated Job without a step label keeps its replicas."""
    rt = runtime()
    jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    jobs[0]["replicas"], jobs[0]["template"]["spec"]["parallelism"] = 4, 2
    jobs[1]["replicas"] = 4
    jobs.append({"name": "warmup", "replicas": 2, "template": {"spec": {"parallelism": 3, "template": {"spec": {
        "containers": [{"name": "warmup", "image": "w:1", "resources": {"requests": {"cpu": "1"}}}]}}}}})
    pod_sets = adm.pod_sets(with_runtime(trainjob(), rt))
    assert [(ps["name"], ps["count"]) for ps in pod_sets or ()] == [("dataset-initializer", 2), ("node", 3), ("warmup", 6)]
    # Placement counts the trainer step alike.
    nodes = trainer_nodes(trainjob(), rt)
    assert nodes.count == 3


def kueue_patch(job: dict[str, Any]) -> dict[str, Any]:
    (patch,) = [p for p in job["spec"].get("runtimePatches") or () if p["manager"] == KUEUE_MANAGER]
    return dict(patch)


def test_started_the_trainjob_carries_its_flavors_node_labels_in_kueues_runtime_patch() -> None:
    queued = with_runtime(trainjob(patches=[{"manager": "someone", "trainingRuntimeSpec": {"template": {"spec": {}}}}]), runtime())
    pod_sets = adm.pod_sets(queued)
    assert pod_sets is not None
    workload = {"spec": {"podSets": pod_sets}, "status": {"admissionChecks": [{"name": "budget", "state": "Ready", "podSetUpdates": [
        {"name": "node", "labels": {"budget/set": "node"}, "tolerations": [SPOT]}]}]}}
    source = trainjob(patches=[{"manager": "someone", "trainingRuntimeSpec": {"template": {"spec": {}}}}])
    before = copy.deepcopy(source)
    started = podsets.start(source, workload, {"node": {"pool": "a100"}, "dataset-initializer": {"pool": "a100"}})
    assert source == before
    assert kueue_patch(started)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] == [
        {"name": "dataset-initializer", "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a100"}}}}}},
        {"name": "node", "template": {"spec": {"template": {
            "metadata": {"labels": {"budget/set": "node"}},
            "spec": {"nodeSelector": {"pool": "a100"}, "tolerations": [{"key": "gpu", "operator": "Exists"}, SPOT]}}}}},
    ]
    assert started["spec"]["runtimePatches"][0]["manager"] == "someone"  # the others' patches stay
    # The trainer applies the patch: the nodes' pods ask for the flavor's nodes.
    nodes = trainer_nodes(started, runtime())
    assert nodes.template["spec"]["nodeSelector"] == {"pool": "a100"}
    assert nodes.template["metadata"]["labels"] == {"app": "node", "budget/set": "node"}
    # Kueue's own patch is not the TrainJob's: its pod sets are as before, and match.
    assert adm.pod_sets(with_runtime(started, runtime())) == pod_sets

    stopped = podsets.restore(started, workload)
    assert kueue_patch(stopped)["trainingRuntimeSpec"]["template"]["spec"] == {}
    assert "nodeSelector" not in trainer_nodes(stopped, runtime()).template["spec"]


def test_a_trainjob_is_started_by_its_suspend_flag() -> None:
    job = trainjob()
    assert podsets.startable(job) and podsets.suspended(job)
    assert kueue_jobs.set_job_suspend(job, False) and job["spec"]["suspend"] is False
