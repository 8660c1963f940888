"""The FederatedHPA over members that are not all there, and over a target whose scale has no
usable selector: Karmada's calibration when a member is not Ready (its replicas, from the
binding, are left out of the count and the result scaled to the whole target), Karmada's
``FailedGetBinding`` when the target has no binding, ``FailedGetTargetClusters`` when the
binding places it nowhere, and kube's
``InvalidSelector`` when the scale's selector is missing or does not parse and
``AmbiguousSelector`` when two FederatedHPAs select the same pods."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.errors import Conflict
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.federatedhpa.controller import no_binding_error
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import deployment, eventually, get_object, node_shape, propagation_policy, put_cluster
from .test_federated_hpa import (
    FHPA_API,
    GPU_UTIL,
    WORK_API,
    conditions,
    events,
    fhpa,
    placed_on_onprem,
    placed_two_and_two,
    replicas,
    report,
    spread_over_two,
    status_of,
)

pytestmark = pytest.mark.waiting

CLUSTER_API = "cluster.gpufed.io/v1alpha1"
GROUP = "scaled.example.io"
SCALED_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"servers.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced", "names": {"plural": "servers", "kind": "Server"},
        "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}, "scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}},
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


@pytest.fixture
async def manager(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=dataclasses.replace(FAST, federated_hpa_sync_seconds=0.1)) as running:
        yield running


async def unreachable(objects: ObjectStore, cluster: str) -> None:
    """The hub's health monitor's verdict on a member whose agent fell silent."""
    rt = objects.registry.require(CLUSTER_API, "Cluster")
    current = await objects.get(rt, name=cluster)
    ready = {"type": "Ready", "status": "Unknown", "reason": "ClusterStatusUnknown",
             "message": "cluster status unknown", "lastTransitionTime": "2024-05-01T10:00:05Z"}
    others = [c for c in current["status"].get("conditions") or () if c["type"] != "Ready"]
    await objects.update_status(rt, {**current, "status": {**current["status"], "conditions": [*others, ready]}})


async def test_an_unready_member_is_left_out_and_calibrated_for(objects: ObjectStore) -> None:
    """4 replicas placed 2 and 2; cloud becomes unreachable with its last report (two pods at
    10 %) stale. onprem's two pods at 60 % against 50 %: a ratio of 1.2, over 2 of the 4 replicas
    (a calibration of 0.5), is ceil(1.2 x 2 / 0.5) = 5. Counting cloud's stale pods would say
    35 %: a scale-down (held by kube's 5-minute window)."""
    await spread_over_two(objects)
    settings = dataclasses.replace(FAST, federated_hpa_sync_seconds=0.1)
    async with ControllerManager(objects, settings=settings):
        await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=4))
        await eventually(lambda: placed_two_and_two(objects), what="web placed 2 and 2")
        await report(objects, "onprem", "web", [0.6, 0.6])
        await report(objects, "cloud", "web", [0.1, 0.1], start=2)
        await unreachable(objects, "cloud")
        await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("web", GPU_UTIL))

        async def rescaled() -> list[tuple[str, str]] | None:
            found = [e for e in await events(objects, "web") if e[0] == "SuccessfulRescale"]
            return found or None

        assert await eventually(rescaled, what="a rescale") == [
            ("SuccessfulRescale", "New size: 5; reason: pods metric DCGM_FI_DEV_GPU_UTIL above target")]
        assert await replicas(objects, "web") == 5


async def test_every_member_unready_is_karmadas_failed_get_scale(objects: ObjectStore) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("web", placement={"clusterAffinity": {"clusterNames": ["onprem"]}}))
    async with ControllerManager(objects, settings=dataclasses.replace(FAST, federated_hpa_sync_seconds=0.1)):
        await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=2))

        async def placed() -> bool:
            binding = await get_object(objects, WORK_API, "ResourceBinding", "web-deployment", namespace="default")
            return bool(((binding or {}).get("spec") or {}).get("clusters"))

        await eventually(placed, what="web placed")
        await unreachable(objects, "onprem")
        await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("web", GPU_UTIL))

        async def failed() -> dict[str, Any] | None:
            status = await status_of(objects, "web")
            return status if conditions(status).get("AbleToScale") == ("False", "FailedGetScale") else None

        status = await eventually(failed, what="AbleToScale False")
        problem = "failed to get replicas in any of clusters, possibly because all of clusters are not ready"
        able = next(c for c in status["conditions"] if c["type"] == "AbleToScale")
        assert able["message"] == f"the HPA controller was unable to get the target's current scale: {problem}"
        assert ("FailedGetScale", problem) in await events(objects, "web")


async def test_a_binding_placing_no_cluster_is_karmadas_failed_get_target_clusters(objects: ObjectStore) -> None:
    """The policy names a cluster that does not exist: the binding is there, placing nothing."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await report(objects, "onprem", "web", [0.9, 0.9])
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("web", placement={"clusterAffinity": {"clusterNames": ["elsewhere"]}}))
    async with ControllerManager(objects, settings=dataclasses.replace(FAST, federated_hpa_sync_seconds=0.1)):
        await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=2))

        async def bound() -> bool:
            return await get_object(objects, WORK_API, "ResourceBinding", "web-deployment", namespace="default") is not None

        await eventually(bound, what="web's binding")
        await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("web", GPU_UTIL))

        able = await unable_to_scale(objects, "web", "FailedGetTargetClusters")
        assert (able["status"], able["message"]) == (
            "False", "the HPA controller was unable to get the target clusters from binding: "
                     "Binding has no schedulable clusters. ")
        assert await events(objects, "web") == [("FailedGetTargetClusters", "Binding has no schedulable clusters. ")]
        assert await replicas(objects, "web") == 2


async def unable_to_scale(objects: ObjectStore, name: str, reason: str) -> dict[str, Any]:
    """``name``'s ``AbleToScale`` condition, once its reason is ``reason``."""
    async def probe() -> dict[str, Any] | None:
        status = await status_of(objects, name)
        return next((c for c in status.get("conditions") or () if c["type"] == "AbleToScale" and c["reason"] == reason), None)
    return await eventually(probe, what=f"AbleToScale {reason}")


async def test_a_target_without_a_binding_is_karmadas_failed_get_binding(objects: ObjectStore, manager: ControllerManager) -> None:
    """No policy selects web: Karmada's ``FailedGetBinding`` (not every member's pods counted); once
    a policy places it, it scales."""
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=2))
    await report(objects, "onprem", "web", [0.9, 0.9])
    await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("web", GPU_UTIL))

    able = await unable_to_scale(objects, "web", "FailedGetBinding")
    assert (able["status"], able["message"]) == (
        "False", "the HPA controller was unable to get the binding by scaleTargetRef: No label of policy found. ")
    assert await events(objects, "web") == [("FailedGetBindings", "No label of policy found. ")]
    assert await replicas(objects, "web") == 2

    await placed_on_onprem(objects, "web")
    await report(objects, "onprem", "web", [0.9, 0.9])  # its report again, after the cluster's

    async def scaled() -> bool:
        return await replicas(objects, "web") == 4

    await eventually(scaled, what="web scaled once placed")


@pytest.mark.parametrize(("labels", "propagated", "error"), [
    ({}, None, "Target resource has no label. "),
    ({"app": "web"}, None, "No label of policy found. "),
    ({"app": "web"}, "NoPolicyMatched", "No label of policy found. "),
    ({}, "WaitingForQuota", "Length of binding list is zero. "),  # selected, held for quota
    ({"app": "web"}, "PolicyClaimed", "Length of binding list is zero. "),  # selected, not written yet
])
def test_karmadas_error_for_a_target_without_a_binding(labels: dict[str, str], propagated: str | None, error: str) -> None:
    conditions = [{"type": "Propagated", "status": "False", "reason": propagated}] if propagated else []
    target = {"metadata": {"name": "web", "labels": labels}, "status": {"conditions": conditions}}
    assert no_binding_error(target) == error


async def test_pods_two_federated_hpas_select_are_kubes_ambiguous_selector(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """Both select the pods of web (app=web): neither scales, each says kube's AmbiguousSelector
    with kube's Events; once one is deleted, the other scales."""
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=2))
    await placed_on_onprem(objects, "web")
    await report(objects, "onprem", "web", [0.9, 0.9])
    rt = objects.registry.require(FHPA_API, "FederatedHPA")
    second = fhpa("web", GPU_UTIL)
    second["metadata"]["name"] = "web-again"
    await objects.create(rt, fhpa("web", GPU_UTIL))
    await objects.create(rt, second)
    message = "pods by selector app=web are controlled by multiple HPAs: [default/web default/web-again]"

    def ambiguous(name: str) -> Callable[[], Awaitable[dict[str, Any] | None]]:
        async def check() -> dict[str, Any] | None:
            status = await status_of_named(objects, name)
            found = next((c for c in status.get("conditions") or () if c["type"] == "ScalingActive"), None)
            return found if found is not None and found["reason"] == "AmbiguousSelector" else None
        return check

    for name in ("web", "web-again"):
        active = await eventually(ambiguous(name), what=f"{name} AmbiguousSelector")
        assert (active["status"], active["message"]) == ("False", message)
        assert {("AmbiguousSelector", message), ("FailedComputeMetricsReplicas", message)} <= set(
            await events(objects, name))
    assert await replicas(objects, "web") == 2

    await objects.delete(rt, namespace="default", name="web-again")

    async def scaled() -> bool:
        return await replicas(objects, "web") == 4

    await eventually(scaled, what="web scaled to 4")


async def test_another_workloads_pods_under_the_selector_are_kubes_ambiguous_selector(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """kube looks at the pods the selector selects, whoever runs them, by their own labels (the
    agents report each GPU pod's): web's selector app=web selects web-canary's pod too (app=web,
    track=canary), which web-canary's selector selects, so web stops with AmbiguousSelector. (Its
    pod template's labels alone would not say so.)"""
    deployments = objects.registry.require("apps/v1", "Deployment")
    canary = deployment("web-canary", replicas=1)
    canary["spec"]["selector"] = {"matchLabels": {"app": "web", "track": "canary"}}
    canary["spec"]["template"]["metadata"]["labels"] = {"app": "web", "track": "canary"}
    await objects.create(deployments, deployment("web", replicas=2))
    await objects.create(deployments, canary)
    await placed_on_onprem(objects, "web")

    async def canary_placed() -> bool:
        binding = await get_object(objects, WORK_API, "ResourceBinding", "web-canary-deployment", namespace="default")
        return bool(((binding or {}).get("spec") or {}).get("clusters"))

    await eventually(canary_placed, what="web-canary placed")
    await report(objects, "onprem", "web", [0.9, 0.9], labels={"app": "web", "pod-template-hash": "7d4"},
                 also=("web-canary", {"app": "web", "track": "canary"}))
    rt = objects.registry.require(FHPA_API, "FederatedHPA")
    await objects.create(rt, fhpa("web-canary", GPU_UTIL))

    async def selector_checked() -> bool:
        # ScalingActive is written only once a sync has checked the selector, so web-canary's is
        # recorded; AbleToScale alone may be a sync that stopped before it (its scale not yet
        # reported by the member), and web would then scale before it knows of web-canary.
        conditions = (await status_of_named(objects, "web-canary")).get("conditions") or ()
        return any(c["type"] == "ScalingActive" for c in conditions)

    await eventually(selector_checked, what="web-canary's selector checked")
    await objects.create(rt, fhpa("web", GPU_UTIL))
    message = "pods by selector app=web are controlled by multiple HPAs: [default/web default/web-canary]"

    async def ambiguous() -> dict[str, Any] | None:
        status = await status_of_named(objects, "web")
        found = next((c for c in status.get("conditions") or () if c["type"] == "ScalingActive"), None)
        return found if found is not None and found["reason"] == "AmbiguousSelector" else None

    active = await eventually(ambiguous, what="web AmbiguousSelector")
    assert active["message"] == message
    assert await replicas(objects, "web") == 2


async def status_of_named(objects: ObjectStore, name: str) -> dict[str, Any]:
    found = await get_object(objects, FHPA_API, "FederatedHPA", name, namespace="default")
    return (found or {}).get("status") or {}


async def test_a_scale_without_a_usable_selector_is_kubes_invalid_selector(
    objects: ObjectStore, crds: CrdController, manager: ControllerManager
) -> None:
    await objects.create(objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition"), SCALED_CRD)

    async def served() -> bool:
        return objects.registry.for_kind(f"{GROUP}/v1", "Server") is not None

    await eventually(served, what="Server served")
    server_rt = objects.registry.require(f"{GROUP}/v1", "Server")
    await objects.create(server_rt, {"apiVersion": f"{GROUP}/v1", "kind": "Server",
                                              "metadata": {"name": "web", "namespace": "default"},
                                              "spec": {"replicas": 2}})
    await placed_on_onprem(objects, "web", kind="Server", api_version=f"{GROUP}/v1")
    target = fhpa("web", GPU_UTIL)
    target["spec"]["scaleTargetRef"] = {"apiVersion": f"{GROUP}/v1", "kind": "Server", "name": "web"}
    await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), target)

    async def active(reason: str) -> dict[str, Any] | None:
        status = await status_of(objects, "web")
        found = next((c for c in status.get("conditions") or () if c["type"] == "ScalingActive"), None)
        return found if found is not None and found["reason"] == reason else None

    # No selector at the scale's labelSelectorPath.
    missing = await eventually(lambda: active("InvalidSelector"), what="InvalidSelector")
    assert (missing["status"], missing["message"]) == ("False", "the HPA target's scale is missing a selector")
    assert sorted(await events(objects, "web")) == [("FailedComputeMetricsReplicas", "selector is required"),
                                                    ("SelectorRequired", "selector is required")]
    assert (await status_of(objects, "web"))["currentReplicas"] == 2

    # One that does not parse.
    await select(objects, server_rt, "app in (web")
    message = ("couldn't convert selector into a corresponding internal selector object: unable to parse "
               'requirement: found end of input in selector "app in (web"')

    async def unparsed() -> dict[str, Any] | None:
        found = await active("InvalidSelector")
        return found if found is not None and found["message"] == message else None

    await eventually(unparsed, what="the parse error")
    assert {("InvalidSelector", message), ("FailedComputeMetricsReplicas", message)} <= set(await events(objects, "web"))

    # A good one: the metrics are looked at (no pods report yet).
    await select(objects, server_rt, "app=web")
    await eventually(lambda: active("FailedGetPodsMetric"), what="the metric looked at")
    assert await replicas_of(objects, server_rt) == 2


async def select(objects: ObjectStore, rt: Any, selector: str) -> None:
    """The Server's ``status.selector`` (the hub writes conditions of its own there too)."""
    for _ in range(20):
        current = await objects.get(rt, namespace="default", name="web")
        try:
            await objects.update_status(rt, {**current, "status": {
                **(current.get("status") or {}), "replicas": 2, "selector": selector}})
            return
        except Conflict:
            continue
    raise AssertionError("the Server's status kept changing")


async def replicas_of(objects: ObjectStore, rt: Any) -> int:
    return int((await objects.get(rt, namespace="default", name="web"))["spec"]["replicas"])
