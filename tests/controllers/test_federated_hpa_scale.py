"""What a FederatedHPA reads of its target's scale, as Karmada's controller reads it: a target at
0 replicas (its members hold none) is Karmada's ``FailedGetScale``; a target that is not there
is Karmada's ``FailedGetScaleTargetRef``."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import deployment, eventually, get_object
from .test_federated_hpa import FHPA_API, GPU_UTIL, WORK_API, events, fhpa, placed_on_onprem, replicas, report
from .test_federated_hpa_members import unable_to_scale

FAILED_GET_REPLICAS = "failed to get replicas in any of clusters, possibly because all of clusters are not ready"


@pytest.fixture
async def manager(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=dataclasses.replace(FAST, federated_hpa_sync_seconds=0.1)) as running:
        yield running


async def placed(objects: ObjectStore, name: str) -> list[tuple[str, int]]:
    binding = await get_object(objects, WORK_API, "ResourceBinding", f"{name}-deployment", namespace="default")
    return sorted((c["name"], int(c.get("replicas") or 0)) for c in ((binding or {}).get("spec") or {}).get("clusters") or ())


async def test_a_target_at_zero_replicas_is_karmadas_failed_get_scale(objects: ObjectStore, manager: ControllerManager) -> None:
    """Karmada sums its members' scales first and stops when they hold no replicas, so a target
    scaled to 0 gets ``FailedGetScale`` (its ``ScalingDisabled`` is never reached), and stays at 0."""
    rt = objects.registry.require("apps/v1", "Deployment")
    await objects.create(rt, deployment("web", replicas=2))
    await placed_on_onprem(objects, "web")
    current = await objects.get(rt, namespace="default", name="web")
    await objects.update(rt, {**current, "spec": {**current["spec"], "replicas": 0}})

    async def none_placed() -> list[tuple[str, int]] | None:
        found = await placed(objects, "web")
        return found if all(count == 0 for _, count in found) else None

    await eventually(none_placed, what="no replicas placed")
    await report(objects, "onprem", "web", [])
    await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("web", GPU_UTIL))

    able = await unable_to_scale(objects, "web", "FailedGetScale")
    assert (able["status"], able["message"]) == (
        "False", f"the HPA controller was unable to get the target's current scale: {FAILED_GET_REPLICAS}")
    assert await events(objects, "web") == [("FailedGetScale", FAILED_GET_REPLICAS)]
    assert await replicas(objects, "web") == 0


async def test_a_missing_target_is_karmadas_failed_get_scale_target_ref(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("ghost", GPU_UTIL))
    able = await unable_to_scale(objects, "ghost", "FailedGetScaleTargetRef")
    problem = 'deployments.apps "ghost" not found'
    assert (able["status"], able["message"]) == (
        "False", f"the HPA controller was unable to get the target reference object: {problem}")
    assert await events(objects, "ghost") == [("FailedGetScaleTargetRef", problem)]

