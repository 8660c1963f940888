"""Kueue's CRD defaults on the hub's Workloads: a Workload written without them reads back as
Kueue's API server stores it (``active: true``, pod sets named ``main`` of ``count`` 1, and at
v1beta1 ``priorityClassSource: ""``), at v1beta1 and v1beta2; one stored without them is served
with them; an apply of the same Workload again writes nothing; and the hub's admission reads the
defaulted Workload as it read the one without defaults."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.admission.objects import pending_of
from controlplane.admission.requeuing import is_active
from controlplane.apis import kueue_defaulting
from controlplane.apiserver import codec
from controlplane.apiserver.objects import ObjectStore

from .test_kueue_defaults import GROUP, applying_again_writes_nothing, ok, served  # noqa: F401 (fixtures)

Obj = dict[str, Any]
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}
Served = tuple[TestClient[Any, Any], ObjectStore]


def workload(version: str, name: str, **spec: Any) -> Obj:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"queueName": "team-a", "podSets": [{"template": TEMPLATE}], **spec}}


async def test_a_workload_reads_back_with_kueues_defaults(served: Served) -> None:  # noqa: F811
    client, _ = served
    created = await ok(await client.post(f"{GROUP}/v1beta1/namespaces/default/workloads", json=workload("v1beta1", "a")), 201)
    assert created["spec"] == {
        "queueName": "team-a", "podSets": [{"name": "main", "count": 1, "template": TEMPLATE}],
        "active": True, "priorityClassSource": "",
    }
    created = await ok(await client.post(f"{GROUP}/v1beta2/namespaces/default/workloads", json=workload("v1beta2", "b")), 201)
    assert created["spec"] == {
        "queueName": "team-a", "podSets": [{"name": "main", "count": 1, "template": TEMPLATE}], "active": True,
    }
    at_v1beta1 = await ok(await client.get(f"{GROUP}/v1beta1/namespaces/default/workloads/b"))
    assert at_v1beta1["spec"]["priorityClassSource"] == ""
    # What is set is kept.
    given = workload("v1beta1", "c", active=False, podSets=[{"name": "workers", "count": 3, "template": TEMPLATE}])
    created = await ok(await client.post(f"{GROUP}/v1beta1/namespaces/default/workloads", json=given), 201)
    assert (created["spec"]["active"], created["spec"]["podSets"][0]["name"], created["spec"]["podSets"][0]["count"]) == (
        False, "workers", 3,
    )


async def test_a_workload_stored_without_defaults_is_served_with_them(served: Served) -> None:  # noqa: F811
    client, objects = served
    rt = objects.registry.require("kueue.x-k8s.io/v1beta1", "Workload")
    old = workload("v1beta1", "old")
    old["metadata"].update(uid="u-1", creationTimestamp="2026-01-01T00:00:00Z", generation=1)
    await objects.store.create(rt.key(namespace="default", name="old"), codec.encode(old))
    read = await ok(await client.get(f"{GROUP}/v1beta1/namespaces/default/workloads/old"))
    assert (read["spec"]["active"], read["spec"]["priorityClassSource"], read["spec"]["podSets"][0]["count"]) == (True, "", 1)
    listed = await ok(await client.get(f"{GROUP}/v1beta2/namespaces/default/workloads"))
    assert [(item["spec"]["active"], "priorityClassSource" in item["spec"]) for item in listed["items"]] == [(True, False)]


async def test_applying_the_same_workload_again_writes_nothing(served: Served) -> None:  # noqa: F811
    client, _ = served
    for version in ("v1beta1", "v1beta2"):
        name = f"applied-{version}"
        path = f"{GROUP}/{version}/namespaces/default/workloads/{name}"
        await applying_again_writes_nothing(client, path, workload(version, name))


@pytest.mark.parametrize("spec", [{}, {"active": False}, {"priority": 5, "priorityClassName": "high"}])
def test_the_defaults_change_no_admission_reading(spec: Obj) -> None:
    written = workload("v1beta1", "w", **spec)
    stored = copy.deepcopy(written)
    kueue_defaulting.workload(v1beta1=True)(stored)
    assert stored != written
    assert is_active(stored) == is_active(written)
    assert pending_of(stored, "cq") == pending_of(written, "cq")
