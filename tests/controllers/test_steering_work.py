"""The hub's steering away from scarce GPU models reaches the member in the Work: a preferred
node-affinity term after the user's own affinity, which stays as the user wrote it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from gpufed.commands.explain import render_explanation

from .fleet import deployment, eventually, get_object, node_shape, propagation_policy, put_cluster, settled
from .test_trainjob_placement import API as TRAINER_API
from .test_trainjob_placement import runtime as trainer_runtime
from .test_trainjob_placement import trainjob

WORK_API = "work.gpufed.io/v1alpha1"
T4 = "Tesla-T4"
V100 = "Tesla-V100-SXM2-16GB"
PRODUCT = "nvidia.com/gpu.product"
STEERING = {"weight": 1, "preference": {"matchExpressions": [{"key": PRODUCT, "operator": "NotIn", "values": [T4]}]}}
USER_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 20, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
        ],
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                              "labelSelector": {"matchLabels": {"app": "flex"}}}}
        ]
    },
}


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


def steered_policy(name: str, **tiered_overflow: Any) -> dict[str, Any]:
    placement = {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "TieredOverflow",
            "tieredOverflow": tiered_overflow,
        }
    }
    return propagation_policy(name, placement=placement)


def flexible_with_own_affinity() -> dict[str, Any]:
    obj = deployment("flex", replicas=1)
    obj["spec"]["template"]["spec"]["affinity"] = copy.deepcopy(USER_AFFINITY)
    return obj


async def work_of(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    return await get_object(objects, WORK_API, "Work", f"default-{name}-deployment", namespace="gpufed-es-mixed")


async def flexible_work(objects: ObjectStore, manager: ControllerManager, **tiered_overflow: Any) -> dict[str, Any]:
    """A cluster of 8 free T4s and 8 free V100s; a T4-only Deployment of one 8-GPU replica (8 GPUs
    of T4-only demand: as many as the fleet's free T4s), then a flexible one with its own affinity."""
    shapes = [node_shape(1, gpus=8, product=T4), node_shape(1, gpus=8, product=V100)]
    for found in shapes:
        found["labels"]["zone"] = "a"
    await put_cluster(objects, "mixed", *shapes)
    await settled(manager)
    await create(objects, steered_policy("steered", **tiered_overflow))
    pinned = deployment("pinned", replicas=1, gpus=8)
    pinned["spec"]["template"]["spec"]["nodeSelector"] = {PRODUCT: T4}
    await create(objects, pinned)
    await eventually(lambda: work_of(objects, "pinned"), what="the T4-only Work")
    await create(objects, flexible_with_own_affinity())
    return await eventually(lambda: work_of(objects, "flex"), what="the flexible Work")


async def flex_binding(objects: ObjectStore, cluster: str) -> tuple[dict[str, Any], tuple[str, ...], str]:
    """The flexible Deployment's binding, its explanation's reasons for ``cluster`` and what
    `gpufed explain` prints for it."""
    binding = await get_object(objects, WORK_API, "ResourceBinding", "flex-deployment")
    assert binding is not None
    reasons = next(e["reasons"] for e in binding["status"]["explanation"] if e["cluster"] == cluster)
    workload = await get_object(objects, "apps/v1", "Deployment", "flex")
    assert workload is not None
    return binding, tuple(reasons), render_explanation(workload, binding)


def pod_spec(work: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = work["spec"]["workload"]["manifests"][0]["spec"]["template"]["spec"]
    return spec


async def test_the_work_carries_the_steering_term_after_the_users_own_affinity(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    work = await flexible_work(objects, manager)  # steering is on by default
    affinity = pod_spec(work)["affinity"]
    expected = copy.deepcopy(USER_AFFINITY)
    expected["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].append(STEERING)
    assert affinity == expected
    binding, reasons, text = await flex_binding(objects, "mixed")
    assert json.loads(binding["metadata"]["annotations"]["scheduler.gpufed.io/gpu-steering"]) == {"mixed": [T4]}
    assert any("steered inside the cluster away from Tesla-T4" in r for r in reasons), reasons
    assert "Steering:    in mixed, nodes other than Tesla-T4 preferred" in text, text
    # The T4-only replica itself is never steered.
    pinned = await work_of(objects, "pinned")
    assert pinned is not None and "affinity" not in pod_spec(pinned)


@pytest.mark.parametrize(
    "switched_off",
    [
        pytest.param({"scarcitySteering": False}, id="steering-false"),
        pytest.param({"scarcitySteering": True, "scarcityAware": False}, id="scarcity-aware-false"),
    ],
)
async def test_without_steering_the_work_keeps_the_users_affinity_alone(
    objects: ObjectStore, manager: ControllerManager, switched_off: dict[str, Any]
) -> None:
    work = await flexible_work(objects, manager, **switched_off)
    assert pod_spec(work)["affinity"] == USER_AFFINITY
    binding = await get_object(objects, WORK_API, "ResourceBinding", "flex-deployment")
    assert binding is not None and "scheduler.gpufed.io/gpu-steering" not in (binding["metadata"].get("annotations") or {})
    workload = await get_object(objects, "apps/v1", "Deployment", "flex")
    assert workload is not None and "Steering:" not in render_explanation(workload, binding)


async def test_a_trainjob_gets_no_steering_its_work_could_not_carry(objects: ObjectStore, manager: ControllerManager) -> None:
    """The same fleet and T4-only demand; the flexible workload is a TrainJob of one 1-GPU node.
    Its pods' template is its runtime's, which the Work cannot give a preferred term: the binding
    records no steering and `gpufed explain` shows none."""
    await flexible_work(objects, manager)
    await create(objects, trainer_runtime("ClusterTrainingRuntime", gpus=1, num_nodes=1))
    policy = steered_policy("steered-training")
    policy["spec"]["resourceSelectors"] = [{"apiVersion": TRAINER_API, "kind": "TrainJob"}]
    await create(objects, policy)
    await create(objects, trainjob("llama", "ClusterTrainingRuntime"))

    async def placed() -> dict[str, Any] | None:
        found = await get_object(objects, WORK_API, "ResourceBinding", "llama-trainjob")
        return found if (found or {}).get("spec", {}).get("clusters") else None

    binding = await eventually(placed, what="the TrainJob placed")
    assert "scheduler.gpufed.io/gpu-steering" not in (binding["metadata"].get("annotations") or {})
    assert not any("steered" in r for e in binding["status"]["explanation"] for r in e["reasons"])
    workload = await get_object(objects, TRAINER_API, "TrainJob", "llama")
    assert workload is not None and "Steering:" not in render_explanation(workload, binding)
