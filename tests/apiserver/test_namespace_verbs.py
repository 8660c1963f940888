"""The verbs kube serves on namespaces: its namespace storage
(``pkg/registry/core/namespace/storage/storage.go``) has no ``DeleteCollection``, so discovery and
the OpenAPI documents leave ``deletecollection`` out and a ``DELETE`` of the collection is
go-restful's 405, whatever its selectors; the namespaced kinds keep theirs."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

NAMESPACES = "/api/v1/namespaces"
AGGREGATED = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}


async def test_a_delete_of_the_namespaces_is_kubes_405_and_deletes_none(api: TestClient[Any, Any]) -> None:
    created = await api.post(
        NAMESPACES, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pag"}}
    )
    assert created.status == 201, await created.text()
    for query in ("", "?dryRun=All&labelSelector=kubernetes.io/metadata.name%3Dpag"):
        response = await api.delete(f"{NAMESPACES}{query}")
        assert response.status == 405
        status = await response.json()
        assert (status["kind"], status["status"], status["reason"], status["code"]) == (
            "Status",
            "Failure",
            "MethodNotAllowed",
            405,
        )
        assert status["message"] == "the server does not allow this method on the requested resource"
    found = await api.get(f"{NAMESPACES}/pag")
    assert (found.status, (await found.json())["status"]["phase"]) == (200, "Active")
    # A namespaced kind's collection is deleted as kube deletes it.
    assert (await api.delete(f"{NAMESPACES}/pag/configmaps")).status == 200


async def test_discovery_and_openapi_list_no_deletecollection_of_namespaces(
    api: TestClient[Any, Any],
) -> None:
    served = {r["name"]: r["verbs"] for r in (await (await api.get("/api/v1")).json())["resources"]}
    assert served["namespaces"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
    assert "deletecollection" in served["configmaps"]
    aggregated = await (await api.get("/api", headers=AGGREGATED)).json()
    resources = {r["resource"]: r for r in aggregated["items"][0]["versions"][0]["resources"]}
    assert resources["namespaces"]["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
    paths = (await (await api.get("/openapi/v3/api/v1")).json())["paths"]
    assert set(paths[NAMESPACES]) == {"parameters", "get", "post"}
    assert "delete" in paths["/api/v1/namespaces/{namespace}/configmaps"]
