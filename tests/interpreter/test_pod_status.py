"""A propagated Pod's and PersistentVolumeClaim's hub status, folded from the members' copies as
Karmada folds them: a Pod's worst phase and every member's container statuses
(``aggregatePodStatus``), a claim's Bound unless a member's is not
(``aggregatePersistentVolumeClaimStatus``)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.interpreter import interpreter_for
from controlplane.interpreter.native import status_interpreter_for

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleep", "namespace": "default"}}


def member(phase: str, *, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    state = {"running": {"startedAt": "2026-12-06T05:00:00Z"}} if phase == "Running" else {"terminated": {"exitCode": 0, "reason": "Completed"}}
    return {
        "phase": phase, "qosClass": "Burstable", "podIP": "10.0.0.7", "hostIP": "10.1.0.2",
        "conditions": [{"type": "Ready", "status": str(ready)}],
        "containerStatuses": [{
            "name": "sleep", "image": "busybox", "imageID": "docker.io/library/busybox@sha256:1", "ready": ready,
            "restartCount": restarts, "started": True, "state": state, "lastState": {}, "containerID": "containerd://1",
        }],
    }


@pytest.mark.parametrize(
    ("members", "phase"),
    [
        ([("member1", member("Running"))], "Running"),
        ([("member1", member("Running")), ("member2", member("Succeeded"))], "Running"),
        ([("member1", member("Succeeded")), ("member2", member("Succeeded"))], "Succeeded"),
        ([("member1", member("Running")), ("member2", None)], "Pending"),  # not reported yet
        ([("member1", member("Pending")), ("member2", member("Running"))], "Pending"),
        ([("member1", member("Failed")), ("member2", member("Pending"))], "Failed"),
    ],
)
def test_the_worst_phase_wins(members: list[tuple[str, dict[str, Any] | None]], phase: str) -> None:
    folding = interpreter_for("v1", "Pod")
    assert folding is not None
    assert folding.aggregate_status(POD, members)["phase"] == phase


def test_each_members_container_statuses_are_kept_without_what_is_of_one_node() -> None:
    folding = interpreter_for("v1", "Pod")
    assert folding is not None
    status = folding.aggregate_status(POD, [("member1", member("Running", restarts=2)), ("member2", member("Running", ready=False))])
    assert status == {
        "phase": "Running",
        "containerStatuses": [
            {"name": "sleep", "image": "busybox", "imageID": "docker.io/library/busybox@sha256:1", "restartCount": 2,
             "ready": True, "state": {"running": {"startedAt": "2026-12-06T05:00:00Z"}}},
            {"name": "sleep", "image": "busybox", "imageID": "docker.io/library/busybox@sha256:1", "restartCount": 0,
             "ready": False, "state": {"running": {"startedAt": "2026-12-06T05:00:00Z"}}},
        ],
    }


def test_no_member_reported_yet() -> None:
    folding = interpreter_for("v1", "Pod")
    assert folding is not None
    assert folding.aggregate_status(POD, [("member1", None)]) == {"phase": "Pending"}


@pytest.mark.parametrize(
    ("phases", "phase"),
    [
        (["Bound", "Bound"], "Bound"),
        (["Bound", "Pending"], "Pending"),
        (["Pending", "Lost", "Bound"], "Lost"),
        (["Bound", None], "Bound"),  # a member that has not reported is left out, as in Karmada
    ],
)
def test_a_claims_hub_phase_is_bound_only_when_every_member_bound_it(phases: list[str | None], phase: str) -> None:
    folding = status_interpreter_for("", "PersistentVolumeClaim")
    assert folding is not None
    members = [(f"member{i}", None if p is None else {"phase": p, "capacity": {"storage": "10Gi"}}) for i, p in enumerate(phases)]
    assert folding.aggregate_status({"kind": "PersistentVolumeClaim"}, members) == {"phase": phase}
    assert folding.aggregate_status({"kind": "PersistentVolumeClaim"}, [("member1", None)]) == {}
