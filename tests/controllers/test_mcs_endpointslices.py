"""A MultiClusterService's EndpointSlices at the hub: what a provider's agent reports on the
Service's Work status goes to every consumer cluster but the provider, as Karmada's
endpointslice-dispatch controller names and labels it, and goes away with the slice, the
MultiClusterService, or the cluster's place in the lists. The slice naming rules, pure, first."""

from __future__ import annotations

from typing import Any

from controlplane.apis.mcs_endpointslices import collected_slice, collected_slices, dispatched_slice
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.objectclient import errors

from .fleet import eventually, node_shape, put_cluster
from .test_multi_cluster_services import MCS_API, SERVICE, WORK, WORK_API, mcs, reasons

ENDPOINT = {
    "addresses": ["10.1.0.7"],
    "conditions": {"ready": True, "serving": True, "terminating": False},
    "nodeName": "gpu-node-0",
    "targetRef": {"kind": "Pod", "namespace": "default", "name": "nginx-abc", "uid": "u1"},
}
MEMBER_SLICE: dict[str, Any] = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {
        "name": "nginx-x7k2p",
        "namespace": "default",
        "uid": "s1",
        "resourceVersion": "42",
        "labels": {
            "kubernetes.io/service-name": "nginx",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
        },
    },
    "addressType": "IPv4",
    "endpoints": [ENDPOINT],
    "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
}

#: The Service's manifest in its Work's status.
SERVICE_IDENTIFIER = {
    "version": "v1",
    "kind": "Service",
    "namespace": "default",
    "name": "nginx",
    "ordinal": 0,
}


def test_a_collected_slice_keeps_its_name_addresses_and_ports() -> None:
    assert collected_slice(MEMBER_SLICE) == {
        "name": "nginx-x7k2p",
        "addressType": "IPv4",
        "endpoints": [ENDPOINT],
        "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
    }
    placeholder = {**MEMBER_SLICE, "endpoints": None}
    del placeholder["ports"]
    assert collected_slice(placeholder) == {"name": "nginx-x7k2p", "addressType": "IPv4", "endpoints": []}


def test_a_dispatched_slice_is_named_and_labelled_as_karmada_does() -> None:
    dispatched = dispatched_slice(
        collected_slice(MEMBER_SLICE), provider="member1", namespace="default", service="nginx"
    )
    assert dispatched == {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "member1-nginx-x7k2p",
            "namespace": "default",
            "labels": {
                "kubernetes.io/service-name": "nginx",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-dispatch-controller.karmada.io",
            },
            "annotations": {"endpointslice.karmada.io/provision-cluster": "member1"},
        },
        "addressType": "IPv4",
        "endpoints": [ENDPOINT],
        "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
    }


def test_collected_slices_are_read_from_the_services_manifest_status() -> None:
    def work(entry: dict[str, Any]) -> dict[str, Any]:
        return {
            "status": {
                "manifestStatuses": [
                    {
                        "identifier": SERVICE_IDENTIFIER,
                        **entry,
                    }
                ]
            }
        }

    assert collected_slices(work({}), "nginx") is None
    assert collected_slices(work({"endpointSlices": []}), "nginx") == []
    assert collected_slices(work({"endpointSlices": [{"name": "a"}, {"noname": 1}]}), "nginx") == [
        {"name": "a"}
    ]
    assert collected_slices(work({"endpointSlices": [{"name": "a"}]}), "other") is None


async def _report(objects: ObjectStore, cluster: str, slices: list[dict[str, Any]]) -> None:
    """What the provider's agent writes: the Service's manifest status with its slices."""
    rt = objects.registry.require(WORK_API, "Work")

    async def present() -> dict[str, Any] | None:
        try:
            return await objects.get(rt, namespace=f"gpufed-es-{cluster}", name=WORK)
        except errors.NotFound:
            return None  # not written yet

    work = await eventually(present, what=f"the Service's Work in {cluster}")
    entry = {
        "identifier": SERVICE_IDENTIFIER,
        "endpointSlices": [collected_slice(s) for s in slices],
    }
    await objects.update_status(rt, {**work, "status": {"manifestStatuses": [entry]}})


async def _slice_works(objects: ObjectStore) -> dict[str, list[str]]:
    """consumer cluster -> the names of the EndpointSlices its Works carry."""
    out: dict[str, list[str]] = {}
    for work in (await objects.list(objects.registry.require(WORK_API, "Work"))).items:
        for manifest in work["spec"]["workload"]["manifests"]:
            if manifest["kind"] == "EndpointSlice":
                out.setdefault(work["metadata"]["namespace"].removeprefix("gpufed-es-"), []).append(
                    manifest["metadata"]["name"]
                )
    return {k: sorted(v) for k, v in out.items()}


async def _until_slices(objects: ObjectStore, expected: dict[str, list[str]], what: str) -> None:
    async def matches() -> bool:
        return await _slice_works(objects) == expected

    await eventually(matches, what=what)


async def _start(objects: ObjectStore, **spec: Any) -> None:
    """Three clusters, the Service and its MultiClusterService (``spec``: fields changed from :func:`mcs`'s)."""
    for cluster in ("member1", "member2", "member3"):
        await put_cluster(objects, cluster, node_shape(1))
    await objects.create(objects.registry.require("v1", "Service"), SERVICE)
    obj = mcs("nginx", "CrossCluster")
    obj["spec"].update(spec)
    await objects.create(objects.registry.require(MCS_API, "MultiClusterService"), obj)


async def _respec(objects: ObjectStore, key: str, clusters: list[str]) -> None:
    rt = objects.registry.require(MCS_API, "MultiClusterService")
    obj = await objects.get(rt, namespace="default", name="nginx")
    obj["spec"][key] = [{"name": cluster} for cluster in clusters]
    await objects.update(rt, obj)


async def test_a_providers_slices_go_to_the_consumers_and_leave_with_them(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await _start(objects)
    rt = objects.registry.require(MCS_API, "MultiClusterService")
    await _report(objects, "member1", [MEMBER_SLICE])
    await _until_slices(objects, {"member2": ["member1-nginx-x7k2p"]}, "the slice in the consumer member2")

    work_rt = objects.registry.require(WORK_API, "Work")
    [work] = [
        w
        for w in (await objects.list(work_rt, namespace="gpufed-es-member2")).items
        if w["metadata"]["name"] != WORK
    ]
    assert work["metadata"]["name"] == "default-member1-nginx-x7k2p-endpointslice"
    assert work["metadata"]["annotations"] == {"endpointslice.karmada.io/provision-cluster": "member1"}
    assert work["metadata"]["labels"]["multiclusterservice.karmada.io/name"] == "nginx"
    assert work["spec"]["workload"]["manifests"][0]["endpoints"] == [ENDPOINT]
    obj = await objects.get(rt, namespace="default", name="nginx")
    [dispatched] = [c for c in obj["status"]["conditions"] if c["type"] == "EndpointSliceDispatched"]
    assert (dispatched["status"], dispatched["reason"], dispatched["message"]) == (
        "True",
        "EndpointSliceDispatchedSucceed",
        "EndpointSlice are dispatched successfully",
    )

    await _respec(
        objects, "consumerClusters", []
    )  # every cluster consumes: member1 is not sent its own slices
    await _until_slices(
        objects,
        {"member2": ["member1-nginx-x7k2p"], "member3": ["member1-nginx-x7k2p"]},
        "the slice in every consumer but its provider",
    )

    await _respec(objects, "consumerClusters", ["member3"])
    await _until_slices(objects, {"member3": ["member1-nginx-x7k2p"]}, "member2 no longer a consumer")

    await _report(objects, "member1", [])
    await _until_slices(objects, {}, "the provider's slice gone")

    async def not_collected() -> bool:
        return (await reasons(objects, "nginx") or {}).get(
            "EndpointSliceDispatched"
        ) == "EndpointSlicesNotCollected"

    await eventually(not_collected, what="EndpointSliceDispatched False again")

    await _report(objects, "member1", [MEMBER_SLICE])
    await _until_slices(objects, {"member3": ["member1-nginx-x7k2p"]}, "the slice back")
    await objects.delete(rt, namespace="default", name="nginx")
    await _until_slices(objects, {}, "no slice once the MultiClusterService is gone")


async def test_a_cluster_that_is_no_provider_has_its_slices_ignored(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await _start(objects, consumerClusters=[])
    await _report(objects, "member1", [MEMBER_SLICE])
    await _report(
        objects,
        "member3",
        [{**MEMBER_SLICE, "metadata": {**MEMBER_SLICE["metadata"], "name": "nginx-zzzzz"}}],
    )
    await _until_slices(
        objects,
        {"member2": ["member1-nginx-x7k2p"], "member3": ["member1-nginx-x7k2p"]},
        "the provider's slice only",
    )

    await _respec(objects, "providerClusters", ["member3"])
    await _until_slices(
        objects,
        {"member1": ["member3-nginx-zzzzz"], "member2": ["member3-nginx-zzzzz"]},
        "member1 no longer a provider: member3's slice instead",
    )
