"""Kueue's pod integration as pure functions: the scheduling gate added once, removed leaving the
Pod's other gates, and a Pod started with its flavor's node labels and its checks' podSetUpdates
merged in (a conflicting key is Kueue's error); the webhook's marks (label and finalizer
``kueue.x-k8s.io/managed``), when Kueue's pod controller stops a Pod and why, and the Workload's
``kueue.x-k8s.io/job-uid`` label."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.admission import pods
from controlplane.admission.checks import PodSetUpdateConflict
from controlplane.admission.objects import workload_labels

GATE = {"name": "kueue.x-k8s.io/admission"}
MANAGED = "kueue.x-k8s.io/managed"


def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "main", "image": "i:1"}], **spec}}


def test_the_gate_is_added_once_and_removed_leaving_the_pods_own() -> None:
    gated = pod(schedulingGates=[{"name": "example.com/mine"}])
    pods.add_gate(gated)
    pods.add_gate(gated)
    assert gated["spec"]["schedulingGates"] == [{"name": "example.com/mine"}, GATE]
    assert pods.gated(gated)
    before = copy.deepcopy(gated)
    assert pods.without_gate(gated)["spec"]["schedulingGates"] == [{"name": "example.com/mine"}]
    assert gated == before
    only = pod()
    pods.add_gate(only)
    assert "schedulingGates" not in pods.without_gate(only)["spec"]
    assert not pods.gated(pod()) and not pods.is_pod({"apiVersion": "batch/v1", "kind": "Job"})


def test_a_started_pod_carries_its_flavor_and_its_checks_updates() -> None:
    queued = pod(schedulingGates=[GATE], nodeSelector={"disk": "ssd"})
    updates = [{"name": "budget", "state": "Ready", "podSetUpdates": [
        {"name": "main", "labels": {"team": "a"}, "tolerations": [{"key": "spot", "operator": "Exists"}]}]}]
    started = pods.start(queued, {"nvidia.com/gpu.product": "A100"}, updates)
    assert "schedulingGates" not in started["spec"]
    assert started["spec"]["nodeSelector"] == {"disk": "ssd", "nvidia.com/gpu.product": "A100"}
    assert started["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert started["metadata"] == {"name": "p", "labels": {"app": "x", "team": "a"}}


def test_a_check_contradicting_the_pod_is_kueues_conflict() -> None:
    queued = pod(schedulingGates=[GATE], nodeSelector={"zone": "z1"})
    updates = [{"name": "prov", "state": "Ready", "podSetUpdates": [{"name": "main", "nodeSelector": {"zone": "z2"}}]}]
    with pytest.raises(PodSetUpdateConflict, match="conflict for key=zone"):
        pods.start(queued, {}, updates)


def test_kueues_webhook_marks_the_pod_it_gates() -> None:
    queued = pod()
    queued["metadata"]["finalizers"] = ["example.com/keep"]
    pods.manage(queued)
    pods.manage(queued)
    assert queued["metadata"]["labels"] == {"app": "x", MANAGED: "true"}
    assert queued["metadata"]["finalizers"] == ["example.com/keep", MANAGED]
    assert queued["spec"]["schedulingGates"] == [GATE]
    assert pods.managed(queued) and pods.has_finalizer(queued)
    assert pods.without_finalizer(queued)["metadata"]["finalizers"] == ["example.com/keep"]
    assert "finalizers" not in pods.without_finalizer({**queued, "metadata": {**queued["metadata"], "finalizers": [MANAGED]}})["metadata"]
    assert not pods.managed({"metadata": {"labels": {MANAGED: "false"}}})


def workload(*conditions: tuple[str, str, str], admitted: bool = False, deleting: bool = False) -> dict[str, Any]:
    wl: dict[str, Any] = {"metadata": {"name": "pod-p-1a2b3"}, "status": {"conditions": [
        {"type": t, "status": s, "reason": r, "message": f"{r} message"} for t, s, r in conditions]}}
    if admitted:
        wl["status"]["admission"] = {"clusterQueue": "cq"}
    if deleting:
        wl["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return wl


ADMITTED = ("Admitted", "True", "Admitted")
STARTED = pod()
GATED = pod(schedulingGates=[GATE])
SUCCEEDED = {**pod(), "status": {"phase": "Succeeded"}}


@pytest.mark.parametrize(
    ("obj", "wl", "expected"),
    [
        (STARTED, workload(ADMITTED, admitted=True), None),
        (STARTED, workload(("Evicted", "True", "Preempted"), ("Admitted", "False", "NoReservation")),
         pods.Stop("WorkloadEvictedDueToPreempted", "Preempted message")),
        (STARTED, workload(("Evicted", "True", "PodsReadyTimeout"), ADMITTED, admitted=True),
         pods.Stop("WorkloadEvictedDueToPodsReadyTimeout", "PodsReadyTimeout message")),
        (STARTED, workload(("QuotaReserved", "True", "QuotaReserved"), admitted=True),
         pods.Stop("NotAdmitted", "Not admitted by cluster queue")),
        (STARTED, None, pods.Stop("NoMatchingWorkload", "Missing Workload; unable to restore pod templates")),
        (STARTED, workload(("Finished", "True", "FailedToStart")), None),
        (GATED, workload(("Evicted", "True", "Preempted")), None),  # never started: it waits, gated
        (GATED, None, None),  # its Workload is made
        (SUCCEEDED, workload(("Evicted", "True", "Preempted")), None),
        (GATED, workload(deleting=True), pods.Stop("WorkloadDeleted", "Workload is deleted")),
        (SUCCEEDED, workload(deleting=True), pods.Stop("WorkloadDeleted", "Workload is deleted")),
        ({**STARTED, "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, None, None),
    ],
)
def test_when_kueue_stops_a_managed_pod(obj: dict[str, Any], wl: dict[str, Any] | None, expected: pods.Stop | None) -> None:
    assert pods.stop_of(obj, wl) == expected


def test_a_workload_is_labelled_with_its_jobs_uid_when_kueue_can() -> None:
    uid = "0f6e3c1a-6f7e-4c36-9b8e-8a0d2b7c5d11"
    assert workload_labels({"metadata": {"uid": uid}}) == {"kueue.x-k8s.io/job-uid": uid}
    assert workload_labels({"metadata": {"uid": "not a label value"}}) == {}


@pytest.mark.parametrize(("labels", "refused"), [({}, False), ({MANAGED: "true"}, False), ({MANAGED: "false"}, True), ({MANAGED: ""}, True)])
def test_kueues_managed_label_can_only_be_true(labels: dict[str, str], refused: bool) -> None:
    errors = pods.managed_label_errors({"metadata": {"labels": labels}})
    assert [(e.field, e.message) for e in errors] == (
        [(f"metadata.labels[{MANAGED}]", "Forbidden: managed label value can only be 'true'")] if refused else [])
