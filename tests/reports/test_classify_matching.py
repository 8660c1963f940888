"""The shape-grouped demand matching agrees with matching node by node, on random fleets.

Seeded random fleets of a few small clusters (whole GPUs, MIG instances with their
unpartitioned rest, time-sliced shares, device samples repeated on a node as the GPUs no report
names are; cordons, readiness, tiers, equal and different prices, repeated node names) and
random pending demand (several resources per replica, allow- and deny-lists, never-fitting
demand) are classified by :func:`classify_fleet` and by the node-by-node reference in
``classify_reference.py``: every device's state (and the demand it was matched to), the unmet
demand and the per-cluster parts must be the same, in both the matched and the literal mode.
"""

from __future__ import annotations

import random

import pytest

from controlplane.reports.classify import ClassificationMemo, WasteState, classify_fleet
from controlplane.reports.fleet import (
    UNPARTITIONED,
    ClusterSample,
    DeviceSample,
    FleetSample,
    NodeSample,
    PendingDemand,
    PendingReason,
    PodRef,
    mig_share,
)

from .builders import T0
from .classify_reference import reference_classification

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
A100_MIG_SINGLE = "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
PRODUCTS = (A100, H100, A100_MIG_SINGLE)
GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
MIG_1G = "nvidia.com/mig-1g.10gb"
MIG_3G = "nvidia.com/mig-3g.40gb"
RESOURCES = (GPU, GPU, GPU, SHARED, MIG_1G, MIG_3G)
CASES = 400


def _holder(rng: random.Random) -> PodRef | None:
    if rng.random() < 0.6:
        return None
    return PodRef("ml", f"p{rng.randrange(5)}", "Deployment", f"w{rng.randrange(3)}")


def _utilization(rng: random.Random) -> float | None:
    return rng.choice((None, 0.0, 0.05, 0.5, 0.95))


def _devices(rng: random.Random, product: str) -> list[DeviceSample]:
    devices: list[DeviceSample] = []
    for gpu in range(rng.randrange(0, 5)):
        kind = rng.random()
        if kind < 0.45:
            devices.append(DeviceSample(str(gpu), f"GPU-{gpu}", None, 1.0, _holder(rng), _utilization(rng)))
        elif kind < 0.6:
            # The GPUs no report names: one sample stands for several devices of the node.
            same = DeviceSample(GPU, "", None, 1.0, _holder(rng), None, GPU)
            devices.extend([same] * rng.randrange(1, 4))
        elif kind < 0.85:
            used = 0
            for instance in range(rng.randrange(0, 4)):
                profile = rng.choice(("1g.10gb", "1g.10gb", "3g.40gb"))
                slices = int(profile[0])
                if used + slices > 7:
                    break
                used += slices
                resource = GPU if product == A100_MIG_SINGLE else f"nvidia.com/mig-{profile}"
                devices.append(
                    DeviceSample(
                        str(gpu), f"MIG-{gpu}-{instance}", profile, mig_share(profile), _holder(rng), _utilization(rng), resource
                    )
                )
            if used < 7:
                devices.append(DeviceSample(str(gpu), f"MIG-{gpu}", UNPARTITIONED, (7 - used) / 7, resource=None))
        else:
            count = rng.randrange(2, 4)
            resource = rng.choice((GPU, SHARED))
            devices.extend(
                DeviceSample(str(gpu), f"GPU-{gpu}", None, 1.0 / count, _holder(rng), _utilization(rng), resource)
                for _ in range(count)
            )
    return devices


def _cluster(rng: random.Random, name: str) -> ClusterSample:
    nodes = []
    for index in range(rng.randrange(0, 7)):
        product = rng.choice(PRODUCTS)
        nodes.append(
            NodeSample(
                name=rng.choice((f"n{index}", f"n{rng.randrange(3)}", "(unreported)")),
                product=product,
                devices=tuple(_devices(rng, product)),
                ready=rng.random() > 0.1,
                schedulable=rng.random() > 0.1,
            )
        )
    pricing = {product: float(rng.choice((1, 2, 2, 3))) for product in PRODUCTS[:2] if rng.random() < 0.8}
    return ClusterSample(
        name,
        tuple(nodes),
        ready=rng.random() > 0.08,
        schedulable=rng.random() > 0.08,
        pricing=pricing,
        tier=rng.choice((0, 0, 1)),
    )


def _maybe(rng: random.Random, values: tuple[str, ...]) -> frozenset[str] | None:
    return frozenset(rng.sample(values, rng.randrange(1, len(values) + 1))) if rng.random() < 0.3 else None


def _demand(rng: random.Random, clusters: tuple[str, ...], index: int) -> PendingDemand:
    requests = {resource: rng.choice((1, 1, 2, 3)) for resource in rng.sample(RESOURCES, rng.choice((1, 1, 1, 2)))}
    if rng.random() < 0.1:
        requests["cpu"] = 4  # not GPU-like: plays no part
    return PendingDemand(
        namespace=rng.choice(("ml", "ml", "research")),
        workload=f"Deployment/d{index % 4}",
        replicas=rng.choice((0, 1, 1, 2, 3, 5, 8)),
        requests=requests,
        products=_maybe(rng, PRODUCTS),
        clusters=_maybe(rng, clusters),
        reason=rng.choice((PendingReason.UNPLACED, PendingReason.MEMBER_UNSCHEDULABLE, PendingReason.NEVER_FITS))
        if rng.random() < 0.3
        else PendingReason.UNPLACED,
        excluded_products=frozenset(rng.sample(PRODUCTS, 1)) if rng.random() < 0.1 else frozenset(),
        excluded_clusters=frozenset(rng.sample(clusters, 1)) if rng.random() < 0.1 else frozenset(),
    )


def random_fleet(seed: int) -> FleetSample:
    rng = random.Random(seed)
    names = tuple(f"c{i}" for i in range(rng.randrange(1, 5)))
    # Now and then two clusters of one name: their nodes still sort by name, then by place.
    listed = names + ((names[0],) if rng.random() < 0.05 else ())
    clusters = tuple(_cluster(rng, name) for name in listed)
    pending = tuple(_demand(rng, names, i) for i in range(rng.randrange(0, 7)))
    return FleetSample(T0, clusters, pending)


@pytest.mark.parametrize("cap_needed_by_demand", [True, False], ids=["matched", "literal"])
def test_grouped_matching_agrees_with_node_by_node_matching(cap_needed_by_demand: bool) -> None:
    outcomes: set[WasteState] = set()
    for seed in range(CASES):
        sample = random_fleet(seed)
        expected_states, expected_unmet = reference_classification(sample, cap_needed_by_demand=cap_needed_by_demand)
        got = classify_fleet(sample, cap_needed_by_demand=cap_needed_by_demand)
        assert list(got.states) == expected_states, f"seed {seed}"
        assert list(got.unmet) == expected_unmet, f"seed {seed}"
        assert [s for part in got.parts for s in part] == expected_states, f"seed {seed}"
        outcomes.update(s.state for s in expected_states)
    # The random fleets reach every state the matching decides.
    assert {WasteState.FREE_NEEDED, WasteState.FREE_FRAGMENTED, WasteState.FREE_SPARE} <= outcomes


def test_grouped_matching_agrees_through_a_memo() -> None:
    """The layouts a memo keeps give the same outcome on the next sample as fresh ones."""
    for seed in range(0, CASES, 4):
        sample = random_fleet(seed)
        if len({c.name for c in sample.clusters}) != len(sample.clusters):
            continue  # a memo is keyed by cluster name
        memo = ClassificationMemo()
        expected_states, expected_unmet = reference_classification(sample)
        for _ in range(2):
            got = classify_fleet(sample, memo=memo)
            assert list(got.states) == expected_states, f"seed {seed}"
            assert list(got.unmet) == expected_unmet, f"seed {seed}"
