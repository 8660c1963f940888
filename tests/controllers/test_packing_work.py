"""The hub's packing hint reaches the member in the Work: a preferred node-affinity term after the
user's own affinity, which stays as the user wrote it; `gpufed explain` says so, and says when the
member's reported node scoring is why (``packingHintsScope: SpreadingMembers``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, get_object, node_shape, put_cluster, settled
from .test_steering_work import (
    USER_AFFINITY,
    WORK_API,
    create,
    flex_binding,
    flexible_with_own_affinity,
    pod_spec,
    steered_policy,
)

PACKED = {"weight": 1, "preference": {"matchExpressions": [
    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}}


async def packed_work(
    objects: ObjectStore, manager: ControllerManager, node_scoring: str | None = None, **tiered_overflow: Any
) -> dict[str, Any]:
    """A cluster of one 8-GPU node with 4 GPUs in use (``node-a``) and three empty ones, its agent
    reporting ``node_scoring``; a Deployment of one 1-GPU replica with its own affinity."""
    half = node_shape(1, gpus=4)
    half["allocatable"]["nvidia.com/gpu"] = 8
    half["hostnames"] = ["node-a"]
    shapes = [half, node_shape(3, gpus=8)]
    for found in shapes:
        found["labels"]["zone"] = "a"
    await put_cluster(objects, "c", *shapes, node_scoring=node_scoring)
    await settled(manager)
    await create(objects, steered_policy("packed", **tiered_overflow))
    await create(objects, flexible_with_own_affinity())
    return await eventually(
        lambda: get_object(objects, WORK_API, "Work", "default-flex-deployment", namespace="gpufed-es-c"),
        what="the Work",
    )


async def test_the_work_carries_the_packing_term_after_the_users_own_affinity(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    work = await packed_work(objects, manager, packingHints=True, packingHintsScope="AllMembers",
                             packingHintsMultiGPUPercent=0)
    expected = copy.deepcopy(USER_AFFINITY)
    expected["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].append(PACKED)
    assert pod_spec(work)["affinity"] == expected
    binding, reasons, text = await flex_binding(objects, "c")
    assert json.loads(binding["metadata"]["annotations"]["scheduler.gpufed.io/packing-hints"]) == {"c": ["node-a"]}
    assert any("packed inside the cluster toward 1 node(s) already running GPU work (node-a" in r for r in reasons), reasons
    assert "Packing:     in c, 1 node(s) already running GPU work preferred: node-a (a preferred" in text, text


@pytest.mark.parametrize("tiered_overflow", [{}, {"packingHints": False}], ids=["default", "off"])
async def test_without_packing_hints_the_work_keeps_the_users_affinity_alone(
    objects: ObjectStore, manager: ControllerManager, tiered_overflow: dict[str, Any]
) -> None:
    work = await packed_work(objects, manager, **tiered_overflow)
    assert pod_spec(work)["affinity"] == USER_AFFINITY
    binding, _, text = await flex_binding(objects, "c")
    assert "scheduler.gpufed.io/packing-hints" not in (binding["metadata"].get("annotations") or {})
    assert "Packing:" not in text


# Whatever the recent demand: this test's fleet sees one 1-GPU replica (the default waits for
# multi-GPU demand, tests/scheduler/test_packhints_demand.py).
SPREADING = {"packingHints": True, "packingHintsScope": "SpreadingMembers", "packingHintsMultiGPUPercent": 0}


async def test_a_spreading_member_gets_the_term_and_explain_says_its_scoring_added_it(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    work = await packed_work(objects, manager, "LeastAllocated", **SPREADING)
    expected = copy.deepcopy(USER_AFFINITY)
    expected["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].append(PACKED)
    assert pod_spec(work)["affinity"] == expected
    _, reasons, text = await flex_binding(objects, "c")
    because = "added because the member reports node scoring LeastAllocated, which spreads replicas over empty nodes"
    assert any(because in r for r in reasons), reasons
    assert because in " ".join(text.split()), text


@pytest.mark.parametrize("node_scoring", ["MostAllocated", None])
async def test_a_member_that_packs_or_says_nothing_keeps_the_users_affinity_under_the_spreading_scope(
    objects: ObjectStore, manager: ControllerManager, node_scoring: str | None
) -> None:
    work = await packed_work(objects, manager, node_scoring, **SPREADING)
    assert pod_spec(work)["affinity"] == USER_AFFINITY
    _, _, text = await flex_binding(objects, "c")
    assert "Packing:" not in text
