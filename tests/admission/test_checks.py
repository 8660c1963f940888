"""Kueue's admission-check rules (:mod:`controlplane.admission.checks`), table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission import checks
from controlplane.admission.stopping import cluster_queue_active

NOW = "2026-01-01T00:00:00Z"


def queue(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "cq"}, "spec": spec}


def admission(*flavors: str) -> dict[str, Any]:
    return {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": f}} for f in flavors]}


def state(name: str, value: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {"name": name, "state": value, "lastTransitionTime": "2025-12-31T00:00:00Z", "message": message, **extra}


@pytest.mark.parametrize(("spec", "flavors", "names"), [
    ({}, ("a100",), set()),
    ({"admissionChecks": ["budget", "prov"]}, ("a100",), {"budget", "prov"}),
    # v1beta2's strategy: a rule with onFlavors applies when one of them was given.
    ({"admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["spot"]}, {"name": "budget"}]}},
     ("a100",), {"budget"}),
    ({"admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["spot"]}]}}, ("a100", "spot"), {"prov"}),
])
def test_the_checks_of_a_workload_follow_its_flavors(spec: dict[str, Any], flavors: tuple[str, ...], names: set[str]) -> None:
    assert checks.check_names(queue(**spec), admission(*flavors)) == names


def test_synced_states_add_pending_drop_the_unnamed_and_sort() -> None:
    kept = state("prov", "Ready")
    synced = checks.synced_states([kept, state("gone", "Retry")], {"prov", "budget"}, now=NOW)
    assert synced == [{"name": "budget", "state": "Pending", "lastTransitionTime": NOW, "message": ""}, kept]


@pytest.mark.parametrize(("conditions", "states", "want"), [
    ([], [state("a", "Pending")], None),
    ([], [state("a", "Ready"), state("b", "Ready")], ("True", "Admitted", "The workload is admitted")),
    ([], [], ("True", "Admitted", "The workload is admitted")),
    ([{"type": "Admitted", "status": "True"}], [state("a", "Ready")], None),
    ([{"type": "Admitted", "status": "True"}], [state("a", "Pending")],
     ("False", "UnsatisfiedChecks", "The workload has not all checks ready")),
])
def test_admitted_follows_the_checks(conditions: list[dict[str, Any]], states: list[dict[str, Any]], want: tuple[str, ...] | None) -> None:
    got = checks.admitted_condition({"status": {"conditions": conditions}}, states)
    assert (None if got is None else (got["status"], got["reason"], got["message"])) == want


def test_rejected_deactivates_retry_requeues() -> None:
    assert checks.verdict([state("a", "Ready"), state("b", "Pending")]) is None
    retry = checks.verdict([state("a", "Retry")])
    assert retry == checks.Verdict(False, "AdmissionCheck", "At least one admission check is false")
    rejected = checks.verdict([state("a", "Retry"), state("b", "Rejected", "over budget"), state("c", "Rejected")])
    assert rejected is not None and rejected.deactivate
    assert (rejected.reason, rejected.message) == (
        "DeactivatedDueToAdmissionCheck", "The workload is deactivated due to Admission check(s): b,c, were rejected")
    assert rejected.event_message == "Deactivating workload because AdmissionCheck for b was Rejected: over budget"


def test_an_eviction_resets_the_states_to_pending() -> None:
    pending = state("a", "Pending", "waiting")
    reset = checks.reset_on_eviction([pending, state("b", "Retry", retryCount=2), state("c", "Ready")], now=NOW)
    assert reset == [
        pending,
        {"name": "b", "state": "Pending", "lastTransitionTime": NOW, "retryCount": 3,
         "message": "Reset to Pending after eviction. Previously: Retry"},
        {"name": "c", "state": "Pending", "lastTransitionTime": NOW, "message": "Reset to Pending after eviction. Previously: Ready"},
    ]


def test_a_queue_naming_missing_or_inactive_checks_is_inactive() -> None:
    active = {"metadata": {"name": "on"}, "status": {"conditions": [{"type": "Active", "status": "True"}]}}
    idle = {"metadata": {"name": "idle"}, "status": {"conditions": [{"type": "Active", "status": "False"}]}}
    cq = queue(admissionChecks=["on", "idle", "gone"])
    missing, inactive = checks.unusable_checks(cq, {"on": active, "idle": idle})
    assert (missing, inactive) == (["gone"], ["idle"])
    cond = cluster_queue_active(cq, [], None, missing, inactive)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "AdmissionCheckNotFound",
        "Can't admit new workloads: references missing AdmissionCheck(s): [gone], references inactive AdmissionCheck(s): [idle].")


def test_waiting_on_names_the_checks_not_ready() -> None:
    assert checks.waiting_on([state("a", "Ready"), state("b", "Pending", "provisioning"), state("c", "Pending")]) == (
        "b (Pending: provisioning), c (Pending)")


def test_retry_requeues_after_the_longest_requeue_after_seconds() -> None:
    retry = checks.verdict([state("a", "Retry", requeueAfterSeconds=60), state("b", "Retry", requeueAfterSeconds=300), state("c", "Retry")])
    assert retry is not None and (retry.deactivate, retry.requeue_after) == (False, 300)
    assert checks.verdict([state("a", "Retry"), state("b", "Pending", requeueAfterSeconds=60)]) == checks.Verdict(
        False, "AdmissionCheck", "At least one admission check is false", requeue_after=0)


TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "train"}},
    "spec": {"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "gpu", "operator": "Exists"}], "containers": [{"name": "main"}]},
}


def test_a_job_starts_with_the_flavor_and_every_ready_checks_pod_set_updates() -> None:
    updates = [
        state("budget", "Ready", podSetUpdates=[
            {"name": "main", "labels": {"team": "a", "app": "train"}, "annotations": {"cost": "low"},
             "tolerations": [{"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": "Exists"}]},
            {"name": "other", "labels": {"ignored": "yes"}},
        ]),
        state("prov", "Ready", podSetUpdates=[{"name": "main", "nodeSelector": {"zone": "z1"}}]),
    ]
    started = checks.start_pod_template(TEMPLATE, "main", {"pool": "onprem"}, updates)
    assert started == {
        "metadata": {"labels": {"app": "train", "team": "a"}, "annotations": {"cost": "low"}},
        "spec": {"nodeSelector": {"disk": "ssd", "pool": "onprem", "zone": "z1"}, "containers": [{"name": "main"}],
                 "tolerations": [{"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": "Exists"}]},
    }
    # Stopped: the template the Job was queued with (its Workload's pod set), as Kueue restores it.
    assert checks.restore_pod_template(started, TEMPLATE) == TEMPLATE


@pytest.mark.parametrize(("node_labels", "updates", "message"), [
    ({}, [state("budget", "Ready", podSetUpdates=[{"name": "main", "nodeSelector": {"disk": "hdd"}}])],
     "invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for key=disk, value1=ssd, value2=hdd"),
    ({"pool": "onprem"}, [state("budget", "Ready", podSetUpdates=[{"name": "main", "nodeSelector": {"pool": "cloud"}}])],
     "in admission check 'budget': invalid admission check PodSetUpdate: conflict for nodeSelector: "
     "conflict for key=pool, value1=onprem, value2=cloud"),
    ({}, [state("budget", "Ready", podSetUpdates=[{"name": "main", "labels": {"app": "serve"}}])],
     "invalid admission check PodSetUpdate: conflict for labels: conflict for key=app, value1=train, value2=serve"),
])
def test_an_update_setting_a_key_otherwise_is_a_conflict(
    node_labels: dict[str, str], updates: list[dict[str, Any]], message: str,
) -> None:
    with pytest.raises(checks.PodSetUpdateConflict) as err:
        checks.start_pod_template(TEMPLATE, "main", node_labels, updates)
    assert str(err.value) == message
