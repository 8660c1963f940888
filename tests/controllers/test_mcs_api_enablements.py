"""A MultiClusterService's providers and consumers judged by their Cluster's ``apiEnablements``,
as Karmada's controllers judge them (``helper.IsAPIEnabled`` of ``discovery.k8s.io/v1``
EndpointSlice): one without the EndpointSlice API is skipped with an ``APIIncompatible``
Warning, before any slice Work is written to it. A Cluster that lists no APIs is judged by its
agent's ``KindNotServed`` instead (``test_mcs_endpointslices.py``)."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, settled
from .test_mcs_endpointslices import MEMBER_SLICE, _events, _report, _start, _until_slices

CORE = {"groupVersion": "v1", "resources": [{"name": "services", "kind": "Service"}]}
SLICES = {
    "groupVersion": "discovery.k8s.io/v1",
    "resources": [{"name": "endpointslices", "kind": "EndpointSlice"}],
}


async def _list_apis(objects: ObjectStore, name: str, *enablements: dict[str, Any]) -> None:
    """What the cluster's agent reports of its member's discovery."""
    rt = objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    cluster = await objects.get(rt, name=name)
    await objects.update_status(
        rt, {**cluster, "status": {**cluster["status"], "apiEnablements": list(enablements)}}
    )


async def _warned(objects: ObjectStore, message: str) -> bool:
    return any(e[:3] == ("Warning", "APIIncompatible", message) for e in await _events(objects))


async def test_a_consumer_whose_cluster_lacks_the_endpointslice_api_gets_no_slice(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await _start(objects, consumerClusters=[{"name": "member2"}, {"name": "member3"}])
    await _list_apis(objects, "member2", CORE, SLICES)
    await _list_apis(objects, "member3", CORE)
    # The hub knows what each member lists before a slice comes (a Cluster's watch event may
    # otherwise arrive after the Work's: a slice sent to member3 before its list was seen stays).
    await settled(manager)
    await _report(objects, "member1", [MEMBER_SLICE])
    await _until_slices(objects, {"member2": ["member1-nginx-x7k2p"]}, "the slice in member2 only")
    message = "Consumer cluster member3 does not support EndpointSlice"
    await eventually(lambda: _warned(objects, message), what="the APIIncompatible Warning about member3")

    # Its member installs the API (the agent's next list names it): the slice follows.
    await _list_apis(objects, "member3", CORE, SLICES)
    both = {"member2": ["member1-nginx-x7k2p"], "member3": ["member1-nginx-x7k2p"]}
    await _until_slices(objects, both, "member3 serving EndpointSlices")


async def test_a_provider_whose_cluster_lacks_the_endpointslice_api_is_skipped(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await _start(objects)
    await _report(objects, "member1", [MEMBER_SLICE])
    await _until_slices(objects, {"member2": ["member1-nginx-x7k2p"]}, "the slice in member2")
    await _list_apis(objects, "member1", CORE)
    await _until_slices(objects, {}, "member1 without the API: its slices are not dispatched")
    message = "Provider cluster member1 does not support EndpointSlice"
    await eventually(lambda: _warned(objects, message), what="the APIIncompatible Warning about member1")
