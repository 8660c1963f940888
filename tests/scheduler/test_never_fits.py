"""The never-fit decision: a request no node of the fleet could hold, even empty.

Compared with each node's allocatable resources, not its free ones: a full node of 8 GPUs still
holds an 8-GPU pod one day; no node holds a 64-GPU pod ever.
"""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.framework import BindingRequest, GpuShape
from controlplane.scheduler.core.neverfit import never_fits, waits_for_room
from controlplane.scheduler.core.snapshot import ClusterSnapshot

from .builders import A100, H100, cluster, shape

L4 = "NVIDIA-L4"
MIG_3G = "nvidia.com/mig-3g.40gb"
MIG_1G = "nvidia.com/mig-1g.10gb"
SHARED = "nvidia.com/gpu.shared"
PRODUCT = "nvidia.com/gpu.product"


def fleet() -> list[ClusterSnapshot]:
    """On-prem A100s (8 per node, all in use; two nodes cut into 1g slices), cloud H100s, L4s (4 per node)."""
    return [
        cluster(
            "onprem",
            shape(2, gpus=0, product=A100, allocatable={"nvidia.com/gpu": 8}),
            shape(2, product=A100, extra={MIG_1G: 7}, mig_strategy="mixed"),
        ),
        cluster("cloud-h100", shape(4, gpus=8, product=H100), provider="aws"),
        cluster("cloud-l4", shape(3, gpus=4, product=L4), provider="gcp"),
    ]


def req(resources: dict[str, int], selector: dict[str, str] | None = None) -> ReplicaRequirements:
    return ReplicaRequirements.build({"cpu": 1000, **resources}, node_selector=selector or {})


def request(requirements: ReplicaRequirements, **extra: Any) -> BindingRequest:
    return BindingRequest(key="ml/x", replicas=2, requirements=requirements, **extra)


@pytest.mark.parametrize(
    ("requirements", "message"),
    [
        pytest.param(req({"nvidia.com/gpu": 8}), None, id="whole-gpus-as-many-as-a-node-has-even-all-in-use"),
        pytest.param(
            req({"nvidia.com/gpu": 64}),
            "can never fit: needs 64 nvidia.com/gpu in one pod; the largest node in the fleet has 8",
            id="whole-gpus-more-than-any-node",
        ),
        pytest.param(req({MIG_1G: 7}), None, id="mig-profile-the-fleet-offers"),
        pytest.param(
            req({MIG_1G: 8}),
            "can never fit: needs 8 nvidia.com/mig-1g.10gb in one pod; the largest node in the fleet has 7",
            id="mig-more-slices-than-a-node-has",
        ),
        pytest.param(
            req({MIG_3G: 1}),
            "can never fit: needs 1 nvidia.com/mig-3g.40gb in one pod; no node in the fleet offers "
            "nvidia.com/mig-3g.40gb",
            id="mig-profile-no-node-is-cut-into",
        ),
        pytest.param(
            req({SHARED: 1}),
            "can never fit: needs 1 nvidia.com/gpu.shared in one pod; no node in the fleet offers nvidia.com/gpu.shared",
            id="time-sliced-share-without-time-slicing",
        ),
        pytest.param(req({"nvidia.com/gpu": 4}, {PRODUCT: L4}), None, id="gpu-model-selector-fits"),
        pytest.param(
            req({"nvidia.com/gpu": 8}, {PRODUCT: L4}),
            f"can never fit: needs 8 nvidia.com/gpu in one pod; the largest node matching {PRODUCT}={L4} has 4",
            id="gpu-model-selector-too-small",
        ),
        pytest.param(
            req({"nvidia.com/gpu": 1}, {PRODUCT: "NVIDIA-B200"}),
            f"can never fit: no node in the fleet matches its node selection and tolerations "
            f"(matching {PRODUCT}=NVIDIA-B200)",
            id="gpu-model-no-node-has",
        ),
        pytest.param(
            req({"nvidia.com/gpu": 1, "cpu": 500_000}),
            "can never fit: needs 500 cpu in one pod; the largest node in the fleet has 64",
            id="cpu-more-than-any-node",
        ),
    ],
)
def test_never_fits(requirements: ReplicaRequirements, message: str | None) -> None:
    found = never_fits(request(requirements), fleet())
    assert (found.message if found is not None else None) == message


def test_an_alternative_gpu_shape_that_fits_is_enough() -> None:
    shared = req({SHARED: 1})
    whole = GpuShape(resources=(("nvidia.com/gpu", 1),))
    assert never_fits(request(shared), fleet()) is not None
    assert never_fits(request(shared, gpu_shapes=(whole,)), fleet()) is None


def test_a_gang_needs_every_role_in_one_cluster() -> None:
    """An L4 role and an H100 role each fit somewhere, but never together in one cluster."""
    l4 = req({"nvidia.com/gpu": 1}, {PRODUCT: L4})
    h100 = req({"nvidia.com/gpu": 8}, {PRODUCT: H100})
    gang = BindingRequest(
        key="ml/train", replicas=3, requirements=h100, gang=True,
        components=(Component("Master", 1, l4), Component("Worker", 2, h100)),
    )
    assert never_fits(gang, fleet()) is not None
    same = BindingRequest(
        key="ml/train", replicas=3, requirements=h100, gang=True,
        components=(Component("Master", 1, req({})), Component("Worker", 2, h100)),
    )
    assert never_fits(same, fleet()) is None


@pytest.mark.parametrize(
    ("pods", "gpus", "selector", "message"),
    [
        pytest.param(4, 8, None, None, id="as-many-gpus-as-the-largest-cluster-has"),
        pytest.param(
            5, 8, None, "can never fit: its 5 pods need 40 nvidia.com/gpu together; the largest cluster has 32",
            id="more-gpus-than-any-cluster-has",
        ),
        pytest.param(2, 8, {PRODUCT: A100}, None, id="allocatable-counts-not-free"),
        pytest.param(
            3, 8, {PRODUCT: A100},
            "can never fit: its 3 pods need 24 nvidia.com/gpu together; the largest cluster has 16",
            id="more-of-a-model-than-any-cluster-has",
        ),
        pytest.param(
            5, 5, None, "can never fit: its 5 pods do not fit together in any one cluster, even on empty nodes",
            id="enough-gpus-but-never-on-few-enough-nodes",
        ),
    ],
)
def test_a_gangs_pods_must_fit_one_cluster_together(
    pods: int, gpus: int, selector: dict[str, str] | None, message: str | None
) -> None:
    """Each pod alone fits some node; the gang never fits when no cluster, empty, holds them all."""
    each = req({"nvidia.com/gpu": gpus}, selector)
    gang = BindingRequest(
        key="default/grp", replicas=pods, requirements=each, gang=True,
        components=(Component("role of g0", pods, each),),
    )
    found = never_fits(gang, fleet())
    assert (found.message if found is not None else None) == message
    assert never_fits(BindingRequest(key="default/g0-pod", replicas=pods, requirements=each), fleet()) is None


def test_nothing_is_decided_before_any_cluster_reports_nodes() -> None:
    assert never_fits(request(req({"nvidia.com/gpu": 64})), []) is None
    assert never_fits(request(req({"nvidia.com/gpu": 64})), [cluster("empty")]) is None


@pytest.mark.parametrize(
    ("scheduled", "waits"),
    [
        (None, False),  # no decision yet: its own event queued it for its first
        ({"type": "Scheduled", "status": "False", "reason": "Unschedulable"}, True),
        ({"type": "Scheduled", "status": "False", "reason": "NoClusterFit"}, True),
        ({"type": "Scheduled", "status": "False", "reason": "NeverFits"}, False),  # waits for capacity facts
        ({"type": "Scheduled", "status": "True", "reason": "Success"}, False),
    ],
)
def test_which_bindings_a_report_of_more_room_sends_back(scheduled: dict[str, str] | None, waits: bool) -> None:
    assert waits_for_room(scheduled) is waits
