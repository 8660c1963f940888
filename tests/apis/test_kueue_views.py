"""The typed views of Kueue's Workload, ClusterQueue, Cohort and LocalQueue read each field as the
dict chains they replaced did: set, absent, or null."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.kueue_views import (
    ClusterQueueView,
    CohortView,
    LocalQueueView,
    WorkloadView,
    pod_set_assignments,
)

#: An object with no spec or status, one whose spec and status are null.
EMPTY: list[Any] = [None, {}, {"metadata": None, "spec": None, "status": None}]


def test_workload_view() -> None:
    pod_set = {"name": "main", "count": 2}
    admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2}]}
    view = WorkloadView({
        "metadata": {"name": "w", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "lq", "podSets": [pod_set], "priority": 5, "active": False},
        "status": {"admission": admission, "admissionChecks": [{"name": "c", "state": "Ready"}],
                   "requeueState": {"count": 1}, "reclaimablePods": [{"name": "main", "count": 1}]},
    })
    assert view.queue_name == "lq" and view.pod_sets == [pod_set] and view.priority == 5
    assert not view.is_active and view.creation_timestamp == "2026-01-01T00:00:00Z"
    assert view.admission is admission and pod_set_assignments(view.admission)[0]["count"] == 2
    assert view.admission_checks[0]["state"] == "Ready" and view.requeue_state == {"count": 1}
    assert view.reclaimable_pods == [{"name": "main", "count": 1}]


@pytest.mark.parametrize("raw", [*EMPTY, {
    "metadata": {"creationTimestamp": None},
    "spec": {"queueName": None, "podSets": None, "priority": None, "active": None},
    "status": {"admission": None, "admissionChecks": None, "requeueState": None, "reclaimablePods": None},
}, {"spec": {"priority": "7", "active": True}, "status": {"admission": "garbled"}}])
def test_workload_view_unset(raw: Any) -> None:
    view = WorkloadView(raw)
    assert view.queue_name == "" and view.pod_sets == () and view.priority == 0
    assert view.is_active and view.creation_timestamp == ""  # active unless set to false
    assert view.admission is None and pod_set_assignments(view.admission) == ()
    assert view.admission_checks == () and dict(view.requeue_state) == {} and view.reclaimable_pods == ()


def test_pod_set_assignments_of_an_admission_without_them() -> None:
    assert pod_set_assignments({"clusterQueue": "cq"}) == ()
    assert pod_set_assignments({"clusterQueue": "cq", "podSetAssignments": None}) == ()


def test_cluster_queue_view() -> None:
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": []}]}]
    selector: dict[str, Any] = {}
    view = ClusterQueueView({"spec": {
        "resourceGroups": groups, "cohort": "all", "stopPolicy": "Hold", "queueingStrategy": "StrictFIFO",
        "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"}, "preemption": {"withinClusterQueue": "LowerPriority"},
        "namespaceSelector": selector, "admissionChecks": ["a"],
        "admissionChecksStrategy": {"admissionChecks": [{"name": "b", "onFlavors": ["f"]}]},
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}, "fairSharing": {"weight": "2"},
    }})
    assert view.resource_groups == groups and view.cohort == "all" and view.stop_policy == "Hold"
    assert view.queueing_strategy == "StrictFIFO" and view.flavor_fungibility == {"whenCanBorrow": "TryNextFlavor"}
    assert view.preemption["withinClusterQueue"] == "LowerPriority"
    # an empty selector (every namespace) stays one, not "unset" (none)
    assert view.namespace_selector is selector
    assert view.admission_check_names == ["a"] and view.admission_check_rules[0]["name"] == "b"
    assert view.admission_scope == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    assert view.fair_sharing_weight == "2"


@pytest.mark.parametrize("raw", [*EMPTY, {"spec": {
    "resourceGroups": None, "cohort": None, "stopPolicy": None, "queueingStrategy": None, "flavorFungibility": None,
    "preemption": None, "namespaceSelector": None, "admissionChecks": None, "admissionChecksStrategy": None,
    "admissionScope": None, "fairSharing": None,
}}, {"spec": {"cohort": "", "stopPolicy": "", "admissionChecksStrategy": {"admissionChecks": None},
              "fairSharing": {"weight": None}}}])
def test_cluster_queue_view_unset(raw: Any) -> None:
    view = ClusterQueueView(raw)
    assert view.resource_groups == () and view.cohort is None and view.stop_policy is None
    assert view.queueing_strategy is None and dict(view.flavor_fungibility) == {} and dict(view.preemption) == {}
    assert view.namespace_selector is None and view.admission_scope is None and view.fair_sharing_weight is None
    assert view.admission_check_names == () and view.admission_check_rules == ()


def test_cohort_view() -> None:
    view = CohortView({"metadata": {"name": "team"}, "spec": {"parentName": "org", "resourceGroups": [{}],
                                                              "fairSharing": {"weight": "500m"}}})
    assert view.name == "team" and view.parent_name == "org"
    assert view.resource_groups == [{}] and view.fair_sharing_weight == "500m"


@pytest.mark.parametrize("raw", [*EMPTY, {"spec": {"parentName": None, "resourceGroups": None, "fairSharing": None}},
                                 {"spec": {"parentName": ""}}])
def test_cohort_view_unset(raw: Any) -> None:
    view = CohortView(raw)
    assert view.parent_name is None and view.resource_groups == () and view.fair_sharing_weight is None


def test_local_queue_view() -> None:
    history = {"consumedResources": {"cpu": "1"}, "lastUpdate": "2026-01-01T00:00:00Z"}
    view = LocalQueueView({
        "spec": {"clusterQueue": "cq", "stopPolicy": "HoldAndDrain", "fairSharing": {"weight": "3"}},
        "status": {"fairSharing": {"weightedShare": 4, "admissionFairSharingStatus": history}},
    })
    assert view.cluster_queue == "cq" and view.stop_policy == "HoldAndDrain" and view.fair_sharing_weight == "3"
    assert view.fair_sharing_status["weightedShare"] == 4 and view.admission_fair_sharing_status is history


@pytest.mark.parametrize("raw", [*EMPTY, {
    "spec": {"clusterQueue": None, "stopPolicy": None, "fairSharing": None}, "status": {"fairSharing": None},
}, {"status": {"fairSharing": {"admissionFairSharingStatus": None}}},
    {"status": {"fairSharing": {"admissionFairSharingStatus": "garbled"}}}])
def test_local_queue_view_unset(raw: Any) -> None:
    view = LocalQueueView(raw)
    assert view.cluster_queue == "" and view.stop_policy is None and view.fair_sharing_weight is None
    assert view.admission_fair_sharing_status is None


def test_object_view_creation_timestamp() -> None:
    assert WorkloadView({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}).creation_timestamp == "2026-01-01T00:00:00Z"
