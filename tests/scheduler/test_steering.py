"""Steering a flexible replica inside its cluster away from GPU models constrained demand needs,
on small hand-computed fleets."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from controlplane.apis.fragmentation import TaskShape
from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.controller.writing import kept_steering
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduledCondition, ScheduleResult
from controlplane.scheduler.core.steering import avoided_models, preferred_term
from policies.models import Placement

from .builders import cluster, shape
from .test_tiebreak import CPU, NOW, T4, V100, observe, reasons, tiered

P100 = "Tesla-P100-PCIE-16GB"
FLEX_1 = TaskShape(CPU, 1000, 1)


@pytest.mark.parametrize(
    ("task", "cluster_free", "fleet_free", "constrained", "expected"),
    [
        # 10 GPUs of T4-only demand against 8 free T4s in the fleet: at least PRESSURE (1.0) x 8.
        pytest.param(FLEX_1, {T4: 8, V100: 8}, {T4: 8, V100: 8}, {T4: 10.0}, (T4,), id="t4-scarce"),
        pytest.param(FLEX_1, {T4: 8, V100: 8}, {T4: 8, V100: 8}, {T4: 8.0}, (T4,), id="demand-equals-free"),
        pytest.param(FLEX_1, {T4: 8, V100: 8}, {T4: 8, V100: 8}, {T4: 6.0}, (), id="t4-not-scarce"),
        # The fleet's free T4s count, not the cluster's: 10 against 16 in the fleet.
        pytest.param(FLEX_1, {T4: 8, V100: 8}, {T4: 16, V100: 8}, {T4: 10.0}, (), id="fleet-has-room"),
        pytest.param(FLEX_1, {T4: 8, V100: 8, P100: 2}, {T4: 8, V100: 8, P100: 2}, {T4: 9.0, P100: 3.0},
                     (P100, T4), id="two-models-sorted"),
        # Nothing left once T4 is avoided, or too little for the replica's GPUs: no term.
        pytest.param(FLEX_1, {T4: 8}, {T4: 8, V100: 8}, {T4: 10.0}, (), id="t4-only-cluster"),
        pytest.param(TaskShape(CPU, 1000, 2), {T4: 8, V100: 1}, {T4: 8, V100: 1}, {T4: 10.0}, (), id="too-little-v100"),
        pytest.param(FLEX_1, {T4: 8, V100: 0}, {T4: 8, V100: 0}, {T4: 10.0}, (), id="v100-full"),
        # A replica bound to one model, or without GPUs, is never steered.
        pytest.param(TaskShape(CPU, 1000, 1, (T4,)), {T4: 8, V100: 8}, {T4: 8, V100: 8}, {T4: 10.0}, (), id="t4-only"),
        pytest.param(TaskShape(CPU, 0, 0), {T4: 8, V100: 8}, {T4: 8, V100: 8}, {T4: 10.0}, (), id="cpu-only"),
        # Accepting two models is flexible: it is steered among them.
        pytest.param(TaskShape(CPU, 1000, 1, (T4, V100)), {T4: 8, V100: 8, P100: 8}, {T4: 8, V100: 8, P100: 8},
                     {T4: 10.0, P100: 10.0}, (T4,), id="accepts-t4-and-v100"),
        # A share of a GPU needs its thousandths only.
        pytest.param(TaskShape(CPU, 500, 1), {T4: 8, V100: 0.5}, {T4: 8, V100: 0.5}, {T4: 10.0}, (T4,), id="share"),
    ],
)
def test_avoided_models_by_hand(
    task: TaskShape,
    cluster_free: dict[str, float],
    fleet_free: dict[str, float],
    constrained: dict[str, float],
    expected: tuple[str, ...],
) -> None:
    assert avoided_models(task, cluster_free, fleet_free, constrained) == expected


def test_the_term_prefers_nodes_of_other_models_with_kubes_lowest_weight() -> None:
    assert preferred_term((T4, P100)) == {
        "weight": 1,
        "preference": {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": [T4, P100]}]},
    }


def mixed_fleet() -> list[Any]:
    """One cluster of 2 T4 nodes and 1 V100 node, 4 free GPUs each: 8 free T4s in the fleet."""
    return [cluster("mixed", shape(2, gpus=4, product=T4), shape(1, gpus=4, product=V100))]


def flexible(key: str, *, previous: dict[str, int] | None = None, **tiered_overflow: Any) -> BindingRequest:
    return BindingRequest(
        key=key,
        replicas=1,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": CPU}),
        placement=tiered(**tiered_overflow),
        previous=previous or {},
    )


def t4_demand_waits(cache: SchedulerCache) -> None:
    """Recent T4-only demand of 10 GPUs (5 replicas of 2): more than the fleet's 8 free T4s."""
    observe(cache, TaskShape(CPU, 1000, 2, (T4,)), 5, "t4only")


def test_a_flexible_replica_in_a_t4_and_v100_cluster_is_steered_off_t4_while_t4_demand_waits() -> None:
    cache = SchedulerCache()
    t4_demand_waits(cache)
    result = schedule(flexible("ns/job"), mixed_fleet(), now=NOW, cache=cache)
    assert result.clusters == {"mixed": 1}
    assert result.steering == {"mixed": (T4,)}
    assert any("steered inside the cluster away from Tesla-T4" in r for r in reasons(result, "mixed"))


@pytest.mark.parametrize(
    "tiered_overflow",
    [
        pytest.param({"scarcityAware": False}, id="scarcity-switched-off"),
        pytest.param({"scarcitySteering": True, "scarcityAware": False}, id="asked-for-with-scarcity-off"),
        pytest.param({"scarcitySteering": False}, id="switched-off"),
    ],
)
def test_no_steering_when_switched_off_or_with_scarcity_off(tiered_overflow: dict[str, Any]) -> None:
    cache = SchedulerCache()
    t4_demand_waits(cache)
    result = schedule(flexible("ns/job", **tiered_overflow), mixed_fleet(), now=NOW, cache=cache)
    assert result.clusters == {"mixed": 1}
    assert result.steering == {}
    assert not any("steered" in r for r in reasons(result, "mixed"))


@pytest.mark.parametrize(
    "replica_scheduling",
    [
        pytest.param(None, id="no-replica-scheduling"),
        pytest.param({"replicaSchedulingType": "Duplicated"}, id="duplicated"),
        pytest.param({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}, id="aggregated"),
        pytest.param({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}, id="weighted"),
    ],
)
def test_only_tiered_overflow_steers_by_default(replica_scheduling: dict[str, Any] | None) -> None:
    """Other divisions have no tieredOverflow block to turn steering off in: they never steer."""
    cache = SchedulerCache()
    t4_demand_waits(cache)
    raw = {"replicaScheduling": replica_scheduling} if replica_scheduling else {}
    request = dataclasses.replace(flexible("ns/job"), placement=Placement.model_validate(raw))
    result = schedule(request, mixed_fleet(), now=NOW, cache=cache)
    assert result.clusters == {"mixed": 1}
    assert result.steering == {}


def test_no_steering_without_constrained_demand_or_for_a_cluster_already_running_replicas() -> None:
    cache = SchedulerCache()
    observe(cache, FLEX_1, 20, "flex")
    assert schedule(flexible("ns/a"), mixed_fleet(), now=NOW, cache=cache).steering == {}
    t4_demand_waits(cache)
    running = flexible("ns/b", previous={"mixed": 1})
    assert schedule(running, mixed_fleet(), now=NOW, cache=cache).steering == {}


def test_a_cluster_already_running_replicas_keeps_the_steering_its_work_has() -> None:
    """New clusters get the decision's steering; one that already ran replicas keeps the binding's
    (a changed pod template would restart a Deployment's pods, and a Job's cannot change)."""
    binding = {"metadata": {"annotations": {"scheduler.gpufed.io/gpu-steering": json.dumps({"old": [P100]})}}}
    request = flexible("ns/job", previous={"old": 1, "bare": 1})
    condition = ScheduledCondition(True, ScheduledReason.SUCCESS, "scheduled")
    result = ScheduleResult(
        {"old": 2, "bare": 1, "new": 1, "gone": 0}, {}, condition, None, [], 0,
        steering={"old": (T4,), "bare": (T4,), "new": (T4,)},
    )
    assert kept_steering(binding, request, result) == {"old": (P100,), "new": (T4,)}
