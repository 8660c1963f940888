"""A namespace's ``spec.finalizers`` as kube keeps them, and its ``finalize`` subresource: a create
keeps the request's finalizers (``kubernetes`` added), the lifecycle takes only ``kubernetes`` off
an emptied namespace, and ``PUT .../finalize`` (the one verb kube serves there) takes the others
off, finishing the deletion; its ``metadata.finalizers`` hold it as any object's do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.controllers.fleet import eventually

from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

NAMESPACES = "/api/v1/namespaces"


def namespace(name: str, *finalizers: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": list(finalizers)}}


async def created(api: TestClient[Any, Any], name: str, *finalizers: str) -> dict[str, Any]:
    response = await api.post(NAMESPACES, json=namespace(name, *finalizers))
    assert response.status == 201, await response.text()
    body: dict[str, Any] = await response.json()
    return body


async def test_a_create_keeps_the_given_finalizers_and_adds_kubernetes(api: TestClient[Any, Any]) -> None:
    assert (await created(api, "held", "example.com/hold"))["spec"]["finalizers"] == ["example.com/hold", "kubernetes"]
    assert (await created(api, "ordered", "kubernetes", "example.com/hold"))["spec"]["finalizers"] == [
        "kubernetes", "example.com/hold"]
    assert (await created(api, "plain"))["spec"]["finalizers"] == ["kubernetes"]


async def test_a_create_refuses_a_finalizer_name_as_kube_does(api: TestClient[Any, Any]) -> None:
    response = await api.post(NAMESPACES, json=namespace("bad", "hold"))
    status = await response.json()
    assert (response.status, status["reason"]) == (422, "Invalid"), status
    assert status["message"] == (
        'Namespace "bad" is invalid: spec.finalizers: Invalid value: "hold": '
        "name is neither a standard finalizer name nor is it fully qualified"
    )


@pytest.mark.usefixtures("namespace_controller")
async def test_a_namespace_held_by_its_finalizer_stays_terminating_until_finalized(api: TestClient[Any, Any]) -> None:
    await created(api, "held", "example.com/hold")
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    assert (await api.post(f"{NAMESPACES}/held/configmaps", json=configmap)).status == 201
    deleting = await api.delete(f"{NAMESPACES}/held")
    assert deleting.status == 200, await deleting.text()
    assert (await deleting.json())["spec"]["finalizers"] == ["example.com/hold", "kubernetes"]  # marked only
    # The controller deletes the content, the lifecycle takes ``kubernetes`` off; the user's finalizer holds it.
    held = await finalized_to(api, "held", ["example.com/hold"])
    assert (await api.get(f"{NAMESPACES}/held/configmaps/c")).status == 404
    assert held["status"]["phase"] == "Terminating"
    assert held["spec"]["finalizers"] == ["example.com/hold"]
    # An update keeps the stored finalizers: only ``finalize`` changes them.
    updated = await api.put(f"{NAMESPACES}/held", json={**held, "spec": {"finalizers": []}})
    assert updated.status == 200, await updated.text()
    assert (await updated.json())["spec"]["finalizers"] == ["example.com/hold"]
    held = await (await api.get(f"{NAMESPACES}/held")).json()
    finalized = await api.put(f"{NAMESPACES}/held/finalize", json={**held, "spec": {"finalizers": []}})
    assert finalized.status == 200, await finalized.text()
    assert (await api.get(f"{NAMESPACES}/held")).status == 404


@pytest.mark.usefixtures("namespace_controller")
async def test_an_emptied_namespace_finalized_to_kubernetes_alone_is_removed(api: TestClient[Any, Any]) -> None:
    """``kubernetes`` is the lifecycle's own: given back to an emptied, terminating namespace by
    ``finalize``, the lifecycle takes it off again and the namespace goes."""
    await created(api, "back", "example.com/hold")
    assert (await api.delete(f"{NAMESPACES}/back")).status == 200
    held = await finalized_to(api, "back", ["example.com/hold"])
    finalized = await api.put(f"{NAMESPACES}/back/finalize", json={**held, "spec": {"finalizers": ["kubernetes"]}})
    assert finalized.status == 200, await finalized.text()
    assert (await api.get(f"{NAMESPACES}/back")).status == 404


@pytest.mark.usefixtures("namespace_controller")
async def test_metadata_finalizers_hold_an_emptied_namespace_until_an_update_removes_them(
    api: TestClient[Any, Any],
) -> None:
    """A namespace's ``metadata.finalizers`` hold it as any object's do: emptied and finalized, it
    stays ``Terminating`` until an update takes them off, and that update deletes it."""
    body = {**namespace("meta"), "metadata": {"name": "meta", "finalizers": ["example.com/meta"]}}
    assert (await api.post(NAMESPACES, json=body)).status == 201
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    assert (await api.post(f"{NAMESPACES}/meta/configmaps", json=configmap)).status == 201
    assert (await api.delete(f"{NAMESPACES}/meta")).status == 200
    held = await finalized_to(api, "meta", None)
    assert (await api.get(f"{NAMESPACES}/meta/configmaps/c")).status == 404
    assert (held["status"]["phase"], held["metadata"]["finalizers"]) == ("Terminating", ["example.com/meta"])
    assert "finalizers" not in held["spec"]  # the lifecycle took ``kubernetes`` off
    finalized = await api.put(f"{NAMESPACES}/meta/finalize", json=held)
    assert finalized.status == 200, await finalized.text()
    assert (await api.delete(f"{NAMESPACES}/meta")).status == 200
    held = await (await api.get(f"{NAMESPACES}/meta")).json()
    assert held["metadata"]["finalizers"] == ["example.com/meta"]
    released = await api.put(f"{NAMESPACES}/meta", json={**held, "metadata": {**held["metadata"], "finalizers": []}})
    assert released.status == 200, await released.text()
    assert (await api.get(f"{NAMESPACES}/meta")).status == 404


async def finalized_to(api: TestClient[Any, Any], name: str, finalizers: list[str] | None) -> dict[str, Any]:
    """Namespace ``name`` once its ``spec.finalizers`` read ``finalizers`` (the controller emptied it)
    and its conditions are written (so the namespace read is the one a write must follow)."""

    async def read() -> dict[str, Any] | None:
        body: dict[str, Any] = await (await api.get(f"{NAMESPACES}/{name}")).json()
        done = body["spec"].get("finalizers") == finalizers and body["status"].get("conditions")
        return body if done else None

    return await eventually(read, what=f"namespace {name} finalized to {finalizers}")


async def test_finalize_changes_the_finalizers_and_keeps_the_status(api: TestClient[Any, Any]) -> None:
    ns = await created(api, "kept", "example.com/a", "example.com/b")
    body = {**ns, "spec": {"finalizers": ["example.com/b"]}, "status": {"phase": "Terminating"}}
    response = await api.put(f"{NAMESPACES}/kept/finalize", json=body)
    assert response.status == 200, await response.text()
    answer = await response.json()
    assert answer["spec"]["finalizers"] == ["example.com/b"]
    assert answer["status"]["phase"] == "Active"
    stored = await (await api.get(f"{NAMESPACES}/kept")).json()
    assert (stored["spec"], stored["status"]) == ({"finalizers": ["example.com/b"]}, {"phase": "Active"})
    # Not terminating: no finalizer left does not delete it.
    response = await api.put(f"{NAMESPACES}/kept/finalize", json={**stored, "spec": {"finalizers": []}})
    assert response.status == 200, await response.text()
    assert (await api.get(f"{NAMESPACES}/kept")).status == 200


async def test_finalize_refuses_bad_names_at_their_index(api: TestClient[Any, Any]) -> None:
    ns = await created(api, "names")
    body = {**ns, "spec": {"finalizers": ["kubernetes", "hold", "Bad_/x"]}}
    response = await api.put(f"{NAMESPACES}/names/finalize", json=body)
    status = await response.json()
    assert (response.status, status["reason"]) == (422, "Invalid"), status
    causes = [(c["field"], c["message"]) for c in status["details"]["causes"]]
    assert causes[0] == (
        "spec.finalizers[1]",
        'Invalid value: "hold": name is neither a standard finalizer name nor is it fully qualified',
    )
    assert {field for field, _ in causes[1:]} == {"spec.finalizers[2]"}
    assert (await (await api.get(f"{NAMESPACES}/names")).json())["spec"]["finalizers"] == ["kubernetes"]


async def test_finalize_checks_the_resource_version(api: TestClient[Any, Any]) -> None:
    ns = await created(api, "stale", "example.com/hold")
    labelled = await api.put(f"{NAMESPACES}/stale", json={**ns, "metadata": {**ns["metadata"], "labels": {"a": "b"}}})
    assert labelled.status == 200
    response = await api.put(f"{NAMESPACES}/stale/finalize", json={**ns, "spec": {"finalizers": []}})
    status = await response.json()
    assert (response.status, status["reason"]) == (409, "Conflict"), status
    assert status["message"] == (
        'Operation cannot be fulfilled on namespaces "stale": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert (await api.put(f"{NAMESPACES}/missing/finalize", json=namespace("missing"))).status == 404


async def test_finalize_is_served_for_update_only(api: TestClient[Any, Any]) -> None:
    await created(api, "verbs")
    assert (await api.get(f"{NAMESPACES}/verbs/finalize")).status == 405
    patched = await api.patch(f"{NAMESPACES}/verbs/finalize", data="{}",
                              headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status == 405
    assert (await api.post(f"{NAMESPACES}/verbs/finalize", json=namespace("verbs"))).status == 405
    discovery = await (await api.get("/api/v1")).json()
    entries = {r["name"]: r for r in discovery["resources"]}
    assert entries["namespaces/finalize"]["verbs"] == ["update"]
    assert entries["namespaces/finalize"]["kind"] == "Namespace"
    assert "configmaps/finalize" not in entries
    assert (await api.put(f"{NAMESPACES}/default/configmaps/x/finalize", json={})).status == 404


@needs_kubectl
@pytest.mark.usefixtures("namespace_controller")
async def test_kubectl_replace_raw_finalize_unsticks_a_terminating_namespace(kubeconfig: Path) -> None:  # noqa: F811
    """The well-known way out of a namespace stuck in ``Terminating``: ``kubectl get ns -o json``,
    its ``spec.finalizers`` emptied, ``kubectl replace --raw .../finalize -f -``."""
    code, _, err = await kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(namespace("stuck", "example.com/hold")))
    assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "delete", "namespace", "stuck", "--wait=false")
    assert code == 0, err

    async def held() -> dict[str, Any] | None:  # once the controller emptied it and ``kubernetes`` went
        code, out, err = await kubectl(kubeconfig, "get", "namespace", "stuck", "-o", "json")
        assert code == 0, err
        read: dict[str, Any] = json.loads(out)
        return read if read["spec"]["finalizers"] == ["example.com/hold"] else None

    stuck = await eventually(held, what="stuck held by its own finalizer alone")
    assert stuck["status"]["phase"] == "Terminating"
    stuck["spec"]["finalizers"] = []
    code, out, err = await kubectl(
        kubeconfig, "replace", "--raw", "/api/v1/namespaces/stuck/finalize", "-f", "-", stdin=json.dumps(stuck)
    )
    assert code == 0, err
    assert json.loads(out)["metadata"]["name"] == "stuck"
    code, _, err = await kubectl(kubeconfig, "get", "namespace", "stuck")
    assert code != 0 and 'namespaces "stuck" not found' in err


async def test_openapi_and_aggregated_discovery_show_finalize(api: TestClient[Any, Any]) -> None:
    document = await (await api.get("/openapi/v3/api/v1")).json()
    item = document["paths"]["/api/v1/namespaces/{name}/finalize"]
    assert set(item) == {"parameters", "put"}
    assert item["put"]["operationId"] == "replaceNamespaceFinalize"
    aggregated = await (await api.get("/api", headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})).json()
    resources = {r["resource"]: r for r in aggregated["items"][0]["versions"][0]["resources"]}
    assert {"subresource": "finalize", "responseKind": {"group": "", "version": "v1", "kind": "Namespace"},
            "verbs": ["update"]} in resources["namespaces"]["subresources"]
