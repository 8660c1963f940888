"""A Job's ``Suspended`` condition as kube's Job controller keeps it for ``spec.suspend``, a
JobSet's as the JobSet controller keeps it, a Kubeflow job's as the training operator keeps it for
``spec.runPolicy.suspend``, and a RayJob's and a RayCluster's status as KubeRay keeps it: the hub
sets it on a job it holds, so ``kubectl get`` says ``Suspended`` as on one cluster."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.interpreter.job import suspension_condition
from controlplane.interpreter.jobset import suspension_condition as jobset_suspension
from controlplane.interpreter.kubeflow import suspension_condition as kubeflow_suspension
from controlplane.interpreter.raycluster import suspension_status as raycluster_suspension
from controlplane.interpreter.rayjob import suspension_deployment_status

SUSPENDED = {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"}
RESUMED = {"type": "Suspended", "status": "False", "reason": "JobResumed", "message": "Job resumed"}


def job(*, suspend: bool | None, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec = {} if suspend is None else {"suspend": suspend}
    return {"apiVersion": "batch/v1", "kind": "Job", "spec": spec, "status": {"conditions": conditions or []}}


@pytest.mark.parametrize(
    ("obj", "wanted"),
    [
        (job(suspend=True), SUSPENDED),
        (job(suspend=True, conditions=[SUSPENDED]), SUSPENDED),
        (job(suspend=False, conditions=[SUSPENDED]), RESUMED),
        (job(suspend=False), None),  # never suspended: nothing to say
        (job(suspend=None), None),
        (job(suspend=False, conditions=[RESUMED]), None),
        (job(suspend=True, conditions=[{"type": "Complete", "status": "True"}]), None),  # finished: left alone
        (job(suspend=True, conditions=[{"type": "Failed", "status": "True"}]), None),
    ],
)
def test_the_condition_follows_spec_suspend(obj: dict[str, Any], wanted: dict[str, str] | None) -> None:
    assert suspension_condition(obj) == wanted


def pytorchjob(*, suspend: bool | None, conditions: list[dict[str, Any]] | None = None, api_version: str = "kubeflow.org/v1") -> dict[str, Any]:
    spec: dict[str, Any] = {} if suspend is None else {"runPolicy": {"suspend": suspend}}
    return {"apiVersion": api_version, "kind": "PyTorchJob", "metadata": {"name": "mnist"}, "spec": spec,
            "status": {"conditions": conditions or []}}


KF_SUSPENDED = {"type": "Suspended", "status": "True", "reason": "PyTorchJobSuspended", "message": "PyTorchJob mnist is suspended."}
KF_RESUMED = {"type": "Suspended", "status": "False", "reason": "PyTorchJobResumed", "message": "PyTorchJob mnist is resumed."}


@pytest.mark.parametrize(
    ("obj", "wanted"),
    [
        (pytorchjob(suspend=True), KF_SUSPENDED),
        (pytorchjob(suspend=False, conditions=[KF_SUSPENDED]), KF_RESUMED),
        (pytorchjob(suspend=None), None),
        (pytorchjob(suspend=True, conditions=[{"type": "Succeeded", "status": "True"}]), None),
        (pytorchjob(suspend=True, api_version="kubeflow.org/v2beta1"), None),  # another operator's words
    ],
)
def test_a_kubeflow_jobs_condition_follows_run_policy_suspend(obj: dict[str, Any], wanted: dict[str, str] | None) -> None:
    assert kubeflow_suspension(obj) == wanted


@pytest.mark.parametrize(
    ("suspend", "current", "wanted"),
    [
        (True, None, "Suspended"),  # created suspended: KubeRay goes to Suspended at once
        (True, "Suspended", "Suspended"),
        (False, "Suspended", "New"),  # resumed
        (False, None, None),
        (False, "Running", None),
        (True, "Complete", None),
        (True, "Failed", None),
    ],
)
def test_a_rayjobs_deployment_status_follows_spec_suspend(suspend: bool, current: str | None, wanted: str | None) -> None:
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"suspend": suspend},
           "status": {} if current is None else {"jobDeploymentStatus": current}}
    assert suspension_deployment_status(job) == wanted


JS_SUSPENDED = {"type": "Suspended", "status": "True", "reason": "SuspendedJobs", "message": "jobset is suspended"}
JS_RESUMED = {"type": "Suspended", "status": "False", "reason": "ResumeJobs", "message": "jobset is resumed"}


@pytest.mark.parametrize(
    ("suspend", "status", "wanted"),
    [
        (True, {}, JS_SUSPENDED),
        (True, {"conditions": [JS_SUSPENDED]}, JS_SUSPENDED),
        (False, {"conditions": [JS_SUSPENDED]}, JS_RESUMED),
        (False, {}, None),  # never suspended: the controller adds no False condition
        (None, {"conditions": [JS_RESUMED]}, None),
        (True, {"conditions": [{"type": "Completed", "status": "True"}]}, None),  # finished: left alone
        (True, {"terminalState": "Failed"}, None),
    ],
)
def test_a_jobsets_condition_follows_spec_suspend(suspend: bool | None, status: dict[str, Any], wanted: dict[str, str] | None) -> None:
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "spec": {} if suspend is None else {"suspend": suspend}, "status": status}
    assert jobset_suspension(jobset) == wanted


RC_SUSPENDED = [
    {"type": "RayClusterSuspended", "status": "True", "reason": "RayClusterSuspended", "message": ""},
    {"type": "RayClusterSuspending", "status": "False", "reason": "RayClusterSuspending", "message": ""},
]
RC_RESUMED = [{"type": "RayClusterSuspended", "status": "False", "reason": "RayClusterSuspended", "message": ""}]


@pytest.mark.parametrize(
    ("suspend", "status", "wanted"),
    [
        (True, {}, ("suspended", RC_SUSPENDED)),  # created suspended: no pod ever runs
        (True, {"state": "suspended", "conditions": RC_SUSPENDED}, ("suspended", RC_SUSPENDED)),
        (False, {"state": "suspended", "conditions": RC_SUSPENDED}, (None, RC_RESUMED)),  # state kept until ready
        (None, {"state": "suspended", "conditions": RC_SUSPENDED}, (None, [])),  # KubeRay resumes on false only
        (False, {"conditions": RC_RESUMED}, (None, [])),
        (False, {}, (None, [])),
    ],
)
def test_a_rayclusters_state_and_conditions_follow_spec_suspend(
    suspend: bool | None, status: dict[str, Any], wanted: tuple[str | None, list[dict[str, str]]],
) -> None:
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "spec": {} if suspend is None else {"suspend": suspend}, "status": status}
    assert raycluster_suspension(cluster) == wanted
