"""Verdicts a decision does not need, and fleet-wide memos, never change what is decided or explained.

Tiered overflow and gangs judge clusters for GPU capacity only as far as the division needs
them; the rest of the verdicts are worked out when the explanation is read, against the
reservations as they stood at the decision (a checkpoint). Decisions that need every verdict
reuse the last decision's verdicts of the same request kind for the clusters that did not
change. These tests take every decision twice on the same state: with the default profile,
and with a profile whose GPU feasibility filter judges every cluster one by one with no
fleet-wide memo (an eager decision). Then, before the default decision's explanation is
read, they change the reservations and the fleet (another decision reserved, releases,
reports, clusters whose prices or tiers change), and require the two results to be equal in
every field, explanations included.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import reserve_decision, schedule
from controlplane.scheduler.core.explanation import ClusterExplanation, cluster_explanation
from controlplane.scheduler.core.framework import BindingRequest, CycleState, Profile, Status
from controlplane.scheduler.core.plugins import DEFAULT_PROFILE, GpuFeasibility
from controlplane.scheduler.core.reservations import Demand, Reservation, Reservations
from controlplane.scheduler.core.slots import slot_setters
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape
from policies.models import Placement

from .builders import A100, H100, cluster, shape
from .test_caches_equivalence import (
    PLACEMENTS,
    REQUIREMENTS,
    T0,
    changed_report,
    random_cluster,
    random_request,
    result_fields,
)


class EagerGpuFeasibility:
    """GPU feasibility judged cluster by cluster, every cluster, nothing kept across decisions
    but the per-snapshot memo (what the scheduler did before verdicts were deferred)."""

    name = "GpuFeasibility"
    placement_only = False

    def __init__(self) -> None:
        self.inner = GpuFeasibility()

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        return self.inner.filter(state, cluster)


EAGER = Profile(filters=(*DEFAULT_PROFILE.filters[:-1], EagerGpuFeasibility()), scorers=DEFAULT_PROFILE.scorers)


def untainted(wire: dict[str, Any]) -> dict[str, Any]:
    """The cluster without cluster taints (a gang's decision is deferred only in such a fleet)."""
    return {**wire, "spec": {k: v for k, v in wire["spec"].items() if k != "taints"}}


def repriced(rng: random.Random, wire: dict[str, Any]) -> dict[str, Any]:
    """The cluster's next report with other prices or another tier (it moves in tier, price order)."""
    spec = dict(wire["spec"])
    if rng.random() < 0.5:
        spec["pricing"] = {A100: rng.choice((1.0, 2.5, 5.0))}
    else:
        spec["tier"] = rng.choice((0, 1, 2))
    return {**wire, "spec": spec}


@pytest.mark.parametrize("seed", range(12))
def test_deferred_and_remembered_verdicts_decide_and_explain_as_eager_ones(seed: int) -> None:
    rng = random.Random(500 + seed)
    names = [f"c{i:02d}" for i in range(rng.choice((3, 7, 12)))]
    wires = {name: random_cluster(rng, name) for name in names}
    if seed % 2 == 0:
        wires = {name: untainted(wire) for name, wire in wires.items()}
    cache = SchedulerCache()  # shared by every decision below, as the scheduler controller's is
    fleet = {name: ClusterSnapshot.from_cluster(wire, cache=cache) for name, wire in wires.items()}
    placements = [Placement.model_validate(p) for p in PLACEMENTS]
    reservations = Reservations()
    placed: dict[str, Any] = {}
    now = T0
    for step in range(120):
        if placed and rng.random() < 0.25:
            earlier = placed[rng.choice(sorted(placed))]
            request = dataclasses.replace(earlier, replicas=earlier.replicas if earlier.gang else rng.choice((1, 4, 9)))
            if rng.random() < 0.3:  # its member could not place some: that cluster keeps what it runs
                request = dataclasses.replace(request, keep_only={rng.choice(sorted(request.previous)): "moving"})
        else:
            request = random_request(rng, f"ns/b{step}", placements)
        clusters = list(fleet.values())
        deferred = schedule(request, clusters, reservations=reservations, now=now, cache=cache)
        eager = schedule(request, clusters, reservations=reservations, now=now, profile=EAGER, cache=cache)
        expected = result_fields(eager)
        reserve_decision(reservations, request, deferred, now=now)
        # Change what the deferred verdicts would see if they were judged now, not as at the decision.
        other = random_request(rng, f"ns/other{step}", placements)
        decided = schedule(other, clusters, reservations=reservations, now=now, cache=cache)
        reserve_decision(reservations, other, decided, now=now)
        if rng.random() < 0.3:
            name = rng.choice(names)
            reservations.reserve(f"ns/x{step}", name, [Demand(rng.randint(1, 6), rng.choice(REQUIREMENTS))], now=now)
        if rng.random() < 0.1:
            name = rng.choice(names)
            wires[name] = changed_report(rng, wires[name])
            fleet[name] = ClusterSnapshot.from_cluster(wires[name], previous=fleet[name], cache=cache)
            reservations.observe_report(name, reported_at=now)
        if rng.random() < 0.05:
            name = rng.choice(names)
            wires[name] = repriced(rng, wires[name])
            fleet[name] = ClusterSnapshot.from_cluster(wires[name], previous=fleet[name], cache=cache)
        assert result_fields(deferred) == expected, (step, request.key)
        if deferred.clusters:
            placed[request.key] = dataclasses.replace(request, previous=dict(deferred.clusters))
        if rng.random() < 0.05 and placed:
            gone = rng.choice(sorted(placed))
            reservations.release(gone)
            del placed[gone]
        now += timedelta(seconds=1)


# ---------------------------------------------------------------------------------------------
# Reservations: what changed since, and checkpoints
# ---------------------------------------------------------------------------------------------

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("changes", "changed"),
    [
        ([], []),
        ([("reserve", "a")], ["a"]),
        ([("reserve", "a"), ("reserve", "b"), ("reserve", "a")], ["a", "b"]),
        ([("reserve", "a"), ("release", "a")], ["a"]),
        ([("reserve", "a"), ("report", "b")], ["b", "a"]),
    ],
)
def test_changed_since_lists_each_changed_cluster_once_latest_first(
    changes: list[tuple[str, str]], changed: list[str]
) -> None:
    reservations = Reservations()
    reservations.reserve("ns/old", "z", [Demand(1, REQUIREMENTS[0])], now=NOW)
    clock = reservations.clock
    for what, name in changes:
        if what == "reserve":
            reservations.reserve(f"ns/{len(changes)}", name, [Demand(1, REQUIREMENTS[0])], now=NOW)
        elif what == "release":
            reservations.release(f"ns/{len(changes)}", cluster=name)
        else:
            reservations.observe_report(name, reported_at=NOW)
    assert reservations.changed_since(clock) == changed
    assert reservations.changed_since(reservations.clock) == []
    assert (reservations.clock > clock) == bool(changes)


def test_a_checkpoint_answers_as_the_reservations_stood_when_it_was_taken() -> None:
    reservations = Reservations()
    reservations.reserve("ns/a", "c1", [Demand(2, REQUIREMENTS[0])], now=NOW)
    reservations.reserve("ns/b", "c1", [Demand(1, REQUIREMENTS[1])], now=NOW)
    before = {name: (reservations.version(name), list(reservations.journal(name).entries)) for name in ("c1", "c2")}
    checkpoint = reservations.checkpoint()
    reservations.reserve("ns/c", "c1", [Demand(3, REQUIREMENTS[0])], now=NOW)  # the journal grows
    reservations.reserve("ns/d", "c2", [Demand(1, REQUIREMENTS[0])], now=NOW)  # a journal starts
    reservations.observe_report("c1", reported_at=NOW + timedelta(hours=1))  # a new generation
    for name, (version, entries) in before.items():
        assert checkpoint.version(name) == version
        assert list(checkpoint.journal(name).entries) == entries
    assert reservations.version("c1") != before["c1"][0]


# ---------------------------------------------------------------------------------------------
# Constructors that skip the frozen dataclasses' __init__ set every field
# ---------------------------------------------------------------------------------------------


def test_a_quick_explanation_entry_equals_the_constructed_one() -> None:
    reasons = ("holds 3 replica(s)",)
    quick = cluster_explanation("c1", chosen=True, replicas=3, reasons=reasons, score=12.5, tier=1, price=2.5)
    made = ClusterExplanation(cluster="c1", chosen=True, replicas=3, reasons=reasons, score=12.5, tier=1, price=2.5)
    assert quick == made
    assert [f.name for f in dataclasses.fields(ClusterExplanation)] == [
        "cluster", "chosen", "replicas", "reasons", "score", "tier", "price"
    ]


def test_a_quick_reservation_equals_the_constructed_one() -> None:
    reservations = Reservations()
    demands = [Demand(2, REQUIREMENTS[0])]
    reservations.reserve("ns/a", "c1", demands, now=NOW, target=2)
    made = reservations.get("ns/a", "c1")
    assert made == Reservation(binding="ns/a", cluster="c1", demands=tuple(demands), created=NOW, target=2)
    assert {f.name for f in dataclasses.fields(Reservation)} == {
        "binding", "cluster", "demands", "created", "applied_at", "target"
    }


@pytest.mark.parametrize("cls", [ClusterExplanation, Reservation, NodeShape])
def test_slot_setters_cover_every_field_and_store_its_value(cls: type) -> None:
    setters = slot_setters(cls)
    assert list(setters) == [f.name for f in dataclasses.fields(cls)]
    blank = object.__new__(cls)
    for name, setter in setters.items():
        setter(blank, name)
        assert getattr(blank, name) == name


DYNAMIC = {
    "replicaScheduling": {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {"dynamicWeight": "AvailableReplicas"},
    }
}


@pytest.mark.parametrize("keep_only", [False, True])
@pytest.mark.parametrize("taken", [1, 5, 11, 12])
def test_verdicts_worked_out_from_pods_taken_since_equal_replayed_ones(taken: int, keep_only: bool) -> None:
    """Dynamic weights over clusters of one GPU product: after other bindings took pods of the same
    request, a new decision and a rescale work the verdicts out without replaying; as eager ones."""
    fleet = [cluster(f"c{i}", shape(2 + i, gpus=3 + i), shape(1, gpus=1, product=H100)) for i in range(3)]
    one_gpu = ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 1_000})
    placement = Placement.model_validate(DYNAMIC)
    reservations = Reservations()
    first = BindingRequest("ns/first", 4, one_gpu, placement=placement)
    placed = schedule(first, fleet, reservations=reservations, now=NOW)  # fills the fleet memo
    reserve_decision(reservations, first, placed, now=NOW)
    for name in ("c0", "c1"):
        reservations.reserve(f"ns/other-{name}", name, [Demand(taken, one_gpu)], now=NOW)
    rescale = BindingRequest(
        "ns/first",
        7,
        one_gpu,
        placement=placement,
        previous=dict(placed.clusters),
        keep_only={"c1": "moving"} if keep_only else {},
    )
    for request in (BindingRequest("ns/second", 3, one_gpu, placement=placement), rescale):
        eager = schedule(request, fleet, reservations=reservations, now=NOW, profile=EAGER)
        assert result_fields(schedule(request, fleet, reservations=reservations, now=NOW)) == result_fields(eager)
