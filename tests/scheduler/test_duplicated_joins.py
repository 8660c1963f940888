"""A Duplicated workload goes to every feasible cluster with all its replicas, as a kind without
replicas does: the controller schedules it again when a cluster it does not run in joins or changes
(reading.goes_everywhere_but), or when room frees in a cluster it was left out of (a report, or a
hold dropped on the hub: roomwaits), and the decision adds that cluster and keeps the others."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.controller.reading import goes_everywhere_but
from controlplane.scheduler.controller.roomwaits import RoomWaits
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.reservations import Demand, Reservation
from policies.models import Placement

from .builders import cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
DUPLICATED = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
DIVIDED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}
REQUIREMENTS = {"resourceRequest": {"nvidia.com/gpu": "1"}}


def _binding(placement: dict[str, Any] | None, *, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    more: dict[str, Any] = {"placement": placement} if placement is not None else {}
    return {
        "metadata": {"name": "serve-deployment", "namespace": "ns"},
        "spec": {
            "replicas": replicas,
            "replicaRequirements": REQUIREMENTS,
            "clusters": [{"name": "onprem", "replicas": replicas}],
            **more,
            **spec,
        },
    }


@pytest.mark.parametrize(
    ("binding", "expected"),
    [
        (_binding(DUPLICATED), True),
        (_binding({"clusterAffinity": {"clusterNames": ["onprem", "late"]}}), True),  # Karmada's default
        (_binding(None), True),
        (_binding(DIVIDED), False),  # Divided replicas are not sent to every cluster
        (_binding(DUPLICATED, requiredBy=[{"name": "x", "namespace": "ns"}]), False),  # propagateDeps' placement
        (_binding(DUPLICATED, clusters=None), True),  # its first decision may be on its way
        (_binding(DIVIDED, clusters=None), False),
    ],
    ids=["duplicated", "no-replica-scheduling", "no-placement", "divided", "required-by", "undecided", "undecided-divided"],
)
def test_a_duplicated_workload_is_requeued_for_a_cluster_it_is_not_in(binding: dict[str, Any], expected: bool) -> None:
    assert goes_everywhere_but(binding, "late") is expected
    placed = binding["spec"]["clusters"] is not None
    assert goes_everywhere_but(binding, "onprem") is (expected and not placed)  # False: it runs there already


def test_a_cluster_that_joins_gets_all_the_replicas_and_the_others_keep_theirs() -> None:
    request = BindingRequest(
        key="ns/serve-deployment",
        replicas=2,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1}),
        placement=Placement.model_validate(DUPLICATED),
        previous={"onprem": 2},
    )
    fleet = [cluster("onprem", shape(2, gpus=8)), cluster("late", shape(1, gpus=8))]
    result = schedule(request, fleet, now=NOW)
    assert result.clusters == {"late": 2, "onprem": 2}
    assert result.condition.status


NO_SCHEDULE = [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]


def _request(placement: dict[str, Any], *, gang: bool = False, **requests: int) -> BindingRequest:
    return BindingRequest(
        key="ns/serve-deployment",
        replicas=2,
        requirements=ReplicaRequirements.build(requests or {"nvidia.com/gpu": 1}),
        placement=Placement.model_validate(placement),
        gang=gang,
    )


BUSY_FLEET = [
    cluster("onprem", shape(2, gpus=8)),
    cluster("busy", shape(1, gpus=1, allocatable={"nvidia.com/gpu": 8})),  # room for 1 of the 2 replicas
    cluster("full", shape(1, allocatable={"nvidia.com/gpu": 8})),  # its GPUs all in use
    cluster("tainted", shape(1, gpus=8), taints=NO_SCHEDULE),  # the placement rules it out, room or not
]


@pytest.mark.parametrize(
    ("placement", "gang", "short"),
    [
        (DUPLICATED, False, {"busy", "full"}),
        (DIVIDED, False, set()),  # a Divided workload is not decided again for room elsewhere
        (DUPLICATED, True, set()),  # a gang goes to one cluster, not to every one
    ],
    ids=["duplicated", "divided", "gang"],
)
def test_a_decision_names_the_clusters_a_duplicated_workload_was_left_out_of_for_want_of_room(
    placement: dict[str, Any], gang: bool, short: set[str]
) -> None:
    result = schedule(_request(placement, gang=gang), BUSY_FLEET, now=NOW)
    assert result.condition.status
    assert result.short_of_room == short


def _decided(roomwaits: RoomWaits, key: tuple[str, str], request: BindingRequest) -> None:
    roomwaits.record(key, request, schedule(request, BUSY_FLEET, now=NOW))


@pytest.mark.parametrize(
    ("freed", "expected"),
    [
        ({"nvidia.com/gpu": 8}, [("ns", "gpu")]),  # only the binding whose pods ask for GPUs
        ({"cpu": 64_000, "nvidia.com/gpu": 1}, [("ns", "cpu"), ("ns", "gpu")]),
        ({"nvidia.com/gpu": 1, "memory": 0}, [("ns", "gpu")]),
    ],
    ids=["gpus", "cpu-and-gpus", "less-memory"],
)
def test_a_report_with_more_free_room_decides_again_only_the_bindings_left_out_there_that_it_may_hold(
    freed: dict[str, int], expected: list[tuple[str, str]]
) -> None:
    roomwaits = RoomWaits()
    busy = BUSY_FLEET[1]
    _decided(roomwaits, ("ns", "gpu"), _request(DUPLICATED))
    # 2 replicas of 40 CPUs, no GPU: busy (64 CPUs) holds one, onprem's two nodes one each
    _decided(roomwaits, ("ns", "cpu"), _request(DUPLICATED, cpu=40_000))
    _decided(roomwaits, ("ns", "divided"), _request(DIVIDED))
    assert roomwaits.waiting_in("busy") == {("ns", "gpu"), ("ns", "cpu")}
    assert roomwaits.waiting_in("full") == {("ns", "gpu"), ("ns", "cpu")}
    free = {"cpu": 64_000, "memory": 512 * 2**30, "pods": 110, "nvidia.com/gpu": 1}
    for name, more in freed.items():
        free[name] += more
    after = cluster("busy", {**shape(1), "free": free, "allocatable": {**free, "nvidia.com/gpu": 8}})
    assert roomwaits.freed("busy", busy, after) == expected
    assert roomwaits.freed("onprem", BUSY_FLEET[0], after) == []  # nothing waits for room there
    roomwaits.record(("ns", "gpu"), _request(DUPLICATED), schedule(_request(DUPLICATED), [BUSY_FLEET[0], after], now=NOW))
    roomwaits.forget(("ns", "cpu"))
    assert roomwaits.waiting_in("busy") == set()
    assert roomwaits.waiting_in("full") == set()  # the decision without it forgot it there too


def test_a_cluster_that_leaves_takes_its_waiting_bindings_along() -> None:
    roomwaits = RoomWaits()
    _decided(roomwaits, ("ns", "gpu"), _request(DUPLICATED))
    roomwaits.forget_cluster("busy")
    assert roomwaits.waiting_in("busy") == set()
    assert roomwaits.waiting_in("full") == {("ns", "gpu")}
    roomwaits.forget(("ns", "gpu"))
    assert roomwaits.waiting_in("full") == set()


@pytest.mark.parametrize(
    ("cluster_name", "held", "expected"),
    [
        ("busy", {"nvidia.com/gpu": 7, "cpu": 1000}, [("ns", "cpu"), ("ns", "gpu")]),
        ("busy", {"nvidia.com/gpu": 7}, [("ns", "gpu")]),  # only the binding whose pods ask for GPUs
        ("busy", {"memory": 2**30}, []),  # room none of them waits for
        ("onprem", {"nvidia.com/gpu": 7}, []),  # nothing waits for room there
    ],
    ids=["gpus-and-cpu", "gpus", "memory", "elsewhere"],
)
def test_a_hold_dropped_on_the_hub_decides_again_only_the_bindings_left_out_there_that_it_held_room_for(
    cluster_name: str, held: dict[str, int], expected: list[tuple[str, str]]
) -> None:
    roomwaits = RoomWaits()
    _decided(roomwaits, ("ns", "gpu"), _request(DUPLICATED))
    _decided(roomwaits, ("ns", "cpu"), _request(DUPLICATED, cpu=40_000))
    _decided(roomwaits, ("ns", "divided"), _request(DIVIDED))
    hold = Reservation("ns/hog", cluster_name, (Demand(1, ReplicaRequirements.build(held)),), NOW)
    assert roomwaits.released(hold) == expected
