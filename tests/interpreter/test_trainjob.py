"""A TrainJob read with its runtime (controlplane.interpreter.trainjob, controlplane.apis.trainer_runtime)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.trainer_runtime import resolved, resolved_runtime, runtime_lookup, with_runtime
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.base import Health
from controlplane.interpreter.dependencies import Dependency, is_dependency

API = "trainer.kubeflow.org/v1alpha1"
TRAINJOB = interpreter_for(API, "TrainJob")


def runtime(kind: str = "ClusterTrainingRuntime", *, num_nodes: int | None = 2, gpus: int = 1,
            gang: bool = True, labelled: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {"spec": {"replicatedJobs": [
            {"name": "dataset-initializer", "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
                "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer", "image": "init"}]}}}}},
            {"name": "node", "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"} if labelled else {}},
                "spec": {"template": {"spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    "containers": [
                        {"name": "node", "image": "pytorch/pytorch:2.5",
                         "resources": {"limits": {"nvidia.com/gpu": gpus, "cpu": "8"}}},
                        {"name": "sidecar", "image": "log", "resources": {"requests": {"cpu": "1"}}},
                    ]}}}}},
        ]}},
        "mlPolicy": {"torch": {"numProcPerNode": "auto"}, **({"numNodes": num_nodes} if num_nodes else {})},
    }
    if gang:
        spec["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    meta: dict[str, Any] = {"name": "torch-distributed"}
    if kind == "TrainingRuntime":
        meta["namespace"] = "ml"
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}


def trainjob(trainer: dict[str, Any] | None = None, *, kind: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": "torch-distributed"}
    if kind:
        ref["kind"] = kind
    spec: dict[str, Any] = {"runtimeRef": ref}
    if trainer is not None:
        spec["trainer"] = trainer
    return {"apiVersion": API, "kind": "TrainJob", "metadata": {"name": "llama", "namespace": "ml"}, "spec": spec}


def test_trainjob_has_an_interpreter() -> None:
    assert TRAINJOB is not None


def test_replicas_are_the_runtimes_num_nodes_unless_the_trainjob_sets_them() -> None:
    assert TRAINJOB is not None
    assert TRAINJOB.replicas(with_runtime(trainjob(), runtime(num_nodes=4))) == 4
    assert TRAINJOB.replicas(with_runtime(trainjob({"numNodes": 3}), runtime(num_nodes=4))) == 3
    # Neither says: the trainer Job's own parallelism, 1 when unset.
    assert TRAINJOB.replicas(with_runtime(trainjob(), runtime(num_nodes=None))) == 1
    components = TRAINJOB.components(with_runtime(trainjob({"numNodes": 3}), runtime()))
    assert [(c.name, c.replicas) for c in components] == [("node", 3)]  # the initializer is not counted


def test_per_node_gpus_are_the_runtimes_node_container_with_the_pod_template_around_it() -> None:
    assert TRAINJOB is not None
    req = TRAINJOB.replica_requirements(with_runtime(trainjob(), runtime(gpus=8))).to_spec()
    assert req["resourceRequest"] == {"nvidia.com/gpu": "8", "cpu": "9"}  # node 8 + the sidecar's 1
    assert req["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_resources_per_node_replace_the_node_containers_resources() -> None:
    assert TRAINJOB is not None
    job = trainjob({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}})
    req = TRAINJOB.replica_requirements(with_runtime(job, runtime(gpus=8))).to_spec()
    # Replaced whole, as the trainer's jobset plugin does: the runtime's cpu limit goes too.
    assert req["resourceRequest"] == {"nvidia.com/gpu": "2", "cpu": "1"}
    # Without limits or requests the runtime's stand.
    same = TRAINJOB.replica_requirements(with_runtime(trainjob({"resourcesPerNode": {}}), runtime(gpus=8))).to_spec()
    assert same["resourceRequest"]["nvidia.com/gpu"] == "8"


def test_a_runtime_without_the_ancestor_label_runs_its_node_job() -> None:
    assert TRAINJOB is not None
    resolved = with_runtime(trainjob({"numNodes": 2}), runtime(labelled=False, gpus=4))
    assert TRAINJOB.replicas(resolved) == 2
    assert TRAINJOB.replica_requirements(resolved).to_spec()["resourceRequest"]["nvidia.com/gpu"] == "4"


@pytest.mark.parametrize("gang", [True, False])
def test_a_trainjob_is_placed_whole_with_or_without_a_pod_group_policy(gang: bool) -> None:
    assert TRAINJOB is not None
    resolved = with_runtime(trainjob(), runtime(gang=gang))
    assert TRAINJOB.is_gang(resolved)
    assert TRAINJOB.with_replicas(resolved, 1) == resolved  # never split


def test_read_without_its_runtime_it_counts_what_the_trainjob_says() -> None:
    assert TRAINJOB is not None
    alone = trainjob({"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}})
    assert TRAINJOB.replicas(alone) == 2
    assert TRAINJOB.replica_requirements(alone).to_spec()["resourceRequest"] == {"nvidia.com/gpu": "4"}
    assert TRAINJOB.replicas(trainjob()) == 1


def test_a_namespaced_runtime_is_a_dependency_a_cluster_runtime_is_not() -> None:
    assert TRAINJOB is not None
    namespaced = trainjob(kind="TrainingRuntime")
    namespaced["spec"]["initializer"] = {"dataset": {"secretRef": {"name": "hf-token"}}, "model": {}}
    assert TRAINJOB.dependencies(namespaced) == [
        Dependency("Secret", "hf-token"), Dependency("TrainingRuntime", "torch-distributed", API),
    ]
    assert TRAINJOB.dependencies(trainjob()) == []  # ClusterTrainingRuntime by default
    assert is_dependency(API, "TrainingRuntime")
    assert not is_dependency(API, "ClusterTrainingRuntime")
    assert not is_dependency("example.com/v1", "TrainingRuntime")


def test_the_resolved_copy_is_a_copy() -> None:
    job, rt = trainjob({"numNodes": 2}), runtime()
    before = copy.deepcopy((job, rt))
    assert TRAINJOB is not None
    TRAINJOB.replica_requirements(with_runtime(job, rt))
    assert (job, rt) == before


def status(*conditions: tuple[str, str], active: int = 0) -> dict[str, Any]:
    return {
        "conditions": [{"type": t, "status": s, "reason": t, "message": t} for t, s in conditions],
        "jobsStatus": [{"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": active, "suspended": 0}],
    }


@pytest.mark.parametrize(
    ("conditions", "health"),
    [
        ((), Health.UNKNOWN),
        ((("Created", "True"),), Health.HEALTHY),
        ((("Created", "True"), ("Complete", "True")), Health.HEALTHY),
        ((("Created", "True"), ("Failed", "True")), Health.UNHEALTHY),
    ],
)
def test_health_by_the_trainers_conditions(conditions: tuple[tuple[str, str], ...], health: Health) -> None:
    assert TRAINJOB is not None
    assert TRAINJOB.health_of({"kind": "TrainJob", "status": status(*conditions)}) is health


def test_status_merges_conditions_and_sums_jobs_status() -> None:
    assert TRAINJOB is not None
    done = status(("Created", "True"), ("Complete", "True"))
    done["jobsStatus"][0]["succeeded"] = 1
    running = status(("Created", "True"), active=1)
    merged = TRAINJOB.aggregate_status(trainjob(), [("a", done), ("b", running)])
    assert merged["jobsStatus"] == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 1, "suspended": 0}]
    assert {c["type"] for c in merged["conditions"]} >= {"Created"}
    failed = TRAINJOB.aggregate_status(trainjob(), [("a", done), ("b", status(("Failed", "True")))])
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in failed["conditions"])
    assert TRAINJOB.aggregate_status(trainjob(), [("a", None)]) == {}


def test_a_listed_runtime_is_found_as_the_trainjob_names_it_and_other_kinds_are_read_as_they_are() -> None:
    """The waste report's lookup over listed runtimes: a TrainingRuntime in the TrainJob's namespace
    only, a ClusterTrainingRuntime by name; the copy is the one the interpreter reads."""
    namespaced = runtime("TrainingRuntime", num_nodes=3)
    elsewhere = copy.deepcopy(namespaced)
    elsewhere["metadata"]["namespace"] = "research"
    lookup = runtime_lookup([elsewhere, runtime(num_nodes=4)])
    job = trainjob(kind="TrainingRuntime")
    assert resolved_runtime(resolved(job, lookup)) is None  # only in another namespace
    assert TRAINJOB is not None and TRAINJOB.replicas(resolved(job, runtime_lookup([namespaced]))) == 3
    assert TRAINJOB.replicas(resolved(trainjob(), lookup)) == 4  # the ClusterTrainingRuntime
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "ml"}}
    assert resolved(deployment, lookup) is deployment
