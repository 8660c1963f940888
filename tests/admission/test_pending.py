"""Who waits where, in the admission cycle's order: the positions Kueue's visibility API reports
(0-based, in the ClusterQueue and in each LocalQueue) and its ``limit``/``offset`` pages, from
which ``gpufed explain`` prints a 1-based place — one order for all of them."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission import pending, requeuing, usagehistory
from controlplane.admission.core.admissionfairsharing import AdmissionFairSharing
from controlplane.admission.requeuing import RequeuingTimestamp

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"


def workload(name: str, namespace: str = "team-a", *, queue: str = "lq", priority: int | None = None,
             created: str = T0, status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]}
    if priority is not None:
        spec["priority"] = priority
    meta = {"name": name, "namespace": namespace, "creationTimestamp": created, "uid": f"uid-{name}",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"job-{name}",
                                 "controller": True, "blockOwnerDeletion": True}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": meta, "spec": spec,
            "status": status or {}}


ADMITTED: dict[str, Any] = {"admission": {"clusterQueue": "cq", "podSetAssignments": []}}
FINISHED: dict[str, Any] = {"conditions": [{"type": "Finished", "status": "True"}]}


def names(items: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in items]


# Two LocalQueues of one ClusterQueue (the same name in two namespaces): by priority, then age, then key.
MIXED = [
    workload("a-low", priority=1, created=T0),
    workload("a-high", priority=10, created=T1),
    workload("b-high", "team-b", priority=10, created=T1),
    workload("b-mid", "team-b", priority=5, created=T0),
    workload("b-old", "team-b", priority=5, created="2025-12-31T00:00:00Z"),
]


def test_the_cluster_queue_page_lists_every_waiting_workload_with_both_positions() -> None:
    ordered = pending.in_order(MIXED)
    assert names(pending.cluster_queue_page(ordered, limit=1000, offset=0)) == [
        ("a-high", 0, 0), ("b-high", 1, 0), ("b-old", 2, 1), ("b-mid", 3, 2), ("a-low", 4, 1),
    ]


@pytest.mark.parametrize(
    ("limit", "offset", "expected"),
    [
        (2, 0, [("a-high", 0, 0), ("b-high", 1, 0)]),
        (2, 2, [("b-old", 2, 1), ("b-mid", 3, 2)]),  # local positions count the skipped ones
        (10, 4, [("a-low", 4, 1)]),
        (10, 5, []),
        (-1, 0, []),  # a negative limit is 0, as Kueue bounds it
        (1, -3, [("a-high", 0, 0)]),  # a negative offset is 0
    ],
)
def test_limit_and_offset_page_the_cluster_queue(limit: int, offset: int, expected: list[tuple[str, int, int]]) -> None:
    assert names(pending.cluster_queue_page(pending.in_order(MIXED), limit=limit, offset=offset)) == expected


@pytest.mark.parametrize(
    ("namespace", "limit", "offset", "expected"),
    [
        ("team-b", 1000, 0, [("b-high", 1, 0), ("b-old", 2, 1), ("b-mid", 3, 2)]),
        ("team-b", 1, 1, [("b-old", 2, 1)]),
        ("team-a", 1000, 0, [("a-high", 0, 0), ("a-low", 4, 1)]),
        ("team-a", 5, 2, []),
        ("team-c", 1000, 0, []),
    ],
)
def test_a_local_queue_page_keeps_its_cluster_queue_positions(
    namespace: str, limit: int, offset: int, expected: list[tuple[str, int, int]]
) -> None:
    page = pending.local_queue_page(pending.in_order(MIXED), namespace, "lq", limit=limit, offset=offset)
    assert names(page) == expected


@pytest.mark.parametrize(
    "left_out",
    [
        workload("admitted", priority=99, status=ADMITTED),
        workload("finished", priority=99, status=FINISHED),
        {**workload("deleting", priority=99), "metadata": {**workload("deleting")["metadata"],
                                                           "deletionTimestamp": T2}},
        {**workload("inactive", priority=99), "spec": {**workload("inactive")["spec"], "active": False}},
    ],
)
def test_only_waiting_workloads_are_in_line(left_out: dict[str, Any]) -> None:
    assert [w["metadata"]["name"] for w in pending.in_order([workload("w"), left_out])] == ["w"]


def test_a_pending_workload_carries_kueues_fields() -> None:
    item = pending.cluster_queue_page([workload("w")], limit=1, offset=0)[0]
    assert item == {
        "metadata": {"name": "w", "namespace": "team-a", "creationTimestamp": T0, "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "w", "uid": "job-w"}]},
        "priority": 0, "localQueueName": "lq", "positionInClusterQueue": 0, "positionInLocalQueue": 0,
    }


def test_workloads_of_a_cluster_queue_come_through_its_local_queues() -> None:
    lqs = [{"metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": cq}}
           for ns, cq in (("team-a", "cq"), ("team-b", "cq"), ("team-c", "other"))]
    wls = [workload(f"w-{ns}", ns) for ns in ("team-a", "team-b", "team-c")]
    assert [w["metadata"]["name"] for w in pending.in_cluster_queue(wls, lqs, "cq")] == ["w-team-a", "w-team-b"]


def test_a_stopped_local_queue_s_workloads_are_out_of_its_cluster_queue_s_line() -> None:
    lqs = [{"metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": "cq", "stopPolicy": stop}}
           for ns, stop in (("team-a", "Hold"), ("team-b", "None"), ("team-c", "HoldAndDrain"))]
    wls = [workload(f"w-{ns}", ns) for ns in ("team-a", "team-b", "team-c")]
    assert [w["metadata"]["name"] for w in pending.in_cluster_queue(wls, lqs, "cq")] == ["w-team-b"]


def evicted(reason: str, at: str, *, status: str = "True") -> dict[str, Any]:
    """A Workload's status after an eviction (back in its queue, no admission)."""
    return {"conditions": [{"type": "Evicted", "status": status, "reason": reason, "message": "m",
                            "lastTransitionTime": at}]}


# ``timed-out`` is the oldest, but the PodsReady timeout evicted it after the others were created.
REQUEUED = [
    workload("timed-out", priority=5, created=T0, status=evicted("PodsReadyTimeout", T2)),
    workload("newer", priority=5, created=T1),
    workload("preempted", priority=5, created=T1, status=evicted("Preempted", T2)),
    workload("high", priority=9, created=T2, status=evicted("PodsReadyTimeout", "2026-01-02T00:00:00Z")),
]


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        # Kueue's default: a PodsReady timeout sends it behind what was created before its eviction;
        # a preemption keeps its creation time; priority still comes first.
        (RequeuingTimestamp.EVICTION, ["high", "newer", "preempted", "timed-out"]),
        (RequeuingTimestamp.CREATION, ["high", "timed-out", "newer", "preempted"]),
    ],
)
def test_a_workload_evicted_by_the_pods_ready_timeout_counts_from_its_eviction(
    timestamp: RequeuingTimestamp, expected: list[str]
) -> None:
    ordered = pending.in_order(REQUEUED, timestamp=timestamp)
    assert [w["metadata"]["name"] for w in ordered] == expected


def test_the_default_order_is_kueues_eviction_timestamp() -> None:
    assert pending.in_order(REQUEUED) == pending.in_order(REQUEUED, timestamp=RequeuingTimestamp.EVICTION)


@pytest.mark.parametrize(
    ("status", "counts_from"),
    [
        (evicted("PodsReadyTimeout", T2), T2),
        (evicted("PodsReadyTimeout", T2, status="False"), T0),  # readmitted since: the eviction is history
        (evicted("InactiveWorkloadRequeuingLimitExceeded", T2), T0),
        (evicted("ClusterQueueStopped", T2), T0),
        ({}, T0),
    ],
)
def test_the_queue_order_timestamp(status: dict[str, Any], counts_from: str) -> None:
    wl = workload("w", created=T0, status=status)
    assert requeuing.queue_order_timestamp(wl, RequeuingTimestamp.EVICTION) == counts_from
    assert requeuing.queue_order_timestamp(wl, RequeuingTimestamp.CREATION) == T0
    assert pending.queued(wl, "cq").created == counts_from


def local_queue(namespace: str, consumed: dict[str, str]) -> dict[str, Any]:
    history = {"consumedResources": consumed, "lastUpdate": T0}
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": "cq"}, "status": {"fairSharing": {"admissionFairSharingStatus": history}}}


def test_with_admission_fair_sharing_the_local_queue_that_consumed_least_comes_first() -> None:
    cq = {"spec": {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}}}
    queues = [local_queue("team-a", {"nvidia.com/gpu": "12"}), local_queue("team-b", {"nvidia.com/gpu": "500m"})]
    fair = usagehistory.local_queue_usage(AdmissionFairSharing(), {"cq": cq}, queues, {})
    ordered = pending.in_order(MIXED, cluster_queue="cq", fair_usage=fair)
    # team-b's LocalQueue consumed less: all of its workloads first, each queue as before.
    assert names(pending.cluster_queue_page(ordered, limit=1000, offset=0)) == [
        ("b-high", 0, 0), ("b-old", 1, 1), ("b-mid", 2, 2), ("a-high", 3, 0), ("a-low", 4, 1),
    ]
    plain = usagehistory.local_queue_usage(AdmissionFairSharing(), {"cq": {}}, queues, {})  # not usage-based
    assert [w["metadata"]["name"] for w in pending.in_order(MIXED, cluster_queue="cq", fair_usage=plain)] == [
        w["metadata"]["name"] for w in pending.in_order(MIXED)]
