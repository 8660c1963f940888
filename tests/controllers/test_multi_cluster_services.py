"""Karmada's MultiClusterService at the hub: its Service goes to the provider and consumer
clusters in Works labelled for it, left to a PropagationPolicy that already binds it; its status
says what was done and what was not (no EndpointSlices collected yet, no load balancer). The
EndpointSlices' way from providers to consumers: ``test_mcs_endpointslices.py``."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, node_shape, propagation_policy, put_cluster, settled

MCS_API = "networking.karmada.io/v1alpha1"
WORK_API = "work.gpufed.io/v1alpha1"
WORK = "default-nginx-service"
SERVICE: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx", "namespace": "default"},
    "spec": {"ports": [{"port": 80}], "selector": {"app": "nginx"}},
}


def mcs(name: str, *types: str) -> dict[str, Any]:
    return {"apiVersion": MCS_API, "kind": "MultiClusterService", "metadata": {"name": name, "namespace": "default"},
            "spec": {"types": list(types), "providerClusters": [{"name": "member1"}],
                     "consumerClusters": [{"name": "member2"}]}}


async def reasons(objects: ObjectStore, name: str) -> dict[str, str] | None:
    obj = await objects.get(objects.registry.require(MCS_API, "MultiClusterService"), namespace="default", name=name)
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c["reason"] for c in conditions} or None


async def service_works(objects: ObjectStore) -> dict[str, dict[str, Any]]:
    """cluster -> the Work carrying Service default/nginx there."""
    rt = objects.registry.require(WORK_API, "Work")
    return {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w
            for w in (await objects.list(rt)).items if w["metadata"]["name"] == WORK}


async def works_in(objects: ObjectStore, clusters: set[str], what: str) -> dict[str, dict[str, Any]]:
    async def matches() -> list[dict[str, dict[str, Any]]] | None:
        works = await service_works(objects)
        return [works] if set(works) == clusters else None  # a list: no Work at all is an answer too

    return (await eventually(matches, what=what))[0]


async def test_a_cross_cluster_service_propagates_its_service_and_waits_for_endpoints(
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
    for cluster in ("member1", "member2", "member3"):
        await put_cluster(objects, cluster, node_shape(1))
    await objects.create(objects.registry.require("v1", "Service"), SERVICE)

    async def with_service() -> dict[str, Any] | None:
        obj = await objects.get(rt, namespace="default", name="nginx")
        conditions = {c["type"]: c for c in obj["status"]["conditions"]}
        return conditions if conditions["ServiceApplied"]["status"] == "True" else None

    conditions = await eventually(with_service, what="ServiceApplied True")
    assert conditions["ServiceApplied"]["reason"] == "ServiceAppliedSucceed"
    assert conditions["EndpointSliceDispatched"]["status"] == "False"
    assert conditions["EndpointSliceDispatched"]["reason"] == "EndpointSlicesNotCollected"
    assert conditions["EndpointSliceDispatched"]["message"] == (
        "no provider cluster (member1) has reported EndpointSlices of Service default/nginx, so none are "
        "dispatched to the consumer clusters (member2)"
    )
    works = await works_in(objects, {"member1", "member2"}, "the Service's Works in the provider and consumer clusters")
    mcs_obj = await objects.get(rt, namespace="default", name="nginx")
    labels = works["member1"]["metadata"]["labels"]
    assert labels["endpointslice.gpufed.io/collect"] == "true"  # the provider's agent reports its slices
    assert works["member2"]["metadata"]["labels"]["endpointslice.gpufed.io/collect"] == "false"
    assert labels["multiclusterservice.karmada.io/name"] == "nginx"
    assert labels["multiclusterservice.karmada.io/namespace"] == "default"
    assert labels["multiclusterservice.karmada.io/permanent-id"] == \
        mcs_obj["metadata"]["labels"]["multiclusterservice.karmada.io/permanent-id"]
    (manifest,) = works["member2"]["spec"]["workload"]["manifests"]
    assert (manifest["kind"], manifest["metadata"]["name"], manifest["spec"]["ports"][0]["port"]) == ("Service", "nginx", 80)
    assert "clusterIP" not in manifest["spec"]
    assert works["member2"]["spec"]["conflictResolution"] == "Overwrite"


async def test_a_service_follows_the_cluster_lists_and_goes_with_the_multi_cluster_service(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    rt = objects.registry.require(MCS_API, "MultiClusterService")
    for cluster in ("member1", "member2", "member3"):
        await put_cluster(objects, cluster, node_shape(1))
    await objects.create(objects.registry.require("v1", "Service"), SERVICE)
    await objects.create(rt, mcs("nginx", "CrossCluster"))
    await works_in(objects, {"member1", "member2"}, "Works in member1 and member2")
    await settled(manager)  # nothing queued: only the Service's change brings the Works up to date

    service_rt = objects.registry.require("v1", "Service")
    service = await objects.get(service_rt, namespace="default", name="nginx")
    service["spec"]["ports"] = [{"port": 81}]
    await objects.update(service_rt, service)

    async def carried() -> bool:
        works = await service_works(objects)
        return len(works) == 2 and all(
            w["spec"]["workload"]["manifests"][0]["spec"]["ports"][0]["port"] == 81 for w in works.values())

    await eventually(carried, what="the changed port in both Works")

    obj = await objects.get(rt, namespace="default", name="nginx")
    obj["spec"]["consumerClusters"] = [{"name": "member3"}]
    await objects.update(rt, obj)
    await works_in(objects, {"member1", "member3"}, "member2 loses its Work, member3 gets one")

    obj = await objects.get(rt, namespace="default", name="nginx")
    obj["spec"]["consumerClusters"] = []
    await objects.update(rt, obj)
    await works_in(objects, {"member1", "member2", "member3"}, "no consumer list: every cluster")

    await objects.delete(rt, namespace="default", name="nginx")
    await works_in(objects, set(), "no Work once the MultiClusterService is gone")


async def test_a_service_a_policy_propagates_is_left_to_the_policy(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    for cluster in ("member1", "member2", "member3"):
        await put_cluster(objects, cluster, node_shape(1))
    await objects.create(objects.registry.require("v1", "Service"), SERVICE)
    placement = {"clusterAffinity": {"clusterNames": ["member3"]}}
    await objects.create(
        objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
        propagation_policy("svc", kind="Service", api_version="v1", placement=placement),
    )
    works = await works_in(objects, {"member3"}, "the policy's Work")
    await objects.create(objects.registry.require(MCS_API, "MultiClusterService"), mcs("nginx", "CrossCluster"))

    async def left() -> dict[str, str] | None:
        found = await reasons(objects, "nginx")
        return found if found and found.get("ServiceApplied") == "ServicePropagatedByPolicy" else None

    await eventually(left, what="ServiceApplied ServicePropagatedByPolicy")
    await settled(manager)
    after = await service_works(objects)
    assert set(after) == {"member3"}
    assert after["member3"]["metadata"]["labels"] == works["member3"]["metadata"]["labels"]


async def test_a_load_balancer_service_says_no_load_balancer_serves_the_hub(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await objects.create(objects.registry.require(MCS_API, "MultiClusterService"), mcs("web", "LoadBalancer"))
    await settled(manager)
    assert await reasons(objects, "web") == {"ServiceApplied": "LoadBalancerNotProvided"}
