"""Price bands: prices within ``tieredOverflow.priceBandPercent`` tie, and scarcity decides across GPU models."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from controlplane.apis.fragmentation import TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.pricebands import band_starts, banded
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

from .builders import cluster, shape
from .test_tiebreak import CPU, NOW, T4, V100, observe, reasons, tiered

#: The what-if's amortised on-prem prices of the openb models ($ per GPU-hour).
OPENB = (0.18, 0.34, 0.49, 1.02, 1.02, 1.3)


@pytest.mark.parametrize(
    ("prices", "percent", "starts"),
    [
        (OPENB, 0, (0.18, 0.34, 0.49, 1.02, 1.3)),
        (OPENB, 100, (0.18, 0.49, 1.02)),  # 0.34 <= 0.36; 1.02 > 0.98 starts a band holding 1.3
        (OPENB, 500, (0.18, 1.3)),  # up to 1.08
        ((4.0, 4.1, 4.5), 10, (4.0, 4.5)),
        ((4.0, 4.4), 10, (4.0,)),  # the band's upper end is in it
        ((), 10, ()),
    ],
)
def test_band_starts(prices: tuple[float, ...], percent: float, starts: tuple[float, ...]) -> None:
    assert band_starts(prices, percent) == starts


@pytest.mark.parametrize(
    ("price", "banded_price"),
    [(0.0, 0.0), (0.18, 0.18), (0.34, 0.18), (0.49, 0.49), (1.02, 1.02), (1.3, 1.02), (9.0, 1.02)],
)
def test_a_price_counts_as_its_bands_start(price: float, banded_price: float) -> None:
    assert banded(price, (0.18, 0.49, 1.02)) == banded_price


def test_band_percent_is_bounded() -> None:
    for bad in (-1, 1001):
        with pytest.raises(ValidationError, match="priceBandPercent"):
            tiered(priceBandPercent=bad)


# --------------------------------------------------------------------------------- decisions


def request(key: str, placement: Placement, *, replicas: int = 1) -> BindingRequest:
    return BindingRequest(
        key=key,
        replicas=replicas,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": CPU}),
        placement=placement,
    )


def fleet(*, v100_price: float = 0.54, v100_tier: int | None = None) -> list[ClusterSnapshot]:
    """A cheap T4 cluster and a V100 cluster, 8 free GPUs each."""
    return [
        cluster("a-t4", shape(1, gpus=8, product=T4), pricing={T4: 0.5}),
        cluster("b-v100", shape(1, gpus=8, product=V100), pricing={V100: v100_price}, tier=v100_tier),
    ]


def t4_only_waiting(cache: SchedulerCache) -> None:
    """100 recent 1-GPU arrivals that take any model, 3 of 2 GPUs that accept only a T4."""
    observe(cache, TaskShape(CPU, 1000, 1), 100, "flex")
    observe(cache, TaskShape(CPU, 1000, 2, (T4,)), 3, "t4only")


Case = tuple[str, dict[str, Any], dict[str, Any], dict[str, int]]
CASES: list[Case] = [
    ("no band: price order holds", {}, {}, {"a-t4": 1}),
    ("8 % apart, band 10 %: scarcity decides", {"priceBandPercent": 10}, {}, {"b-v100": 1}),
    ("8 % apart, band 5 %: price order holds", {"priceBandPercent": 5}, {}, {"a-t4": 1}),
    ("in band, scarcity off", {"priceBandPercent": 10, "scarcityAware": False}, {}, {"a-t4": 1}),
    ("a band never joins tiers", {"priceBandPercent": 500}, {"v100_tier": 1}, {"a-t4": 1}),
    ("wide band over the openb spread", {"priceBandPercent": 500}, {"v100_price": 1.02}, {"b-v100": 1}),
]


@pytest.mark.parametrize(("name", "tiered_overflow", "fleet_args", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_flexible_replica_goes_where_its_model_is_least_scarce_within_the_band(
    name: str, tiered_overflow: dict[str, Any], fleet_args: dict[str, Any], expected: dict[str, int]
) -> None:
    """6 GPUs of T4-only demand against 8 free T4s: a flexible replica costs 0.75 GPU of scarcity in
    the T4 cluster and none in the V100 one; it goes there only when the band ties their prices."""
    cache = SchedulerCache()
    t4_only_waiting(cache)
    result = schedule(request("ns/job", tiered(**tiered_overflow)), fleet(**fleet_args), now=NOW, cache=cache)
    assert result.clusters == expected
    if expected == {"b-v100": 1}:
        assert "decided by scarcity" in reasons(result, "b-v100")[-1]
        assert "scarcity 0.75 GPUs" in reasons(result, "a-t4")[0]
        assert "#2 of 2 clusters tied on tier and price band" in reasons(result, "a-t4")[0]


def test_replicas_spill_from_the_preferred_cluster_of_the_band_to_the_other() -> None:
    """10 replicas: the 8 V100s first (scarcity), the remaining 2 on T4s, the explanation's prices
    are the clusters' own (the band only orders them)."""
    cache = SchedulerCache()
    t4_only_waiting(cache)
    result = schedule(request("ns/job", tiered(priceBandPercent=10), replicas=10), fleet(), now=NOW, cache=cache)
    assert result.clusters == {"b-v100": 8, "a-t4": 2}
    prices = {entry.cluster: entry.price for entry in result.explanation}
    assert prices == {"a-t4": 0.5, "b-v100": 0.54}


def test_a_gang_takes_the_cluster_of_the_band_its_model_is_least_scarce_in() -> None:
    cache = SchedulerCache()
    t4_only_waiting(cache)
    gang = BindingRequest(
        key="ns/gang",
        replicas=2,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": CPU}),
        placement=tiered(priceBandPercent=10),
        gang=True,
    )
    assert schedule(gang, fleet(), now=NOW, cache=cache).clusters == {"b-v100": 2}
    cache = SchedulerCache()
    t4_only_waiting(cache)
    no_band = BindingRequest(
        key="ns/gang", replicas=2, requirements=gang.requirements, placement=tiered(), gang=True
    )
    assert schedule(no_band, fleet(), now=NOW, cache=cache).clusters == {"a-t4": 2}
