"""Packing hints: a replica smaller than a node is steered, inside its cluster, toward the nodes
already running GPU work; on small hand-computed fleets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.interpreter.requirements import ReplicaRequirements, parse_required_node_affinity
from controlplane.scheduler.controller.writing import kept_packing
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduledCondition, ScheduleResult
from controlplane.scheduler.core.packhints import MAX_HINTED, hinted_hosts, preferred_term

from .builders import cluster, shape
from .test_tiebreak import CPU, NOW, reasons, tiered

HOSTNAME = "kubernetes.io/hostname"


def named(count: int, gpus: int, *hostnames: str, cpu: int = 64_000, size: int = 8) -> dict[str, Any]:
    """``count`` nodes of ``size`` GPUs with ``gpus`` free, the agent naming ``hostnames`` of them."""
    out = shape(count, gpus=gpus, cpu=cpu, allocatable={"nvidia.com/gpu": size})
    out["gpu"]["count"] = size
    if hostnames:
        out["hostnames"] = list(hostnames)
    return out


def hosts(fleet: Any, gpus: float) -> tuple[str, ...]:
    return hinted_hosts(fleet, request(max(int(gpus), 1)).requirements, gpus)


def half_used(node_scoring: str | None = None) -> list[Any]:
    """One cluster: one 8-GPU node with 4 GPUs in use (``node-a``), three empty 8-GPU nodes; its
    agent reports ``node_scoring`` (None: nothing)."""
    return [cluster("c", named(1, 4, "node-a"), named(3, 8), node_scoring=node_scoring)]


def request(
    gpus: int = 1,
    *,
    key: str = "ns/job",
    previous: dict[str, int] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    **tiered_overflow: Any,
) -> BindingRequest:
    return BindingRequest(
        key=key,
        replicas=1,
        requirements=ReplicaRequirements.build(
            {"nvidia.com/gpu": gpus, "cpu": CPU},
            node_selector=node_selector,
            node_affinity=parse_required_node_affinity(affinity),
        ),
        placement=tiered(**tiered_overflow),
        previous=previous or {},
    )


#: Hints for every member, whatever the recent demand (the defaults pack only spreading members, and
#: only while multi-GPU demand lasts: tests/scheduler/test_packhints_demand.py).
ALWAYS = {"packingHints": True, "packingHintsScope": "AllMembers", "packingHintsMultiGPUPercent": 0}


def test_a_one_gpu_replica_prefers_the_half_used_node() -> None:
    result = schedule(request(**ALWAYS), half_used(), now=NOW, cache=SchedulerCache())
    assert result.clusters == {"c": 1}
    assert result.packing == {"c": ("node-a",)}
    assert any(
        "packed inside the cluster toward 1 node(s) already running GPU work (node-a; preferred node affinity, "
        "weight 1)" in r
        for r in reasons(result, "c")
    )


def test_the_term_prefers_the_named_nodes_with_kubes_lowest_weight() -> None:
    assert preferred_term(("node-a", "node-b")) == {
        "weight": 1,
        "preference": {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["node-a", "node-b"]}]},
    }


@pytest.mark.parametrize(
    ("gpus", "tiered_overflow"),
    [
        pytest.param(8, ALWAYS, id="fills-a-whole-node"),
        pytest.param(1, {}, id="none-by-default-for-a-member-not-reporting-its-scoring"),
        pytest.param(1, {**ALWAYS, "packingHints": False}, id="switched-off"),
    ],
)
def test_no_hint_for_a_whole_node_or_unless_asked_for(gpus: int, tiered_overflow: dict[str, Any]) -> None:
    result = schedule(request(gpus, **tiered_overflow), half_used(), now=NOW, cache=SchedulerCache())
    assert result.clusters == {"c": 1}
    assert result.packing == {}
    assert not any("packed" in r for r in reasons(result, "c"))


SPREADING = {"packingHints": True, "packingHintsScope": "SpreadingMembers", "packingHintsMultiGPUPercent": 0}


@pytest.mark.parametrize(
    ("node_scoring", "tiered_overflow", "hinted"),
    [
        pytest.param("LeastAllocated", {}, False, id="by-default-not-without-multi-gpu-demand"),
        pytest.param("LeastAllocated", ALWAYS, True, id="all-members-least-allocated"),
        pytest.param("MostAllocated", ALWAYS, True, id="all-members-most-allocated"),
        pytest.param("LeastAllocated", SPREADING, True, id="spreading-least-allocated-gets-the-hint"),
        pytest.param("MostAllocated", SPREADING, False, id="spreading-most-allocated-packs-already"),
        pytest.param("FragmentationAware", SPREADING, False, id="spreading-fragmentation-aware"),
        pytest.param("RequestedToCapacityRatio", SPREADING, False, id="spreading-requested-to-capacity-ratio"),
        pytest.param("Unknown", SPREADING, False, id="spreading-unknown"),
        pytest.param(None, SPREADING, False, id="spreading-nothing-reported"),
        pytest.param("LeastAllocated", {**SPREADING, "packingHints": False}, False, id="false-overrides-the-scope"),
    ],
)
def test_the_scope_follows_the_members_node_scoring(
    node_scoring: str | None, tiered_overflow: dict[str, Any], hinted: bool
) -> None:
    result = schedule(request(**tiered_overflow), half_used(node_scoring), now=NOW, cache=SchedulerCache())
    assert result.clusters == {"c": 1}
    assert result.packing == ({"c": ("node-a",)} if hinted else {})
    because = [r for r in reasons(result, "c") if "packed" in r]
    assert len(because) == int(hinted)
    by_scoring = "added because the member reports node scoring LeastAllocated, which spreads replicas over empty " \
        "nodes (packingHintsScope: SpreadingMembers)"
    assert any(by_scoring in r for r in because) == (hinted and tiered_overflow == SPREADING)


def test_in_a_fleet_of_both_only_the_spreading_member_gets_the_hint() -> None:
    """Tier 0 spreads (least-allocated): a half-used node ``node-a`` (4 free GPUs) and an empty one;
    tier 1 packs (most-allocated): a half-used ``node-b`` and an empty node. 13 1-GPU replicas fill
    tier 0 (12 GPUs) and overflow one into tier 1. Only tier 0 is packed toward its named node."""
    fleet = [
        cluster("spreads", named(1, 4, "node-a"), named(1, 8), tier=0, node_scoring="LeastAllocated"),
        cluster("packs", named(1, 4, "node-b"), named(1, 8), tier=1, node_scoring="MostAllocated"),
    ]
    overflow = BindingRequest(
        key="ns/job", replicas=13, requirements=request().requirements, placement=tiered(**SPREADING), previous={}
    )
    result = schedule(overflow, fleet, now=NOW, cache=SchedulerCache())
    assert result.clusters == {"spreads": 12, "packs": 1}
    assert result.packing == {"spreads": ("node-a",)}


@pytest.mark.parametrize(
    ("node_selector", "affinity"),
    [
        pytest.param({HOSTNAME: "node-b"}, None, id="node-selector"),
        pytest.param(None, {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "NotIn", "values": ["node-a"]}]}]}, id="affinity"),
        pytest.param(None, {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]}, id="match-fields"),
    ],
)
def test_no_hint_when_the_users_own_affinity_pins_the_nodes(
    node_selector: dict[str, str] | None, affinity: dict[str, Any] | None
) -> None:
    requirements = request(node_selector=node_selector, affinity=affinity).requirements
    assert hinted_hosts(half_used()[0], requirements, 1.0) == ()


def test_only_named_nodes_with_room_the_fewest_free_gpus_first_and_at_most_32() -> None:
    """Named 8-GPU nodes: 2 with 6 free GPUs, 40 with 2 free, 1 with 3 free but 0.5 cores (no room
    for a replica of 1 core), 1 with 7 free. A 1-GPU replica takes the 2-free ones first, then the
    rest by free GPUs, up to 32 names."""
    two_free = [f"two-{i:02}" for i in range(40)]
    fleet = cluster(
        "c",
        named(2, 6, "six-a", "six-b"),
        named(40, 2, *two_free[:32]),
        named(1, 3, "no-cpu", cpu=500),
        named(1, 7, "seven"),
        named(4, 8),
    )
    assert len(hosts(fleet, 1)) == MAX_HINTED == 32
    assert hosts(fleet, 1) == tuple(two_free[:32])
    small = cluster("c", named(2, 6, "six-a", "six-b"), named(1, 3, "no-cpu", cpu=500), named(1, 7, "seven"))
    assert hosts(small, 1) == ("seven", "six-a", "six-b")
    # Six GPUs: only the nodes with six or more free hold it.
    assert hosts(small, 6) == ("seven", "six-a", "six-b")
    assert hosts(small, 7) == ("seven",)


def test_in_a_cluster_of_two_node_sizes_a_replica_goes_where_a_node_is_in_use() -> None:
    """8-GPU nodes and 2-GPU nodes, one of these half used (``small-a``): a 1-GPU replica or a share
    is packed onto it, a 2-GPU replica has no room there; in a cluster of 2-GPU nodes only, a 2-GPU
    replica fills a node: no hint; nothing named: no hint."""
    mixed = cluster("c", named(2, 8), named(1, 1, "small-a", size=2), named(3, 2, size=2))
    assert hosts(mixed, 1) == ("small-a",)
    assert hosts(mixed, 0.5) == ("small-a",)
    assert hosts(mixed, 2) == ()
    only_small = cluster("c", named(1, 1, "small-a", size=2), named(3, 2, size=2))
    assert hosts(only_small, 2) == ()
    assert hosts(only_small, 1) == ("small-a",)
    assert hosts(cluster("c", named(4, 8)), 1) == ()


def test_no_hint_for_a_cluster_already_running_replicas_which_keeps_what_its_work_has() -> None:
    cache = SchedulerCache()
    running = request(previous={"c": 1}, **ALWAYS)
    assert schedule(running, half_used(), now=NOW, cache=cache).packing == {}
    binding = {"metadata": {"annotations": {"scheduler.gpufed.io/packing-hints": json.dumps(
        {"old": ["node-x"], "gone": ["y"]})}}}
    result = ScheduleResult(
        clusters={"old": 1, "new": 1},
        shapes={},
        condition=ScheduledCondition(True, ScheduledReason.SUCCESS, ""),
        affinity_name=None,
        explanation=[],
        unplaced=0,
        packing={"old": ("node-z",), "new": ("node-a",)},
    )
    request_now = request(previous={"old": 1, "gone": 1})
    assert kept_packing(binding, request_now, result) == {"old": ("node-x",), "new": ("node-a",)}
