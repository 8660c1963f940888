"""The ResourceInterpreterCustomizations in examples/interpreter-customizations/: each validates
as the hub validates it on apply, and each hook does on a sample object (written from the kind's
public schema) what the file's comments promise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apis.work_v1alpha1 import Health
from controlplane.interpreter.customization_validation import validate_customization
from controlplane.interpreter.customized import Customization, CustomizedInterpreter, ScriptFailure
from controlplane.interpreter.dependencies import Dependency

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "interpreter-customizations"


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(doc, dict)
    return doc


def interpreter(name: str, failures: list[ScriptFailure]) -> CustomizedInterpreter:
    return CustomizedInterpreter(Customization.from_object(load(name)), None, failures.append)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_validates(name: str) -> None:
    assert validate_customization(load(name)) == []


def trainjob(nodes: int | None = 4) -> dict[str, Any]:
    trainer: dict[str, Any] = {
        "image": "pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime",
        "command": ["torchrun", "train.py"],
        "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "32", "memory": "256Gi"}},
    }
    if nodes is not None:
        trainer["numNodes"] = nodes
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "team"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer},
    }


def trainjob_status(*, ready: int, complete: bool = False, failed: bool = False) -> dict[str, Any]:
    conditions = []
    if complete:
        conditions.append({"type": "Complete", "status": "True", "reason": "JobsCompleted"})
    if failed:
        conditions.append({"type": "Failed", "status": "True", "reason": "JobFailed", "message": "node-0 OOM"})
    return {
        "conditions": conditions,
        "jobsStatus": [{"name": "node", "ready": ready, "succeeded": 0, "failed": 0, "active": ready, "suspended": 0}],
        "extra": "dropped by ReflectStatus",
    }


def test_trainjob_replicas_requirements_and_share() -> None:
    failures: list[ScriptFailure] = []
    interp = interpreter("kubeflow-trainjob.yaml", failures)
    assert interp.replicas(trainjob(4)) == 4
    assert interp.replicas(trainjob(None)) == 1
    req = interp.replica_requirements(trainjob())
    assert req.gpu_resources == {"nvidia.com/gpu": 8}
    assert dict(req.resources)["cpu"] == 32_000  # requests win, limits fill the rest
    share = interp.with_replicas(trainjob(4), 2)
    assert share["spec"]["trainer"]["numNodes"] == 2
    assert share["spec"]["runtimeRef"] == {"name": "torch-distributed"}
    assert failures == []


def test_trainjob_status_and_health() -> None:
    failures: list[ScriptFailure] = []
    interp = interpreter("kubeflow-trainjob.yaml", failures)
    status = interp.aggregate_status(
        trainjob(), [("east", trainjob_status(ready=2, complete=True)), ("west", trainjob_status(ready=1))]
    )
    assert status["jobsStatus"] == [{"name": "node", "ready": 3, "succeeded": 0, "failed": 0, "active": 3, "suspended": 0}]
    assert "conditions" not in status  # west has not completed
    done = interp.aggregate_status(
        trainjob(), [("east", trainjob_status(ready=0, complete=True)), ("west", trainjob_status(ready=0, complete=True))]
    )
    assert [c["type"] for c in done["conditions"]] == ["Complete"]
    broken = interp.aggregate_status(trainjob(), [("east", trainjob_status(ready=1, failed=True)), ("west", None)])
    assert broken["conditions"][0]["type"] == "Failed" and broken["conditions"][0]["message"] == "east: node-0 OOM"
    assert interp.health(trainjob_status(ready=1)) is Health.HEALTHY
    assert interp.health(trainjob_status(ready=0, failed=True)) is Health.UNHEALTHY
    assert failures == []


def volcano_job() -> dict[str, Any]:
    def task(name: str, replicas: int, gpus: int) -> dict[str, Any]:
        resources = {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}}
        if gpus:
            resources["limits"]["nvidia.com/gpu"] = str(gpus)
        return {
            "name": name,
            "replicas": replicas,
            "template": {
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": name, "image": "trainer:1", "resources": resources,
                                    "envFrom": [{"configMapRef": {"name": f"{name}-config"}}]}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "dataset"}}],
                }
            },
        }

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "mpi", "namespace": "team"},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "queue": "default",
            "tasks": [task("mpimaster", 1, 0), task("mpiworker", 2, 4)],
        },
    }


def test_volcano_job_components_and_replicas() -> None:
    failures: list[ScriptFailure] = []
    interp = interpreter("volcano-job.yaml", failures)
    components = interp.components(volcano_job())
    assert [(c.name, c.replicas) for c in components] == [("mpimaster", 1), ("mpiworker", 2)]
    assert components[1].requirements.gpu_resources == {"nvidia.com/gpu": 4}
    assert components[0].requirements.gpu_resources == {}
    assert interp.replicas(volcano_job()) == 3
    assert interp.replica_requirements(volcano_job()).gpu_resources == {"nvidia.com/gpu": 4}
    assert interp.with_replicas(volcano_job(), 3) == volcano_job()  # a gang: never split
    assert failures == []


def test_volcano_job_status_health_and_dependencies() -> None:
    failures: list[ScriptFailure] = []
    interp = interpreter("volcano-job.yaml", failures)
    running = {"state": {"phase": "Running"}, "running": 3, "pending": 0, "minAvailable": 3}
    status = interp.aggregate_status(volcano_job(), [("east", running)])
    assert status["state"] == {"phase": "Running"} and status["running"] == 3 and status["minAvailable"] == 3
    failed = interp.aggregate_status(volcano_job(), [("east", running), ("west", {"state": {"phase": "Failed"}, "failed": 1})])
    assert failed["state"]["phase"] == "Failed" and failed["failed"] == 1
    assert interp.health(running) is Health.HEALTHY
    assert interp.health({"state": {"phase": "Aborted"}}) is Health.UNHEALTHY
    assert interp.dependencies(volcano_job()) == [
        Dependency("ConfigMap", "mpimaster-config"),
        Dependency("ConfigMap", "mpiworker-config"),
        Dependency("PersistentVolumeClaim", "dataset"),
    ]
    assert failures == []
