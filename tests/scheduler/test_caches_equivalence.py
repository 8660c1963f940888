"""The scheduler's caches and indexes never give stale answers.

The hot path keeps answers across decisions: per-node fits shared across reports,
per-snapshot estimates carried from one reservation-adjusted snapshot to the next, fit
vectors spliced instead of recomputed, filter verdicts per (snapshot, request), the
division asked about only the clusters that can matter, and explanations built lazily.
These tests run long random sequences of decisions, reservation changes and capacity
reports, and check every answer against

* a straightforward estimator written here (replay every reservation from scratch on the
  reported shapes, then sum per node; no memo anywhere), and
* the same decision taken cold: fresh snapshots built from the same reports (empty
  caches) and a fresh :class:`SchedulerCache`, with every field of the result compared,
  explanations included.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.pods import FrozenToleration
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core import reservations as reservations_module
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import reserve_decision, schedule
from controlplane.scheduler.core.dividing import _break_ties, _divide_tiered, tier_rows
from controlplane.scheduler.core.estimating import Estimate
from controlplane.scheduler.core.estimator import estimate_max_replicas
from controlplane.scheduler.core.framework import BindingRequest, CycleState, Feasibility, GpuShape
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.reservations import Demand, Reservation, Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape, SnapshotMemo
from policies.division import TierCandidate, divide_tiered_overflow
from policies.models import Placement

from .builders import A100, GI, H100
from .reference import reference_eligible, reference_estimate, reference_fit, reference_replay

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
A100_SINGLE = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
PRODUCTS = (A100, H100, A100_SINGLE, "NVIDIA-A100-SXM4-80GB-MIG-INVALID")

REQUIREMENTS = (
    ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 4_000, "memory": 16 * GI}),
    ReplicaRequirements.build({"nvidia.com/gpu": 2, "cpu": 8_000}),
    ReplicaRequirements.build({"nvidia.com/gpu": 4, "cpu": 16_000, "memory": 64 * GI}),
    ReplicaRequirements.build({"nvidia.com/mig-3g.40gb": 1, "cpu": 2_000}),
    ReplicaRequirements.build({"nvidia.com/mig-1g.10gb": 1}, node_selector={"nvidia.com/gpu.product": H100}),
    ReplicaRequirements.build({"nvidia.com/gpu": 1}, node_selector={"nvidia.com/gpu.product": A100}),
    ReplicaRequirements.build({"nvidia.com/gpu.shared": 1, "cpu": 500}),
    ReplicaRequirements.build(
        {"nvidia.com/gpu": 1}, tolerations=[FrozenToleration(key="dedicated", operator="Exists")]
    ),
    ReplicaRequirements.build({"cpu": 2_000, "memory": 8 * GI}),
)
ALTERNATIVES = (
    (GpuShape(resources=(("nvidia.com/gpu", 1),)),),
    (GpuShape(resources=(("nvidia.com/mig-3g.40gb", 1),)), GpuShape(resources=(("nvidia.com/gpu", 2),))),
)


# ---------------------------------------------------------------------------------------------
# A random fleet, as agents report it (wire form), and reports that change a few nodes
# ---------------------------------------------------------------------------------------------


def random_shape(rng: random.Random) -> dict[str, Any]:
    product = rng.choice(PRODUCTS)
    free: dict[str, int] = {"cpu": rng.choice((4_000, 16_000, 64_000)), "memory": rng.choice((32, 256)) * GI}
    if rng.random() < 0.8:
        free["pods"] = rng.randint(0, 30)
    if product == H100:
        free["nvidia.com/mig-1g.10gb"] = rng.randint(0, 4)
        free["nvidia.com/mig-3g.40gb"] = rng.randint(0, 2)
    elif rng.random() < 0.3:
        free["nvidia.com/gpu.shared"] = rng.choice((0, 5, 20))
    else:
        free["nvidia.com/gpu"] = rng.choice((0, 1, 2, 4, 8))
    taints = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}] if rng.random() < 0.15 else []
    return {
        "count": rng.randint(1, 4),
        "labels": {"nvidia.com/gpu.product": product},
        "taints": taints,
        "free": free,
        "allocatable": dict(free),
        "gpu": {"product": product, "count": 8},
    }


def random_cluster(rng: random.Random, name: str) -> dict[str, Any]:
    provider = rng.choice(("onprem", "aws", "gcp"))
    spec: dict[str, Any] = {"provider": provider, "region": rng.choice(("eu", "us"))}
    if provider != "onprem":
        spec["pricing"] = {A100: rng.choice((2.5, 3.0, 4.0)), H100: 9.0}
    if rng.random() < 0.1:
        spec["unschedulable"] = True
    if rng.random() < 0.1:
        spec["taints"] = [{"key": "spot", "effect": "NoSchedule"}]
    return {
        "metadata": {"name": name, "labels": {"tier": provider}},
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if rng.random() < 0.95 else "False"}],
            "lastReportTime": "2024-05-01T10:00:00Z",
            "nodeShapes": [random_shape(rng) for _ in range(rng.randint(2, 9))],
        },
    }


def changed_report(rng: random.Random, wire: dict[str, Any]) -> dict[str, Any]:
    """The cluster's next report: one node shape replaced, the rest repeated."""
    shapes = list(wire["status"]["nodeShapes"])
    shapes[rng.randrange(len(shapes))] = random_shape(rng)
    return {**wire, "status": {**wire["status"], "nodeShapes": shapes}}


@pytest.mark.parametrize(("seed", "compact"), [(seed, False) for seed in range(8)] + [(8, True), (9, True)])
def test_cached_estimates_match_a_from_scratch_replay(seed: int, compact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if compact:  # journals start afresh often, so replays across a new generation are covered too
        monkeypatch.setattr(reservations_module, "_COMPACT_RATIO", 1)
        monkeypatch.setattr(reservations_module, "_COMPACT_SLACK", 2)
    rng = random.Random(seed)
    wires = {f"c{i}": random_cluster(rng, f"c{i}") for i in range(3)}
    cache = SchedulerCache()
    clusters = {name: ClusterSnapshot.from_cluster(wire, cache=cache) for name, wire in wires.items()}
    reservations = Reservations()
    saved: dict[str, Mapping[str, Reservation]] = {}
    now = T0
    for step in range(150):
        name = rng.choice(list(clusters))
        binding = f"ns/b{rng.randrange(12)}"
        action = rng.random()
        if action < 0.45:
            demands = [
                Demand(rng.randint(1, 3), rng.choice(REQUIREMENTS)) for _ in range(rng.choice((1, 1, 2)))
            ]
            reservations.reserve(binding, name, demands, now=now)  # a new one, or one replaced
        elif action < 0.55:  # a rescale: gains or loses replicas where it runs
            before = rng.randint(0, 3)
            after = rng.randint(0, 6)
            reservations.record_decision(
                binding,
                previous={name: before} if before else {},
                decided={name: after} if after else {},
                requirements={name: rng.choice(REQUIREMENTS)},
                now=now,
            )
        elif action < 0.6:  # a decision not written: the binding's reservations are put back
            if binding in saved and rng.random() < 0.5:
                reservations.restore(binding, saved.pop(binding))
            else:
                saved[binding] = reservations.of_binding(binding)
        elif action < 0.72:
            reservations.release(binding, cluster=name if rng.random() < 0.5 else None)
        elif action < 0.82:
            wires[name] = changed_report(rng, wires[name])
            clusters[name] = ClusterSnapshot.from_cluster(wires[name], previous=clusters[name], cache=cache)
            reservations.observe_report(name, reported_at=now - timedelta(seconds=rng.choice((0, 5))))
        elif action < 0.88:
            reservations.mark_applied(binding, name, at=now)
        else:
            reservations.expire(now=now, max_age=timedelta(seconds=rng.choice((3, 30))))
        now += timedelta(seconds=1)
        if rng.random() < 0.3:
            continue  # several changes before the next question: replayed together
        for cluster in clusters.values():
            _check_promises(cluster, reservations)
        # Ask about a few requirements on every cluster (so memos fill and carry), and check each.
        for cluster in clusters.values():
            for req in rng.sample(REQUIREMENTS, 3):
                got = estimate_max_replicas(cluster, req, reserved=reservations)
                assert (got.replicas, got.products) == reference_estimate(cluster, reservations, req), (
                    step,
                    req,
                )
            if rng.random() < 0.2:  # the reasons too, against an estimate taken on a cold copy
                req = rng.choice(REQUIREMENTS)
                cold = _cold_estimate(wires[cluster.name], reservations, req)
                assert estimate_max_replicas(cluster, req, reserved=reservations).reasons == cold.reasons


def _check_promises(cluster: ClusterSnapshot, reservations: Reservations) -> None:
    """What the accounting promises: every reserved pod is held on a node unless none has room
    for it, and then its GPUs are held anyway unless no eligible node has any left; nothing is
    held for a binding without a reservation; no node is overdrawn."""
    nodes = reference_replay(cluster, reservations)
    held: dict[tuple[str, ReplicaRequirements], int] = {}
    spilled: dict[tuple[str, ReplicaRequirements], dict[str, int]] = {}
    for node in nodes:
        assert all(amount >= 0 for amount in node.free.values()), node
        for binding, req, pods in node.holds:
            if isinstance(pods, int):
                held[(binding, req)] = held.get((binding, req), 0) + pods * node.count
            else:
                amounts = spilled.setdefault((binding, req), {})
                for name, amount in pods:
                    amounts[name] = amounts.get(name, 0) + amount * node.count
    wanted: dict[tuple[str, ReplicaRequirements], int] = {}
    for reservation in reservations.for_cluster(cluster.name):
        for demand in reservation.demands:
            key = (reservation.binding, demand.requirements)
            wanted[key] = wanted.get(key, 0) + demand.replicas
    assert set(held) <= set(wanted)
    assert set(spilled) <= set(wanted)
    for (binding, req), count in wanted.items():
        got = held.get((binding, req), 0)
        assert got <= count, binding
        if got < count:
            assert not any(reference_fit(node, req) for node in nodes), (binding, req)
            for name, amount in req.resources:
                if not is_gpu_resource(name):
                    continue
                taken = spilled.get((binding, req), {}).get(name, 0)
                assert taken <= amount * (count - got), (binding, req)
                if taken < amount * (count - got):  # short of GPUs only where none are left to take
                    assert not any(
                        node.free.get(name, 0) and not node.invalid and reference_eligible(node, req) for node in nodes
                    ), (binding, req, name)
        else:
            assert (binding, req) not in spilled, (binding, req)


def _cold_estimate(wire: dict[str, Any], reservations: Reservations, req: ReplicaRequirements) -> Estimate:
    cold = ClusterSnapshot.from_cluster(wire, cache=SchedulerCache())
    return estimate_max_replicas(cold, req, reserved=reservations)


# ---------------------------------------------------------------------------------------------
# Whole decisions: hot (caches kept across decisions) against cold (fresh snapshots)
# ---------------------------------------------------------------------------------------------

PLACEMENTS: tuple[dict[str, Any], ...] = (
    {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "TieredOverflow",
        }
    },
    {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "TieredOverflow",
            "tieredOverflow": {
                "tiers": [
                    {
                        "name": "onprem",
                        "clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "onprem"}}},
                    }
                ]
            },
        }
    },
    {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"dynamicWeight": "AvailableReplicas"},
        }
    },
    {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}},
    {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "TieredOverflow",
            "tieredOverflow": {"priceBandPercent": 25},
        }
    },
    {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
    {
        "clusterAffinity": {
            "fieldSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]}
        },
        "clusterTolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "TieredOverflow",
        },
    },
    {
        "clusterAffinities": [
            {"affinityName": "onprem", "labelSelector": {"matchLabels": {"tier": "onprem"}}},
            {"affinityName": "anywhere"},
        ],
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "TieredOverflow",
        },
    },
    {
        "spreadConstraints": [
            {"spreadByField": "cluster", "maxGroups": 4, "minGroups": 1},
            {"spreadByField": "region", "maxGroups": 1, "minGroups": 1},
        ]
    },
)


def random_request(rng: random.Random, key: str, placements: Sequence[Placement]) -> BindingRequest:
    placement = rng.choice(placements)
    req = rng.choice(REQUIREMENTS)
    if rng.random() < 0.2:
        workers = rng.randint(1, 3)
        components = (
            Component("Master", 1, REQUIREMENTS[-1]),
            Component("Worker", workers, rng.choice(REQUIREMENTS[:4])),
        )
        return BindingRequest(
            key,
            workers + 1,
            components[1].requirements,
            placement=placement,
            gang=True,
            components=components,
            gpu_shapes=rng.choice(((), *ALTERNATIVES)),
        )
    return BindingRequest(
        key,
        rng.choice((0, 1, 2, 3, 5, 8, 12)),
        req,
        placement=placement,
        gpu_shapes=rng.choice(((), (), *ALTERNATIVES)),
    )


def result_fields(result: ScheduleResult) -> dict[str, Any]:
    return {
        "clusters": result.clusters,
        "shapes": result.shapes,
        "condition": result.condition,
        "affinity_name": result.affinity_name,
        "unplaced": result.unplaced,
        "requirements": result.requirements,
        "chosen_shapes": result.chosen_shapes,
        "explanation": [entry.to_wire() for entry in result.explanation],
    }


@pytest.mark.parametrize("seed", range(6))
def test_decisions_with_warm_caches_match_cold_ones(seed: int) -> None:
    rng = random.Random(100 + seed)
    wires = {f"c{i}": random_cluster(rng, f"c{i}") for i in range(6)}
    cache = SchedulerCache()
    hot = {name: ClusterSnapshot.from_cluster(wire, cache=cache) for name, wire in wires.items()}
    placements = [Placement.model_validate(p) for p in PLACEMENTS]
    reservations = Reservations()
    placed: dict[str, BindingRequest] = {}
    now = T0
    for step in range(150):
        if placed and rng.random() < 0.3:  # rescale (or re-place) a binding that runs somewhere
            earlier = placed[rng.choice(sorted(placed))]
            request = dataclasses.replace(
                earlier, replicas=earlier.replicas if earlier.gang else rng.choice((0, 1, 4, 9))
            )
        else:
            request = random_request(rng, f"ns/b{step}", placements)
        warm = schedule(request, list(hot.values()), reservations=reservations, now=now, cache=cache)
        # The cold run shares nothing with the warm one but the recent demand (state, not a memo).
        fresh = SchedulerCache(demand=cache.demand.copy())
        cold_fleet = [ClusterSnapshot.from_cluster(wire, cache=fresh) for wire in wires.values()]
        cold = schedule(request, cold_fleet, reservations=reservations, now=now, cache=fresh)
        # The cold explanation first: a lazy one that read state changed since would differ.
        expected = result_fields(cold)
        reserve_decision(reservations, request, warm, now=now)
        assert result_fields(warm) == expected, (step, request.key)
        if warm.clusters:
            placed[request.key] = dataclasses.replace(request, previous=dict(warm.clusters))
        if rng.random() < 0.1:
            name = rng.choice(sorted(wires))
            wires[name] = changed_report(rng, wires[name])
            hot[name] = ClusterSnapshot.from_cluster(wires[name], previous=hot[name], cache=cache)
            reservations.observe_report(name, reported_at=now)
        if rng.random() < 0.05 and placed:
            gone = rng.choice(sorted(placed))
            reservations.release(gone)
            del placed[gone]
        now += timedelta(seconds=1)


# ---------------------------------------------------------------------------------------------
# Targeted checks of the pieces
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_tiered_division_over_the_clusters_that_matter_equals_the_full_division(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"c{i:02d}" for i in range(rng.randint(1, 12))]
    wires = {name: random_cluster(rng, name) for name in names}
    feasible = [ClusterSnapshot.from_cluster(wires[name]) for name in names]
    previous = {name: rng.randint(1, 4) for name in names if rng.random() < 0.3}
    request = BindingRequest(
        "ns/b",
        rng.randint(0, 30),
        REQUIREMENTS[0],
        placement=Placement.model_validate(PLACEMENTS[0]),
        previous=previous,
    )
    state = CycleState(
        request=request,
        term=request.placement.affinity_terms()[0],
        reservations=None,
        now=T0,
        cache=SchedulerCache(),
    )
    for cluster in feasible:
        state.feasibility[cluster.name] = Feasibility(
            available=rng.choice((0, 0, 1, 2, 5, 9)),
            requirements=REQUIREMENTS[0],
            price=rng.choice((0.0, 2.5, 3.0)),
        )
    division, more = _divide_tiered(state, feasible, previous)
    reasons = {**division.reasons, **(more() if more is not None else {})}
    # Ties of tier and price are broken by the tie-break's order, the same for both.
    extra = request.replicas - sum(previous.values())
    order = _break_ties(state, sorted(tier_rows(state, feasible)[0]), feasible, extra)
    ranks = {row[2]: index for index, row in enumerate(order)}
    full = divide_tiered_overflow(
        request.replicas,
        [
            TierCandidate(
                c.name,
                state.feasibility[c.name].available,
                c.tier,
                state.feasibility[c.name].price,
                rank=ranks[c.name],
            )
            for c in feasible
        ],
        current=previous,
    )
    assert (division.assignments, division.unplaced, reasons) == (
        full.assignments,
        full.unplaced,
        dict(full.reasons),
    )


def test_a_split_shape_copies_every_field_of_the_constructor() -> None:
    shape = NodeShape.from_dict(random_shape(random.Random(3)))
    free = {"cpu": 1_000, "nvidia.com/gpu": 1}
    for piece, count, shares_memo in ((shape.with_free(free, 2), 2, False), (shape.with_count(5), 5, True)):
        expected = NodeShape(
            count=count,
            labels=shape.labels,
            taints=shape.taints,
            free=free if not shares_memo else shape.free,
            allocatable=shape.allocatable,
            gpu=shape.gpu,
        )
        for field in dataclasses.fields(NodeShape):
            if field.name != "fits":
                assert getattr(piece, field.name) == getattr(expected, field.name), field.name
        assert (piece.fits is shape.fits) is shares_memo


def test_reports_repeating_a_node_share_its_answers_and_others_do_not() -> None:
    wire = random_cluster(random.Random(5), "c")
    cache = SchedulerCache()
    first = ClusterSnapshot.from_cluster(wire, cache=cache)
    again = ClusterSnapshot.from_cluster(wire, cache=cache)
    other = ClusterSnapshot.from_cluster(changed_report(random.Random(9), wire), cache=cache)
    elsewhere = ClusterSnapshot.from_cluster(wire, cache=SchedulerCache())
    assert all(a.fits is b.fits for a, b in zip(first.shapes, again.shapes, strict=True))
    assert not any(a.fits is b.fits for a, b in zip(first.shapes, elsewhere.shapes, strict=True))
    estimate_max_replicas(first, REQUIREMENTS[0])
    assert all(REQUIREMENTS[0] in s.fits for s in again.shapes)
    changed = [s for s in other.shapes if not any(s.fits is f.fits for f in first.shapes)]
    assert changed and all(
        REQUIREMENTS[0] not in s.fits for s in changed if s.free not in [f.free for f in first.shapes]
    )


def test_reservation_versions_are_zero_exactly_when_nothing_is_reserved() -> None:
    reservations = Reservations()
    seen: set[int] = set()
    reservations.reserve("ns/a", "c", [Demand(1, REQUIREMENTS[0])], now=T0)
    reservations.reserve("ns/b", "c", [Demand(2, REQUIREMENTS[1])], now=T0 + timedelta(seconds=5))
    for change in (
        lambda: reservations.reserve("ns/a", "c", [Demand(3, REQUIREMENTS[0])], now=T0),
        lambda: reservations.observe_report("c", reported_at=T0 + timedelta(seconds=1)),
    ):
        before = reservations.version("c")
        seen.add(before)
        change()
        assert reservations.version("c") not in seen and reservations.version("c") != before
        assert reservations.versions()["c"] == reservations.version("c")
    # Expiring the last one empties the cluster: version 0, and no entry in versions().
    assert reservations.expire(now=T0 + timedelta(hours=1), max_age=timedelta(minutes=1))
    assert reservations.version("c") == 0 and "c" not in reservations.versions()
    assert reservations.for_cluster("c") == ()


@pytest.mark.parametrize("seed", range(6))
def test_estimates_carried_across_reports_match_a_from_scratch_replay(seed: int) -> None:
    rng = random.Random(300 + seed)
    wire = random_cluster(rng, "c")
    cache = SchedulerCache()
    snapshot = ClusterSnapshot.from_cluster(wire, cache=cache)
    reservations = Reservations()
    now = T0
    linked = 0
    for step in range(40):
        # Ask on the reported snapshot itself (nothing reserved) and after reservations.
        cold = rng.random() < 0.3  # checked against a snapshot built with a cache of its own
        for req in rng.sample(REQUIREMENTS, 4):
            got = estimate_max_replicas(snapshot, req, reserved=reservations)
            assert (got.replicas, got.products) == reference_estimate(snapshot, reservations, req), (step, req)
            if cold:
                assert got.reasons == _cold_estimate(wire, reservations, req).reasons
        if cold or rng.random() < 0.4:
            reservations.reserve(f"ns/b{rng.randrange(4)}", "c", [Demand(rng.randint(1, 3), rng.choice(REQUIREMENTS))], now=now)
        else:
            wire = changed_report(rng, wire)
            snapshot = ClusterSnapshot.from_cluster(wire, previous=snapshot, cache=cache)
            linked += snapshot.memo.previous_report is not None
            if rng.random() < 0.5:
                reservations.observe_report("c", reported_at=now + timedelta(seconds=1))
        now += timedelta(seconds=1)
    assert linked  # the estimates above were carried from the report before at least once


def test_a_snapshot_with_other_shapes_copies_every_field_and_starts_with_empty_memos() -> None:
    snapshot = ClusterSnapshot.from_cluster(random_cluster(random.Random(7), "c"))
    estimate_max_replicas(snapshot, REQUIREMENTS[0])  # fills a memo
    view = snapshot.view
    shapes = snapshot.shapes[:1]
    copy = snapshot.with_shapes(shapes)
    for field in dataclasses.fields(ClusterSnapshot):
        if field.name == "shapes":
            assert copy.shapes is shapes
        elif field.repr:
            assert getattr(copy, field.name) == getattr(snapshot, field.name), field.name
        elif field.name == "memo":  # typed memo slots: none set, nothing shared
            assert copy.memo is not snapshot.memo and copy.memo.fit_vectors is not snapshot.memo.fit_vectors
            assert [getattr(copy.memo, slot) for slot in SnapshotMemo.__slots__] == [
                {} if slot == "fit_vectors" else None for slot in SnapshotMemo.__slots__
            ]
        else:  # a memo table: empty and not shared
            assert getattr(copy, field.name) == {} and getattr(copy, field.name) is not getattr(snapshot, field.name)
    assert copy.view is view
