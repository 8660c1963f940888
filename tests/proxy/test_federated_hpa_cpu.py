"""A FederatedHPA on cpu utilization scales a Deployment from its pods' usage in the members: a
real hub (syncing FederatedHPAs twice a second), two simulated members and their agents in one
process. A simulated container's cpu usage is modelled from its request and its pod's
``sim.gpufed.io/gpu-utilization`` annotation (``simulator.podmetrics``): at 1.0, 900m of 1 cpu;
at 0, 200m."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.controllers.context import ControllerSettings
from tests.proxy.members import TwoMembers, two_members
from tests.proxy.test_proxy_tunnel import eventually

pytestmark = [pytest.mark.timeout(420), pytest.mark.waiting]

MEMBERS = ("sim-a", "sim-b")
FLEET = {"clusters": [
    {"name": name, "nodeGroups": [{"name": "cpu", "count": 1, "cpu": 64, "memoryGiB": 256}]} for name in MEMBERS
]}
POLICY = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
             "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)}, "replicaScheduling": {
                 "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                 "weightPreference": {"staticWeightList": [
                     {"targetCluster": {"clusterNames": [name]}, "weight": 1} for name in MEMBERS]}}}},
}
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}


def deployment(busy: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}, "annotations": {"sim.gpufed.io/gpu-utilization": busy}},
            "spec": {"containers": [{"name": "web", "image": "web:1",
                                     "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]}}},
    }


FHPA = {
    "apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
             "minReplicas": 2, "maxReplicas": 4, "metrics": [CPU],
             "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}},
}


@pytest.fixture
async def members(tmp_path: Path) -> AsyncIterator[TwoMembers]:
    async with two_members(tmp_path, FLEET, controllers=ControllerSettings(federated_hpa_sync_seconds=0.5)) as running:
        yield running


async def _create(members: TwoMembers, path: str, obj: dict[str, Any]) -> None:
    code, body = await members.fleet.request("POST", path, body=obj)
    assert code == 201, body


async def _replicas(members: TwoMembers) -> int:
    code, body = await members.get("/apis/apps/v1/namespaces/default/deployments/web")
    assert code == 200, body
    return int(body["spec"]["replicas"])


async def _fhpa_status(members: TwoMembers) -> dict[str, Any]:
    code, body = await members.get("/apis/autoscaling.karmada.io/v1alpha1/namespaces/default/federatedhpas/web")
    assert code == 200, body
    return body.get("status") or {}


async def _events(members: TwoMembers) -> list[tuple[str, str]]:
    code, body = await members.get("/api/v1/namespaces/default/events")
    assert code == 200, body
    return [(e["reason"], e["message"]) for e in body["items"] if e["involvedObject"].get("kind") == "FederatedHPA"]


async def test_a_federated_hpa_on_cpu_utilization_scales_the_deployment(members: TwoMembers) -> None:
    async def ready() -> bool:
        return await members.fleet.hub.resource_metrics.members() == list(MEMBERS)

    await eventually(ready, within=120, what="both members Ready with their tunnels")

    async def default_namespace() -> bool:  # made by the leader's controllers
        return (await members.get("/api/v1/namespaces/default"))[0] == 200

    await eventually(default_namespace, within=60, what="the default namespace")
    await _create(members, "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies", POLICY)
    await _create(members, "/apis/apps/v1/namespaces/default/deployments", deployment("1.0"))
    await _create(members, "/apis/autoscaling.karmada.io/v1alpha1/namespaces/default/federatedhpas", FHPA)

    # One pod in each member, each using 900m of its 1 cpu: 90 % against 50 % -> 2 x 1.8 -> 4.
    async def scaled_to(count: int) -> bool:
        return await _replicas(members) == count

    async def wait_for(count: int, what: str) -> None:
        try:
            await eventually(lambda: scaled_to(count), within=180, what=what)
        except AssertionError as exc:  # say where the FederatedHPA stands
            raise AssertionError(f"{exc}; status {await _fhpa_status(members)}; events {await _events(members)}") from None

    async def recorded(event: tuple[str, str]) -> bool:
        return event in await _events(members)

    # The Event is recorded after the scale is written: wait for it too.
    await wait_for(4, "web scaled up to 4")
    up = ("SuccessfulRescale", "New size: 4; reason: cpu resource utilization (percentage of request) above target")
    await eventually(lambda: recorded(up), within=60, what=f"the Event {up}")

    async def measured() -> dict[str, Any] | None:
        status = await _fhpa_status(members)
        return status if status.get("currentMetrics") and status.get("currentReplicas") == 4 else None

    status = await eventually(measured, within=60, what="the FederatedHPA's status at 4 replicas")
    assert status["currentMetrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 90, "averageValue": "900m"}}}]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions["ScalingActive"] == ("True", "ValidMetricFound")

    # The pods go idle (200m of 1 cpu: 20 % against 50 %): 4 x 0.4 -> 2 once the new pods report,
    # and the minimum holds it there (2 x 0.4 would be 1).
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    for _ in range(5):  # client-go's RetryOnConflict: the hub writes the Deployment's status meanwhile
        code, web = await members.get(path)
        assert code == 200, web
        web["spec"]["template"]["metadata"]["annotations"]["sim.gpufed.io/gpu-utilization"] = "0"
        code, body = await members.fleet.request("PUT", path, body=web)
        if code != 409:
            break
    assert code == 200, body
    await wait_for(2, "web scaled down to 2")
    down = ("SuccessfulRescale", "New size: 2; reason: All metrics below target")
    await eventually(lambda: recorded(down), within=60, what=f"the Event {down}")
