"""What a delete answers, as kube-apiserver does: the deleted object for the kinds whose registry
returns it (Pod, PersistentVolumeClaim, Service, ServiceAccount, ResourceQuota, StorageClass), a success Status for the other
built-in kinds; and ``/version/`` served like ``/version``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.kinds import builtin_kind_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.storage import MemoryStore

OBJECTS: dict[str, dict[str, Any]] = {
    "persistentvolumeclaims": {
        "kind": "PersistentVolumeClaim",
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    },
    "services": {"kind": "Service", "spec": {"ports": [{"port": 80}]}},
    "serviceaccounts": {"kind": "ServiceAccount"},
    "pods": {"kind": "Pod", "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}},
    "configmaps": {"kind": "ConfigMap", "data": {"a": "1"}},
    "resourcequotas": {"kind": "ResourceQuota", "spec": {"hard": {"pods": "10"}}},
    "limitranges": {"kind": "LimitRange", "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}},
    "storageclasses": {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "csi.example.com"},
}
BASES = {"storageclasses": "/apis/storage.k8s.io/v1/storageclasses"}


@pytest.fixture
async def api() -> AsyncIterator[TestClient[Any, Any]]:
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, Registry(core_resources(), builtin_kind_resources()))
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, objects.registry))) as client:
            yield client


@pytest.mark.parametrize(
    ("plural", "answer"),
    [
        ("persistentvolumeclaims", "PersistentVolumeClaim"),
        ("services", "Service"),
        ("serviceaccounts", "ServiceAccount"),
        ("pods", "Pod"),
        ("configmaps", "Status"),
        ("resourcequotas", "ResourceQuota"),
        ("storageclasses", "StorageClass"),
        ("limitranges", "Status"),
    ],
)
async def test_delete_answers_as_kube(api: TestClient[Any, Any], plural: str, answer: str) -> None:
    base = BASES.get(plural, f"/api/v1/namespaces/default/{plural}")
    body = {"apiVersion": "v1", "metadata": {"name": "x"}, **OBJECTS[plural]}
    created = await api.post(base, json=body)
    assert created.status == 201, await created.text()
    deleted = await api.delete(f"{base}/x")
    assert deleted.status == 200
    answered = await deleted.json()
    assert answered["kind"] == answer
    if answer == "Status":
        assert answered["status"] == "Success"
    else:
        assert answered["metadata"]["name"] == "x"
    assert (await api.get(f"{base}/x")).status == 404


async def test_version_with_a_trailing_slash(api: TestClient[Any, Any]) -> None:
    plain, slashed = await api.get("/version"), await api.get("/version/")
    assert slashed.status == 200
    assert await slashed.json() == await plain.json()
