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

from .fleet import eventually, node_shape, put_cluster, settled
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


async def _start(objects: ObjectStore, *, unready: tuple[str, ...] = (), **spec: Any) -> None:
    """Three clusters (``unready``: those not Ready), the Service and its MultiClusterService
    (``spec``: fields changed from :func:`mcs`'s)."""
    for cluster in ("member1", "member2", "member3"):
        await put_cluster(objects, cluster, node_shape(1))
        if cluster in unready:
            await _set_ready(objects, cluster, "False")
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


async def _set_ready(objects: ObjectStore, name: str, status: str) -> None:
    rt = objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    cluster = await objects.get(rt, name=name)
    ready = {
        "type": "Ready",
        "status": status,
        "reason": "Test",
        "message": "t",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    await objects.update_status(
        rt, {**cluster, "status": {**cluster.get("status", {}), "conditions": [ready]}}
    )


async def _events(objects: ObjectStore) -> list[tuple[str, str, str, int]]:
    """(type, reason, message, count) of the Events on MultiClusterService default/nginx."""
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    return sorted(
        (e["type"], e["reason"], e["message"], e["count"])
        for e in events
        if e["involvedObject"]["kind"] == "MultiClusterService" and e["involvedObject"]["name"] == "nginx"
    )


def _named(name: str) -> dict[str, Any]:
    return {**MEMBER_SLICE, "metadata": {**MEMBER_SLICE["metadata"], "name": name}}


async def test_a_consumer_that_is_not_ready_is_skipped_and_keeps_the_slices_it_has(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await _start(objects, unready=("member3",), consumerClusters=[{"name": "member2"}, {"name": "member3"}])
    # The hub knows member3 is not Ready before a slice comes (its Cluster's watch event may
    # otherwise arrive after the Work's: a slice sent while member3 looked Ready stays).
    await settled(manager)
    await _report(objects, "member1", [MEMBER_SLICE])
    await _until_slices(objects, {"member2": ["member1-nginx-x7k2p"]}, "no slice for member3, not Ready")

    async def warned(count: int) -> bool:
        return (
            "Warning",
            "SyncServiceFailed",
            "Consumer cluster member3 is not ready, skip to propagate EndpointSlice",
            count,
        ) in await _events(objects)

    await eventually(lambda: warned(1), what="the Warning about member3")

    await _set_ready(objects, "member3", "True")
    both = {"member2": ["member1-nginx-x7k2p"], "member3": ["member1-nginx-x7k2p"]}
    await _until_slices(objects, both, "member3 Ready: its slice")

    # Not Ready again: what it has stays as it is, a new slice is not written to it.
    await _set_ready(objects, "member3", "False")
    await eventually(lambda: warned(2), what="the Warning about member3 again, folded into the first")
    await _report(objects, "member1", [MEMBER_SLICE, _named("nginx-bbbbb")])
    await _until_slices(
        objects,
        {"member2": ["member1-nginx-bbbbb", "member1-nginx-x7k2p"], "member3": ["member1-nginx-x7k2p"]},
        "the new slice in the Ready consumer only",
    )
    # A slice its provider no longer reports leaves every consumer, Ready or not.
    await _report(objects, "member1", [_named("nginx-bbbbb")])
    await _until_slices(objects, {"member2": ["member1-nginx-bbbbb"]}, "the gone slice left member3 too")


async def test_a_provider_that_is_not_ready_has_its_slices_withdrawn(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await _start(objects)
    await _report(objects, "member1", [MEMBER_SLICE])
    await _until_slices(objects, {"member2": ["member1-nginx-x7k2p"]}, "the slice in member2")
    await _set_ready(objects, "member1", "False")
    await _until_slices(objects, {}, "member1 not Ready: its slice withdrawn")

    async def warned() -> bool:
        return (
            "Warning",
            "SyncServiceFailed",
            "Provider cluster member1 is not ready, skip to propagate MultiClusterService",
            1,
        ) in await _events(objects)

    await eventually(warned, what="the Warning about member1")
    await _set_ready(objects, "member1", "True")
    await _until_slices(objects, {"member2": ["member1-nginx-x7k2p"]}, "member1 Ready again")


async def test_karmadas_events_are_recorded_once_per_decision(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await _start(objects, consumerClusters=[{"name": "member2"}, {"name": "member9"}])
    await _report(objects, "member1", [MEMBER_SLICE])
    await _until_slices(objects, {"member2": ["member1-nginx-x7k2p"]}, "the slice in member2")
    # More reconciles, the same decisions: a new slice reported, then the same again.
    await _report(objects, "member1", [MEMBER_SLICE, _named("nginx-bbbbb")])
    await _until_slices(objects, {"member2": ["member1-nginx-bbbbb", "member1-nginx-x7k2p"]}, "two slices")
    expected = [
        ("Normal", "DispatchEndpointSliceSucceed", "EndpointSlice are dispatched successfully", 1),
        ("Normal", "SyncServiceSucceed", "Service is propagated to target clusters.", 1),
        ("Warning", "ClusterNotFound", "Consumer cluster member9 is not found", 1),
    ]

    async def recorded() -> bool:
        return await _events(objects) == expected

    await eventually(recorded, what=f"the Events {expected}")


async def _applied(objects: ObjectStore, cluster: str, work: str, status: str, reason: str) -> None:
    """What the consumer's agent writes on a slice's Work: its Applied condition."""
    rt = objects.registry.require(WORK_API, "Work")
    obj = await objects.get(rt, namespace=f"gpufed-es-{cluster}", name=work)
    applied = {
        "type": "Applied",
        "status": status,
        "reason": reason,
        "message": "m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    await objects.update_status(rt, {**obj, "status": {"conditions": [applied]}})


async def test_a_consumer_without_the_endpointslice_api_gets_no_new_slices(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await _start(objects, consumerClusters=[{"name": "member2"}, {"name": "member3"}])
    await _report(objects, "member1", [MEMBER_SLICE])
    both = {"member2": ["member1-nginx-x7k2p"], "member3": ["member1-nginx-x7k2p"]}
    await _until_slices(objects, both, "the slice in both consumers")
    await _applied(objects, "member3", "default-member1-nginx-x7k2p-endpointslice", "False", "KindNotServed")

    async def warned() -> bool:
        event = ("Warning", "APIIncompatible", "Consumer cluster member3 does not support EndpointSlice", 1)
        return event in await _events(objects)

    await eventually(warned, what="the APIIncompatible Warning about member3")
    await _report(objects, "member1", [MEMBER_SLICE, _named("nginx-bbbbb")])
    await _until_slices(
        objects,
        {"member2": ["member1-nginx-bbbbb", "member1-nginx-x7k2p"], "member3": ["member1-nginx-x7k2p"]},
        "the new slice in member2 only",
    )
    # Once the API is served (the agent applied the slice), member3 gets the slices again.
    await _applied(
        objects, "member3", "default-member1-nginx-x7k2p-endpointslice", "True", "AppliedSuccessful"
    )
    await _until_slices(
        objects,
        {
            "member2": ["member1-nginx-bbbbb", "member1-nginx-x7k2p"],
            "member3": ["member1-nginx-bbbbb", "member1-nginx-x7k2p"],
        },
        "member3 serving EndpointSlices again",
    )
