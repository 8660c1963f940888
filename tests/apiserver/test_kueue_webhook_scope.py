"""Where Kueue's webhook checks apply (``ResourceType.validate_once_valid``): a ClusterQueue's or a
ResourceFlavor's webhook is not called for its status writes (Kueue registers only the Workload's
for ``workloads/status``), and an object stored before the checks, which they refuse, stays
changeable and deletable: the hub's own status writes and a finalizer's removal go through."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.hub import hub_registry
from tests.apiserver.test_kueue_crd_rules import GROUP, valid, webhook_causes

Client = TestClient[Any, Any]
MERGE = {"Content-Type": "application/merge-patch+json"}
#: A lending limit above its quota: refused by Kueue's ClusterQueue webhook.
LENDING_ABOVE = {
    "cohort": "c",
    "resourceGroups": [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1", "lendingLimit": "2"}]}],
        }
    ],
}


@pytest.fixture
def api_registry() -> Registry:
    return hub_registry()


@contextmanager
def without_webhook_checks(rt: ResourceType) -> Iterator[None]:
    """``rt`` as it was before its webhook's checks were served (an object stored then)."""
    checks = rt.validate_once_valid
    object.__setattr__(rt, "validate_once_valid", None)
    try:
        yield
    finally:
        object.__setattr__(rt, "validate_once_valid", checks)


async def test_a_cluster_queues_status_write_is_not_its_webhooks_and_one_stored_before_can_go(
    api: Client, objects: ObjectStore
) -> None:
    rt = objects.registry.require(f"{GROUP}/v1beta1", "ClusterQueue")
    fresh = valid("ClusterQueue", "v1beta1", name="fresh", spec=LENDING_ABOVE)
    answer = await api.post(f"/apis/{GROUP}/v1beta1/clusterqueues", json=fresh)
    assert webhook_causes(await answer.json(), "vclusterqueue.kb.io") == [
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "2": '
        "must be less than or equal to the nominalQuota"
    ]
    with without_webhook_checks(rt):
        await objects.create(rt, valid("ClusterQueue", "v1beta1", name="old", spec=LENDING_ABOVE))
    path = f"/apis/{GROUP}/v1beta1/clusterqueues/old"
    status = await api.patch(f"{path}/status", json={"status": {"pendingWorkloads": 1}}, headers=MERGE)
    assert status.status == 200, await status.text()
    labelled = await api.patch(path, json={"metadata": {"labels": {"team": "a"}}}, headers=MERGE)
    assert labelled.status == 200, await labelled.text()
    deleted = await api.delete(path)
    assert deleted.status == 200, await deleted.text()


async def test_a_workload_stored_before_its_webhook_takes_status_writes(api: Client, objects: ObjectStore) -> None:
    rt = objects.registry.require(f"{GROUP}/v1beta1", "Workload")
    workload = valid("Workload", "v1beta1", name="old")
    containers = workload["spec"]["podSets"][0]["template"]["spec"]["containers"]
    containers[0]["resources"] = {"requests": {"pods": "1"}}  # Kueue's webhook keeps `pods` for itself
    fresh = {**workload, "metadata": {**workload["metadata"], "name": "fresh"}}
    refused = await api.post(f"/apis/{GROUP}/v1beta1/namespaces/default/workloads", json=fresh)
    assert len(webhook_causes(await refused.json(), "vworkload.kb.io")) == 1
    with without_webhook_checks(rt):
        await objects.create(rt, workload)
    path = f"/apis/{GROUP}/v1beta1/namespaces/default/workloads/old"
    condition = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "waits",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    written = await api.patch(f"{path}/status", json={"status": {"conditions": [condition]}}, headers=MERGE)
    assert written.status == 200, await written.text()
