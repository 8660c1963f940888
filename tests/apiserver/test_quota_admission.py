"""The hub's ResourceQuota admission over a real store (in memory and etcd): writes past a quota
are refused with kube's 403, writes that fit are charged to ``status.used`` by a compare-and-swap,
so two hub replicas racing for the last slot never both take it; dry runs charge nothing."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.quotaadmission import QuotaAdmission
from controlplane.hub import hub_registry
from controlplane.storage.interface import Store

NS = "team"


async def _replica(store: Store) -> ObjectStore:
    objects = ObjectStore(store, hub_registry())
    objects.admit_writes(QuotaAdmission(objects))
    return objects


@pytest.fixture
async def replicas(store: Store) -> AsyncIterator[tuple[ObjectStore, ObjectStore]]:
    """Two hub replicas over one store, each with its own admission (and its own locks)."""
    first, second = await _replica(store), await _replica(store)
    await first.bootstrap()
    await first.create(first.registry.require("v1", "Namespace"), {"metadata": {"name": NS}})
    yield first, second


async def _quota(objects: ObjectStore, hard: dict[str, str], used: dict[str, str] | None) -> dict[str, Any]:
    """A quota whose status the resourcequota controller has written (``used`` None: not counted)."""
    rt = objects.registry.require("v1", "ResourceQuota")
    created = await objects.create(rt, {"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": hard}})
    status: dict[str, Any] = {"hard": hard} if used is None else {"hard": hard, "used": used}
    return await objects.update_status(rt, {**created, "status": status})


async def _used(objects: ObjectStore) -> dict[str, str]:
    q = await objects.get(objects.registry.require("v1", "ResourceQuota"), namespace=NS, name="q")
    return dict(q["status"]["used"])


def _configmap(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "data": {"k": "v"}}


async def test_a_create_past_the_quota_is_kubes_403(replicas: tuple[ObjectStore, ObjectStore]) -> None:
    objects, _ = replicas
    configmaps = objects.registry.require("v1", "ConfigMap")
    await _quota(objects, {"count/configmaps": "2"}, {"count/configmaps": "0"})
    for name in ("a", "b"):
        await objects.create(configmaps, _configmap(name))
    assert await _used(objects) == {"count/configmaps": "2"}
    with pytest.raises(errors.Forbidden) as refused:
        await objects.create(configmaps, _configmap("c"))
    status = refused.value.to_status()
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    assert status["message"] == (
        'configmaps "c" is forbidden: exceeded quota: q, requested: count/configmaps=1, '
        "used: count/configmaps=2, limited: count/configmaps=2"
    )
    assert status["details"] == {"name": "c", "kind": "configmaps"}
    assert len((await objects.list(configmaps, namespace=NS)).items) == 2
    assert await _used(objects) == {"count/configmaps": "2"}


async def test_a_quota_not_yet_counted_refuses_with_status_unknown(replicas: tuple[ObjectStore, ObjectStore]) -> None:
    objects, _ = replicas
    await _quota(objects, {"count/deployments.apps": "5"}, None)
    deployment = {
        "metadata": {"generateName": "web-", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": {
            "metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "w", "image": "nginx"}]},
        }},
    }
    # Validating admission sees the generated name, as kube's store generates it before.
    with pytest.raises(errors.Forbidden) as refused:
        await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment)
    assert re.fullmatch(
        r'deployments\.apps "web-\w{5}" is forbidden: status unknown for quota: q, resources: count/deployments\.apps',
        refused.value.message,
    ), refused.value.message


async def test_a_dry_run_is_checked_and_charges_nothing(replicas: tuple[ObjectStore, ObjectStore]) -> None:
    objects, _ = replicas
    configmaps = objects.registry.require("v1", "ConfigMap")
    await _quota(objects, {"configmaps": "1"}, {"configmaps": "0"})
    await objects.create(configmaps, _configmap("a"), dry_run=True)
    assert await _used(objects) == {"configmaps": "0"}
    await objects.create(configmaps, _configmap("a"))
    with pytest.raises(errors.Forbidden, match="exceeded quota: q, requested: configmaps=1"):
        await objects.create(configmaps, _configmap("b"), dry_run=True)
    assert await _used(objects) == {"configmaps": "1"}


async def test_racing_creates_take_the_last_slot_once(replicas: tuple[ObjectStore, ObjectStore]) -> None:
    first, second = replicas
    configmaps = first.registry.require("v1", "ConfigMap")
    await _quota(first, {"count/configmaps": "3"}, {"count/configmaps": "2"})
    results = await asyncio.gather(
        *(replica.create(configmaps, _configmap(f"c{i}")) for i in range(8) for replica in (first, second) if i % 2 == (replica is second)),
        return_exceptions=True,
    )
    created = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if isinstance(r, errors.ApiError)]
    assert len(created) == 1 and len(refused) == 7, results
    # Refused in kube's words: the quota is full, or (after three lost races) the quota changed.
    assert all(isinstance(r, errors.Forbidden | errors.Conflict) for r in refused)
    assert len((await first.list(configmaps, namespace=NS)).items) == 1
    assert await _used(second) == {"count/configmaps": "3"}


async def test_a_service_becoming_a_load_balancer_is_charged(replicas: tuple[ObjectStore, ObjectStore]) -> None:
    objects, _ = replicas
    services = objects.registry.require("v1", "Service")
    await _quota(
        objects, {"services": "2", "services.loadbalancers": "0"}, {"services": "0", "services.loadbalancers": "0"}
    )
    service = {"metadata": {"name": "web", "namespace": NS}, "spec": {"ports": [{"port": 80}], "selector": {"app": "w"}}}
    created = await objects.create(services, service)
    assert await _used(objects) == {"services": "1", "services.loadbalancers": "0"}
    created["spec"]["type"] = "LoadBalancer"
    with pytest.raises(errors.Forbidden) as refused:
        await objects.update(services, created)
    assert refused.value.message == (
        'services "web" is forbidden: exceeded quota: q, requested: services.loadbalancers=1, '
        "used: services.loadbalancers=0, limited: services.loadbalancers=0"
    )
    stored = await objects.get(services, namespace=NS, name="web")
    assert stored["spec"]["type"] == "ClusterIP"


async def test_pods_asking_past_any_real_quantity_are_charged_and_refused(
    replicas: tuple[ObjectStore, ObjectStore],
) -> None:
    """A request of ``1e999999999`` CPUs (past Python's decimal range) was left out of the usage,
    so the pod got past a quota of 10 CPUs; ``1e100000`` cost the hub's event loop an integer of a
    hundred thousand digits. Both count as far more than 10 CPUs, and are refused."""
    objects, _ = replicas
    pods = objects.registry.require("v1", "Pod")
    await _quota(objects, {"requests.cpu": "10"}, {"requests.cpu": "0"})
    for name, huge in (("beyond-decimals", "1e999999999"), ("hundred-thousand-digits", "1e100000")):
        container = {"name": "c", "image": "i", "resources": {"requests": {"cpu": huge}}}
        with pytest.raises(errors.Forbidden) as refused:
            await objects.create(pods, {"metadata": {"name": name, "namespace": NS}, "spec": {"containers": [container]}})
        assert "exceeded quota: q, requested: requests.cpu=" in refused.value.to_status()["message"]
    assert (await objects.list(pods, namespace=NS)).items == []
    assert await _used(objects) == {"requests.cpu": "0"}
