"""Karmada's MultiClusterService at the hub: its status says what the hub did not do for it (the
Service not propagated for it, no EndpointSlices collected or dispatched, no load balancer), and
follows its Service coming and going."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, settled

MCS_API = "networking.karmada.io/v1alpha1"


def mcs(name: str, *types: str) -> dict[str, Any]:
    return {"apiVersion": MCS_API, "kind": "MultiClusterService", "metadata": {"name": name, "namespace": "default"},
            "spec": {"types": list(types), "providerClusters": [{"name": "member1"}],
                     "consumerClusters": [{"name": "member2"}]}}


async def reasons(objects: ObjectStore, name: str) -> dict[str, str] | None:
    obj = await objects.get(objects.registry.require(MCS_API, "MultiClusterService"), namespace="default", name=name)
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c["reason"] for c in conditions} or None


async def test_a_cross_cluster_service_says_its_service_is_not_propagated_nor_its_endpoints_collected(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    rt = objects.registry.require(MCS_API, "MultiClusterService")
    await objects.create(rt, mcs("nginx", "CrossCluster"))

    async def without_service() -> dict[str, str] | None:
        found = await reasons(objects, "nginx")
        return found if found and found.get("ServiceApplied") == "ServiceNotFound" else None

    assert await eventually(without_service, what="ServiceApplied ServiceNotFound") == {
        "ServiceApplied": "ServiceNotFound", "EndpointSliceDispatched": "EndpointSlicesNotCollected",
    }
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx", "namespace": "default"},
               "spec": {"ports": [{"port": 80}], "selector": {"app": "nginx"}}}
    await objects.create(objects.registry.require("v1", "Service"), service)

    async def with_service() -> dict[str, Any] | None:
        obj = await objects.get(rt, namespace="default", name="nginx")
        conditions = {c["type"]: c for c in obj["status"]["conditions"]}
        return conditions if conditions["ServiceApplied"]["reason"] == "ServiceNotPropagated" else None

    conditions = await eventually(with_service, what="ServiceApplied ServiceNotPropagated")
    assert conditions["ServiceApplied"]["status"] == "False"
    assert "provider clusters (member1) and consumer clusters (member2)" in conditions["ServiceApplied"]["message"]
    assert "from the provider clusters (member1)" in conditions["EndpointSliceDispatched"]["message"]


async def test_a_load_balancer_service_says_no_load_balancer_serves_the_hub(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await objects.create(objects.registry.require(MCS_API, "MultiClusterService"), mcs("web", "LoadBalancer"))
    await settled(manager)
    assert await reasons(objects, "web") == {"ServiceApplied": "LoadBalancerNotProvided"}
