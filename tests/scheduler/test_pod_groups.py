"""A Kueue pod group as one gang (pure): a role per distinct Pod request, the first member's
placement, and each Pod's share of the group's decision."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.podgroups import group_request, member_result
from policies.models import Placement

from .builders import cluster, shape, tiered_placement

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def pod(name: str, gpus: int, placement: Placement | None = None) -> BindingRequest:
    return BindingRequest(
        key=f"default/{name}-pod",
        replicas=1,
        requirements=ReplicaRequirements.from_spec({"resourceRequest": {"nvidia.com/gpu": str(gpus)}}),
        placement=placement or Placement(),
    )


@pytest.mark.parametrize(
    ("gpus", "roles"),
    [
        ((1, 1, 1), [("role of g0", 1, 3)]),
        ((2, 1, 1), [("role of g0", 2, 1), ("role of g1", 1, 2)]),
        ((1, 2, 1), [("role of g0", 1, 2), ("role of g1", 2, 1)]),
    ],
)
def test_one_role_per_distinct_pod_request(gpus: tuple[int, ...], roles: list[tuple[str, int, int]]) -> None:
    gang = group_request("default/grp", [pod(f"g{i}", n) for i, n in enumerate(gpus)])
    assert gang.gang and gang.replicas == len(gpus)
    assert [(c.name, c.requirements.resource_map["nvidia.com/gpu"], c.replicas) for c in gang.components] == roles


def test_the_first_members_placement_decides() -> None:
    first = tiered_placement()
    gang = group_request("default/grp", [pod("g1", 1), pod("g0", 1, first)])
    assert gang.placement is first


def test_each_pod_gets_the_cluster_that_holds_the_group_or_none() -> None:
    members = [pod("g0", 2), pod("g1", 1), pod("g2", 1)]
    small = cluster("a-small", shape(4, gpus=1))  # 4 free GPUs, one a node: no room for the 2-GPU pod
    big = cluster("b-big", shape(1, gpus=4), provider="cloud", pricing={"A100": 4.0})
    result = schedule(group_request("default/grp", members), [small, big], now=NOW)
    share = member_result(result, members[1], group="grp", pods=3)
    assert share.clusters == {"b-big": 1}
    assert share.condition.message == "pod group grp: scheduled with its 3 pods to b-big"
    assert [(e.cluster, e.chosen, e.replicas) for e in share.explanation] == [("a-small", False, 0), ("b-big", True, 1)]

    result = schedule(group_request("default/grp", members), [small], now=NOW)
    share = member_result(result, members[0], group="grp", pods=3)
    assert share.clusters == {} and share.unplaced == 1 and not share.condition.status
    assert share.condition.message.startswith("pod group grp: no cluster can hold its 3 pods: ")
