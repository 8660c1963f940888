"""The typed views read stored objects as the dict chains they replace did."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.views import BindingView, ClusterObjectView, ManifestStatusView, ObjectView, WorkView

BINDING: dict[str, Any] = {
    "apiVersion": "work.gpufed.io/v1alpha1",
    "kind": "ResourceBinding",
    "metadata": {
        "name": "train-job", "namespace": "ml", "uid": "u1", "generation": 3,
        "labels": {"team": "a"}, "annotations": {"note": "x"}, "finalizers": ["f"],
        "ownerReferences": [{"kind": "Job", "name": "train"}],
        "deletionTimestamp": "2026-01-01T00:00:00Z",
    },
    "spec": {
        "resource": {"apiVersion": "batch/v1", "kind": "Job", "namespace": "ml", "name": "train"},
        "clusters": [{"name": "a", "replicas": 2}, {"replicas": 1}, {"name": "b"}],
        "gracefulEvictionTasks": [{"fromCluster": "c"}],
        "policy": {"kind": "PropagationPolicy", "name": "p", "namespace": "ml"},
        "schedulePriority": {"priority": 7},
        "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}},
        "replicas": 4,
        "propagateDeps": True,
        "preserveResourcesOnDeletion": True,
    },
    "status": {
        "conditions": [{"type": "Scheduled", "status": "True"}],
        "explanation": [{"cluster": "a"}],
    },
}


def test_binding_view_reads_every_field() -> None:
    view = BindingView(BINDING)
    assert (view.api_version, view.kind) == ("work.gpufed.io/v1alpha1", "ResourceBinding")
    assert (view.name, view.namespace, view.uid, view.generation) == ("train-job", "ml", "u1", 3)
    assert view.labels == {"team": "a"} and view.annotations == {"note": "x"}
    assert list(view.finalizers) == ["f"] and view.owner_references[0]["name"] == "train"
    assert view.is_deleting and view.deletion_timestamp == "2026-01-01T00:00:00Z"
    assert view.resource["name"] == "train"
    assert view.cluster_names == ("a", "b")
    assert view.eviction_tasks[0]["fromCluster"] == "c"
    assert view.policy["name"] == "p" and view.priority == 7
    assert view.placement["replicaScheduling"] == {"replicaSchedulingType": "Divided"} and view.replicas == 4
    assert view.propagate_deps and view.preserve_resources_on_deletion
    assert view.condition("Scheduled") == {"type": "Scheduled", "status": "True"}
    assert view.condition("Ready") is None
    assert view.explanation[0]["cluster"] == "a"


@pytest.mark.parametrize("raw", [None, {}, {"metadata": None, "spec": None, "status": None},
                                 {"spec": {"placement": None, "replicas": None}}])
def test_missing_parts_read_empty(raw: dict[str, Any] | None) -> None:
    view = BindingView(raw)
    assert (view.name, view.namespace, view.uid, view.generation) == ("", "", None, None)
    assert not view.is_deleting and view.deletion_timestamp is None
    assert dict(view.labels) == {} and dict(view.annotations) == {} and not view.finalizers
    assert dict(view.resource) == {} and view.cluster_names == () and not view.eviction_tasks
    assert view.priority == 0 and not view.propagate_deps and not view.conditions
    assert dict(view.placement) == {} and view.replicas == 0


@pytest.mark.parametrize("priority", [True, "3", 2.5])
def test_priority_is_an_integer_or_zero(priority: Any) -> None:
    assert BindingView({"spec": {"schedulePriority": {"priority": priority}}}).priority == 0


def test_views_wrap_without_copying() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "a"}, "spec": {"x": 1}}
    view = ObjectView(obj)
    assert view.raw is obj and view.spec is obj["spec"] and view.metadata is obj["metadata"]
    obj["metadata"]["name"] = "b"
    assert view.name == "b"


def test_work_and_cluster_views() -> None:
    work = WorkView({
        "spec": {"workload": {"manifests": [{"kind": "Job"}]}},
        "status": {"manifestStatuses": [{"health": "Healthy"}]},
    })
    assert work.manifests[0]["kind"] == "Job" and work.manifest_statuses[0]["health"] == "Healthy"
    assert WorkView({"spec": {}}).manifests == ()
    cluster = ClusterObjectView({
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
        "status": {"lastReportTime": "2026-01-01T00:00:00Z"},
    })
    assert cluster.taints[0]["key"] == "k" and cluster.unschedulable
    assert cluster.last_report_time == "2026-01-01T00:00:00Z"
    assert ClusterObjectView(None).last_report_time is None and not ClusterObjectView(None).unschedulable


def test_manifest_status_view() -> None:
    entry = ManifestStatusView({
        "identifier": {"kind": "Job", "name": "train"},
        "interpretedBy": {"healthInterpretation": 2},
        "health": "Healthy",
        "conditions": [{"type": "Interpreted", "status": "False"}],
    })
    assert entry.identifier["name"] == "train" and "healthInterpretation" in entry.interpreted_by
    assert entry.health == "Healthy" and entry.conditions[0]["type"] == "Interpreted"


@pytest.mark.parametrize("raw", [None, {}, {"identifier": None, "interpretedBy": None, "health": None, "conditions": None},
                                 {"health": ""}])
def test_manifest_status_view_missing_parts_read_empty(raw: dict[str, Any] | None) -> None:
    entry = ManifestStatusView(raw)
    assert dict(entry.identifier) == {} and dict(entry.interpreted_by) == {}
    assert entry.health is None and entry.conditions == ()
