"""A simulated member enforces a v1 ResourceQuota as kube does: its API refuses a pod past the
quota in kube's words (the ReplicaSet controller reports it as a FailedCreate and the pod is never
made), a pod without the requests a compute quota limits is refused, and the quota's
``status.used`` counts the namespace's pods (requests.*, limits.*, pods, count/*), giving back
what a deleted pod used."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.objectclient import errors
from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

FLEET = {"clusters": [{"name": "q", "nodeGroups": [{"name": "cpu", "count": 2, "cpu": 32, "memoryGiB": 128}],
                       "simulation": {"startupDelaySeconds": 1}}]}
HARD = {"cpu": "20", "limits.memory": "8Gi", "pods": "10", "count/pods": "10"}


@pytest.fixture
async def member(tmp_path: Path) -> AsyncIterator[SimServer]:
    profile = parse_fleet(FLEET).clusters[0]
    config = SimServerConfig(profile=profile, state_dir=tmp_path, time_scale=20.0, seed=1, snapshot_interval=None)
    async with SimServer(config) as server:
        yield server


async def _until(check: Any, *, what: str) -> Any:
    for _ in range(300):
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _pod(name: str, cpu: str | None) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}, "limits": {"memory": "1Gi"}} if cpu else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "m", "image": "app:1", "resources": resources}]}}


async def test_a_member_refuses_pods_past_its_quota_and_counts_what_is_used(member: SimServer) -> None:
    objects = member.objects
    quota_rt, pod_rt = objects.registry.require("v1", "ResourceQuota"), objects.registry.require("v1", "Pod")
    await objects.create(quota_rt, {"apiVersion": "v1", "kind": "ResourceQuota",
                                    "metadata": {"name": "share", "namespace": "default"}, "spec": {"hard": HARD}})

    async def used() -> dict[str, str] | None:
        stored = await objects.get(quota_rt, namespace="default", name="share")
        return (stored.get("status") or {}).get("used")

    assert await _until(used, what="the quota counted") == {
        "cpu": "0", "limits.memory": "0", "pods": "0", "count/pods": "0",
    }
    await objects.create(pod_rt, _pod("a", "8"))
    await objects.create(pod_rt, _pod("b", "8"))
    with pytest.raises(errors.Forbidden) as refused:
        await objects.create(pod_rt, _pod("c", "8"))
    assert str(refused.value) == (
        'pods "c" is forbidden: exceeded quota: share, requested: cpu=8, used: cpu=16, limited: cpu=20'
    )
    with pytest.raises(errors.Forbidden) as unbounded:
        await objects.create(pod_rt, _pod("d", None))
    assert str(unbounded.value) == 'pods "d" is forbidden: failed quota: share: must specify cpu for: m; limits.memory for: m'

    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "m", "image": "web:1",
                                     "resources": {"requests": {"cpu": "3"}, "limits": {"memory": "1Gi"}}}]}}},
    }
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment)
    rs_rt = objects.registry.require("apps/v1", "ReplicaSet")

    async def failure() -> str | None:
        for rs in (await objects.list(rs_rt, namespace="default")).items:
            for cond in (rs.get("status") or {}).get("conditions") or ():
                if cond.get("type") == "ReplicaFailure":
                    return str(cond.get("message"))
        return None

    assert "exceeded quota: share, requested: cpu=3, used: cpu=19, limited: cpu=20" in await _until(
        failure, what="the ReplicaSet's ReplicaFailure"
    )
    pods = {p["metadata"]["name"] for p in (await objects.list(pod_rt, namespace="default")).items}
    assert len(pods) == 3 and {"a", "b"} <= pods

    await objects.delete(pod_rt, namespace="default", name="a")

    async def given_back() -> bool:
        return (await used() or {}).get("cpu") in ("14", "17")  # the deleted pod's 8, then the replica's 3

    await _until(given_back, what="the deleted pod's cpu given back")
