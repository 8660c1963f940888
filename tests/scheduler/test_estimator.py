"""The estimator: exact per node, MIG-aware, selector/taint-aware, reservation-aware; gang fit."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from controlplane.apis.pods import FrozenToleration
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ReplicaRequirements,
)
from controlplane.scheduler.core.estimating import UNLIMITED
from controlplane.scheduler.core.estimator import estimate_max_replicas, room_without
from controlplane.scheduler.core.gangs import fits_gang
from controlplane.scheduler.core.packing import place_pods
from controlplane.scheduler.core.replaying import adjusted_snapshot
from controlplane.scheduler.core.reservations import Demand, Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

from .builders import A100, GI, H100, cluster, shape
from .reference import reference_replay

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
A100_MIG_SINGLE = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"


def gpus(n: int, **extra: int) -> ReplicaRequirements:
    return ReplicaRequirements.build({"nvidia.com/gpu": n, "cpu": 1000, **extra})


def mig(profile: str, n: int = 1) -> ReplicaRequirements:
    return ReplicaRequirements.build({f"nvidia.com/mig-{profile}": n, "cpu": 1000})


def product_affinity(operator: str, *values: str) -> tuple[NodeSelectorTerm, ...]:
    return (
        NodeSelectorTerm(expressions=(NodeSelectorRequirement("nvidia.com/gpu.product", operator, values),)),
    )


CASES = [
    # (id, cluster, requirements, replicas, a substring every reason list must contain or None)
    (
        "fragmented: 8 nodes x 1 free GPU hold no 4-GPU replica",
        cluster("c", shape(8, gpus=1)),
        gpus(4),
        0,
        "insufficient nvidia.com/gpu: need 4, 1 free",
    ),
    (
        "fragmentation is reported as such",
        cluster("c", shape(8, gpus=1)),
        gpus(4),
        0,
        "8 free in total but fragmented",
    ),
    (
        "one node with 4 free holds one 4-GPU replica",
        cluster("c", shape(8, gpus=1), shape(1, gpus=4)),
        gpus(4),
        1,
        None,
    ),
    ("per node floor, times node count", cluster("c", shape(3, gpus=7)), gpus(2), 9, None),
    (
        "MIG mixed: free 1g slices never hold a 3g request",
        cluster("c", shape(2, product=H100, extra={"nvidia.com/mig-1g.10gb": 7})),
        mig("3g.40gb"),
        0,
        "insufficient nvidia.com/mig-3g.40gb: need 1, 0 free",
    ),
    (
        "MIG mixed: 1g slices hold 1g requests",
        cluster("c", shape(2, product=H100, extra={"nvidia.com/mig-1g.10gb": 7})),
        mig("1g.10gb"),
        14,
        None,
    ),
    (
        "MIG mixed: all-balanced layout, 3g per node",
        cluster(
            "c",
            shape(
                4,
                product=H100,
                extra={"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1},
            ),
        ),
        mig("3g.40gb"),
        4,
        None,
    ),
    (
        "MIG mixed: need 4 slices of 3g, 1 free per node",
        cluster("c", shape(4, product=H100, extra={"nvidia.com/mig-3g.40gb": 1})),
        mig("3g.40gb", 4),
        0,
        "insufficient nvidia.com/mig-3g.40gb: need 4, 1 free",
    ),
    (
        "MIG single: slices advertised as nvidia.com/gpu, selected by the MIG product label",
        cluster("c", shape(2, gpus=7, product=A100_MIG_SINGLE, mig_strategy="single")),
        ReplicaRequirements.build(
            {"nvidia.com/gpu": 1}, node_selector={"nvidia.com/gpu.product": A100_MIG_SINGLE}
        ),
        14,
        None,
    ),
    (
        "MIG single: a whole-GPU product selector does not match slices",
        cluster("c", shape(2, gpus=7, product=A100_MIG_SINGLE, mig_strategy="single")),
        ReplicaRequirements.build(
            {"nvidia.com/gpu": 1}, node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
        ),
        0,
        "0/2 nodes match nodeSelector nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB",
    ),
    (
        "MIG single with a mixed layout is unusable",
        cluster("c", shape(3, gpus=7, product="NVIDIA-A100-SXM4-40GB-MIG-INVALID", mig_strategy="single")),
        gpus(1),
        0,
        "3 node(s) have an unusable MIG layout",
    ),
    (
        "time-sliced shares count as their own resource",
        cluster("c", shape(1, product=A100, extra={"nvidia.com/gpu.shared": 75})),
        ReplicaRequirements.build({"nvidia.com/gpu.shared": 1, "cpu": 100}),
        75,
        None,
    ),
    (
        "time-sliced shares do not hold whole-GPU requests",
        cluster("c", shape(1, product=A100, extra={"nvidia.com/gpu.shared": 75})),
        gpus(1),
        0,
        "insufficient nvidia.com/gpu",
    ),
    (
        "nodeSelector on gpu.product picks the H100 nodes",
        cluster("c", shape(8, gpus=8, product=A100), shape(2, gpus=8, product=H100)),
        ReplicaRequirements.build({"nvidia.com/gpu": 8}, node_selector={"nvidia.com/gpu.product": H100}),
        2,
        "2/10 nodes match nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
    ),
    (
        "nodeSelector matching no node",
        cluster("c", shape(12, gpus=8, product=A100)),
        ReplicaRequirements.build({"nvidia.com/gpu": 1}, node_selector={"nvidia.com/gpu.product": H100}),
        0,
        "0/12 nodes match nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
    ),
    (
        "required node affinity In",
        cluster("c", shape(8, gpus=8, product=A100), shape(2, gpus=8, product=H100)),
        ReplicaRequirements.build({"nvidia.com/gpu": 8}, node_affinity=product_affinity("In", H100)),
        2,
        "8 node(s) didn't match required node affinity",
    ),
    (
        "required node affinity NotIn",
        cluster("c", shape(8, gpus=8, product=A100), shape(2, gpus=8, product=H100)),
        ReplicaRequirements.build({"nvidia.com/gpu": 8}, node_affinity=product_affinity("NotIn", H100)),
        8,
        None,
    ),
    (
        "required node affinity DoesNotExist",
        cluster("c", shape(8, gpus=8, product=A100), shape(2, product=None)),
        ReplicaRequirements.build({"cpu": 64_000}, node_affinity=product_affinity("DoesNotExist")),
        2,
        None,
    ),
    (
        "required node affinity Gt on gpu memory",
        cluster(
            "c",
            shape(2, gpus=8, labels={"nvidia.com/gpu.memory": "81559"}),
            shape(3, gpus=8, labels={"nvidia.com/gpu.memory": "40960"}),
        ),
        ReplicaRequirements.build(
            {"nvidia.com/gpu": 8},
            node_affinity=(
                NodeSelectorTerm(
                    expressions=(NodeSelectorRequirement("nvidia.com/gpu.memory", "Gt", ("50000",)),)
                ),
            ),
        ),
        2,
        None,
    ),
    (
        "untolerated node taint",
        cluster(
            "c",
            shape(3, gpus=8, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        ),
        gpus(1),
        0,
        "3 node(s) had untolerated taint {nvidia.com/gpu: present}",
    ),
    (
        "tolerated node taint",
        cluster(
            "c",
            shape(3, gpus=8, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        ),
        ReplicaRequirements.build(
            {"nvidia.com/gpu": 8}, tolerations=[FrozenToleration(key="nvidia.com/gpu", operator="Exists")]
        ),
        3,
        None,
    ),
    (
        "PreferNoSchedule does not filter",
        cluster("c", shape(3, gpus=8, taints=[{"key": "spot", "value": "", "effect": "PreferNoSchedule"}])),
        gpus(8),
        3,
        None,
    ),
    (
        "NoExecute filters too",
        cluster("c", shape(1, gpus=8, taints=[{"key": "maint", "value": "now", "effect": "NoExecute"}])),
        gpus(1),
        0,
        "1 node(s) had untolerated taint {maint: now}",
    ),
    ("cpu can be the limit", cluster("c", shape(2, gpus=8, cpu=4_000)), gpus(1, cpu=3_000), 2, None),
    (
        "memory can be the limit",
        cluster("c", shape(1, gpus=8, memory=16 * GI)),
        ReplicaRequirements.build({"nvidia.com/gpu": 1, "memory": 32 * GI}),
        0,
        "insufficient memory: need 32Gi, 16Gi free",
    ),
    (
        "the pod slots of a node cap replicas",
        cluster("c", shape(1, extra={"pods": 3})),
        ReplicaRequirements.build({"cpu": 10}),
        3,
        None,
    ),
    ("no nodes at all", cluster("c"), gpus(1), 0, "0/0 nodes are available"),
]


@pytest.mark.parametrize(
    ("snapshot", "req", "replicas", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_estimate(
    snapshot: ClusterSnapshot, req: ReplicaRequirements, replicas: int, reason: str | None
) -> None:
    estimate = estimate_max_replicas(snapshot, req)
    assert estimate.replicas == replicas
    if reason is not None:
        assert any(reason in r for r in estimate.reasons), estimate.reasons
    # Memoised: the same question about the same snapshot returns the same answer object.
    assert estimate_max_replicas(snapshot, req) is estimate


def test_nothing_requested_is_unlimited_without_pod_slots() -> None:
    snapshot = ClusterSnapshot.from_cluster(
        {
            "metadata": {"name": "c"},
            "spec": {"provider": "onprem"},
            "status": {"nodeShapes": [{"count": 2, "free": {"cpu": 1000}}]},
        }
    )
    assert estimate_max_replicas(snapshot, ReplicaRequirements()).replicas == UNLIMITED


def test_products_of_fitting_nodes() -> None:
    snapshot = cluster("c", shape(1, gpus=8, product=A100), shape(1, gpus=1, product=H100))
    assert estimate_max_replicas(snapshot, gpus(4)).products == (A100,)


def test_reservations_prevent_double_booking() -> None:
    snapshot = cluster("c", shape(1, gpus=4), shape(1, gpus=1))
    reservations = Reservations()
    assert estimate_max_replicas(snapshot, gpus(4), reserved=reservations).replicas == 1
    # The first binding takes the 4-GPU node...
    reservations.reserve("ns/first", "c", [Demand(1, gpus(4))], now=T0)
    second = estimate_max_replicas(snapshot, gpus(4), reserved=reservations)
    # ...so the second, asked right after, sees no room, with the reason.
    assert second.replicas == 0
    assert any("insufficient nvidia.com/gpu: need 4" in r for r in second.reasons)
    # Small pods still fit on what is left.
    assert estimate_max_replicas(snapshot, gpus(1), reserved=reservations).replicas == 1


def test_reserved_pods_take_the_tightest_nodes_first() -> None:
    snapshot = cluster("c", shape(1, gpus=4), shape(1, gpus=1))
    reservations = Reservations()
    reservations.reserve("ns/small", "c", [Demand(1, gpus(1))], now=T0)
    # The 1-GPU pod is assumed on the 1-GPU node, keeping the 4-GPU hole whole.
    assert estimate_max_replicas(snapshot, gpus(4), reserved=reservations).replicas == 1


def test_reservation_lifecycle() -> None:
    snapshot = cluster("c", shape(2, gpus=8))
    reservations = Reservations()
    reservations.reserve("ns/a", "c", [Demand(3, gpus(4))], now=T0)
    assert estimate_max_replicas(snapshot, gpus(4), reserved=reservations).replicas == 1
    # A report taken before the decision settled does not release it...
    assert (
        reservations.observe_report("c", reported_at=T0 + timedelta(seconds=5), settle=timedelta(seconds=30))
        == []
    )
    assert estimate_max_replicas(snapshot, gpus(4), reserved=reservations).replicas == 1
    # ...one taken after the Work was applied does.
    reservations.mark_applied("ns/a", "c", at=T0 + timedelta(seconds=2))
    dropped = reservations.observe_report("c", reported_at=T0 + timedelta(seconds=6))
    assert [r.binding for r in dropped] == ["ns/a"]
    assert estimate_max_replicas(snapshot, gpus(4), reserved=reservations).replicas == 4


def test_reservations_expire_and_release() -> None:
    reservations = Reservations()
    reservations.reserve("ns/a", "c", [Demand(1, gpus(1))], now=T0)
    reservations.reserve("ns/b", "c", [Demand(1, gpus(1))], now=T0 + timedelta(minutes=9))
    assert [
        r.binding for r in reservations.expire(now=T0 + timedelta(minutes=10), max_age=timedelta(minutes=5))
    ] == ["ns/a"]
    reservations.release("ns/b")
    assert len(reservations) == 0
    assert reservations.version("c") == 0


@pytest.mark.parametrize(
    ("previous", "decided", "reserved_before", "reserved_after"),
    [
        ({}, {"c": 3}, 0, 3),  # new replicas are reserved
        ({"c": 3}, {"c": 5}, 3, 5),  # scale-up adds to the unreported reservation
        ({"c": 3}, {"c": 5}, 0, 2),  # scale-up after the report: only the new ones
        ({"c": 5}, {"c": 2}, 3, 0),  # scale-down cancels unreported replicas first
        ({"c": 5}, {"c": 4}, 3, 2),
        ({"c": 5}, {}, 2, 0),
    ],
)
def test_record_decision(
    previous: dict[str, int], decided: dict[str, int], reserved_before: int, reserved_after: int
) -> None:
    reservations = Reservations()
    if reserved_before:
        reservations.reserve("ns/a", "c", [Demand(reserved_before, gpus(1))], now=T0)
    reservations.record_decision(
        "ns/a", previous=previous, decided=decided, requirements={"c": gpus(1)}, now=T0
    )
    assert reservations.reserved_replicas("ns/a", "c") == reserved_after


def test_place_pods_splits_shape_groups() -> None:
    snapshot = cluster("c", shape(3, gpus=8))
    shapes, placed = place_pods(snapshot.shapes, gpus(4), 3)
    assert placed == 3
    assert sorted((s.count, s.free["nvidia.com/gpu"]) for s in shapes) == [(1, 0), (1, 4), (1, 8)]
    assert sum(s.count for s in shapes) == 3


def pytorch_gang(workers: int, gpus_per_worker: int) -> tuple[Component, ...]:
    return (
        Component("Master", 1, ReplicaRequirements.build({"cpu": 2000})),
        Component("Worker", workers, gpus(gpus_per_worker)),
    )


@pytest.mark.parametrize(
    ("snapshot", "gang", "fits"),
    [
        (cluster("c", shape(2, gpus=4)), pytorch_gang(2, 4), True),
        (cluster("c", shape(1, gpus=4), shape(1, gpus=3)), pytorch_gang(2, 4), False),
        (cluster("c", shape(8, gpus=1)), pytorch_gang(1, 4), False),
        (cluster("c", shape(1, gpus=8)), pytorch_gang(2, 4), True),
        (
            cluster("c", shape(1, gpus=8, cpu=4_500)),
            pytorch_gang(2, 4),
            True,
        ),  # master fits next to the workers
        (cluster("c", shape(1, gpus=8, cpu=3_000)), pytorch_gang(2, 4), False),  # cpu runs out for the master
        (
            cluster("c", shape(4, gpus=8)),
            pytorch_gang(3, 4),
            True,
        ),  # ample room: the envelope check settles it
        (cluster("c", shape(4, gpus=4, cpu=1_000)), pytorch_gang(3, 4), False),  # workers take every cpu
    ],
)
def test_fits_gang(snapshot: ClusterSnapshot, gang: tuple[Component, ...], fits: bool) -> None:
    ok, reasons = fits_gang(snapshot, gang)
    assert ok is fits
    assert bool(reasons) is not fits
    if not fits:
        assert reasons[0].startswith("gang does not fit")


def test_fits_gang_with_roles_on_different_nodes() -> None:
    cpu_pool = {"pool": "cpu"}
    master = Component("Master", 1, ReplicaRequirements.build({"cpu": 2000}, node_selector={"pool": "cpu"}))
    gang = (master, Component("Worker", 2, gpus(4)))
    assert fits_gang(cluster("c", shape(2, gpus=4), shape(1, product=None, labels=cpu_pool)), gang)[0]
    ok, reasons = fits_gang(cluster("c", shape(2, gpus=4)), gang)
    assert not ok
    assert any("nodeSelector pool=cpu" in r for r in reasons)


def test_fits_gang_respects_reservations() -> None:
    snapshot = cluster("c", shape(2, gpus=4))
    reservations = Reservations()
    assert fits_gang(snapshot, pytorch_gang(2, 4), reserved=reservations)[0]
    reservations.reserve("ns/other", "c", [Demand(1, gpus(4))], now=T0)
    assert not fits_gang(snapshot, pytorch_gang(2, 4), reserved=reservations)[0]


def _fresh(snapshot: ClusterSnapshot, shapes: tuple[NodeShape, ...]) -> ClusterSnapshot:
    """The same capacity as new objects, so no memo of the estimator is reused."""
    copies = tuple(
        NodeShape(
            count=s.count,
            labels=dict(s.labels),
            taints=s.taints,
            free=dict(s.free),
            allocatable=s.allocatable,
        )
        for s in shapes
    )
    return ClusterSnapshot(name=snapshot.name, shapes=copies)


def _capacity(shapes: tuple[NodeShape, ...]) -> list[tuple[int, tuple[tuple[str, int], ...], str]]:
    merged: dict[tuple[tuple[str, int], ...], int] = {}
    for s in shapes:
        key = tuple(sorted(s.free.items()))
        merged[key] = merged.get(key, 0) + s.count
    return sorted((n, key, "") for key, n in merged.items())


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_incremental_adjustment_matches_a_replay_of_the_journal(seed: int) -> None:
    rng = random.Random(seed)
    snapshot = cluster(
        "c",
        *[
            shape(
                rng.randint(1, 4),
                gpus=rng.choice((0, 1, 2, 4, 8)),
                cpu=rng.choice((8_000, 32_000)),
                extra={"nvidia.com/mig-3g.40gb": rng.randint(0, 2)},
            )
            for _ in range(12)
        ],
    )
    kinds = [gpus(1), gpus(2), gpus(4), mig("3g.40gb"), ReplicaRequirements.build({"cpu": 2_000})]
    reservations = Reservations()
    for step in range(40):
        binding = f"ns/b{rng.randint(0, 15)}"
        action = rng.random()
        if action < 0.75:
            reservations.reserve(binding, "c", [Demand(rng.randint(1, 3), rng.choice(kinds))], now=T0)
        else:
            reservations.release(binding)
        # Ask about every kind, so the memo carries estimates from one adjustment to the next.
        answers = {req: estimate_max_replicas(snapshot, req, reserved=reservations) for req in kinds}
        replay = tuple(
            NodeShape(count=n.count, labels=n.labels, taints=tuple(n.taints), free=n.free, allocatable={})
            for n in reference_replay(snapshot, reservations)
        )
        assert _capacity(adjusted_snapshot(snapshot, reservations).shapes) == _capacity(replay), step
        fresh = _fresh(snapshot, replay)
        for req, answer in answers.items():
            expected = estimate_max_replicas(fresh, req)
            assert (answer.replicas, answer.products) == (expected.replicas, expected.products), (step, req)
            assert answer.reasons == expected.reasons


# ---------------------------------------------------------------------------------------------
# Giving back: a binding returns exactly what its own pods took; the others stay where they are
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "four_gpu_replicas", "one_gpu_replicas"),
    [
        # Nodes: one with 2 free GPUs, one with 8. "a" takes the tight node, "b" lands on the big one.
        ([("a", 2), ("b", 2)], 1, 6),
        # "a" gives back its node; "b" keeps its pods on the big node (a replay would move it).
        ([("a", 2), ("b", 2), ("a", 0)], 1, 8),
        # "b" gives back: the big node is whole again, the tight one still "a"'s.
        ([("a", 2), ("b", 2), ("b", 0)], 2, 8),
        # "a" grows to 3: it gives back its 2 and takes 3 afresh, best fit (2 + 1 on the big node).
        ([("a", 2), ("b", 2), ("a", 3)], 1, 5),
        # Everything given back: the reported capacity, exactly.
        ([("a", 2), ("b", 2), ("a", 0), ("b", 0)], 2, 10),
    ],
)
def test_giving_back_returns_only_the_capacity_a_binding_took(
    changes: list[tuple[str, int]], four_gpu_replicas: int, one_gpu_replicas: int
) -> None:
    snapshot = cluster("c", shape(1, gpus=2), shape(1, gpus=8))
    reservations = Reservations()
    for binding, replicas in changes:
        if replicas:
            reservations.reserve(f"ns/{binding}", "c", [Demand(replicas, gpus(1))], now=T0)
        else:
            reservations.release(f"ns/{binding}")
    assert estimate_max_replicas(snapshot, gpus(4), reserved=reservations).replicas == four_gpu_replicas
    assert estimate_max_replicas(snapshot, gpus(1), reserved=reservations).replicas == one_gpu_replicas


def test_pods_that_did_not_fit_are_placed_once_capacity_comes_back() -> None:
    snapshot = cluster("c", shape(1, gpus=4))
    reservations = Reservations()
    reservations.reserve("ns/a", "c", [Demand(1, gpus(4))], now=T0)
    reservations.reserve("ns/b", "c", [Demand(2, gpus(2))], now=T0)  # no room left: held nowhere yet
    assert estimate_max_replicas(snapshot, gpus(1), reserved=reservations).replicas == 0
    reservations.release("ns/a")
    # "b"'s promise is kept on the capacity "a" gave back, so it is not offered again.
    assert estimate_max_replicas(snapshot, gpus(1), reserved=reservations).replicas == 0
    reservations.release("ns/b")
    assert estimate_max_replicas(snapshot, gpus(1), reserved=reservations).replicas == 4


def test_a_report_starts_the_journal_afresh_with_what_is_still_reserved() -> None:
    reservations = Reservations()
    reservations.reserve("ns/a", "c", [Demand(1, gpus(1))], now=T0)
    reservations.reserve("ns/b", "c", [Demand(1, gpus(1))], now=T0 + timedelta(seconds=10))
    reservations.reserve("ns/a", "c", [Demand(2, gpus(1))], now=T0 + timedelta(seconds=20))
    first = reservations.journal("c")
    assert [(e.binding, sum(d.replicas for d in e.demands)) for e in first.entries] == [
        ("ns/a", 1),
        ("ns/b", 1),
        ("ns/a", 0),
        ("ns/a", 2),
    ]
    reservations.observe_report("c", reported_at=T0 + timedelta(seconds=15))  # covers "b" only
    second = reservations.journal("c")
    assert second.generation != first.generation
    assert [(e.binding, sum(d.replicas for d in e.demands)) for e in second.entries] == [("ns/a", 2)]
    reservations.release("ns/a")
    assert reservations.journal("c") == (0, ())


SPILLS = [
    # (id, node shapes, promises in order (binding, replicas, requirements), released, {request: replicas})
    (
        "a promise that fits no node whole still holds its GPUs",
        # The member spread earlier pods: two nodes with one free GPU, one with two. Two 2-GPU
        # promises: the second fits no node whole, and its 2 GPUs are not sold again.
        (shape(2, gpus=1), shape(1, gpus=2)),
        (("ns/b", 1, gpus(2)), ("ns/c", 1, gpus(2))),
        (),
        {gpus(1): 0, gpus(2): 0},
    ),
    (
        "spilled GPUs come from the largest holes first",
        (shape(1, gpus=2), shape(3, gpus=1)),
        (("ns/a", 1, gpus(3)),),
        (),
        {gpus(2): 0, gpus(1): 2},
    ),
    (
        "nothing left to spill: the promise holds what there is",
        (shape(1, gpus=1),),
        (("ns/a", 2, gpus(2)),),
        (),
        {gpus(1): 0},
    ),
    (
        "capacity given back places the spilled promise whole",
        (shape(2, gpus=1), shape(1, gpus=2)),
        (("ns/b", 1, gpus(2)), ("ns/c", 1, gpus(2))),
        ("ns/b",),
        {gpus(1): 2, gpus(2): 0},
    ),
    (
        "releasing the spilled promise gives its GPUs back",
        (shape(2, gpus=1), shape(1, gpus=2)),
        (("ns/b", 1, gpus(2)), ("ns/c", 1, gpus(2))),
        ("ns/c",),
        {gpus(1): 2, gpus(2): 0},
    ),
    (
        "MIG slices spill like whole GPUs",
        (shape(2, extra={"nvidia.com/mig-1g.10gb": 1}),),
        (("ns/a", 1, mig("1g.10gb", 2)),),
        (),
        {mig("1g.10gb"): 0},
    ),
    (
        "nodes the pods may not run on keep their GPUs",
        (shape(1, gpus=1, product=H100), shape(1, gpus=1, product=A100)),
        (("ns/a", 1, ReplicaRequirements.build({"nvidia.com/gpu": 2}, node_selector={"nvidia.com/gpu.product": A100})),),
        (),
        {gpus(1): 1},
    ),
]


@pytest.mark.parametrize(
    ("shapes", "promises", "released", "expected"), [c[1:] for c in SPILLS], ids=[c[0] for c in SPILLS]
)
def test_promises_that_fit_no_node_whole_are_never_resold(
    shapes: tuple[dict[str, object], ...],
    promises: tuple[tuple[str, int, ReplicaRequirements], ...],
    released: tuple[str, ...],
    expected: dict[ReplicaRequirements, int],
) -> None:
    snapshot = cluster("c", *shapes)
    reservations = Reservations()
    for binding, replicas, requirements in promises:
        reservations.reserve(binding, "c", [Demand(replicas, requirements)], now=T0)
    for binding in released:
        reservations.release(binding)
    for requirements, replicas in expected.items():
        assert estimate_max_replicas(snapshot, requirements, reserved=reservations).replicas == replicas, requirements


def test_room_without_sets_aside_only_the_named_promise() -> None:
    snapshot = cluster("c", shape(1, gpus=4))
    reservations = Reservations()
    reservations.reserve("ns/mine", "c", [Demand(1, gpus(2))], now=T0)
    reservations.reserve("ns/other", "c", [Demand(1, gpus(1))], now=T0)
    # Mine set aside, the other kept: 3 GPUs left, room for one 2-GPU pod, not two.
    assert room_without(snapshot, [gpus(2)], reserved=reservations, binding="ns/mine") == 1
    assert room_without(snapshot, [gpus(2), gpus(1)], reserved=reservations, binding="ns/mine") == 3
    # The decisions' own view is untouched: both promises still count there.
    assert estimate_max_replicas(snapshot, gpus(1), reserved=reservations).replicas == 1
    assert room_without(snapshot, [], reserved=reservations, binding="ns/mine") == 0


def shared_claim(gpus_shared: int, cpu: int = 8000) -> ReplicaRequirements:
    """Replicas of ``cpu`` each sharing one DRA ResourceClaim of ``gpus_shared`` GPUs."""
    return ReplicaRequirements.build({"cpu": cpu}, shared={"nvidia.com/gpu": gpus_shared})


def test_a_shared_claim_counts_once_and_keeps_the_replicas_on_its_node() -> None:
    """Two 8-GPU nodes of 64 CPUs: replicas of 8 CPUs sharing a 6-GPU claim. Charged per replica,
    one replica per node would fit (12 GPUs for two); held once, 8 replicas fit beside the claim on
    one node, and only on one (the claim is allocated on one node, and each replica must run there)."""
    snapshot = cluster("c", shape(2, gpus=8))
    assert estimate_max_replicas(snapshot, shared_claim(6)).replicas == 8
    assert estimate_max_replicas(snapshot, ReplicaRequirements.build({"cpu": 8000, "nvidia.com/gpu": 6})).replicas == 2
    # A node without the claim's devices free holds none, and says why.
    small = cluster("c", shape(3, gpus=4))
    estimate = estimate_max_replicas(small, shared_claim(6))
    assert estimate.replicas == 0
    assert any("insufficient nvidia.com/gpu: need 6, 4 free" in r for r in estimate.reasons), estimate.reasons
    # The best node counts, not the sum: a 4-GPU node beside the 8-GPU one adds nothing.
    mixed = cluster("c", shape(1, gpus=8, cpu=16_000), shape(4, gpus=8, cpu=8_000, product=H100))
    assert estimate_max_replicas(mixed, shared_claim(6)).replicas == 2


def test_reserving_replicas_that_share_a_claim_takes_its_devices_once() -> None:
    """Placed replicas hold the claim's GPUs on their node once: a second workload sees the rest."""
    snapshot = cluster("c", shape(1, gpus=8))
    reservations = Reservations()
    reservations.reserve("ns/shared", "c", [Demand(4, shared_claim(6))], now=T0)
    assert estimate_max_replicas(snapshot, gpus(2), reserved=reservations).replicas == 1
    assert estimate_max_replicas(snapshot, gpus(3), reserved=reservations).replicas == 0


def test_shared_devices_round_trip_through_the_binding_spec() -> None:
    req = ReplicaRequirements.build({"cpu": 1000}, shared={"nvidia.com/gpu": 2})
    spec = req.to_spec()
    assert spec["sharedResourceRequest"] == {"nvidia.com/gpu": "2"} and "nvidia.com/gpu" not in spec["resourceRequest"]
    assert ReplicaRequirements.from_spec(spec) is req
    assert req.first_replica == {"cpu": 1000, "nvidia.com/gpu": 2}


def test_a_gang_sharing_a_claim_needs_its_devices_on_one_node() -> None:
    """The envelope check (the largest request of every resource) keeps the devices the gang shares:
    four 4-GPU nodes hold no gang of two pods sharing a 6-GPU claim; an 8-GPU node holds it."""
    gang = (Component(name="replicas", replicas=2, requirements=shared_claim(6)),)
    assert not fits_gang(cluster("c", shape(4, gpus=4)), gang)[0]
    assert fits_gang(cluster("c", shape(1, gpus=8)), gang)[0]
