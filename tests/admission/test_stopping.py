"""Kueue's stop policies, decided: which admitted Workloads a stopped queue drains, when a
drained one goes back in line, why a stopped LocalQueue's Workloads wait, and the queues'
``Active`` conditions with Kueue's reasons and messages."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission import objects as adm
from controlplane.admission import stopping


def queue(stop: str | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "q"}, "spec": {**spec, **({"stopPolicy": stop} if stop else {})}}


def requeued(status: str, reason: str) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "Requeued", "status": status, "reason": reason, "message": "m"}]}}


@pytest.mark.parametrize(
    ("lq", "cq", "drained"),
    [
        (None, None, None),
        ("Hold", "Hold", None),  # Hold keeps what runs
        ("None", "HoldAndDrain", ("ClusterQueueStopped", "The ClusterQueue is stopped")),
        ("HoldAndDrain", None, ("LocalQueueStopped", "The LocalQueue is stopped")),
        ("HoldAndDrain", "HoldAndDrain", ("LocalQueueStopped", "The LocalQueue is stopped")),  # LocalQueue first
    ],
)
def test_which_admitted_workloads_a_stopped_queue_drains(lq: str | None, cq: str | None, drained: tuple[str, str] | None) -> None:
    why = stopping.drain(queue(lq), queue(cq))
    assert (None if why is None else (why.reason, why.message)) == drained


def test_a_missing_queue_drains_nothing() -> None:
    assert stopping.drain(None, None) is None and stopping.stop_policy(None) == "None"


@pytest.mark.parametrize(
    ("workload", "lq", "cq", "reason"),
    [
        (requeued("False", "LocalQueueStopped"), queue("None"), queue(), "LocalQueueRestarted"),
        (requeued("False", "LocalQueueStopped"), queue("Hold"), queue(), None),
        (requeued("False", "LocalQueueStopped"), None, queue(), None),
        (requeued("False", "ClusterQueueStopped"), queue(), queue(), "ClusterQueueRestarted"),
        (requeued("False", "ClusterQueueStopped"), queue(), queue("HoldAndDrain"), None),
        (requeued("False", "PodsReadyTimeout"), queue(), queue(), None),  # the backoff's, not ours
        (requeued("True", "ClusterQueueStopped"), queue(), queue(), None),
        ({}, queue(), queue(), None),
    ],
)
def test_a_drained_workload_is_requeued_once_its_queue_runs_again(
    workload: dict[str, Any], lq: dict[str, Any] | None, cq: dict[str, Any], reason: str | None
) -> None:
    cond = stopping.restarted(workload, lq, cq)
    assert (cond or {}).get("reason") == reason
    if cond is not None:
        assert cond["status"] == "True" and cond["message"].endswith("was restarted after being stopped")


def test_a_stopped_local_queue_s_workloads_are_out_of_line() -> None:
    assert stopping.waiting_in_stopped(queue("Hold"), "team-a") == "LocalQueue team-a is inactive"
    assert stopping.waiting_in_stopped(queue("HoldAndDrain"), "team-a") == "LocalQueue team-a is inactive"
    assert stopping.waiting_in_stopped(queue("None"), "team-a") is None


@pytest.mark.parametrize(
    ("stop", "flavors", "inactive", "expected"),
    [
        (None, {"a100": {}, "h100": {}}, None, ("True", "Ready", "Can admit new workloads")),
        ("Hold", {"a100": {}, "h100": {}}, "stopPolicy is Hold", ("False", "Stopped", "Can't admit new workloads: is stopped.")),
        (None, {}, "ResourceFlavor a100, h100 not found",
         ("False", "FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s): [h100 a100].")),
        ("HoldAndDrain", {}, "stopPolicy is HoldAndDrain",
         ("False", "Stopped", "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): [h100 a100].")),
        (None, {"a100": {}, "h100": {}}, "Cohort c is in a cycle of parentName",
         ("False", "Unknown", "Can't admit new workloads: Cohort c is in a cycle of parentName.")),
    ],
)
def test_cluster_queue_active_condition(
    stop: str | None, flavors: dict[str, dict[str, str]], inactive: str | None, expected: tuple[str, str, str]
) -> None:
    groups = [{"coveredResources": ["gpu"], "flavors": [{"name": "h100"}, {"name": "a100"}, {"name": "h100"}]}]
    cq = queue(stop, resourceGroups=groups)
    cond = stopping.cluster_queue_active(cq, adm.missing_flavors(cq, flavors), inactive)
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == ("Active", *expected)


@pytest.mark.parametrize(
    ("stop", "cq_active", "expected"),
    [
        (None, "True", ("True", "Active", "Can submit new workloads to localQueue")),
        ("Hold", "True", ("False", "Stopped", "LocalQueue is stopped")),
        ("HoldAndDrain", None, ("False", "Stopped", "LocalQueue is stopped")),
        ("None", "False", ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")),
        (None, None, ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")),
    ],
)
def test_local_queue_active_condition(stop: str | None, cq_active: str | None, expected: tuple[str, str, str]) -> None:
    cq_cond = None if cq_active is None else {"type": "Active", "status": cq_active}
    cond = stopping.local_queue_active(queue(stop), cq_cond)
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == ("Active", *expected)
