"""A propagated Pod's hub status, folded from its members' copies as Karmada's
``aggregatePodStatus`` does: the worst phase and every member's container statuses."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.interpreter import interpreter_for

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
