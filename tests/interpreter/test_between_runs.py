"""When a gang is between runs (the interpreters' ``between_runs``): the only time the hub may
move it whole. Not started, or restarting after a failed attempt; never while its pods run,
never once finished."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.interpreter import interpreter_for


def cond(kind: str, status: str = "True") -> dict[str, str]:
    return {"type": kind, "status": status}


def kubeflow(*conditions: dict[str, str], active: int = 0, failed: int = 0) -> dict[str, Any]:
    return {
        "conditions": list(conditions),
        "replicaStatuses": {"Master": {"active": min(active, 1)}, "Worker": {"active": max(active - 1, 0), "failed": failed}},
    }


@pytest.mark.parametrize(
    ("status", "between"),
    [
        (None, True),  # no status reported yet: none of its pods created
        ({}, True),
        (kubeflow(cond("Created")), True),  # created, all pods pending
        (kubeflow(cond("Created"), active=2), False),  # pods running before the operator says Running
        (kubeflow(cond("Created"), cond("Running")), False),
        (kubeflow(cond("Created"), cond("Running", "False"), cond("Restarting"), active=3, failed=1), True),
        (kubeflow(cond("Created"), cond("Restarting", "False"), cond("Running")), False),
        (kubeflow(cond("Created"), cond("Succeeded")), False),
        (kubeflow(cond("Created"), cond("Restarting"), cond("Failed")), False),
    ],
)
@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"])
def test_kubeflow_jobs(kind: str, status: dict[str, Any] | None, between: bool) -> None:
    interpreter = interpreter_for("kubeflow.org/v1", kind)
    assert interpreter is not None
    assert interpreter.between_runs(status) is between


@pytest.mark.parametrize(
    ("status", "between"),
    [
        (None, True),
        ({"active": 4, "ready": 0}, True),  # pods pending
        ({"active": 4, "ready": 2}, False),  # pods running
        ({"active": 4, "failed": 2}, True),  # retrying after failed pods, none ready
        ({"active": 3, "succeeded": 1}, False),  # a completion would be lost
        ({"succeeded": 4, "conditions": [cond("Complete")]}, False),
        ({"failed": 6, "conditions": [cond("Failed")]}, False),
    ],
)
def test_gang_job(status: dict[str, Any] | None, between: bool) -> None:
    interpreter = interpreter_for("batch/v1", "Job")
    assert interpreter is not None
    assert interpreter.between_runs(status) is between


@pytest.mark.parametrize(("api_version", "kind"), [("apps/v1", "Deployment"), ("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster")])
def test_kinds_that_cannot_tell_never_are(api_version: str, kind: str) -> None:
    interpreter = interpreter_for(api_version, kind)
    assert interpreter is not None
    assert interpreter.between_runs(None) is False
