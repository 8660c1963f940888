"""Whether Kueue's MultiKueue dispatches a job, in its adapters' words (``IsJobManagedByKueue``)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission.multikueue import unmanaged_message
from controlplane.apis.kueue_jobs import multikueue_unmanaged

MK = "kueue.x-k8s.io/multikueue"


def obj(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": spec}


@pytest.mark.parametrize(("job", "why"), [
    (obj("batch/v1", "Job", {"managedBy": MK}), None),
    (obj("batch/v1", "Job", {}), 'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""'),
    (obj("jobset.x-k8s.io/v1alpha2", "JobSet", {"managedBy": "jobset.sigs.k8s.io/jobset-controller"}),
     'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not "jobset.sigs.k8s.io/jobset-controller"'),
    (obj("ray.io/v1", "RayJob", {"managedBy": 'odd"name'}),
     'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not "odd\\"name"'),
    # The training operator's kinds keep it in runPolicy; only MPIJob's adapter says so.
    (obj("kubeflow.org/v1", "PyTorchJob", {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}),
     'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not "kubeflow.org/training-operator"'),
    (obj("kubeflow.org/v2beta1", "MPIJob", {"runPolicy": {}}),
     'Expecting spec.runPolicy.managedBy to be "kueue.x-k8s.io/multikueue" not ""'),
    (obj("kubeflow.org/v2beta1", "MPIJob", {"runPolicy": {"managedBy": MK}}), None),
    (obj("apps/v1", "Deployment", {"managedBy": "other"}), None),  # no managedBy of its kind: the hub's to dispatch
])
def test_a_job_is_multikueues_only_when_its_managed_by_says_so(job: dict[str, Any], why: str | None) -> None:
    assert multikueue_unmanaged(job) == why


def test_the_rejection_names_the_owner_as_kueue_does() -> None:
    assert unmanaged_message("Expecting x") == "The owner is not managed by Kueue: Expecting x"
