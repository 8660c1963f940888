"""Metadata alone, as kube-apiserver answers it: an Accept asking ``as=PartialObjectMetadata`` or
``as=PartialObjectMetadataList`` (``g=meta.k8s.io``, ``v=v1`` or ``v1beta1``) gets a
PartialObjectMetadata of one object, of each watch event's object, or a PartialObjectMetadataList
of a list, as client-go's metadata client and the official Python client's DynamicClient ask for
them; one object asked for as a list, or a list as one object, is kube's 406."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.errors import NotAcceptable
from controlplane.apiserver.metadataonly import partial_object
from controlplane.apiserver.negotiation import conversion_asked
from controlplane.hubregistry import hub_registry

from .kinds import deployment, widget

Client = TestClient[Any, Any]
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
WIDGETS = "/apis/test.gpufed.io/v1/namespaces/default/widgets"
#: What client-go's metadata client sends for a list, and for a get or a watch.
METADATA_LIST = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                 "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")
METADATA_OBJECT = METADATA_LIST.replace("PartialObjectMetadataList", "PartialObjectMetadata")
#: The official Python client's DynamicClient, as its own tests ask for a list of metadata.
PYTHON_METADATA_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"


async def _read_events(response: Any, count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(10):
        while len(events) < count and (line := await response.content.readline()):
            events.append(json.loads(line))
    return events


async def _created(api: Client, collection: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post(collection, json=body)
    assert response.status == 201, await response.text()
    return await response.json()


async def test_one_object_is_its_metadata_alone(api: Client) -> None:
    created = await _created(api, DEPLOYMENTS, deployment("web", replicas=3))
    response = await api.get(f"{DEPLOYMENTS}/web", headers={"Accept": METADATA_OBJECT})
    assert response.status == 200, await response.text()
    assert await response.json() == {
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": created["metadata"],
    }
    beta = await (await api.get(f"{DEPLOYMENTS}/web", headers={
        "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"})).json()
    assert (beta["kind"], beta["apiVersion"], "spec" in beta) == ("PartialObjectMetadata", "meta.k8s.io/v1beta1", False)
    scale = await (await api.get(f"{DEPLOYMENTS}/web/scale", headers={"Accept": METADATA_OBJECT})).json()
    assert (scale["kind"], scale["metadata"]["name"], "spec" in scale) == ("PartialObjectMetadata", "web", False)


@pytest.mark.parametrize("accept", [METADATA_LIST, PYTHON_METADATA_LIST])
async def test_a_list_is_its_items_metadata_with_the_lists_own(api: Client, accept: str) -> None:
    names = ["a", "b", "c"]
    created = {name: await _created(api, DEPLOYMENTS, deployment(name)) for name in names}
    response = await api.get(DEPLOYMENTS, params={"limit": "2"}, headers={"Accept": accept})
    assert response.status == 200, await response.text()
    page = await response.json()
    assert (page["kind"], page["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert page["metadata"]["remainingItemCount"] == 1 and page["metadata"]["continue"]
    assert page["items"] == [
        {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": created[name]["metadata"]}
        for name in names[:2]
    ]
    rest = await (await api.get(DEPLOYMENTS, params={"limit": "2", "continue": page["metadata"]["continue"]},
                                headers={"Accept": accept})).json()
    assert [item["metadata"]["name"] for item in rest["items"]] == ["c"]
    assert "continue" not in rest["metadata"] and rest["metadata"]["resourceVersion"]
    await _created(api, WIDGETS, widget("w"))
    widgets = await (await api.get(WIDGETS, headers={"Accept": accept})).json()
    assert [(i["kind"], i["metadata"]["name"], "spec" in i) for i in widgets["items"]] == [("PartialObjectMetadata", "w", False)]


@pytest.mark.parametrize(
    ("path", "accept", "message"),
    [
        (f"{DEPLOYMENTS}/web", PYTHON_METADATA_LIST,
         "you requested PartialObjectMetadataList, but the requested object is not a list (*apps.Deployment)"),
        (DEPLOYMENTS, METADATA_OBJECT,
         "you requested PartialObjectMetadata, but the requested object is a list (*apps.DeploymentList)"),
        (WIDGETS, METADATA_OBJECT,
         "you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)"),
        (f"{DEPLOYMENTS}/web/scale", PYTHON_METADATA_LIST,
         "you requested PartialObjectMetadataList, but the requested object is not a list (*autoscaling.Scale)"),
        (DEPLOYMENTS, "application/json;as=Scale;g=meta.k8s.io;v=v1",
         "only the following media types are accepted: application/json, application/yaml, "
         "application/vnd.kubernetes.protobuf"),
    ],
    ids=["object-as-list", "list-as-object", "custom-list-as-object", "scale-as-list", "no-such-conversion"],
)
async def test_what_cannot_be_converted_is_kubes_406(api: Client, path: str, accept: str, message: str) -> None:
    await _created(api, DEPLOYMENTS, deployment("web"))
    response = await api.get(path, headers={"Accept": accept})
    status = await response.json()
    assert response.status == 406, status
    assert (status["kind"], status["reason"], status["message"]) == ("Status", "NotAcceptable", message)


async def test_a_clause_kube_cannot_convert_to_is_passed_over(api: Client) -> None:
    await _created(api, DEPLOYMENTS, deployment("web"))
    accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2,application/json"
    whole = await (await api.get(f"{DEPLOYMENTS}/web", headers={"Accept": accept})).json()
    assert whole["kind"] == "Deployment"
    yaml_asked = await api.get(f"{DEPLOYMENTS}/web", headers={
        "Accept": "application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
    assert yaml_asked.headers["Content-Type"].startswith("application/yaml")
    assert "kind: PartialObjectMetadata" in await yaml_asked.text()


async def test_a_watch_sends_each_objects_metadata(api: Client) -> None:
    since = (await _created(api, DEPLOYMENTS, deployment("web")))["metadata"]["resourceVersion"]
    response = await api.get(DEPLOYMENTS, params={"watch": "1", "resourceVersion": since, "allowWatchBookmarks": "true"},
                             headers={"Accept": METADATA_OBJECT})
    assert response.status == 200
    created = await _created(api, DEPLOYMENTS, deployment("next"))
    added, bookmark = await _read_events(response, 2)
    response.close()
    assert added == {"type": "ADDED", "object": {
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": created["metadata"]}}
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                  "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    # kube's watch encoder writes an event's object whole when a list is asked for.
    listed = await api.get(DEPLOYMENTS, params={"watch": "1", "resourceVersion": "0"}, headers={"Accept": METADATA_LIST})
    [first] = await _read_events(listed, 1)
    listed.close()
    assert first["object"]["kind"] == "Deployment"


@pytest.mark.parametrize(
    ("api_version", "kind", "scale", "go_type"),
    [
        ("events.k8s.io/v1", "Event", False, "*core.Event"),  # kube serves them from core's event storage
        ("v1", "Event", False, "*core.Event"),
        ("apps/v1", "Deployment", False, "*apps.Deployment"),
        ("apps/v1", "Deployment", True, "*autoscaling.Scale"),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", True, "*v1.Scale"),  # a CRD's scale storage
    ],
)
def test_the_406_names_the_go_type_kubes_storage_answers_with(api_version: str, kind: str, scale: bool, go_type: str) -> None:
    rt = hub_registry().for_kind(api_version, kind)
    assert rt is not None
    as_list = conversion_asked(PYTHON_METADATA_LIST)
    assert as_list is not None
    with pytest.raises(NotAcceptable) as refused:
        partial_object(rt, {"metadata": {"name": "x"}}, as_list, scale=scale)
    assert refused.value.message.endswith(f"is not a list ({go_type})")
