"""Score plugins: among the clusters that can take a binding, which are better.

Each returns a raw number (higher is better); the runtime normalises per plugin and
weighs. Scores pick the one cluster of a gang (after tier and price) and where a workload
scaled to zero lives; weighted, aggregated and tiered division have their own, stricter
rules in ``policies.division`` and do not consult scores.
"""

from __future__ import annotations

from collections.abc import Sequence

from controlplane.apis.constants import LABEL_GPU_PRODUCT
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.framework import CycleState
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import prefer_no_schedule_count


def price_for(cluster: ClusterSnapshot, requirements: ReplicaRequirements, products: Sequence[str]) -> float:
    """Dollars per GPU-hour a replica of ``requirements`` pays in ``cluster``.

    The price of the GPU product it selects (``nodeSelector`` on ``nvidia.com/gpu.product``),
    else the cheapest listed one among ``products`` (those of the nodes that can hold a
    replica), else the cluster's cheapest listed price (0 when none is listed).
    """
    pricing = cluster.pricing
    if not pricing:
        return 0.0
    product = None
    for key, value in requirements.node_selector:
        if key == LABEL_GPU_PRODUCT:
            product = value
    if product is None:
        listed = [pricing[p] for p in products if p in pricing]
        if listed:
            return min(listed)
    return cluster.view.price_per_gpu_hour(product)


def cluster_price(state: CycleState, cluster: ClusterSnapshot) -> float:
    """What this cycle's binding would pay per GPU-hour in ``cluster`` (see :func:`price_for`)."""
    feasibility = state.feasibility.get(cluster.name)
    if feasibility is not None:
        return feasibility.price
    return price_for(cluster, state.request.requirements, ())


class ClusterLocality:
    """Prefer clusters that already run the binding (fewer moves)."""

    name = "ClusterLocality"

    def score(self, state: CycleState, cluster: ClusterSnapshot) -> float:
        return 1.0 if state.request.previous.get(cluster.name) else 0.0

    def score_all(self, state: CycleState, clusters: Sequence[ClusterSnapshot]) -> list[float]:
        previous = state.request.previous
        if not previous:
            return [0.0] * len(clusters)
        return [1.0 if previous.get(c.name) else 0.0 for c in clusters]


class TierAndPrice:
    """Prefer lower tiers (on-prem first), then cheaper GPU-hours."""

    name = "TierAndPrice"

    def score(self, state: CycleState, cluster: ClusterSnapshot) -> float:
        return -(cluster.tier * 1_000_000.0 + cluster_price(state, cluster))

    def score_all(self, state: CycleState, clusters: Sequence[ClusterSnapshot]) -> list[float]:
        return [-(c.tier * 1_000_000.0 + cluster_price(state, c)) for c in clusters]


class AvailableCapacity:
    """Prefer clusters that can hold more of the binding (up to all of it)."""

    name = "AvailableCapacity"

    def score(self, state: CycleState, cluster: ClusterSnapshot) -> float:
        feasibility = state.feasibility.get(cluster.name)
        held = (feasibility.available if feasibility else 0) + state.request.previous.get(cluster.name, 0)
        return float(min(held, max(state.request.replicas, 1)))

    def score_all(self, state: CycleState, clusters: Sequence[ClusterSnapshot]) -> list[float]:
        feasibility = state.feasibility
        previous = state.request.previous
        wanted = max(state.request.replicas, 1)
        out: list[float] = []
        for cluster in clusters:
            found = feasibility.get(cluster.name)
            held = (found.available if found else 0) + (previous.get(cluster.name, 0) if previous else 0)
            out.append(float(held if held < wanted else wanted))
        return out


class TaintPreference:
    """Avoid clusters with untolerated PreferNoSchedule taints."""

    name = "TaintToleration"

    def score(self, state: CycleState, cluster: ClusterSnapshot) -> float:
        if not cluster.taints:
            return 0.0
        return -float(prefer_no_schedule_count(cluster.view, state.request.tolerations))

    def score_all(self, state: CycleState, clusters: Sequence[ClusterSnapshot]) -> list[float]:
        return [self.score(state, c) if c.taints else 0.0 for c in clusters]
