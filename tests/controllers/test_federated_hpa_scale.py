"""What a FederatedHPA reads of its target's scale and writes in its status, as Karmada's
controller does: a target at 0 replicas (its members hold none) is Karmada's ``FailedGetScale``; a
target that is not there is Karmada's ``FailedGetScaleTargetRef``; the first sync's replicas are a
recommendation of the stabilization window; the status is made anew as kube's ``setStatus``
makes it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.federatedhpa.controller import current_replicas_set, status_set
from controlplane.controllers.manager import ControllerManager

from . import test_federated_hpa as hpa
from .conftest import FAST
from .fleet import deployment, eventually, get_object
from .test_federated_hpa import FHPA_API, GPU_UTIL, events, fhpa, replicas, report
from .test_federated_hpa_members import unable_to_scale

FAILED_GET_REPLICAS = "failed to get replicas in any of clusters, possibly because all of clusters are not ready"


@pytest.fixture
async def manager(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=dataclasses.replace(FAST, federated_hpa_sync_seconds=0.1)) as running:
        yield running


async def placed(objects: ObjectStore, name: str) -> list[tuple[str, int]]:
    binding = await get_object(objects, hpa.WORK_API, "ResourceBinding", f"{name}-deployment", namespace="default")
    return sorted((c["name"], int(c.get("replicas") or 0)) for c in ((binding or {}).get("spec") or {}).get("clusters") or ())


async def test_a_target_at_zero_replicas_is_karmadas_failed_get_scale(objects: ObjectStore, manager: ControllerManager) -> None:
    """Karmada sums its members' scales first and stops when they hold no replicas, so a target
    scaled to 0 gets ``FailedGetScale`` (its ``ScalingDisabled`` is never reached), and stays at 0."""
    rt = objects.registry.require("apps/v1", "Deployment")
    await objects.create(rt, deployment("web", replicas=2))
    await hpa.placed_on_onprem(objects, "web")
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


async def warning_counts(objects: ObjectStore, name: str) -> list[tuple[str, str, int]]:
    """The FederatedHPA ``name``'s Events: reason, message and count."""
    items = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    return [(e["reason"], e["message"], int(e.get("count") or 0)) for e in items
            if e["involvedObject"].get("kind") == "FederatedHPA" and e["involvedObject"].get("name") == name]


async def test_failed_get_scale_is_recorded_every_sync_on_one_event(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """Karmada records the failure's Event at every sync; the hub's Event correlation counts the
    repeats on one Event, as client-go's does."""
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=0))
    await hpa.placed_on_onprem(objects, "web")
    await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("web", GPU_UTIL))

    async def repeated() -> list[tuple[str, str, int]] | None:
        found = await warning_counts(objects, "web")
        return found if found and found[0][2] >= 3 else None

    found = await eventually(repeated, what="FailedGetScale counted three times")
    assert [(reason, message) for reason, message, _ in found] == [("FailedGetScale", FAILED_GET_REPLICAS)]


async def test_a_target_without_a_scale_subresource_is_karmadas_failed_get_scale(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """Karmada reads a target's replicas from its members' scale subresources: for a kind that has
    none (a ConfigMap, placed whole) no member answers, and it stops where a target at 0 does.
    Before that it looks for the target's binding, as for any kind."""
    rt = objects.registry.require(FHPA_API, "FederatedHPA")
    unbound = fhpa("loose", GPU_UTIL)
    unbound["spec"]["scaleTargetRef"] = {"apiVersion": "v1", "kind": "ConfigMap", "name": "loose"}
    await objects.create(objects.registry.require("v1", "ConfigMap"),
                         {"metadata": {"name": "loose", "namespace": "default"}, "data": {}})
    await objects.create(rt, unbound)
    able = await unable_to_scale(objects, "loose", "FailedGetBinding")
    assert able["message"] == "the HPA controller was unable to get the binding by scaleTargetRef: Target resource has no label. "

    await objects.create(objects.registry.require("v1", "ConfigMap"),
                         {"metadata": {"name": "settings", "namespace": "default"}, "data": {"a": "b"}})
    await hpa.placed_on_onprem(objects, "settings", kind="ConfigMap", api_version="v1")
    settings = fhpa("settings", GPU_UTIL)
    settings["spec"]["scaleTargetRef"] = {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings"}
    await objects.create(rt, settings)
    able = await unable_to_scale(objects, "settings", "FailedGetScale")
    assert (able["status"], able["message"]) == (
        "False", f"the HPA controller was unable to get the target's current scale: {FAILED_GET_REPLICAS}")
    # On a loaded machine the controller may sync once before its cache holds the binding's
    # clusters; Karmada records that sync's FailedGetTargetClusters as well, so only it may join.
    seen = await events(objects, "settings")
    assert [event for event in seen if event[0] != "FailedGetTargetClusters"] == [("FailedGetScale", FAILED_GET_REPLICAS)]


async def test_a_missing_target_is_karmadas_failed_get_scale_target_ref(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("ghost", GPU_UTIL))
    able = await unable_to_scale(objects, "ghost", "FailedGetScaleTargetRef")
    problem = 'deployments.apps "ghost" not found'
    assert (able["status"], able["message"]) == (
        "False", f"the HPA controller was unable to get the target reference object: {problem}")
    assert await events(objects, "ghost") == [("FailedGetScaleTargetRef", problem)]
    # The status is written as Go writes it: desiredReplicas even at 0 (the CRD's schema requires
    # it, so kubectl's validation of a `get -o yaml` applied back would refuse a status without it).
    status = await hpa.status_of(objects, "ghost")
    assert status["desiredReplicas"] == 0 and "currentReplicas" not in status, status



async def status_when(objects: ObjectStore, name: str, condition: str, reason: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        status = await hpa.status_of(objects, name)
        return status if hpa.conditions(status).get(condition, ("", ""))[1] == reason else None
    return await eventually(probe, what=f"{condition} {reason}")


async def test_the_first_scale_down_waits_out_the_window(objects: ObjectStore, manager: ControllerManager) -> None:
    """kube records the replicas a target has at the autoscaler's first sync as a recommendation:
    4 pods at 10 % against 50 % ask for 1, and the 5-minute downscale window holds 4. The status is
    kube's, made anew each sync: no ``observedGeneration``. When the metric then fails, the last
    metrics' statuses stay, as Karmada keeps them."""
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=4))
    await hpa.placed_on_onprem(objects, "web")
    await report(objects, "onprem", "web", [0.1, 0.1, 0.1, 0.1])
    rt = objects.registry.require(FHPA_API, "FederatedHPA")
    await objects.create(rt, fhpa("web", GPU_UTIL))

    status = await status_when(objects, "web", "AbleToScale", "ScaleDownStabilized")
    assert (status["currentReplicas"], status["desiredReplicas"]) == (4, 4)
    assert status["currentMetrics"] == [
        {"type": "Pods", "pods": {"metric": {"name": "DCGM_FI_DEV_GPU_UTIL"}, "current": {"averageValue": "10"}}}]
    assert "observedGeneration" not in status and "lastScaleTime" not in status
    assert await replicas(objects, "web") == 4
    assert not [e for e in await events(objects, "web") if e[0] == "SuccessfulRescale"]

    external = {"type": "External", "external": {"metric": {"name": "queue_depth"},
                                                 "target": {"type": "Value", "value": "10"}}}
    current = await objects.get(rt, namespace="default", name="web")
    await objects.update(rt, {**current, "spec": {**current["spec"], "metrics": [external]}})
    failed = await status_when(objects, "web", "ScalingActive", "FailedGetExternalMetric")
    assert failed["currentMetrics"] == status["currentMetrics"]
    assert (failed["currentReplicas"], failed["desiredReplicas"]) == (4, 4)


@pytest.mark.parametrize(("before", "current", "desired", "metrics", "expected"), [
    # A new status: the replicas and metrics given, the old time and conditions kept, nothing else.
    ({"observedGeneration": 3, "currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [{"type": ""}],
      "lastScaleTime": "2024-05-01T10:00:00Z", "conditions": [{"type": "AbleToScale"}]},
     4, 6, None,
     {"currentReplicas": 4, "desiredReplicas": 6, "currentMetrics": None, "lastScaleTime": "2024-05-01T10:00:00Z",
      "conditions": [{"type": "AbleToScale"}]}),
    # currentReplicas is omitted at 0, as kube's omitempty leaves it out.
    ({}, 0, 1, [{"type": ""}], {"desiredReplicas": 1, "currentMetrics": [{"type": ""}]}),
])
def test_status_is_made_anew_as_kube_sets_it(before: dict[str, Any], current: int, desired: int,
                                             metrics: list[dict[str, Any]] | None, expected: dict[str, Any]) -> None:
    assert status_set(before, current=current, desired=desired, metrics=metrics) == expected


def test_a_failed_sync_keeps_the_last_desired_replicas_and_metrics() -> None:
    before = {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": [{"type": "Pods"}], "observedGeneration": 1}
    assert current_replicas_set(before, 5) == {"currentReplicas": 5, "desiredReplicas": 3,
                                               "currentMetrics": [{"type": "Pods"}]}
