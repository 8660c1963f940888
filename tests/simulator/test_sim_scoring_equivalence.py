"""The member scheduler's array-based filtering and scoring against a plain node-by-node reference.

:class:`simulator.scheduling.ClusterState` filters and scores over NumPy arrays. The
reference here walks nodes one at a time with dictionaries, following the definitions
in :class:`simulator.scheduling.Scoring` and kube's search (start where the last pod's
search stopped, stop after ``adaptive_nodes_to_find`` feasible nodes, break score ties
with ``random.Random(seed).choice``). Random clusters (whole GPUs, MIG, time-sliced
shares, nodes advertising ``nvidia.com/gpu-milli``, CPU-only, small pod limits, two
label pools) get random pods and random releases; both must bind every pod to the same
node, refuse the same pods with the same reasons, and score every feasible node alike.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from simulator.devices import Device, NodeInventory
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.filtering import fit_error_message
from simulator.scheduling.model import PodRequest, Scoring

GIB = 2**30
MIG_LAYOUT = (("nvidia.com/mig-3g.40gb", 3), ("nvidia.com/mig-2g.20gb", 2), ("nvidia.com/mig-1g.10gb", 1))
REQUEST_SHAPES: tuple[dict[str, int], ...] = (
    {},
    {"nvidia.com/gpu": 1},
    {"nvidia.com/gpu": 2},
    {"nvidia.com/gpu": 4},
    {"nvidia.com/gpu": 8},
    {"nvidia.com/mig-1g.10gb": 1},
    {"nvidia.com/mig-3g.40gb": 1},
    {"nvidia.com/gpu-milli": 300},
    {"nvidia.com/gpu-milli": 1500},
)


# ------------------------------------------------------------------------------------------ the reference


@dataclass
class RefNode:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    #: Thousandths of a GPU per unit of each GPU resource.
    units: dict[str, int]
    requested: Counter[str] = field(default_factory=Counter)
    pods: int = 0

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested[resource]


def ref_nodes_to_find(count: int, percentage: int) -> int:
    if count < 100 or percentage >= 100:
        return count
    if percentage <= 0:
        percentage = max(5, 50 - count // 125)
    return max(100, count * percentage // 100)


def ref_score(scoring: Scoring, node: RefNode, requests: Mapping[str, int]) -> int:
    if scoring is Scoring.RANDOM:
        return 0
    if scoring is Scoring.BEST_FIT:
        cpu_left = node.free("cpu") - requests.get("cpu", 0)
        if "nvidia.com/gpu-milli" in node.allocatable:
            gpu_free = node.free("nvidia.com/gpu-milli")
        else:
            gpu_free = sum(node.free(r) * unit for r, unit in node.units.items())
        gpu_asked = sum(amount * node.units.get(r, 0) for r, amount in requests.items())
        left = cpu_left / 128_000 * 0.5 + (gpu_free - gpu_asked) / 8_000 * 0.5
        return int((1.0 - left) * 100.0)
    wanted = {"cpu": max(requests.get("cpu", 0), 100), "memory": max(requests.get("memory", 0), 200 * 2**20)}
    wanted.update({r: a for r, a in requests.items() if r.startswith("nvidia.com/")})
    parts = []
    for resource, amount in wanted.items():
        capacity = node.allocatable.get(resource, 0)
        if capacity <= 0:
            continue
        used = node.requested[resource] + amount
        if scoring is Scoring.MOST_ALLOCATED:
            parts.append(100 if used > capacity else used * 100 // capacity)
        else:
            parts.append(0 if used > capacity else (capacity - used) * 100 // capacity)
    return sum(parts) // len(parts) if parts else 0


class Reference:
    """kube-scheduler's cycle for one pod, node by node."""

    def __init__(self, nodes: list[RefNode], *, scoring: Scoring, seed: int, percentage: int) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.scoring = scoring
        self.rng = random.Random(seed)
        self.percentage = percentage
        self.next_start = 0
        self.bound: dict[str, tuple[RefNode, dict[str, int]]] = {}

    def feasible(self, pod: PodRequest) -> tuple[list[RefNode], Counter[str]]:
        reasons: Counter[str] = Counter()
        passing = []
        for node in self.nodes:
            if all(node.labels.get(k) == v for k, v in pod.node_selector.items()):
                passing.append(node)
            else:
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
        if not passing:
            return [], reasons
        capable = [n for n in passing if all(a <= n.allocatable.get(r, 0) for r, a in pod.requests.items())]
        wanted = ref_nodes_to_find(len(self.nodes), self.percentage)
        count = len(capable)
        start = self.next_start % count if count else 0
        found: list[RefNode] = []
        examined = 0
        for offset in range(count):
            node = capable[(start + offset) % count]
            examined += 1
            if self.fits(pod, node):
                found.append(node)
                if len(found) >= wanted:
                    break
        if count:
            self.next_start = (start + examined) % count
        if found:
            return found, Counter()
        for node in passing:
            if node.pods + 1 > node.allocatable["pods"]:
                reasons["Too many pods"] += 1
            for resource, amount in pod.requests.items():
                if amount > node.free(resource):
                    reasons[f"Insufficient {resource}"] += 1
        return [], reasons

    @staticmethod
    def fits(pod: PodRequest, node: RefNode) -> bool:
        return node.pods < node.allocatable["pods"] and all(
            amount <= node.free(resource) for resource, amount in pod.requests.items()
        )

    def schedule(self, pod: PodRequest) -> tuple[str | None, Counter[str]]:
        feasible, reasons = self.feasible(pod)
        if not feasible:
            return None, reasons
        if len(feasible) == 1:
            node = feasible[0]
        elif self.scoring is Scoring.RANDOM:
            node = self.rng.choice(feasible)
        else:
            scores = [ref_score(self.scoring, n, pod.requests) for n in feasible]
            best = [n for n, s in zip(feasible, scores, strict=True) if s == max(scores)]
            node = best[0] if len(best) == 1 else self.rng.choice(best)
        node.requested.update(pod.requests)
        node.pods += 1
        self.bound[pod.key] = (node, dict(pod.requests))
        return node.name, Counter()

    def release(self, key: str) -> None:
        node, requests = self.bound.pop(key)
        node.requested.subtract(requests)
        node.pods -= 1


# ------------------------------------------------------------------------------------------ random clusters


def random_node(rng: random.Random, index: int) -> tuple[dict[str, Any], NodeInventory, RefNode]:
    name = f"n-{index:03d}"
    kind = rng.choice(["whole", "mig", "shared", "milli", "cpu"])
    gpus = rng.choice([1, 2, 4, 8])
    allocatable = {
        "cpu": rng.choice([8, 16, 32, 64, 96, 128, 192]) * 1000,
        "memory": rng.choice([32, 64, 256, 1024]) * GIB,
        "pods": rng.choice([2, 4, 110]),
    }
    devices: dict[str, tuple[Device, ...]] = {}
    units: dict[str, int] = {}

    def add(resource: str, count: int, share: float) -> None:
        allocatable[resource] = count
        devices[resource] = tuple(Device(f"{name}-{resource}-{i}", resource, i, share) for i in range(count))
        units[resource] = round(share * 1000)

    if kind in ("whole", "milli"):
        add("nvidia.com/gpu", gpus, 1.0)
    if kind == "milli":
        allocatable["nvidia.com/gpu-milli"] = gpus * 1000
        units["nvidia.com/gpu-milli"] = 1
    if kind == "mig":
        for resource, slices in MIG_LAYOUT:
            add(resource, gpus * (2 if slices == 1 else 1), slices / 7)
    if kind == "shared":
        replicas = rng.choice([2, 4])
        add("nvidia.com/gpu", gpus * replicas, 1 / replicas)
    labels = {"pool": rng.choice(["a", "b"]), "kubernetes.io/hostname": name}
    node = {
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "allocatable": {r: f"{a}m" if r == "cpu" else str(a) for r, a in allocatable.items()},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    inventory = NodeInventory(node=name, gpus=(), mig_instances=(), devices=devices)
    return node, inventory, RefNode(name, labels, dict(allocatable), units)


def random_pod(rng: random.Random, index: int) -> PodRequest:
    requests = dict(rng.choice(REQUEST_SHAPES))
    cpu = rng.choice([0, 500, 2000, 8000, 30000, 90000])
    memory = rng.choice([0, GIB, 16 * GIB, 200 * GIB])
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    selector = {"pool": rng.choice(["a", "b"])} if rng.random() < 0.3 else {}
    return PodRequest(
        key=f"t/p{index}", namespace="t", name=f"p{index}", requests=requests, node_selector=selector
    )


# ------------------------------------------------------------------------------------------ the test


# FGD's array form is checked against its one-node definition in tests/whatif/test_fgd.py.
@pytest.mark.parametrize("scoring", [s for s in Scoring if s is not Scoring.FGD])
@pytest.mark.parametrize(("percentage", "seed"), [(0, 1), (100, 2), (0, 3)])
def test_array_scheduler_matches_the_node_by_node_reference(
    scoring: Scoring, percentage: int, seed: int
) -> None:
    rng = random.Random(seed * 1000 + percentage)
    built = [random_node(rng, i) for i in range(130)]
    state = ClusterState(scoring=scoring, seed=seed, percentage_of_nodes_to_score=percentage)
    for node, inventory, _ in built:
        state.add_node(node, inventory)
    reference = Reference([ref for _, _, ref in built], scoring=scoring, seed=seed, percentage=percentage)
    bound: list[str] = []
    outcomes = Counter[str]()
    for index in range(500):
        pod = random_pod(rng, index)
        if scoring is not Scoring.RANDOM:
            # Every feasible node scores as the definition says (before either side moves on).
            saved = reference.next_start
            candidates, _ = reference.feasible(pod)
            reference.next_start = saved
            nodes = [state.nodes[n.name] for n in candidates]
            expected = [ref_score(scoring, n, pod.requests) for n in candidates]
            assert state.score_nodes(pod, nodes) == expected
        want_node, want_reasons = reference.schedule(pod)
        result = state.schedule([pod])
        if want_node is None:
            assert not result.bindings
            (failure,) = result.unschedulable
            # Same counts, in the order a node-by-node walk first meets them.
            assert list(failure.reasons.items()) == list(want_reasons.items())
            assert failure.message == fit_error_message(len(built), want_reasons)
            outcomes["refused"] += 1
        else:
            assert [b.node for b in result.bindings] == [want_node], f"pod {index}"
            bound.append(pod.key)
            outcomes["bound"] += 1
        assert state.fits_somewhere(pod) == any(
            reference.fits(pod, n)
            for n in reference.nodes
            if n.labels["pool"] == pod.node_selector.get("pool", n.labels["pool"])
        )
        if bound and rng.random() < 0.2:
            key = bound.pop(rng.randrange(len(bound)))
            state.release(key)
            reference.release(key)
    # The walk must have exercised both outcomes, or it proved little.
    assert outcomes["bound"] > 50 and outcomes["refused"] > 10


def test_a_node_added_after_scheduling_joins_the_arrays() -> None:
    rng = random.Random(7)
    built = [random_node(rng, i) for i in range(3)]
    state = ClusterState(scoring=Scoring.BEST_FIT, seed=1)
    reference = Reference([], scoring=Scoring.BEST_FIT, seed=1, percentage=0)
    for node, inventory, ref in built:
        state.add_node(node, inventory)
        reference.nodes = sorted([*reference.nodes, ref], key=lambda n: n.name)
        pod = PodRequest(key=f"t/{ref.name}", namespace="t", name=ref.name, requests={"cpu": 1000})
        assert state.schedule([pod]).bindings[0].node == reference.schedule(pod)[0]
    extra = ref_score(Scoring.BEST_FIT, reference.nodes[0], {"cpu": 1000})
    probe = PodRequest(key="t/probe", namespace="t", name="probe", requests={"cpu": 1000})
    assert state.score_nodes(probe, [state.nodes[reference.nodes[0].name]]) == [extra]


def test_fgd_schedules_over_mig_and_shared_devices_with_a_learned_mix() -> None:
    rng = random.Random(7)
    built = [random_node(rng, i) for i in range(40)]
    state = ClusterState(scoring=Scoring.FGD, seed=1, percentage_of_nodes_to_score=100)
    for node, inventory, _ in built:
        state.add_node(node, inventory)
    bound = 0
    for index in range(200):
        pod = random_pod(rng, index)
        fits = state.fits_somewhere(pod)
        result = state.schedule([pod])
        # FGD only ranks: a pod binds exactly when some node fits it
        assert bool(result.bindings) == fits
        bound += len(result.bindings)
    assert bound > 20
    assert state.fgd_mix().shapes
