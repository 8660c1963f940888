"""The built-in scheduler plugins and the default profile that runs them.

Filters run cheapest first (those that decide from the placement and the workload's kind
alone, whether the cluster serves that kind last among them, then the request's own
``keep_only`` clusters) and GPU feasibility (the estimator) last; scores weigh tier and price highest, because filling cheap
capacity first is the federation's purpose.
"""

from controlplane.scheduler.core.framework import Profile, WeightedScorer
from controlplane.scheduler.core.plugins.feasibility import GpuFeasibility
from controlplane.scheduler.core.plugins.filters import (
    APIEnablement,
    ClusterAffinity,
    ClusterReady,
    Cordon,
    KeepOnly,
    SpreadConstraint,
    TaintToleration,
)
from controlplane.scheduler.core.plugins.scores import (
    AvailableCapacity,
    ClusterLocality,
    TaintPreference,
    TierAndPrice,
    cluster_price,
)

DEFAULT_PROFILE = Profile(
    filters=(
        ClusterAffinity(),
        TaintToleration(),
        Cordon(),
        ClusterReady(),
        SpreadConstraint(),
        APIEnablement(),
        KeepOnly(),
        GpuFeasibility(),
    ),
    scorers=(
        WeightedScorer(TierAndPrice(), 3.0),
        WeightedScorer(ClusterLocality(), 1.0),
        WeightedScorer(AvailableCapacity(), 1.0),
        WeightedScorer(TaintPreference(), 1.0),
    ),
)

__all__ = [
    "DEFAULT_PROFILE",
    "APIEnablement",
    "AvailableCapacity",
    "ClusterAffinity",
    "ClusterLocality",
    "ClusterReady",
    "Cordon",
    "GpuFeasibility",
    "KeepOnly",
    "SpreadConstraint",
    "TaintPreference",
    "TaintToleration",
    "TierAndPrice",
    "cluster_price",
]
