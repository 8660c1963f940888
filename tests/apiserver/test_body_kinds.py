"""A body of another kind or apiVersion than its URL's resource gets kube-apiserver's 400: its
decoder's words for a built-in kind (a kind it cannot convert, or one not registered at all),
the apiVersion check for the same kind in another version; over HTTP, as kubectl sees it."""

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
