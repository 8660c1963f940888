"""The FederatedHPA controller scales a hub workload on the GPU utilization its pods report in
every member, and on cpu from the members' pods and resource metrics, writes kube's HPA status
and Events, and stops (with kube's condition) on a metric the hub cannot answer."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.timestamps import format_time
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.federatedhpa.podmetrics import MemberPods, PodMetric
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import deployment, eventually, get_object, node_shape, propagation_policy, put_cluster, settled

FHPA_API = "autoscaling.karmada.io/v1alpha1"
WORK_API = "work.gpufed.io/v1alpha1"
GPU_UTIL = {"type": "Pods", "pods": {"metric": {"name": "DCGM_FI_DEV_GPU_UTIL"},
                                     "target": {"type": "AverageValue", "averageValue": "50"}}}
QUICK_DOWN = {"scaleDown": {"stabilizationWindowSeconds": 0}}


@pytest.fixture
async def manager(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=dataclasses.replace(FAST, federated_hpa_sync_seconds=0.1)) as running:
        yield running


def fhpa(name: str, *metrics: dict[str, Any], behavior: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                            "minReplicas": 1, "maxReplicas": 6, "metrics": list(metrics)}
    if behavior is not None:
        spec["behavior"] = behavior
    return {"apiVersion": FHPA_API, "kind": "FederatedHPA", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


async def report(objects: ObjectStore, cluster: str, owner: str, utilization: list[float | None], *, start: int = 0,
                 labels: dict[str, str] | None = None, also: tuple[str, dict[str, str]] | None = None) -> None:
    """``cluster``'s agent reports one GPU pod of ``owner`` per entry, with that GPU utilization
    (None: no sample yet) and ``labels`` (none: not reported); ``also``: one more pod, busy, of
    another Deployment, with its labels."""
    pods, devices = [], []
    entries: list[tuple[str, str, float | None, dict[str, str] | None]] = [
        (owner, f"{owner}-{start + offset}", value, labels) for offset, value in enumerate(utilization)]
    if also is not None:
        entries.append((also[0], f"{also[0]}-0", 0.9, also[1]))
    for offset, (held_by, pod, value, pod_labels) in enumerate(entries):
        pods.append({"pod": pod, "namespace": "default", "resources": {"nvidia.com/gpu": 1},
                     "owner": {"kind": "Deployment", "name": held_by},
                     **({"labels": pod_labels} if pod_labels is not None else {})})
        device: dict[str, Any] = {"gpu": offset, "uuid": f"GPU-{pod}", "pod": pod, "namespace": "default"}
        if value is not None:
            device["utilization"] = value
        devices.append(device)
    await put_cluster(objects, cluster, node_shape(1, gpus=8), pods=[])
    rt = objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    current = await objects.get(rt, name=cluster)
    status = {**current["status"], "utilization": {"sampleTime": None, "nodes": [
        {"name": f"{cluster}-node-0", "devices": devices, "pods": pods}]}}
    await objects.update_status(rt, {**current, "status": status})


async def placed_on_onprem(objects: ObjectStore, name: str, *, kind: str = "Deployment", api_version: str = "apps/v1") -> None:
    """Cluster onprem and a policy placing every ``kind`` there; returns once ``name`` is placed
    (a FederatedHPA reads its target's binding: Karmada's target clusters)."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"), propagation_policy(
        f"onprem-{kind.lower()}", kind=kind, api_version=api_version, placement={"clusterAffinity": {"clusterNames": ["onprem"]}}))

    async def bound() -> bool:
        binding = await get_object(objects, WORK_API, "ResourceBinding", f"{name}-{kind.lower()}", namespace="default")
        return bool(((binding or {}).get("spec") or {}).get("clusters"))

    await eventually(bound, what=f"{name} placed on onprem")


async def replicas(objects: ObjectStore, name: str) -> int:
    rt = objects.registry.require("apps/v1", "Deployment")
    return int((await objects.get(rt, namespace="default", name=name))["spec"]["replicas"])


async def status_of(objects: ObjectStore, name: str) -> dict[str, Any]:
    rt = objects.registry.require(FHPA_API, "FederatedHPA")
    return (await objects.get(rt, namespace="default", name=name)).get("status") or {}


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or ()}


async def events(objects: ObjectStore, name: str) -> list[tuple[str, str]]:
    rt = objects.registry.require("v1", "Event")
    items = (await objects.list(rt, namespace="default")).items
    return [(e["reason"], e["message"]) for e in items if e["involvedObject"].get("name") == name
            and e["involvedObject"].get("kind") == "FederatedHPA"]


async def test_gpu_utilization_across_members_scales_the_workload(objects: ObjectStore, manager: ControllerManager) -> None:
    await spread_over_two(objects)
    await settled(manager)  # both members seen, so the first decision divides over both
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=4))
    await eventually(lambda: placed_two_and_two(objects), what="web placed 2 and 2")
    # Two pods in each member, all 75 % busy: 75 / 50 x 4 -> 6.
    await report(objects, "onprem", "web", [0.75, 0.75])
    await report(objects, "cloud", "web", [0.75, 0.75], start=2)
    await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("web", GPU_UTIL, behavior=QUICK_DOWN))

    async def scaled_to(n: int) -> bool:
        return await replicas(objects, "web") == n

    await eventually(lambda: scaled_to(6), what="web scaled to 6")

    async def recorded() -> dict[str, Any] | None:
        status = await status_of(objects, "web")
        return status if status.get("currentReplicas") == 6 or status.get("lastScaleTime") else None

    status = await eventually(recorded, what="the FederatedHPA's status")
    assert status["desiredReplicas"] == 6
    assert status["currentMetrics"] == [
        {"type": "Pods", "pods": {"metric": {"name": "DCGM_FI_DEV_GPU_UTIL"}, "current": {"averageValue": "75"}}}]
    assert conditions(status)["ScalingActive"] == ("True", "ValidMetricFound")
    assert ("SuccessfulRescale", "New size: 6; reason: pods metric DCGM_FI_DEV_GPU_UTIL above target") in await events(objects, "web")

    # The same four pods, 10 % busy: 10 / 50 x 4 -> 1 (the 0 s window lets it go at once).
    await report(objects, "onprem", "web", [0.1, 0.1])
    await report(objects, "cloud", "web", [0.1, 0.1], start=2)
    await eventually(lambda: scaled_to(1), what="web scaled down to 1")
    assert ("SuccessfulRescale", "New size: 1; reason: All metrics below target") in await events(objects, "web")


async def test_a_metric_the_hub_cannot_answer_stops_scaling(objects: ObjectStore, manager: ControllerManager) -> None:
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("cpu-bound", replicas=2))
    await placed_on_onprem(objects, "cpu-bound")
    await report(objects, "onprem", "cpu-bound", [0.9, 0.9])
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
    await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("cpu-bound", cpu))

    async def failed() -> dict[str, Any] | None:
        status = await status_of(objects, "cpu-bound")
        return status if conditions(status).get("ScalingActive", ("",))[0] == "False" else None

    status = await eventually(failed, what="ScalingActive False")
    active = next(c for c in status["conditions"] if c["type"] == "ScalingActive")
    assert active["reason"] == "FailedGetResourceMetric"
    assert active["message"].startswith("the HPA was unable to compute the replica count: failed to get cpu utilization")
    assert status["currentReplicas"] == 2
    assert await replicas(objects, "cpu-bound") == 2
    synced = manager.reconciles()["federated-hpa"]

    async def synced_again() -> bool:
        return manager.reconciles()["federated-hpa"] >= synced + 3

    await eventually(synced_again, what="three more syncs")
    assert await replicas(objects, "cpu-bound") == 2
    warnings = sorted(await events(objects, "cpu-bound"))  # one Event each, counting the syncs
    assert [reason for reason, _ in warnings] == ["FailedComputeMetricsReplicas", "FailedGetResourceMetric"]
    assert warnings[0][1] == ("invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric "
                              f"value: {warnings[1][1]}")


async def test_a_failing_metric_is_reported_while_the_others_scale(objects: ObjectStore, manager: ControllerManager) -> None:
    """kube records each failing metric's Warning Event even when another metric scales the target
    (then without FailedComputeMetricsReplicas), at every sync: one Event, its count growing."""
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=2))
    await placed_on_onprem(objects, "web")
    await report(objects, "onprem", "web", [0.9, 0.9])
    external = {"type": "External", "external": {"metric": {"name": "queue_depth"},
                                                 "target": {"type": "Value", "value": "10"}}}
    rt = objects.registry.require(FHPA_API, "FederatedHPA")
    capped = fhpa("web", GPU_UTIL)
    # At most 4: right after a rescale the binding still places the old count, and the
    # calibration (its replicas over the new count) would ask for more for a sync.
    capped["spec"]["maxReplicas"] = 4
    await objects.create(rt, capped)

    async def scaled() -> bool:
        return await replicas(objects, "web") == 4

    await eventually(scaled, what="web scaled to 4")
    # The pods metric still asks for 4 (1.8 x 2 pods); the external one fails.
    current = await objects.get(rt, namespace="default", name="web")
    await objects.update(rt, {**current, "spec": {**current["spec"], "metrics": [external, GPU_UTIL]}})
    synced = manager.reconciles()["federated-hpa"]

    async def synced_again() -> bool:
        return manager.reconciles()["federated-hpa"] >= synced + 3

    await eventually(synced_again, what="three more syncs")
    items = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    warnings = [(e["reason"], e["message"], e.get("count")) for e in items if "queue_depth" in e["message"]]
    assert [(reason, message) for reason, message, _ in warnings] == [(
        "FailedGetExternalMetric", "unable to get external metric queue_depth: the hub answers the Pods "
        "metric DCGM_FI_DEV_GPU_UTIL and Resource and ContainerResource metrics, not this one")]
    assert warnings[0][2] >= 3
    assert conditions(await status_of(objects, "web"))["ScalingActive"] == ("True", "ValidMetricFound")


async def spread_over_two(objects: ObjectStore) -> None:
    """Clusters onprem and cloud, and a policy dividing Deployments named web evenly over them."""
    for cluster in ("onprem", "cloud"):
        await put_cluster(objects, cluster, node_shape(2, gpus=8))
    placement = {"clusterAffinity": {"clusterNames": ["onprem", "cloud"]}, "replicaScheduling": {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted", "weightPreference": {
            "staticWeightList": [{"targetCluster": {"clusterNames": [c]}, "weight": 1} for c in ("onprem", "cloud")]}}}
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("web", placement=placement))


async def placed_two_and_two(objects: ObjectStore) -> bool:
    binding = await get_object(objects, WORK_API, "ResourceBinding", "web-deployment", namespace="default")
    clusters = ((binding or {}).get("spec") or {}).get("clusters") or []
    return sorted((c["name"], c.get("replicas")) for c in clusters) == [("cloud", 2), ("onprem", 2)]


class MemberAnswers:
    """What each member answers for the target's pods and their metrics: a stand-in for the
    hub's resource metrics, whose reads through the agents' tunnels tests/proxy cover."""

    def __init__(self) -> None:
        self.answers: list[MemberPods] = []
        self.selectors: list[Any] = []

    async def pod_metrics(self, namespace: str, selector: Any) -> list[MemberPods]:
        self.selectors.append((namespace, selector))
        return self.answers


def _running(name: str) -> dict[str, Any]:
    started = format_time(datetime.now(UTC) - timedelta(hours=1))
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running", "startTime": started,
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}]}}


def _busy(*names: str) -> dict[str, PodMetric]:
    return {name: PodMetric({"main": {"cpu": 900}}, datetime.now(UTC), 30.0) for name in names}


async def test_a_member_whose_pod_list_does_not_answer_is_left_out_as_karmada_leaves_it(objects: ObjectStore) -> None:
    """Two replicas in each member; cloud's pod list does not answer. Karmada leaves such a member
    out of the pods and of the calibration: onprem's two pods at 90 % against 50 % (a ratio of 1.8)
    over 2 of the 4 replicas, ceil(1.8 x 2 / 0.5) = 8, 6 at most. (Standing cloud's replicas in as
    pods without metrics would say 45 %: no change.) When no member's pod list answers, scaling
    stops with Karmada's FailedGetScale."""
    source = MemberAnswers()
    settings = dataclasses.replace(FAST, federated_hpa_sync_seconds=0.1)
    await spread_over_two(objects)
    async with ControllerManager(objects, settings=settings, pod_metrics=source):
        await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=4))
        await eventually(lambda: placed_two_and_two(objects), what="web placed 2 and 2")
        source.answers = [MemberPods("onprem", [_running("web-a"), _running("web-b")], _busy("web-a", "web-b")),
                          MemberPods("cloud", (), None, answered=False)]
        cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
        await objects.create(objects.registry.require(FHPA_API, "FederatedHPA"), fhpa("web", cpu))

        async def rescaled() -> list[tuple[str, str]] | None:
            return [e for e in await events(objects, "web") if e[0] == "SuccessfulRescale"] or None

        assert await eventually(rescaled, what="a rescale") == [
            ("SuccessfulRescale", "New size: 6; reason: cpu resource utilization (percentage of request) above target")]
        assert source.selectors[-1] == ("default", "app=web")

        source.answers = [MemberPods("onprem", (), None, answered=False), source.answers[1]]

        async def failed() -> dict[str, Any] | None:
            status = await status_of(objects, "web")
            return status if conditions(status).get("AbleToScale") == ("False", "FailedGetScale") else None

        await eventually(failed, what="FailedGetScale")
        assert await replicas(objects, "web") == 6
