"""The deprecated v1 ComponentStatus, served read-only as kube-apiserver serves it: probed on
every read, listed by discovery with ``get``/``list`` and short name ``cs``, kube's warning on
every answer, kube's Table, 405 for any other verb."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.componentstatus import (
    NO_LEADER,
    STARTING,
    ComponentHealth,
    ComponentStatuses,
    leader_probe,
    store_probe,
)
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry

Client = TestClient[Any, Any]
COLLECTION = "/api/v1/componentstatuses"
WARNING = '299 - "v1 ComponentStatus is deprecated in v1.19+"'
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def _unhealthy() -> ComponentHealth:
    raise ConnectionError("connection refused")


@pytest.fixture
async def client(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[Client]:
    statuses = ComponentStatuses({
        "scheduler": _unhealthy,
        "controller-manager": leader_probe(leader=lambda: "hub-1", leading=lambda: False, started=lambda: False),
        "etcd-0": store_probe(objects.store),
    })
    app = create_app(objects, api_registry, computed=[statuses.endpoint()])
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_list_and_get_probe_each_component(client: Client) -> None:
    response = await client.get(COLLECTION)
    assert response.status == 200
    assert response.headers.getall("Warning") == [WARNING]
    listed = await response.json()
    assert (listed["kind"], listed["apiVersion"], listed["metadata"]) == ("ComponentStatusList", "v1", {})
    assert [(i["metadata"]["name"], i["conditions"]) for i in listed["items"]] == [
        ("scheduler", [{"type": "Healthy", "status": "False", "error": "connection refused"}]),
        ("controller-manager", [{"type": "Healthy", "status": "True", "message": "ok"}]),
        ("etcd-0", [{"type": "Healthy", "status": "True", "message": "ok"}]),
    ]
    item = await client.get(f"{COLLECTION}/etcd-0")
    assert item.headers.getall("Warning") == [WARNING]
    assert await item.json() == {
        "kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": "etcd-0", "creationTimestamp": None},
        "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}],
    }
    missing = await client.get(f"{COLLECTION}/kube-dns")
    assert missing.status == 404
    assert missing.headers.getall("Warning") == [WARNING]  # added before the storage answers, as kube's
    assert (await missing.json())["message"] == 'componentstatuses "kube-dns" not found'


async def test_the_table_is_kubes(client: Client) -> None:
    rendered = await (await client.get(COLLECTION, headers={"Accept": TABLE})).json()
    assert [c["name"] for c in rendered["columnDefinitions"]] == ["Name", "Status", "Message", "Error"]
    assert [r["cells"] for r in rendered["rows"]] == [
        ["scheduler", "Unhealthy", "", "connection refused"],
        ["controller-manager", "Healthy", "ok", ""],
        ["etcd-0", "Healthy", "ok", ""],
    ]


async def test_metadata_alone_is_kubes_partial_object_metadata(client: Client) -> None:
    """kube's ComponentStatus is a REST storage: its answers convert as any kind's do."""
    as_list = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"}
    listed = await client.get(COLLECTION, headers=as_list)
    assert listed.headers.getall("Warning") == [WARNING]
    body = await listed.json()
    assert (body["kind"], body["apiVersion"], body["metadata"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1", {})
    assert [i["metadata"]["name"] for i in body["items"]] == ["scheduler", "controller-manager", "etcd-0"]
    assert {i["kind"] for i in body["items"]} == {"PartialObjectMetadata"}
    one = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"}
    assert await (await client.get(f"{COLLECTION}/etcd-0", headers=one)).json() == {
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1beta1",
        "metadata": {"name": "etcd-0", "creationTimestamp": None},
    }
    refused = await client.get(COLLECTION, headers=one)
    assert (refused.status, (await refused.json())["message"]) == (
        406, "you requested PartialObjectMetadata, but the requested object is a list (*core.ComponentStatusList)")
    refused = await client.get(f"{COLLECTION}/etcd-0", headers=as_list)
    assert (refused.status, (await refused.json())["message"]) == (
        406, "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ComponentStatus)")


@pytest.mark.parametrize(("method", "path"), [("POST", COLLECTION), ("DELETE", f"{COLLECTION}/etcd-0"),
                                              ("PUT", f"{COLLECTION}/etcd-0"), ("DELETE", COLLECTION)])
async def test_other_verbs_are_not_allowed(client: Client, method: str, path: str) -> None:
    response = await client.request(method, path, json={})
    assert response.status == 405
    assert (await response.json())["reason"] == "MethodNotAllowed"


@pytest.mark.parametrize(("query", "names"), [
    ("fieldSelector=metadata.name%3Detcd-0", ["etcd-0"]),
    ("fieldSelector=metadata.name!%3Detcd-0", ["scheduler", "controller-manager"]),
    ("labelSelector=tier%3Dcontrol-plane", []),
    ("labelSelector=!tier", ["scheduler", "controller-manager", "etcd-0"]),
])
async def test_a_list_takes_kubes_selectors(client: Client, query: str, names: list[str]) -> None:
    """kube filters the listed components by their labels (none) and ``metadata.name``."""
    response = await client.get(f"{COLLECTION}?{query}")
    assert response.status == 200
    assert [item["metadata"]["name"] for item in (await response.json())["items"]] == names


async def test_a_selector_kube_refuses_is_its_bad_request(client: Client) -> None:
    for query, message in (("fieldSelector=status.phase%3Dx",
                            '"status.phase" is not a known field selector: only "metadata.name", "metadata.namespace"'),
                           ("labelSelector=a%3D%3D%3Db", None)):
        response = await client.get(f"{COLLECTION}?{query}")
        assert response.status == 400
        status = await response.json()
        assert status["reason"] == "BadRequest"
        if message is not None:
            assert status["message"] == message


@pytest.mark.parametrize("query", ["watch=true", "watch=yes", "watch", "watch=1"])
async def test_a_watch_is_not_allowed(client: Client, query: str) -> None:
    """Any ``watch`` kube reads as true: all but 0 and false, the empty value included."""
    response = await client.get(f"{COLLECTION}?{query}")
    assert response.status == 405


@pytest.mark.parametrize("query", ["watch=false", "watch=0", "watch=FALSE"])
async def test_a_false_watch_lists(client: Client, query: str) -> None:
    response = await client.get(f"{COLLECTION}?{query}")
    assert response.status == 200
    assert (await response.json())["kind"] == "ComponentStatusList"


async def test_discovery_lists_it_read_only(client: Client) -> None:
    core = await (await client.get("/api/v1")).json()
    entry = next(r for r in core["resources"] if r["name"] == "componentstatuses")
    assert entry == {
        "name": "componentstatuses", "singularName": "componentstatus", "namespaced": False,
        "kind": "ComponentStatus", "verbs": ["get", "list"], "shortNames": ["cs"],
    }
    aggregated = await (await client.get(
        "/api", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
    )).json()
    resources = aggregated["items"][0]["versions"][0]["resources"]
    listed = next(r for r in resources if r["resource"] == "componentstatuses")
    assert (listed["verbs"], listed["shortNames"], listed["scope"]) == (["get", "list"], ["cs"], "Cluster")


@pytest.mark.parametrize(
    ("leader", "leading", "started", "expected"),
    [
        (None, False, False, ComponentHealth(False, NO_LEADER)),
        ("other", False, False, ComponentHealth(True, "ok")),
        ("me", True, False, ComponentHealth(False, STARTING)),
        ("me", True, True, ComponentHealth(True, "ok")),
    ],
)
async def test_a_component_on_the_leader(leader: str | None, leading: bool, started: bool, expected: ComponentHealth) -> None:
    probe = leader_probe(leader=lambda: leader, leading=lambda: leading, started=lambda: started)
    assert await probe() == expected
