"""Kueue's waitForPodsReady and requeuing backoff, table-driven: the backoff after the n-th
eviction, the requeueState it writes, when an admitted Workload times out, and when a Workload
held by ``Requeued=False`` may be queued again (whose pods are ready: ``test_podsready``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.admission.requeuing import (
    WaitForPodsReady,
    backoff_seconds,
    is_active,
    pods_ready_condition,
    ready_deadline,
    requeue_after_timeout,
    requeue_at,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
KUEUE_DEFAULTS = WaitForPodsReady(timeout_seconds=300)


@pytest.mark.parametrize(
    ("count", "expected"),
    # Kueue's documented sequence with backoffBaseSeconds 60 and backoffMaxSeconds 3600.
    [(1, 60), (2, 120), (3, 240), (4, 480), (5, 960), (6, 1920), (7, 3600), (8, 3600), (1000, 3600), (0, 0)],
)
def test_backoff_doubles_from_the_base_up_to_the_max(count: int, expected: int) -> None:
    assert backoff_seconds(count, base=60, maximum=3600) == expected


def workload(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "job-a", "namespace": "ml"},
            "spec": {"queueName": "q"}, "status": status}


@pytest.mark.parametrize(
    ("previous", "settings", "expected"),
    [
        (None, KUEUE_DEFAULTS, {"count": 1, "requeueAt": "2026-01-01T12:01:00Z"}),
        ({"count": 2}, KUEUE_DEFAULTS, {"count": 3, "requeueAt": "2026-01-01T12:04:00Z"}),
        ({"count": 9, "requeueAt": "2026-01-01T11:00:00Z"}, KUEUE_DEFAULTS, {"count": 10, "requeueAt": "2026-01-01T13:00:00Z"}),
        ({"count": 1}, WaitForPodsReady(timeout_seconds=1, backoff_base_seconds=5, backoff_max_seconds=7),
         {"count": 2, "requeueAt": "2026-01-01T12:00:07Z"}),
        # Past backoffLimitCount: deactivated, no requeueState.
        ({"count": 2}, WaitForPodsReady(timeout_seconds=300, backoff_limit_count=2), None),
        (None, WaitForPodsReady(timeout_seconds=300, backoff_limit_count=0), None),
    ],
)
def test_requeue_state_after_a_pods_ready_timeout(
    previous: dict[str, Any] | None, settings: WaitForPodsReady, expected: dict[str, Any] | None
) -> None:
    requeue = requeue_after_timeout(workload(requeueState=previous) if previous else workload(), settings, now=NOW)
    assert requeue.state == expected
    assert requeue.deactivated is (expected is None)


ADMISSION = {"clusterQueue": "cq", "podSetAssignments": []}


def cond(ctype: str, status: str, at: datetime, reason: str = "") -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ")}


ADMITTED_AT = NOW - timedelta(seconds=100)


@pytest.mark.parametrize(
    ("wl", "settings", "expected"),
    [
        # Counting from the admission ...
        (workload(admission=ADMISSION, conditions=[cond("Admitted", "True", ADMITTED_AT)]), KUEUE_DEFAULTS,
         ADMITTED_AT + timedelta(seconds=300)),
        (workload(admission=ADMISSION, conditions=[cond("Admitted", "True", ADMITTED_AT),
                                                   cond("PodsReady", "False", ADMITTED_AT - timedelta(seconds=50))]),
         KUEUE_DEFAULTS, ADMITTED_AT + timedelta(seconds=300)),
        # ... or from when its pods stopped being ready, if later.
        (workload(admission=ADMISSION, conditions=[cond("Admitted", "True", ADMITTED_AT),
                                                   cond("PodsReady", "False", NOW)]),
         KUEUE_DEFAULTS, NOW + timedelta(seconds=300)),
        # Not counting: its pods are ready, it is not admitted, the check is off.
        (workload(admission=ADMISSION, conditions=[cond("Admitted", "True", ADMITTED_AT), cond("PodsReady", "True", NOW)]),
         KUEUE_DEFAULTS, None),
        (workload(conditions=[cond("Admitted", "False", ADMITTED_AT)]), KUEUE_DEFAULTS, None),
        (workload(admission=ADMISSION, conditions=[cond("Admitted", "True", ADMITTED_AT)]), WaitForPodsReady(), None),
        # Ready once, then not: recoveryTimeout from when it began waiting, never without one.
        (workload(admission=ADMISSION, conditions=[cond("Admitted", "True", ADMITTED_AT - timedelta(hours=1)),
                                                   cond("PodsReady", "False", NOW, "WaitForRecovery")]),
         WaitForPodsReady(timeout_seconds=300, recovery_timeout_seconds=30), NOW + timedelta(seconds=30)),
        (workload(admission=ADMISSION, conditions=[cond("Admitted", "True", ADMITTED_AT),
                                                   cond("PodsReady", "False", NOW, "WaitForRecovery")]),
         KUEUE_DEFAULTS, None),
    ],
)
def test_when_an_admitted_workload_times_out(wl: dict[str, Any], settings: WaitForPodsReady, expected: datetime | None) -> None:
    assert ready_deadline(wl, settings) == expected


@pytest.mark.parametrize(
    ("wl", "expected"),
    [
        (workload(requeueState={"count": 1, "requeueAt": "2026-01-01T12:01:00Z"},
                  conditions=[cond("Requeued", "False", NOW, "PodsReadyTimeout")]), NOW + timedelta(minutes=1)),
        (workload(requeueState={"count": 1}, conditions=[cond("Requeued", "False", NOW, "PodsReadyTimeout")]),
         datetime.min.replace(tzinfo=UTC)),
        # Deactivated past the limit (Kueue's reason since 0.10, and before) and active again: queued at once.
        (workload(conditions=[cond("Requeued", "False", NOW, "DeactivatedDueToRequeuingLimitExceeded")]),
         datetime.min.replace(tzinfo=UTC)),
        (workload(conditions=[cond("Requeued", "False", NOW, "InactiveWorkloadRequeuingLimitExceeded")]),
         datetime.min.replace(tzinfo=UTC)),
        (workload(conditions=[cond("Requeued", "False", NOW, "DeactivatedDueToAdmissionCheck")]),
         datetime.min.replace(tzinfo=UTC)),
        # Drained by a stopped queue: held until the queue runs again, not by time.
        (workload(conditions=[cond("Requeued", "False", NOW, "ClusterQueueStopped")]), None),
        # A preempted workload is requeued at once (Requeued=True); the backoff is over.
        (workload(conditions=[cond("Requeued", "True", NOW, "Preempted")]), None),
        (workload(requeueState={"count": 1}, conditions=[cond("Requeued", "True", NOW, "BackoffFinished")]), None),
        (workload(), None),
    ],
)
def test_when_a_held_workload_is_queued_again(wl: dict[str, Any], expected: datetime | None) -> None:
    assert requeue_at(wl) == expected


@pytest.mark.parametrize(("spec", "expected"), [({}, True), ({"active": True}, True), ({"active": False}, False)])
def test_inactive_workloads_take_no_part(spec: dict[str, Any], expected: bool) -> None:
    assert is_active({"spec": spec}) is expected


def ready_cond(status: str, reason: str) -> dict[str, Any]:
    return {"type": "PodsReady", "status": status, "reason": reason}


@pytest.mark.parametrize(
    ("ready", "current", "expected"),
    [
        # Kueue's generatePodsReadyCondition, by the condition it replaces.
        (False, None, ("False", "WaitForStart", "Not all pods are ready or succeeded")),
        (True, None, ("True", "Started", "All pods reached readiness and the workload is running")),
        (True, ready_cond("False", "WaitForStart"), ("True", "Started", "All pods reached readiness and the workload is running")),
        (False, ready_cond("True", "Started"), ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")),
        (False, ready_cond("False", "WaitForRecovery"), ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")),
        (True, ready_cond("False", "WaitForRecovery"), ("True", "Recovered", "All pods reached readiness and the workload is running")),
        (True, ready_cond("True", "Recovered"), ("True", "Recovered", "All pods reached readiness and the workload is running")),
        (False, ready_cond("True", "Recovered"), ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")),
        (False, ready_cond("False", "WaitForStart"), ("False", "WaitForStart", "Not all pods are ready or succeeded")),
    ],
)
def test_the_pods_ready_condition_follows_the_one_it_replaces(
    ready: bool, current: dict[str, Any] | None, expected: tuple[str, str, str],
) -> None:
    cond = pods_ready_condition(ready, current)
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == ("PodsReady", *expected)
