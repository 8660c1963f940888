"""Explanations never show the estimator's "no limit" sentinel, and Aggregated division breaks
ties by price (then room, then name) instead of by name alone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from policies.division import divide_aggregated
from policies.models import Placement

from .builders import A100, H100, cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
AGGREGATED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}
L4 = "NVIDIA-L4"


def request(replicas: int, placement: dict[str, Any], req: ReplicaRequirements, **extra: Any) -> BindingRequest:
    return BindingRequest(
        key="ns/web", replicas=replicas, requirements=req, placement=Placement.model_validate(placement), **extra
    )


def reasons(result: Any, name: str) -> str:
    [entry] = [e for e in result.explanation if e.cluster == name]
    return " | ".join(entry.reasons)


@pytest.mark.parametrize("previous", [{}, {"a": 1}])
def test_pods_that_request_nothing_are_explained_without_the_sentinel(previous: dict[str, int]) -> None:
    no_pod_limit = {**shape(2, gpus=0), "free": {}, "allocatable": {}}  # nodes that report no pod limit
    result = schedule(
        request(3, AGGREGATED, ReplicaRequirements.build({}), previous=previous), [cluster("a", no_pod_limit)], now=NOW
    )
    assert result.clusters == {"a": 3}
    text = reasons(result, "a")
    assert "1073741" not in text
    assert text == "holds any number of replicas (its pods request nothing that runs out)"


def fleet() -> list[Any]:
    """The demo's three clusters: each can hold the whole workload below."""
    return [
        cluster("cloud-h100", shape(2, gpus=8, product=H100), provider="aws", pricing={H100: 4.10}),
        cluster("cloud-l4", shape(3, gpus=4, product=L4), provider="gcp", pricing={L4: 0.35}),
        cluster("onprem-a100", shape(2, gpus=8, product=A100), pricing={A100: 1.20}),
    ]


def test_aggregated_takes_the_cheapest_cluster_that_holds_everything() -> None:
    one_gpu = ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 1000})
    result = schedule(request(4, AGGREGATED, one_gpu), fleet(), now=NOW)
    assert result.clusters == {"cloud-l4": 4}
    assert "not needed: fewer clusters hold the replicas" in reasons(result, "cloud-h100")


def test_aggregated_still_uses_the_fewest_clusters_before_the_cheapest() -> None:
    one_gpu = ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 1000})
    # 14 replicas: only the 16-GPU clusters hold them alone; of those the cheaper wins.
    assert schedule(request(14, AGGREGATED, one_gpu), fleet(), now=NOW).clusters == {"onprem-a100": 14}


@pytest.mark.parametrize(
    ("replicas", "available", "prices", "expected"),
    [
        pytest.param(4, {"h": 16, "a": 16, "l": 12}, {"h": 4.1, "a": 1.2, "l": 0.35}, {"l": 4}, id="cheapest-holder"),
        pytest.param(14, {"h": 16, "a": 16, "l": 12}, {"h": 4.1, "a": 1.2, "l": 0.35}, {"a": 14}, id="cheapest-of-the-big"),
        # Equal room, no holder alone: the cheaper first; then the cheapest that holds the rest.
        pytest.param(20, {"h": 16, "a": 16, "l": 12}, {"h": 4.1, "a": 1.2, "l": 0.35}, {"a": 12, "l": 8},
                     id="fewest-then-cheapest"),
        # Equal prices: as before, the roomiest, then the name.
        pytest.param(5, {"a": 3, "b": 10, "c": 6}, {}, {"b": 5}, id="equal-prices-roomiest"),
        pytest.param(4, {"b": 6, "c": 6}, {}, {"b": 4}, id="equal-everything-by-name"),
    ],
)
def test_divide_aggregated_ties(
    replicas: int, available: dict[str, int], prices: dict[str, float], expected: dict[str, int]
) -> None:
    result = divide_aggregated(replicas, available, prices=prices)
    assert dict(result.assignments) == expected
    assert result.unplaced == 0
