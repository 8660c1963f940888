"""Pods a member placed but cannot start are named in the Work status (``notStarting``), from
the agent's trimmed pod cache, and the hub turns a new reason into a Warning Event on its
workload that says what to do."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.pods import stuck_container
from controlplane.controllers.status import pods_not_starting_message
from member_agent import capacity
from member_agent.applying import PendingPods, not_starting_summary

DEPLOYMENT = {"kind": "Deployment", "metadata": {"name": "infer", "namespace": "ml"}}
MISSING = 'configmap "app-config" not found'


def _pod(name: str, *, node: str | None = "n1", phase: str = "Pending", waiting: dict[str, str] | None = None,
         owner: str = "infer-5cf") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if waiting is not None:
        status["containerStatuses"] = [{"name": "server", "ready": False, "state": {"waiting": waiting}}]
    return {
        "metadata": {"name": name, "namespace": "ml", "labels": {"pod-template-hash": owner.rpartition("-")[2]},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": owner, "controller": True}]},
        "spec": {"containers": [{"name": "server", "image": "vllm"}], **({"nodeName": node} if node else {})},
        "status": status,
    }


CONFIG_ERROR = {"reason": "CreateContainerConfigError", "message": MISSING}


@pytest.mark.parametrize(
    ("pod", "stuck"),
    [
        pytest.param(_pod("a", waiting=CONFIG_ERROR), True, id="config-error"),
        pytest.param(_pod("a", waiting={"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}),
                     True, id="image-pull"),
        pytest.param(_pod("a", waiting={"reason": "ContainerCreating"}), False, id="still-creating"),
        pytest.param(_pod("a", node=None, waiting=CONFIG_ERROR), False, id="not-placed"),
        pytest.param(_pod("a", phase="Failed", waiting=CONFIG_ERROR), False, id="finished"),
        pytest.param(_pod("a", phase="Running"), False, id="running"),
    ],
)
def test_a_pod_is_stuck_only_when_placed_and_waiting_for_a_reason_that_does_not_pass(
    pod: dict[str, Any], stuck: bool
) -> None:
    assert (stuck_container(pod) is not None) is stuck
    # The agent's cache keeps what the summary reads, and the pending-pod index holds it.
    cached = capacity.trim_pod(pod)
    assert (stuck_container(cached) is not None) is stuck
    pending = PendingPods()
    pending.changed("ml/a", cached)
    held = list(pending("ml"))
    assert bool(held) is (stuck or pod["spec"].get("nodeName") is None)


def test_the_work_status_counts_the_workloads_stuck_pods_and_says_why() -> None:
    pods = [capacity.trim_pod(p) for p in (
        _pod("infer-5cf-a", waiting=CONFIG_ERROR),
        _pod("infer-5cf-b", waiting=CONFIG_ERROR),
        _pod("infer-5cf-c", waiting={"reason": "ErrImagePull", "message": "not found"}),
        _pod("infer-5cf-d", phase="Running"),
        _pod("other-77a-a", owner="other-77a", waiting=CONFIG_ERROR),
    )]
    assert not_starting_summary(DEPLOYMENT, pods) == {
        "pods": 3, "reason": "CreateContainerConfigError", "message": MISSING,
    }
    assert not_starting_summary(DEPLOYMENT, [capacity.trim_pod(_pod("infer-5cf-d", phase="Running"))]) is None


@pytest.mark.parametrize(
    ("stuck", "message"),
    [
        (
            {"pods": 2, "reason": "CreateContainerConfigError", "message": MISSING},
            'cluster onprem-a100: 2 pod(s) cannot start: CreateContainerConfigError: configmap "app-config" not '
            "found (propagate ConfigMap app-config to the cluster: select it in a policy, or set propagateDeps: "
            "true in the workload's policy)",
        ),
        (
            {"pods": 1, "reason": "CreateContainerConfigError", "message": 'secret "hf-token" not found'},
            'cluster onprem-a100: 1 pod(s) cannot start: CreateContainerConfigError: secret "hf-token" not found '
            "(propagate Secret hf-token to the cluster: select it in a policy, or set propagateDeps: true in the "
            "workload's policy)",
        ),
        (
            {"pods": 1, "reason": "ImagePullBackOff", "message": 'Back-off pulling image "vllm:nope"'},
            'cluster onprem-a100: 1 pod(s) cannot start: ImagePullBackOff: Back-off pulling image "vllm:nope"',
        ),
    ],
)
def test_the_hubs_event_says_what_the_member_said_and_what_to_do(stuck: dict[str, Any], message: str) -> None:
    assert pods_not_starting_message("onprem-a100", stuck) == message
