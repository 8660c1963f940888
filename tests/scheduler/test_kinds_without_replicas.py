"""A kind without replicas (ConfigMap, Service, a CRD without a scale subresource) goes to every
feasible cluster whatever the division, as Karmada's ``assignReplicas`` sends a non-workload;
a workload scaled to zero keeps its single cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import ResourceBinding
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

from .builders import A100, cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
NO_TOLERATION = [{"key": "maintenance", "effect": "NoSchedule"}]


def divided(preference: str, **more: Any) -> dict[str, Any]:
    return {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": preference, **more}}


def fleet() -> list[ClusterSnapshot]:
    """Four clusters: GPU on-prem, a priced cloud, a CPU-only cluster (no GPU at all) and a tainted one."""
    return [
        cluster("onprem", shape(2, gpus=8), region="eu"),
        cluster("cloud", shape(2, gpus=8), provider="aws", pricing={A100: 4.1}, region="us"),
        cluster("cpu-only", shape(2, product=None), region="eu"),
        cluster("tainted", shape(2, gpus=8), taints=NO_TOLERATION, region="us"),
    ]


UNTAINTED = {"onprem", "cloud", "cpu-only"}

CASES: dict[str, tuple[dict[str, Any], dict[str, int], set[str]]] = {
    # name: (placement, previous clusters, clusters expected)
    "divided-weighted": (divided("Weighted"), {}, UNTAINTED),
    "divided-default": ({"replicaScheduling": {"replicaSchedulingType": "Divided"}}, {}, UNTAINTED),
    "dynamic-weight": (divided("Weighted", weightPreference={"dynamicWeight": "AvailableReplicas"}), {}, UNTAINTED),
    "static-weight": (
        divided("Weighted", weightPreference={"staticWeightList": [
            {"targetCluster": {"clusterNames": ["onprem"]}, "weight": 1}
        ]}),
        {},
        UNTAINTED,
    ),
    "aggregated": (divided("Aggregated"), {}, UNTAINTED),
    "tiered-overflow": (divided("TieredOverflow"), {}, UNTAINTED),
    "duplicated": ({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}, {}, UNTAINTED),
    "placed-once-not-kept-to-one": (divided("Aggregated"), {"cloud": 0}, UNTAINTED),
    "affinity-narrows": (
        {"clusterAffinity": {"clusterNames": ["onprem", "cloud"]}, **divided("Aggregated")},
        {},
        {"onprem", "cloud"},
    ),
    "toleration-admits-the-tainted": (
        {"clusterTolerations": [{"key": "maintenance", "operator": "Exists"}], **divided("Weighted")},
        {},
        UNTAINTED | {"tainted"},
    ),
    "listed-tiers-leave-out-the-rest": (
        divided("TieredOverflow", tieredOverflow={"tiers": [
            {"name": "gpu", "clusterAffinity": {"clusterNames": ["onprem", "cloud"]}}
        ]}),
        {},
        {"onprem", "cloud"},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_kind_without_replicas_goes_to_every_feasible_cluster(name: str) -> None:
    placement, previous, expected = CASES[name]
    request = BindingRequest(
        key="ns/settings",
        replicas=0,
        requirements=ReplicaRequirements.build({}),
        placement=Placement.model_validate(placement),
        previous=previous,
        has_replicas=False,
    )
    result = schedule(request, fleet(), now=NOW)
    assert result.clusters == dict.fromkeys(sorted(expected), 0)
    assert result.condition.status
    assert "without replicas" in result.condition.message


def test_spread_constraints_limit_the_clusters_of_a_kind_without_replicas() -> None:
    spread = [
        {"spreadByField": "region", "maxGroups": 1, "minGroups": 1},
        {"spreadByField": "cluster", "maxGroups": 2, "minGroups": 1},
    ]
    request = BindingRequest(
        key="ns/settings",
        replicas=0,
        requirements=ReplicaRequirements.build({}),
        placement=Placement.model_validate({"spreadConstraints": spread, **divided("Weighted")}),
        has_replicas=False,
    )
    result = schedule(request, fleet(), now=NOW)
    # One region's two untainted clusters (eu), or the single untainted one of us.
    assert set(result.clusters) in ({"onprem", "cpu-only"}, {"cloud"})
    assert result.condition.status


@pytest.mark.parametrize("preference", ["Weighted", "Aggregated", "TieredOverflow"])
def test_a_workload_scaled_to_zero_still_stays_in_one_cluster(preference: str) -> None:
    kept = BindingRequest(
        key="ns/serve",
        replicas=0,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1}),
        placement=Placement.model_validate(divided(preference)),
        previous={"cloud": 2},
    )
    assert schedule(kept, fleet(), now=NOW).clusters == {"cloud": 0}
    fresh = BindingRequest(
        key="ns/serve",
        replicas=0,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1}),
        placement=Placement.model_validate(divided(preference)),
    )
    assert len(schedule(fresh, fleet(), now=NOW).clusters) == 1


def _binding(**spec: Any) -> ResourceBinding:
    return ResourceBinding.model_validate(
        {
            "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": "ns"}, **spec},
        }
    )


@pytest.mark.parametrize(
    ("spec", "has_replicas"),
    [
        ({}, False),  # the detector writes no replicaRequirements for a kind without an interpreter
        ({"replicas": 0}, False),
        ({"replicas": 0, "replicaRequirements": {"resourceRequest": {}}}, True),  # a workload scaled to zero
        ({"replicas": 2}, True),
    ],
)
def test_from_binding_tells_a_kind_without_replicas(spec: dict[str, Any], has_replicas: bool) -> None:
    assert BindingRequest.from_binding(_binding(**spec)).has_replicas is has_replicas
