"""The typed views of single kinds (FlowSchema, WorkloadRebalancer, FederatedHPA, CronFederatedHPA,
Pod) read each field as the dict chains they replaced did: set, absent, or null."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.apps_karmada_v1alpha1 import WorkloadRebalancerView
from controlplane.apis.autoscaling_karmada_v1alpha1 import CronFederatedHPAView, FederatedHPAView
from controlplane.apis.kube.flowcontrol import FlowSchemaView
from controlplane.apis.pods import PodView

#: An object with no spec or status, one whose spec and status are null, one whose fields are null.
EMPTY: list[Any] = [None, {}, {"spec": None, "status": None}]


def test_flow_schema_view() -> None:
    assert FlowSchemaView({"spec": {"priorityLevelConfiguration": {"name": "workload-low"}}}).priority_level == "workload-low"


@pytest.mark.parametrize("raw", [*EMPTY, {"spec": {"priorityLevelConfiguration": None}},
                                 {"spec": {"priorityLevelConfiguration": {"name": None}}}])
def test_flow_schema_view_without_a_level(raw: Any) -> None:
    assert FlowSchemaView(raw).priority_level == ""


def test_workload_rebalancer_view() -> None:
    workload = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml", "name": "web"}
    view = WorkloadRebalancerView({
        "metadata": {"name": "r", "generation": 2},
        "spec": {"workloads": [workload], "ttlSecondsAfterFinished": 0},
        "status": {"observedWorkloads": [{"workload": workload, "result": "Successful"}],
                   "observedGeneration": 2, "finishTime": "2026-01-01T00:00:00Z"},
    })
    assert view.workloads == [workload] and view.ttl_seconds_after_finished == 0
    assert view.observed_workloads[0]["result"] == "Successful"
    assert view.observed_generation == view.generation == 2
    assert view.finish_time == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize("raw", [*EMPTY, {
    "spec": {"workloads": None, "ttlSecondsAfterFinished": None},
    "status": {"observedWorkloads": None, "observedGeneration": None, "finishTime": None},
}, {"status": {"finishTime": ""}}])
def test_workload_rebalancer_view_unset(raw: Any) -> None:
    view = WorkloadRebalancerView(raw)
    assert view.workloads == () and view.observed_workloads == ()
    assert view.ttl_seconds_after_finished is None and view.observed_generation is None
    assert view.finish_time is None


def test_federated_hpa_view() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    metrics = [{"type": "Resource", "resource": {"name": "cpu"}}]
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 0}}
    view = FederatedHPAView({"spec": {"scaleTargetRef": ref, "metrics": metrics, "minReplicas": 2,
                                      "maxReplicas": 9, "behavior": behavior}})
    assert view.scale_target_ref == ref and view.metrics == metrics and view.behavior == behavior
    assert (view.min_replicas, view.max_replicas) == (2, 9)


@pytest.mark.parametrize("raw", [*EMPTY, {
    "spec": {"scaleTargetRef": None, "metrics": None, "minReplicas": None, "maxReplicas": None, "behavior": None},
}])
def test_federated_hpa_view_unset(raw: Any) -> None:
    view = FederatedHPAView(raw)
    assert dict(view.scale_target_ref) == {} and view.metrics == () and view.behavior is None
    # kube's default minimum; a maximum the API requires reads 0 when missing
    assert (view.min_replicas, view.max_replicas) == (1, 0)


def test_cron_federated_hpa_view() -> None:
    rule = {"name": "up", "schedule": "0 8 * * *", "targetReplicas": 3}
    history = {"ruleName": "up", "nextExecutionTime": "2026-01-01T08:00:00Z"}
    view = CronFederatedHPAView({
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "rules": [rule]},
        "status": {"executionHistories": [history, "garbled", None]},
    })
    assert view.scale_target_ref["name"] == "web" and view.rules == [rule]
    assert view.execution_histories == [history] and view.execution_histories[0] is history


@pytest.mark.parametrize("raw", [*EMPTY, {"spec": {"scaleTargetRef": None, "rules": None},
                                          "status": {"executionHistories": None}}])
def test_cron_federated_hpa_view_unset(raw: Any) -> None:
    view = CronFederatedHPAView(raw)
    assert dict(view.scale_target_ref) == {} and view.rules == () and view.execution_histories == []


def test_pod_view() -> None:
    main, sidecar = {"name": "main"}, {"name": "log", "restartPolicy": "Always"}
    view = PodView({
        "metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [main], "initContainers": [sidecar], "resources": {"requests": {"cpu": "1"}}},
        "status": {"phase": "Running"},
    })
    assert view.phase == "Running" and view.is_deleting
    assert view.containers == [main] and view.init_containers == [sidecar]
    assert view.pod_level_requests == {"cpu": "1"}


@pytest.mark.parametrize("raw", [*EMPTY, {"spec": {"containers": None, "initContainers": None, "resources": None},
                                          "status": {"phase": None}},
                                 {"spec": {"resources": {"requests": None}}, "status": {"phase": ""}}])
def test_pod_view_unset(raw: Any) -> None:
    view = PodView(raw)
    assert view.phase is None and not view.is_deleting
    assert view.containers == () and view.init_containers == () and dict(view.pod_level_requests) == {}
