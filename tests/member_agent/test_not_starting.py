"""Pods a member placed but cannot start are named in the Work status (``notStarting``), from
the agent's trimmed pod cache, and the hub turns a new reason into a Warning Event on its
workload that says what to do."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.pods import stuck_container
from controlplane.apis.work_v1alpha1 import WorkStatus
from controlplane.controllers.notstarting import (
    MissingDependency,
    dependency_of,
    missing_dependency,
    pods_not_starting_message,
    what_is_said,
)
from member_agent import capacity
from member_agent.applying import ManifestResult, work_status
from member_agent.manifests import Identifier
from member_agent.podstates import PendingPods, failed_create_summary, not_starting_summary

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
REFUSED = (
    'pods "infer-5cf-" is forbidden: error looking up service account ml/runner: serviceaccount "runner" not found'
)
#: The member API's refusal of a pod whose PriorityClass it lacks (kube's Priority admission).
PRIORITY_REFUSED = 'pods "infer-5cf-" is forbidden: no PriorityClass with name high was found'
#: kube-scheduler's words for a pod whose claim does not exist, and for one whose claim is unbound.
NO_CLAIM = (
    '0/3 nodes are available: persistentvolumeclaim "data" not found. '
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)
UNBOUND = (
    "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)
FAST_MISSING = {"name": "data", "storageClassName": "fast", "message": 'storageclass.storage.k8s.io "fast" not found'}


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
            {"pods": 2, "reason": "FailedCreate", "message": REFUSED},
            f"cluster onprem-a100: 2 pod(s) cannot be created: FailedCreate: {REFUSED} (propagate ServiceAccount runner "
            "to the cluster: select it in a policy, or set propagateDeps: true in the workload's policy)",
        ),
        (
            {"pods": 3, "reason": "FailedCreate", "message": PRIORITY_REFUSED},
            f"cluster onprem-a100: 3 pod(s) cannot be created: FailedCreate: {PRIORITY_REFUSED} (propagate "
            "PriorityClass high to the cluster: select it in a ClusterPropagationPolicy)",
        ),
        (
            {"pods": 2, "reason": "Unschedulable", "message": NO_CLAIM},
            f"cluster onprem-a100: 2 pod(s) cannot be scheduled: Unschedulable: {NO_CLAIM} (propagate "
            "PersistentVolumeClaim data to the cluster: select it in a policy, or set propagateDeps: true in the "
            "workload's policy)",
        ),
        (
            {"pods": 1, "reason": "Unschedulable", "message": UNBOUND, "claim": FAST_MISSING},
            f"cluster onprem-a100: 1 pod(s) cannot be scheduled: Unschedulable: {UNBOUND}; PersistentVolumeClaim "
            'data: storageclass.storage.k8s.io "fast" not found (propagate StorageClass fast to the cluster: '
            "select it in a ClusterPropagationPolicy)",
        ),
        (
            {"pods": 1, "reason": "ImagePullBackOff", "message": 'Back-off pulling image "vllm:nope"'},
            'cluster onprem-a100: 1 pod(s) cannot start: ImagePullBackOff: Back-off pulling image "vllm:nope"',
        ),
    ],
)
def test_the_hubs_event_says_what_the_member_said_and_what_to_do(stuck: dict[str, Any], message: str) -> None:
    assert pods_not_starting_message("onprem-a100", stuck) == message


def _refusing(replicas: int, created: int, *, failing: bool = True) -> dict[str, Any]:
    conditions = [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]
    if failing:
        conditions.append({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": REFUSED})
    return {
        "apiVersion": "apps/v1", **DEPLOYMENT, "spec": {"replicas": replicas},
        "status": {"replicas": created, "conditions": conditions},
    }


@pytest.mark.parametrize(
    ("deployment", "summary"),
    [
        (_refusing(3, 0), {"pods": 3, "reason": "FailedCreate", "message": REFUSED}),
        (_refusing(3, 1), {"pods": 2, "reason": "FailedCreate", "message": REFUSED}),
        (_refusing(3, 3), None),
        (_refusing(3, 0, failing=False), None),
    ],
)
def test_pods_the_members_api_refuses_are_counted_from_replica_failure(
    deployment: dict[str, Any], summary: dict[str, Any] | None
) -> None:
    assert failed_create_summary(deployment) == summary


def test_the_work_status_names_pods_the_member_refuses_to_create() -> None:
    ident = Identifier("apps", "v1", "Deployment", "ml", "infer", 0)
    work = {"metadata": {"name": "w", "namespace": "gpufed-es-east", "generation": 1}}
    result = ManifestResult(identifier=ident, applied=True, live=_refusing(2, 0))
    status = work_status(work, [result], [], now="2026-01-01T00:00:00Z")
    WorkStatus.model_validate(status)  # the hub's Work model holds what the agent writes
    [entry] = status["manifestStatuses"]
    assert entry["notStarting"] == {"pods": 2, "reason": "FailedCreate", "message": REFUSED}


@pytest.mark.parametrize(
    ("message", "dependency"),
    [
        ('configmap "app-config" not found', MissingDependency("v1", "ConfigMap", "app-config")),
        ('secret "hf-token" not found', MissingDependency("v1", "Secret", "hf-token")),
        ('pods "r-1-" is forbidden: error looking up service account ml/runner: serviceaccount "runner" not found',
         MissingDependency("v1", "ServiceAccount", "runner")),
        (PRIORITY_REFUSED, MissingDependency("scheduling.k8s.io/v1", "PriorityClass", "high")),
        (NO_CLAIM, MissingDependency("v1", "PersistentVolumeClaim", "data")),
        (UNBOUND, None),
        ("couldn't find key token in Secret ml/hf", None),
        ('Back-off pulling image "vllm:nope"', None),
    ],
)
def test_the_missing_object_is_read_from_the_members_words(message: str, dependency: MissingDependency | None) -> None:
    assert missing_dependency(message) == dependency


def test_an_object_the_hub_lacks_too_is_to_be_created_first() -> None:
    """Propagating cannot help when the hub has no such ConfigMap: the Event says to create it."""
    stuck = {"pods": 1, "reason": "CreateContainerConfigError", "message": MISSING}
    assert pods_not_starting_message("onprem-a100", stuck, on_hub=False) == (
        'cluster onprem-a100: 1 pod(s) cannot start: CreateContainerConfigError: configmap "app-config" not found '
        "(ConfigMap app-config is not on the hub either: create it in the workload's namespace, then select it in "
        "a policy or set propagateDeps: true in the workload's policy)"
    )


def test_a_priority_class_the_hub_lacks_too_is_to_be_created_on_the_hub() -> None:
    stuck = {"pods": 2, "reason": "FailedCreate", "message": PRIORITY_REFUSED}
    assert pods_not_starting_message("onprem-a100", stuck, on_hub=False) == (
        f"cluster onprem-a100: 2 pod(s) cannot be created: FailedCreate: {PRIORITY_REFUSED} (PriorityClass high is "
        "not on the hub either: create it on the hub, then select it in a ClusterPropagationPolicy)"
    )


def test_a_storage_class_the_hub_lacks_too_is_to_be_created_on_the_hub() -> None:
    stuck = {"pods": 1, "reason": "Unschedulable", "message": UNBOUND, "claim": FAST_MISSING}
    assert dependency_of(stuck) == MissingDependency("storage.k8s.io/v1", "StorageClass", "fast")
    assert pods_not_starting_message("onprem-a100", stuck, on_hub=False).endswith(
        '; PersistentVolumeClaim data: storageclass.storage.k8s.io "fast" not found (StorageClass fast is not on the '
        "hub either: create it on the hub, then select it in a ClusterPropagationPolicy)"
    )


def test_another_missing_class_for_the_same_message_is_news() -> None:
    """The scheduler's words stay the same when the claim's trouble changes: the hub compares both."""
    before = {"pods": 1, "reason": "Unschedulable", "message": UNBOUND, "claim": FAST_MISSING}
    after = {**before, "claim": {**FAST_MISSING, "storageClassName": "faster",
                                 "message": 'storageclass.storage.k8s.io "faster" not found'}}
    assert what_is_said(before) != what_is_said(after)
    assert what_is_said(before) == what_is_said(dict(before))
