"""A body of another kind or apiVersion than its URL's resource gets kube-apiserver's 400: its
decoder's words for a built-in kind (a kind it cannot convert, or one not registered at all),
the apiVersion check for the same kind in another version; and, for a server-side apply, kube's
field manager's "invalid object type". Over HTTP, as kubectl sees it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

Client = TestClient[Any, Any]


@pytest.fixture
async def api() -> AsyncIterator[Client]:
    async with MemoryStore() as memory:
        registry = hub_registry()
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, registry))) as client:
            yield client


def _body(api_version: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}


@pytest.mark.parametrize(("path", "body", "message"), [
    ("/api/v1/namespaces/default/configmaps", _body("v1", "Secret"),
     'Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): '
     "unknown conversion"),
    ("/apis/apps/v1/namespaces/default/deployments", _body("v1", "ConfigMap"),
     'ConfigMap in version "v1" cannot be handled as a Deployment: converting (v1.ConfigMap) to (apps.Deployment): '
     "unknown conversion"),
    ("/apis/apps/v1/namespaces/default/deployments", _body("apps/v1", "deployment"),
     'deployment in version "v1" cannot be handled as a Deployment: no kind "deployment" is registered for version '
     '"apps/v1" in scheme "pkg/api/legacyscheme/scheme.go:30"'),
    ("/apis/batch/v1/namespaces/default/cronjobs", _body("batch/v1beta1", "CronJob"),
     "the API version in the data (batch/v1beta1) does not match the expected API version (batch/v1)"),
    ("/api/v1/namespaces/default/events", _body("events.k8s.io/v1", "Event"),
     "the API version in the data (events.k8s.io/v1) does not match the expected API version (v1)"),
    # A kind served in two versions: a body of the one it is stored in, sent to the other's URL.
    ("/apis/events.k8s.io/v1/namespaces/default/events", _body("v1", "Event"),
     "the API version in the data (v1) does not match the expected API version (events.k8s.io/v1)"),
    ("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers", _body("autoscaling/v2", "HorizontalPodAutoscaler"),
     "the API version in the data (autoscaling/v2) does not match the expected API version (autoscaling/v1)"),
    ("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", _body("autoscaling/v1", "HorizontalPodAutoscaler"),
     "the API version in the data (autoscaling/v1) does not match the expected API version (autoscaling/v2)"),
])
async def test_a_body_of_another_kind_is_kubes_400(api: Client, path: str, body: dict[str, Any], message: str) -> None:
    created = await api.post(path, json=body)
    assert created.status == 400
    status = await created.json()
    assert (status["reason"], status["message"]) == ("BadRequest", message)
    replaced = await api.put(f"{path}/x", json=body)
    assert replaced.status == 400 and (await replaced.json())["message"] == message


APPLY = {"Content-Type": "application/apply-patch+yaml"}
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
HPAS = "/apis/autoscaling/{}/namespaces/default/horizontalpodautoscalers"
CLUSTER_QUEUES = "/apis/kueue.x-k8s.io/{}/clusterqueues"


def _deployment(**fields: Any) -> dict[str, Any]:
    labels = {"app": "x"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
        **fields,
    }


def _without(obj: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != key}


async def _apply(api: Client, url: str, body: dict[str, Any]) -> Any:
    return await api.patch(url, params={"fieldManager": "tester"}, json=body, headers=APPLY)


@pytest.mark.parametrize(("collection", "body", "message"), [
    (DEPLOYMENTS, _deployment(apiVersion="apps/v1beta1"), "invalid object type: apps/v1beta1, Kind=Deployment"),
    (DEPLOYMENTS, _deployment(kind="StatefulSet"), "invalid object type: apps/v1, Kind=StatefulSet"),
    (DEPLOYMENTS, _without(_deployment(), "apiVersion"), "invalid object type: /, Kind=Deployment"),
    (DEPLOYMENTS, _without(_deployment(), "kind"), "invalid object type: apps/v1, Kind="),
    (DEPLOYMENTS, _deployment(apiVersion="v1"), "invalid object type: /v1, Kind=Deployment"),
    # Go reads no group, version or kind at all from an apiVersion with two slashes.
    (DEPLOYMENTS, _deployment(apiVersion="apps/v1/x"), "invalid object type: /, Kind="),
    # Kinds the hub serves at two versions: the body's version is not converted to the URL's.
    (HPAS.format("v1"), _body("autoscaling/v2", "HorizontalPodAutoscaler"),
     "invalid object type: autoscaling/v2, Kind=HorizontalPodAutoscaler"),
    (CLUSTER_QUEUES.format("v1beta2"), _body("kueue.x-k8s.io/v1beta1", "ClusterQueue"),
     "invalid object type: kueue.x-k8s.io/v1beta1, Kind=ClusterQueue"),
])
async def test_an_apply_of_another_version_or_kind_is_kubes_400(
    api: Client, collection: str, body: dict[str, Any], message: str
) -> None:
    """kube's field manager checks the applied object's group, version and kind against the URL's
    before it merges anything, whether the apply creates the object or changes it."""
    created = await _apply(api, f"{collection}/x", body)
    status = await created.json()
    assert (created.status, status["reason"], status["message"]) == (400, "BadRequest", message)

    if collection == DEPLOYMENTS:
        ok = await _apply(api, f"{collection}/x", _deployment())
        assert ok.status == 201, await ok.json()
        refused = await _apply(api, f"{collection}/x", {**body, "metadata": {"name": "x", "labels": {"a": "b"}}})
        assert (refused.status, (await refused.json())["message"]) == (400, message)
        refused = await _apply(api, f"{collection}/x/status", body)
        assert (refused.status, (await refused.json())["message"]) == (400, message)
        stored = await (await api.get(f"{collection}/x")).json()
        assert "labels" not in stored["metadata"]


@pytest.mark.parametrize(("collection", "api_version", "kind"), [
    (HPAS.format("v1"), "autoscaling/v1", "HorizontalPodAutoscaler"),
    (HPAS.format("v2"), "autoscaling/v2", "HorizontalPodAutoscaler"),
    (CLUSTER_QUEUES.format("v1beta1"), "kueue.x-k8s.io/v1beta1", "ClusterQueue"),
    (CLUSTER_QUEUES.format("v1beta2"), "kueue.x-k8s.io/v1beta2", "ClusterQueue"),
])
async def test_an_apply_at_the_urls_own_version_is_taken_at_every_served_version(
    api: Client, collection: str, api_version: str, kind: str
) -> None:
    body = _body(api_version, kind)
    if kind == "HorizontalPodAutoscaler":
        body["spec"] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}, "maxReplicas": 2}
    applied = await _apply(api, f"{collection}/x", body)
    assert applied.status == 201, await applied.json()
    assert (await applied.json())["apiVersion"] == api_version


@pytest.mark.parametrize(("path", "metadata", "message"), [
    ("/api/v1/namespaces/default/configmaps/x", {},
     "the name of the object (x based on URL) was undeterminable: name must be provided"),
    ("/api/v1/namespaces/default/configmaps/x", {"name": "y"},
     "the name of the object (y) does not match the name on the URL (x)"),
    ("/api/v1/namespaces/default/configmaps/x", {"name": "x", "namespace": "kube-system"},
     "the namespace of the provided object does not match the namespace sent on the request"),
    ("/api/v1/namespaces/x/status", {}, "the name of the object (x based on URL) was undeterminable: name must be provided"),
])
async def test_an_update_names_the_object_of_its_url(
    api: Client, path: str, metadata: dict[str, str], message: str
) -> None:
    """kube's update handler checks a body's metadata against the URL: a namespace, when the body
    has one, and a name, which the body must have."""
    assert (await api.post("/api/v1/namespaces", json={"metadata": {"name": "x"}})).status == 201
    assert (await api.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "x"}})).status == 201
    kind = "Namespace" if path.endswith("/status") else "ConfigMap"
    answer = await api.put(path, json={"apiVersion": "v1", "kind": kind, "metadata": metadata})
    assert answer.status == 400
    status = await answer.json()
    assert (status["reason"], status["message"]) == ("BadRequest", message)


@pytest.mark.parametrize(("patch", "content_type", "message"), [
    ([{"op": "remove", "path": "/metadata/name"}], "application/json-patch+json",
     "the name of the object (x based on URL) was undeterminable: name must be provided"),
    ({"metadata": {"name": "y"}}, "application/merge-patch+json",
     "the name of the object (y) does not match the name on the URL (x)"),
    ({"metadata": {"namespace": "kube-system"}}, "application/strategic-merge-patch+json",
     "the namespace of the provided object does not match the namespace sent on the request"),
])
async def test_a_patched_object_names_the_object_of_its_url(
    api: Client, patch: Any, content_type: str, message: str
) -> None:
    """kube's patch handler checks the patched object against the URL as an update's body."""
    assert (await api.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "x"}})).status == 201
    answer = await api.patch("/api/v1/namespaces/default/configmaps/x", json=patch, headers={"Content-Type": content_type})
    assert answer.status == 400
    status = await answer.json()
    assert (status["reason"], status["message"]) == ("BadRequest", message)


@pytest.mark.parametrize(("body", "message"), [
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": 2}},
     'Deployment in version "v1" cannot be handled as a Scale: converting (v1.Deployment) to (autoscaling.Scale): '
     "unknown conversion"),
    ({"kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": 2}},
     'Deployment in version "v1" cannot be handled as a Scale: no kind "Deployment" is registered for version '
     '"autoscaling/v1" in scheme "pkg/api/legacyscheme/scheme.go:30"'),
])
async def test_a_scale_update_of_another_kind_is_kubes_400(api: Client, body: dict[str, Any], message: str) -> None:
    assert (await api.post(DEPLOYMENTS, json=_deployment())).status == 201
    answer = await api.put(f"{DEPLOYMENTS}/x/scale", json=body)
    status = await answer.json()
    assert (answer.status, status["reason"], status["message"]) == (400, "BadRequest", message)
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x"}, "spec": {"replicas": 2}}
    assert (await api.put(f"{DEPLOYMENTS}/x/scale", json=scale)).status == 200


_OMITS_NAME = ('.spec.template.spec.containers: element 0: associative list with keys has an element that omits '
               'key field "name" (and doesn\'t have default value)')


_POD = "/api/v1/namespaces/default/pods/p"


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}


@pytest.mark.parametrize(("body", "detail"), [
    (_pod(containers=[{"name": "a", "image": "i"}, {"name": "a", "image": "j"}]),
     '.spec.containers: duplicate entries for key [name="a"]'),
    (_pod(containers=[{"name": "a", "image": "i", "ports": [{"containerPort": 80}, {"containerPort": 80}]}]),
     '.spec.containers[name="a"].ports: duplicate entries for key [containerPort=80,protocol="TCP"]'),
    (_pod(containers="a"), ".spec.containers: expected list, got &{a}"),
    (_pod(containers=[{"name": "a", "image": "i"}], nodeSelector=["x"]), ".spec.nodeSelector: expected map, got &{[x]}"),
    (_pod(containers=["a", {"name": "b"}]),
     ".spec.containers: element 0: associative list with keys may not have non-map elements"),
    ({**_pod(containers=[{"name": "a", "image": "i"}]), "metadata": {
        "name": "p", "namespace": "default", "finalizers": ["x", "x"], "labels": "y"}},
     'errors:\n  .metadata.finalizers: duplicate entries for key [="x"]\n  .metadata.labels: expected map, got &{y}'),
])
async def test_an_apply_structured_merge_diff_cannot_type_is_refused_in_its_words(
    api: Client, body: dict[str, Any], detail: str
) -> None:
    """kube answers these as a reasonless 500 (its field manager's plain error); the hub answers
    the same words as a 422 Invalid, with SMD's errors as the cause at ``patch``."""
    refused = await _apply(api, _POD, body)
    status = await refused.json()
    message = f"failed to create typed patch object (default/p; /v1, Kind=Pod): {detail}"
    assert (refused.status, status["reason"], status["message"]) == (422, "Invalid", message)
    assert [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("FieldValueInvalid", "patch", detail)
    ]
    assert (await api.get(_POD)).status == 404


@pytest.mark.parametrize(("path", "body", "message"), [
    (f"{DEPLOYMENTS}/x", _deployment(spec={"selector": {"matchLabels": {"app": "x"}}, "template": {
        "metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"image": "i"}]}}}),
     f"failed to create typed patch object (/x; apps/v1, Kind=Deployment): {_OMITS_NAME}"),
    ("/api/v1/namespaces/default/pods/p",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
      "spec": {"containers": [{"name": "a", "image": "i"}, {"image": "j"}]}},
     "failed to create typed patch object (default/p; /v1, Kind=Pod): .spec.containers: element 1: associative "
     'list with keys has an element that omits key field "name" (and doesn\'t have default value)'),
])
async def test_an_apply_of_a_list_item_without_its_key_is_refused_in_kubes_words(
    api: Client, path: str, body: dict[str, Any], message: str
) -> None:
    """structured-merge-diff cannot type the applied object: kube's field manager returns its
    error as a plain one (a 500 without a reason); the hub keeps its words, as a 422 with the
    reason as a cause at ``patch``, whether the apply creates the object or changes it."""
    for existing in (False, True):
        if existing:  # the second round changes an object that exists
            fine = {**body, "spec": {**body["spec"], "containers": [{"name": "c", "image": "i"}]}}
            assert (await _apply(api, path, _deployment() if path.startswith(DEPLOYMENTS) else fine)).status == 201
        refused = await _apply(api, path, body)
        status = await refused.json()
        assert (refused.status, status["reason"], status["message"]) == (422, "Invalid", message)
        assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
            ("patch", message.split("): ", 1)[1])
        ]
