"""Ties of tier and price: node-shape scarcity keeps the nodes rare demand needs, on hand-computed fleets."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.fragmentation import TaskShape
from controlplane.apis.pods import FrozenToleration
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core import shapescarcity
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.demand import DemandHistory
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

from .builders import GI, cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
CORE = 1000
G2 = "G2"
G3 = "G3"


def tiered(**tiered_overflow: Any) -> Placement:
    scheduling: dict[str, Any] = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}
    if tiered_overflow:
        scheduling["tieredOverflow"] = tiered_overflow
    return Placement.model_validate({"replicaScheduling": scheduling})


def eight_gpus(
    key: str,
    cores: int,
    *,
    memory: int = 0,
    placement: Placement | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: tuple[FrozenToleration, ...] = (),
) -> BindingRequest:
    resources = {"nvidia.com/gpu": 8, "cpu": cores * CORE}
    if memory:
        resources["memory"] = memory
    return BindingRequest(
        key=key,
        replicas=1,
        requirements=ReplicaRequirements.build(resources, node_selector=node_selector, tolerations=tolerations),
        placement=placement or tiered(),
    )


def arrivals(cache: SchedulerCache, cores: int, times: int, prefix: str, *, memory: int = 0) -> None:
    for index in range(times):
        cache.demand.observe(f"ns/{prefix}{index}", TaskShape(cores * CORE, 1000, 8), memory)


def reasons(result: ScheduleResult, name: str) -> tuple[str, ...]:
    return next(entry.reasons for entry in result.explanation if entry.cluster == name)


def big_and_small() -> list[ClusterSnapshot]:
    """Both at the default price: ``a-small`` one G3 node of 128 cores and 8 GPUs (8 free GPUs, the
    fewest), ``b-big`` four G2 nodes of 96 cores and 8 GPUs (32)."""
    return [
        cluster("a-small", shape(1, gpus=8, product=G3, cpu=128 * CORE)),
        cluster("b-big", shape(4, gpus=8, product=G2, cpu=96 * CORE)),
    ]


def test_an_88_core_replica_leaves_the_only_120_core_node_to_the_120_core_demand() -> None:
    """40 recent arrivals of 8 GPUs and 88 cores, 2 of 8 GPUs and 120 cores (under 5 %: not in the mix,
    so fragmentation sees only the 88-core ones, which both clusters' nodes host: growth 0 in both).

    Only ``a-small``'s node holds 120 cores; 2 arrivals against 1 node hosting it in the fleet: each
    GPU of the 8 the replica takes there is one the 120-core demand lacks, cost 8 x min(1, 2/1) = 8
    GPUs. ``b-big``'s nodes never held it: 0. Without the term, fewest free GPUs picks ``a-small``.
    """
    cache = SchedulerCache()
    arrivals(cache, 88, 40, "mid")
    arrivals(cache, 120, 2, "wide")
    result = schedule(eight_gpus("ns/job", 88), big_and_small(), now=NOW, cache=cache)
    assert result.clusters == {"b-big": 1}
    assert "decided by node-shape scarcity" in reasons(result, "b-big")[-1]
    assert "node shapes 0.00 GPUs, 32 free GPUs" in reasons(result, "b-big")[-1]
    assert "fragmentation +0.00 GPUs, scarcity 0.00 GPUs, node shapes 8.00 GPUs, 8 free GPUs" in reasons(
        result, "a-small"
    )[0]


def test_without_demand_for_the_rare_shape_or_with_the_term_off_the_old_order_holds() -> None:
    cache = SchedulerCache()
    arrivals(cache, 88, 40, "mid")
    result = schedule(eight_gpus("ns/job", 88), big_and_small(), now=NOW, cache=cache)
    assert result.clusters == {"a-small": 1}
    assert "decided by fewest free GPUs" in reasons(result, "a-small")[-1]
    assert "node shapes" not in reasons(result, "a-small")[-1]
    switched_off = (
        tiered(nodeShapeScarcity=False),
        tiered(scarcityAware=False),
        tiered(nodeShapeScarcity=True, scarcityAware=False),
    )
    for off in switched_off:
        cache = SchedulerCache()
        arrivals(cache, 88, 40, "mid")
        arrivals(cache, 120, 2, "wide")
        result = schedule(eight_gpus("ns/job", 88, placement=off), big_and_small(), now=NOW, cache=cache)
        assert result.clusters == {"a-small": 1}
        assert "node shapes" not in reasons(result, "a-small")[-1]


def test_the_rare_shape_itself_goes_where_it_fits() -> None:
    cache = SchedulerCache()
    arrivals(cache, 88, 40, "mid")
    arrivals(cache, 120, 2, "wide")
    result = schedule(eight_gpus("ns/job", 120), big_and_small(), now=NOW, cache=cache)
    assert result.clusters == {"a-small": 1}


def test_memory_makes_a_node_shape_scarce_too() -> None:
    """Same CPU, but only ``a-small``'s node has the 900 GiB a few recent replicas ask for."""
    cache = SchedulerCache()
    arrivals(cache, 8, 40, "mid")
    arrivals(cache, 8, 2, "fat", memory=900 * GI)
    fleet = [
        cluster("a-small", shape(1, gpus=8, product=G3, memory=1024 * GI)),
        cluster("b-big", shape(4, gpus=8, product=G2, memory=512 * GI)),
    ]
    result = schedule(eight_gpus("ns/job", 8), fleet, now=NOW, cache=cache)
    assert result.clusters == {"b-big": 1}
    assert "decided by node-shape scarcity" in reasons(result, "b-big")[-1]


def test_a_node_that_deprives_nobody_costs_nothing() -> None:
    """``a-small`` also has a 96-core G2 node: the replica can land there, so the cluster costs 0
    and fewest free GPUs decides again."""
    cache = SchedulerCache()
    arrivals(cache, 88, 40, "mid")
    arrivals(cache, 120, 2, "wide")
    fleet = [
        cluster("a-small", shape(1, gpus=8, product=G3, cpu=128 * CORE), shape(1, gpus=8, product=G2, cpu=96 * CORE)),
        cluster("b-big", shape(4, gpus=8, product=G2, cpu=96 * CORE)),
    ]
    result = schedule(eight_gpus("ns/job", 88), fleet, now=NOW, cache=cache)
    assert result.clusters == {"a-small": 1}
    assert "decided by fewest free GPUs" in reasons(result, "a-small")[-1]


# --------------------------------------------------------------------------------- by hand


def test_constrained_needs_lost_needs_and_weights_by_hand() -> None:
    wide = (TaskShape(120 * CORE, 1000, 8), 0)
    mid = (TaskShape(88 * CORE, 1000, 8), 0)
    pinned = (TaskShape(120 * CORE, 1000, 8, (G3,)), 0)  # left to GPU scarcity
    small = frozenset({(G3, 128 * CORE, 1024 * GI, 8)})
    big = frozenset({(G2, 96 * CORE, 512 * GI, 8)})
    assert shapescarcity.constrained_needs([wide, mid, pinned], [small, big]) == (wide,)
    assert shapescarcity.constrained_needs([wide, mid], [small, small]) == ()
    assert shapescarcity.held_by_all([small, big], mid)
    assert not shapescarcity.held_by_all([small, big], wide)
    g3_row = (G3, 128 * CORE, 1024 * GI, (1000,) * 8)
    assert shapescarcity.lost_needs(g3_row, mid, (wide,)) == frozenset({wide})
    # A 1-GPU replica leaves 7 GPUs: the 8-GPU shape is lost all the same.
    one = (TaskShape(1 * CORE, 1000, 1), 0)
    assert shapescarcity.lost_needs(g3_row, one, (wide,)) == frozenset({wide})
    assert shapescarcity.lost_needs((G2, 96 * CORE, 512 * GI, (1000,) * 8), wide, (wide,)) is None
    # 3 arrivals against 4 nodes hosting it: 8 GPUs x 3/4.
    assert shapescarcity.weights((wide,), {wide: 3}, [4]) == {wide: pytest.approx(6.0)}
    assert shapescarcity.cost([frozenset({wide}), frozenset()], {wide: 6.0}) == 0.0
    assert shapescarcity.cost([], {wide: 6.0}) == 0.0


def test_demand_history_counts_needs_with_their_memory_and_forgets_them() -> None:
    history = DemandHistory(limit=2)
    task = TaskShape(CORE, 1000, 1)
    history.observe("ns/a", task, 4 * GI)
    history.observe("ns/b", task, 4 * GI)
    history.observe("ns/c", task)
    assert history.needs() == {(task, 4 * GI): 1, (task, 0): 1}
    assert history.copy().needs() == history.needs()


def small_with_a_g2_node(scoring: str) -> list[ClusterSnapshot]:
    """``a-small`` has the only 120-core node (G3, 128 cores) and one 96-core G2 node, 16 free GPUs;
    ``b-big`` four G2 nodes of 96 cores, 32 free GPUs. Both members report node scoring ``scoring``."""
    return [
        cluster(
            "a-small",
            shape(1, gpus=8, product=G3, cpu=128 * CORE),
            shape(1, gpus=8, product=G2, cpu=96 * CORE),
            node_scoring=scoring,
        ),
        cluster("b-big", shape(4, gpus=8, product=G2, cpu=96 * CORE), node_scoring=scoring),
    ]


def with_wide_demand() -> SchedulerCache:
    cache = SchedulerCache()
    arrivals(cache, 88, 40, "mid")
    arrivals(cache, 120, 2, "wide")
    return cache


def test_a_spreading_member_is_costed_at_the_node_it_picks() -> None:
    """The fleet of ``test_a_node_that_deprives_nobody_costs_nothing``, but its members spread: kube's
    LeastAllocated score of an 88-core 8-GPU replica is (128 - 88) * 100 // 128 = 31 for CPU on the G3
    node against (96 - 88) * 100 // 96 = 8 on the G2 node (memory and GPUs alike on both: 0 GPUs
    left, no memory asked), so ``a-small``'s member puts it on the G3 node, the only one the 120-core
    demand fits. The cost is taken there, 8 x min(1, 2/1) = 8 GPUs, not the 0 of the G2 node, and
    ``b-big`` takes the replica."""
    fleet = small_with_a_g2_node("LeastAllocated")
    result = schedule(eight_gpus("ns/job", 88), fleet, now=NOW, cache=with_wide_demand())
    assert result.clusters == {"b-big": 1}
    assert "decided by node-shape scarcity" in reasons(result, "b-big")[-1]
    assert "node shapes 8.00 GPUs where its LeastAllocated scoring puts it, 16 free GPUs" in reasons(
        result, "a-small"
    )[0]


@pytest.mark.parametrize(
    ("scoring", "placement"),
    [
        pytest.param("LeastAllocated", tiered(nodeShapesByMemberScoring=False), id="turned-off"),
        pytest.param("MostAllocated", None, id="packing-member"),
        pytest.param("", None, id="scoring-not-reported"),
    ],
)
def test_otherwise_the_least_cost_node_counts(scoring: str, placement: Placement | None) -> None:
    """``nodeShapesByMemberScoring: false``, or a member that does not report LeastAllocated: the
    replica can use ``a-small``'s G2 node, so ``a-small`` costs 0 and fewest free GPUs picks it."""
    request = eight_gpus("ns/job", 88, placement=placement)
    result = schedule(request, small_with_a_g2_node(scoring), now=NOW, cache=with_wide_demand())
    assert result.clusters == {"a-small": 1}
    assert "decided by fewest free GPUs" in reasons(result, "a-small")[-1]
    assert "where its" not in reasons(result, "a-small")[-1]


def test_least_allocated_rows_pick_the_emptiest_node_hosting_the_replica() -> None:
    """Hand-computed scores for 8 GPUs and 88 cores: G3 node 31 for CPU, G2 node 8; a 64-core node
    does not host it at all, and a replica no node hosts picks none."""
    small = cluster(
        "a",
        shape(1, gpus=8, product=G3, cpu=128 * CORE),
        shape(1, gpus=8, product=G2, cpu=96 * CORE),
        shape(1, gpus=8, product=G2, cpu=64 * CORE),
    )
    replica = (TaskShape(88 * CORE, 1000, 8), 0)
    picked = shapescarcity.least_allocated_rows(small, replica)
    assert {row[:2] for row in picked} == {(G3, 128 * CORE)}
    # CPU, memory (nothing asked of 512 GiB: 100), GPUs (none left: 0), floor of the mean; the
    # 64-core node scores 0 for CPU (88 cores do not fit) and is not among the picked rows.
    scores = [shapescarcity.least_allocated_score(s, replica) for s in small.shapes]
    assert scores == [(31 + 100 + 0) // 3, (8 + 100 + 0) // 3, (0 + 100 + 0) // 3]
    assert shapescarcity.least_allocated_rows(small, (TaskShape(200 * CORE, 1000, 8), 0)) == frozenset()


# ---------------------------------------------------- the nodes the replica may go to


def tainted(key: str) -> list[dict[str, str]]:
    return [{"key": "dedicated", "value": key, "effect": "NoSchedule"}]


def tolerating(key: str) -> tuple[FrozenToleration, ...]:
    return (FrozenToleration(key="dedicated", value=key, effect="NoSchedule"),)


@pytest.mark.parametrize(
    ("g3_node", "request_"),
    [
        pytest.param(
            {"labels": {"pool": "wide"}},
            eight_gpus("ns/job", 88, node_selector={"pool": "general"}),
            id="node-selector",
        ),
        pytest.param({"taints": tainted("wide")}, eight_gpus("ns/job", 88), id="untolerated-taint"),
    ],
)
def test_a_spreading_member_picks_among_the_nodes_the_replica_may_go_to(
    g3_node: dict[str, Any], request_: BindingRequest
) -> None:
    """The fleet of ``test_a_spreading_member_is_costed_at_the_node_it_picks``, but the replica may
    not go to ``a-small``'s 128-core G3 node (its node selector asks ``pool=general``, which only the
    G2 nodes carry; or the G3 node is tainted ``dedicated=wide:NoSchedule``, which it does not
    tolerate). Its member's LeastAllocated filters leave it the G2 node alone (score 36 against the
    G3 node's 43, the best of all nodes): the replica lands there, where the 120-core demand never
    fit, so ``a-small`` costs 0 GPUs, not 8, and fewest free GPUs (16 against 32) picks it."""
    general = {"pool": "general"}
    fleet = [
        cluster(
            "a-small",
            shape(1, gpus=8, product=G3, cpu=128 * CORE, **g3_node),
            shape(1, gpus=8, product=G2, cpu=96 * CORE, labels=general),
            node_scoring="LeastAllocated",
        ),
        cluster("b-big", shape(4, gpus=8, product=G2, cpu=96 * CORE, labels=general), node_scoring="LeastAllocated"),
    ]
    result = schedule(request_, fleet, now=NOW, cache=with_wide_demand())
    assert result.clusters == {"a-small": 1}
    assert "decided by fewest free GPUs" in reasons(result, "a-small")[-1]
    assert "node shapes" not in reasons(result, "a-small")[-1]  # no tied cluster costs any


def test_a_tolerated_taint_leaves_the_spreading_members_pick_as_it_was() -> None:
    """The untolerated-taint fleet above with a replica tolerating ``dedicated=wide:NoSchedule``: the
    member may use the G3 node again and picks it, 8 GPUs, and ``b-big`` takes the replica."""
    fleet = [
        cluster(
            "a-small",
            shape(1, gpus=8, product=G3, cpu=128 * CORE, taints=tainted("wide")),
            shape(1, gpus=8, product=G2, cpu=96 * CORE),
            node_scoring="LeastAllocated",
        ),
        cluster("b-big", shape(4, gpus=8, product=G2, cpu=96 * CORE), node_scoring="LeastAllocated"),
    ]
    request = eight_gpus("ns/job", 88, tolerations=tolerating("wide"))
    result = schedule(request, fleet, now=NOW, cache=with_wide_demand())
    assert result.clusters == {"b-big": 1}
    assert "node shapes 8.00 GPUs where its LeastAllocated scoring puts it" in reasons(result, "a-small")[0]


def g2_node_tainted() -> list[ClusterSnapshot]:
    """``small_with_a_g2_node`` of packing members (MostAllocated), ``a-small``'s G2 node tainted
    ``dedicated=inference:NoSchedule``."""
    return [
        cluster(
            "a-small",
            shape(1, gpus=8, product=G3, cpu=128 * CORE),
            shape(1, gpus=8, product=G2, cpu=96 * CORE, taints=tainted("inference")),
            node_scoring="MostAllocated",
        ),
        cluster("b-big", shape(4, gpus=8, product=G2, cpu=96 * CORE), node_scoring="MostAllocated"),
    ]


@pytest.mark.parametrize(
    ("tolerations", "chosen", "why"),
    [
        pytest.param((), "b-big", "node-shape scarcity", id="untolerated"),
        pytest.param(tolerating("inference"), "a-small", "fewest free GPUs", id="tolerated"),
    ],
)
def test_the_node_that_deprives_nobody_counts_only_when_the_replica_may_go_to_it(
    tolerations: tuple[FrozenToleration, ...], chosen: str, why: str
) -> None:
    """``a-small``'s member packs (MostAllocated): its cost is taken on its node where the replica
    takes least. Its 96-core G2 node would cost 0, but it is tainted ``dedicated=inference:
    NoSchedule``: a replica not tolerating it can only go to the 128-core G3 node, the only one the
    120-core demand fits, cost 8 x min(1, 2/1) = 8 GPUs, and ``b-big`` (0) takes it. Tolerating the
    taint, the G2 node counts again: 0, and fewest free GPUs picks ``a-small``."""
    fleet = g2_node_tainted()
    request = eight_gpus("ns/job", 88, tolerations=tolerations)
    result = schedule(request, fleet, now=NOW, cache=with_wide_demand())
    assert result.clusters == {chosen: 1}
    assert f"decided by {why}" in reasons(result, chosen)[-1]


def test_eligible_rows_and_the_least_allocated_pick_keep_to_the_replicas_requirements() -> None:
    """By hand: of a 128-core G3 node labelled ``pool=wide`` and a 96-core G2 node labelled
    ``pool=general``, a replica selecting ``pool=general`` may go to the G2 node only, and a
    least-allocated member picks it there though the G3 node scores higher."""
    small = cluster(
        "a",
        shape(1, gpus=8, product=G3, cpu=128 * CORE, labels={"pool": "wide"}),
        shape(1, gpus=8, product=G2, cpu=96 * CORE, labels={"pool": "general"}),
    )
    replica = (TaskShape(88 * CORE, 1000, 8), 0)
    selecting = ReplicaRequirements.build({"nvidia.com/gpu": 8, "cpu": 88 * CORE}, node_selector={"pool": "general"})
    anywhere = ReplicaRequirements.build({"nvidia.com/gpu": 8, "cpu": 88 * CORE})
    assert {row[:2] for row in shapescarcity.eligible_rows(small, selecting)} == {(G2, 96 * CORE)}
    assert {row[:2] for row in shapescarcity.eligible_rows(small, anywhere)} == {(G2, 96 * CORE), (G3, 128 * CORE)}
    assert {row[:2] for row in shapescarcity.least_allocated_rows(small, replica, selecting)} == {(G2, 96 * CORE)}
    assert {row[:2] for row in shapescarcity.least_allocated_rows(small, replica, anywhere)} == {(G3, 128 * CORE)}


def test_the_remembered_cost_is_per_requirements() -> None:
    """One cache, one fleet: the replica not tolerating the G2 node's taint, then the same replica
    tolerating it, are costed apart (``SchedulerCache.lost_options`` is keyed by the requirements)."""
    fleet = g2_node_tainted()
    cache = with_wide_demand()
    first = schedule(eight_gpus("ns/a", 88), fleet, now=NOW, cache=cache)
    second = schedule(eight_gpus("ns/b", 88, tolerations=tolerating("inference")), fleet, now=NOW, cache=cache)
    assert (first.clusters, second.clusters) == ({"b-big": 1}, {"a-small": 1})
