"""How capacity reports settle reservations: by the pods a report shows bound when it can name
them, by time otherwise; and how a decision that is not written gives its reservations back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.reservations import Demand, Reservations

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
GPU = ReplicaRequirements.build({"nvidia.com/gpu": 1})
CPU = ReplicaRequirements.build({"cpu": 1000})


@pytest.mark.parametrize(
    ("previous", "decided", "bound", "left"),
    [
        ({}, {"c": 3}, 0, 3),  # applied, report newer, no pod bound yet: all still promised
        ({}, {"c": 3}, 2, 1),  # two bound: the report counts them, one stays promised
        ({}, {"c": 3}, 3, 0),  # all bound: the reservation goes
        ({"c": 2}, {"c": 5}, 2, 3),  # scale-up: the two running ones are not promised again
        ({"c": 2}, {"c": 5}, 4, 1),
        ({"c": 2}, {"c": 5}, 6, 0),  # more than the target (an old pod still terminating)
    ],
)
def test_a_report_naming_the_pods_keeps_exactly_the_unbound_ones(
    previous: dict[str, int], decided: dict[str, int], bound: int, left: int
) -> None:
    reservations = Reservations()
    reservations.record_decision("ns/a", previous=previous, decided=decided, requirements={"c": GPU}, now=T0)
    reservations.mark_applied("ns/a", "c", at=T0 + timedelta(seconds=1))
    reservations.observe_report("c", reported_at=T0 + timedelta(seconds=30), bound={"ns/a": bound})
    assert reservations.reserved_replicas("ns/a", "c") == left


@pytest.mark.parametrize(
    ("requirements", "applied_after", "reported_after", "settle", "kept"),
    [
        (GPU, 1, 3, 5, True),  # a report 2 s after the apply: the member may not have bound the pods
        (GPU, 1, 7, 5, False),  # 6 s after: it has
        (GPU, None, 4, 5, True),  # never seen applied: counts from the decision
        (GPU, None, 6, 5, False),
        (CPU, 1, 30, 5, False),  # CPU-only pods are not listed in reports: time decides even with ``bound``
    ],
)
def test_without_pod_counts_time_settles(
    requirements: ReplicaRequirements, applied_after: int | None, reported_after: int, settle: int, kept: bool
) -> None:
    reservations = Reservations()
    reservations.record_decision("ns/a", previous={}, decided={"c": 2}, requirements={"c": requirements}, now=T0)
    if applied_after is not None:
        reservations.mark_applied("ns/a", "c", at=T0 + timedelta(seconds=applied_after))
    bound = {"ns/a": 0} if requirements is CPU else None
    reservations.observe_report(
        "c", reported_at=T0 + timedelta(seconds=reported_after), settle=timedelta(seconds=settle), bound=bound
    )
    assert (reservations.reserved_replicas("ns/a", "c") == 2) is kept


def test_a_gang_reserved_whole_waits_for_all_its_gpu_pods() -> None:
    reservations = Reservations()
    master = ReplicaRequirements.build({"cpu": 2000})
    reservations.reserve("ns/job", "c", [Demand(1, master), Demand(4, GPU)], now=T0)
    reservations.observe_report("c", reported_at=T0 + timedelta(seconds=30), bound={"ns/job": 3})
    assert reservations.reserved_replicas("ns/job", "c") == 5  # a gang's reservation is kept whole
    reservations.observe_report("c", reported_at=T0 + timedelta(seconds=40), bound={"ns/job": 4})
    assert reservations.get("ns/job", "c") is None


def test_restore_gives_back_what_a_failed_write_reserved() -> None:
    reservations = Reservations()
    reservations.record_decision("ns/a", previous={}, decided={"x": 2}, requirements={"x": GPU}, now=T0)
    saved = reservations.of_binding("ns/a")
    reservations.record_decision(
        "ns/a", previous={"x": 2}, decided={"x": 1, "y": 3}, requirements={"x": GPU, "y": GPU}, now=T0
    )
    assert reservations.reserved_replicas("ns/a", "y") == 3
    version = reservations.version("x")
    reservations.restore("ns/a", saved)
    assert reservations.of_binding("ns/a") == saved
    assert reservations.reserved_replicas("ns/a", "y") == 0
    assert reservations.version("x") != version  # the estimator's caches see the change
