"""A Job's ``Suspended`` condition as kube's Job controller keeps it for ``spec.suspend``: the hub
sets it on a Job it holds, so ``kubectl get jobs`` says ``Suspended`` as on one cluster."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.interpreter.job import suspension_condition

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
