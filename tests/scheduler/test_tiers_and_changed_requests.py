"""Placement after the rules change: listed tiers bind gangs; a changed per-replica request moves replicas.

``tieredOverflow.tiers`` replace the clusters' own tiers for gangs too, and a cluster that
matches none is never used. Replicas a cluster already runs count as placed only while some
node there could run the binding's current per-replica request (``can_ever_run``): after a
re-pin to another GPU model, or once the GPU shape the cluster ran is gone, they are placed
anew wherever the new request fits.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.pods import FrozenToleration
from controlplane.apis.work_v1alpha1 import ResourceBinding, ScheduledReason
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.estimator import can_ever_run
from controlplane.scheduler.core.framework import BindingRequest, GpuShape
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import GpuShapeAlternative, Placement

from .builders import A100, H100, cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
PRODUCT = "nvidia.com/gpu.product"
MIG_3G = "nvidia.com/mig-3g.40gb"


def pinned(product: str, gpus: int = 1) -> ReplicaRequirements:
    return ReplicaRequirements.build({"nvidia.com/gpu": gpus, "cpu": 1000}, node_selector={PRODUCT: product})


def tiered(*tiers: tuple[str, list[str]]) -> dict[str, Any]:
    """A TieredOverflow placement listing ``(tier name, cluster names)`` in order."""
    return {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "TieredOverflow",
            "tieredOverflow": {
                "tiers": [{"name": name, "clusterAffinity": {"clusterNames": names}} for name, names in tiers]
            },
        }
    }


TIERED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}}


def explained(result: ScheduleResult, name: str) -> str:
    [entry] = [e for e in result.explanation if e.cluster == name]
    return " | ".join(entry.reasons)


def fleet() -> list[ClusterSnapshot]:
    """onprem: A100 nodes with 1 free GPU each (no 4-GPU pod fits); two H100 clouds, one dearer."""
    return [
        cluster("onprem", shape(8, gpus=1, product=A100), pricing={A100: 1.1}),
        cluster("cloud", shape(2, gpus=8, product=H100), provider="aws", pricing={H100: 4.0}),
        cluster("cloud-dear", shape(2, gpus=8, product=H100), provider="azure", pricing={H100: 9.0}),
    ]


def gang(placement: dict[str, Any], *, previous: dict[str, int] | None = None) -> BindingRequest:
    worker = ReplicaRequirements.build({"nvidia.com/gpu": 4, "cpu": 1000})
    components = (
        Component("Master", 1, ReplicaRequirements.build({"cpu": 1000})),
        Component("Worker", 3, worker),
    )
    return BindingRequest(
        key="ns/train",
        replicas=4,
        requirements=worker,
        placement=Placement.model_validate(placement),
        gang=True,
        components=components,
        previous=previous or {},
    )


# --- listed tiers bind gangs --------------------------------------------------------------


@pytest.mark.parametrize(
    ("tiers", "previous", "expected"),
    [
        pytest.param((("dc", ["onprem"]),), {}, {}, id="only-onprem-listed-and-too-small-waits"),
        pytest.param((("dc", ["onprem"]), ("burst", ["cloud-dear"])), {}, {"cloud-dear": 4}, id="unlisted-cheaper-unused"),
        pytest.param((("first", ["cloud-dear"]), ("then", ["cloud"])), {}, {"cloud-dear": 4}, id="listed-order-beats-price"),
        pytest.param((("all", ["onprem", "cloud", "cloud-dear"]),), {}, {"cloud": 4}, id="one-tier-cheapest"),
        pytest.param((("dc", ["onprem"]), ("burst", ["cloud-dear"])), {"cloud": 4}, {"cloud-dear": 4}, id="running-unlisted-leaves"),
    ],
)
def test_a_gang_takes_its_cluster_from_the_listed_tiers(
    tiers: tuple[tuple[str, list[str]], ...], previous: dict[str, int], expected: dict[str, int]
) -> None:
    listed = {name for _, names in tiers for name in names}
    result = schedule(gang(tiered(*tiers), previous=previous), fleet(), now=NOW)
    assert result.clusters == expected
    assert result.condition.status is bool(expected)
    if not expected:
        assert result.condition.reason is ScheduledReason.UNSCHEDULABLE
    for name in ("cloud", "cloud-dear"):
        if name not in listed:
            assert "matches none of tieredOverflow.tiers" in explained(result, name)


def test_a_workload_scaled_to_zero_stays_in_a_listed_tier() -> None:
    request = BindingRequest(
        key="ns/serve", replicas=0, requirements=pinned(H100), placement=Placement.model_validate(tiered(("x", ["cloud-dear"])))
    )
    assert schedule(request, fleet(), now=NOW).clusters == {"cloud-dear": 0}


# --- a changed per-replica request ----------------------------------------------------------

DIVISIONS = {
    "tiered": TIERED,
    "duplicated": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
    "dynamic-weight": {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"dynamicWeight": "AvailableReplicas"},
        }
    },
    "aggregated": {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}},
    "static-weight": {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}},
}


def pin_fleet() -> list[ClusterSnapshot]:
    """cloud's H100s are all in use (by the binding's 4 replicas); onprem has 8 free A100s."""
    return [
        cluster("onprem", shape(2, gpus=4, product=A100), pricing={A100: 1.1}),
        cluster("cloud", shape(1, gpus=0, product=H100, allocatable={"nvidia.com/gpu": 8}), provider="aws"),
    ]


@pytest.mark.parametrize("division", sorted(DIVISIONS))
@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        pytest.param(H100, {"cloud": 4}, id="same-pin-stays"),
        pytest.param(A100, {"onprem": 4}, id="re-pinned-moves"),
    ],
)
def test_replicas_count_as_placed_only_where_the_new_request_can_run(
    division: str, pin: str, expected: dict[str, int]
) -> None:
    request = BindingRequest(
        key="ns/serve",
        replicas=4,
        requirements=pinned(pin, gpus=2),
        placement=Placement.model_validate(DIVISIONS[division]),
        previous={"cloud": 4},
    )
    result = schedule(request, pin_fleet(), now=NOW)
    assert result.clusters == expected
    assert result.condition.status
    if "cloud" not in expected:
        assert f"0/1 nodes match nodeSelector {PRODUCT}={A100}" in explained(result, "cloud")


@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        pytest.param(H100, {"cloud": 4}, id="same-pin-stays"),
        pytest.param(A100, {}, id="re-pinned-waits-when-nothing-holds-it"),
    ],
)
def test_a_gang_stays_whole_only_where_its_new_request_can_run(pin: str, expected: dict[str, int]) -> None:
    worker = pinned(pin, gpus=2)
    request = BindingRequest(
        key="ns/train",
        replicas=4,
        requirements=worker,
        placement=Placement.model_validate(TIERED),
        gang=True,
        components=(Component("Worker", 4, worker),),
        previous={"cloud": 4},
    )
    onprem_one_free = cluster("onprem", shape(8, gpus=1, product=A100, allocatable={"nvidia.com/gpu": 8}))
    clusters = [onprem_one_free, pin_fleet()[1]]
    result = schedule(request, clusters, now=NOW)
    assert result.clusters == expected
    if not expected:
        assert "gang does not fit" in explained(result, "cloud")


def test_a_running_gang_keeps_the_alternative_shape_its_cluster_runs() -> None:
    worker = ReplicaRequirements.build({MIG_3G: 1, "cpu": 1000})
    whole = GpuShape.from_alternative(
        GpuShapeAlternative.model_validate({"resources": {"nvidia.com/gpu": 1}, "nodeSelector": {PRODUCT: H100}})
    )
    request = BindingRequest(
        key="ns/train",
        replicas=2,
        requirements=worker,
        placement=Placement.model_validate(TIERED),
        gang=True,
        components=(Component("Worker", 2, worker),),
        gpu_shapes=(whole,),
        previous={"cloud": 2},
    )
    result = schedule(request, [pin_fleet()[1]], now=NOW)
    assert result.clusters == {"cloud": 2}
    assert result.chosen_shapes == {"cloud": whole}


def test_replicas_of_a_shape_no_longer_offered_are_placed_anew() -> None:
    """The cloud ran the whole-GPU alternative; with it gone only the MIG request is left."""
    mig_request = ReplicaRequirements.build({MIG_3G: 1, "cpu": 1000})
    clusters = [
        cluster("onprem", shape(1, product=A100, extra={MIG_3G: 0}, allocatable={MIG_3G: 4})),
        pin_fleet()[1],
    ]
    request = BindingRequest(
        key="ns/asr",
        replicas=6,
        requirements=mig_request,
        placement=Placement.model_validate(TIERED),
        previous={"onprem": 4, "cloud": 2},
    )
    result = schedule(request, clusters, now=NOW)
    assert result.clusters == {"onprem": 4}
    assert result.unplaced == 2
    assert result.condition.reason is ScheduledReason.UNSCHEDULABLE


# --- the estimator's static check ------------------------------------------------------------

NO_GPU_FREE = shape(1, gpus=0, product=A100, allocatable={"nvidia.com/gpu": 8})
TAINTED = shape(1, gpus=8, product=A100, taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])
INVALID_MIG = shape(1, gpus=8, product=A100 + "-MIG-INVALID")
FULL_PODS = shape(1, gpus=8, product=A100, extra={"pods": 0}, allocatable={"pods": 0})


@pytest.mark.parametrize(
    ("node", "requirements", "runs"),
    [
        pytest.param(NO_GPU_FREE, pinned(A100, gpus=8), True, id="allocatable-counts-not-free"),
        pytest.param(NO_GPU_FREE, pinned(A100, gpus=9), False, id="more-than-a-node-has"),
        pytest.param(NO_GPU_FREE, pinned(H100), False, id="other-gpu-model"),
        pytest.param(NO_GPU_FREE, ReplicaRequirements.build({MIG_3G: 1}), False, id="resource-the-node-lacks"),
        pytest.param(TAINTED, pinned(A100), False, id="untolerated-taint"),
        pytest.param(
            TAINTED,
            ReplicaRequirements.build(
                {"nvidia.com/gpu": 1},
                tolerations=[FrozenToleration(key="dedicated", operator="Equal", value="ml", effect="NoSchedule")],
            ),
            True,
            id="tolerated-taint",
        ),
        pytest.param(INVALID_MIG, pinned(A100 + "-MIG-INVALID"), False, id="invalid-mig-layout"),
        pytest.param(FULL_PODS, pinned(A100), False, id="no-pod-slots"),
    ],
)
def test_can_ever_run(node: dict[str, Any], requirements: ReplicaRequirements, runs: bool) -> None:
    assert can_ever_run(cluster("c", node), requirements) is runs


# --- gpuShapes travel on the binding -------------------------------------------------------


def test_from_binding_reads_the_gpu_shapes_the_binding_carries() -> None:
    binding = ResourceBinding.model_validate(
        {
            "metadata": {"name": "asr-deployment", "namespace": "ml"},
            "spec": {
                "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "asr", "namespace": "ml"},
                "replicas": 2,
                "replicaRequirements": {"resourceRequest": {MIG_3G: "1"}},
                "gpuShapes": {
                    "alternatives": [{"name": "whole", "resources": {"nvidia.com/gpu": 1}, "nodeSelector": {PRODUCT: H100}}]
                },
            },
        }
    )
    [shape_] = BindingRequest.from_binding(binding).gpu_shapes
    assert (shape_.name, shape_.resource_map, dict(shape_.node_selector)) == ("whole", {"nvidia.com/gpu": 1}, {PRODUCT: H100})
    assert BindingRequest.from_binding(binding, gpu_shapes=[]).gpu_shapes == ()
