"""Finished work stays finished: the hub never moves, re-places, fails over or re-runs a
workload its interpreter says Succeeded or Failed, and its status never flips back.

The case behind it: an MPIJob's Launcher succeeded on-prem; the member then reported a worker
Pending ("pod group has 1 of 3 pods") in the same Work status; the hub took that for
unschedulable replicas, moved the whole job to the cloud and ran it again, and its status went
Succeeded -> Running. Each test fails without the guard in the scheduler or the status
controller.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.scheduler.core.rescheduling import replicas_moved

from .conftest import FAST
from .fleet import A100, eventually, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"
SUCCEEDED = {
    "conditions": [
        {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
        {"type": "Running", "status": "False", "reason": "MPIJobSucceeded"},
        {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded", "message": "done"},
    ],
    "replicaStatuses": {"Launcher": {"succeeded": 1}, "Worker": {}},
}
RUNNING_AGAIN = {
    "conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}],
    "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}},
}


def mpijob(name: str = "allreduce") -> dict[str, Any]:
    def role(replicas: int, gpus: int) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "registry.local/mpi:1", "resources": {"requests": {"cpu": "1"}}}
        if gpus:
            container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
        return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"mpiReplicaSpecs": {"Launcher": role(1, 0), "Worker": role(2, 4)}},
    }


async def binding_of(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    try:
        return await objects.get(objects.registry.require(WORK_API, "ResourceBinding"), namespace="default", name=f"{name}-mpijob")
    except errors.NotFound:
        return None


async def placed(objects: ObjectStore, name: str) -> dict[str, int] | None:
    binding = await binding_of(objects, name)
    clusters = ((binding or {}).get("spec") or {}).get("clusters")
    return {t["name"]: t["replicas"] for t in clusters} if clusters else None


async def work_in(objects: ObjectStore, cluster: str, name: str) -> dict[str, Any] | None:
    try:
        return await objects.get(objects.registry.require(WORK_API, "Work"), namespace=f"gpufed-es-{cluster}", name=f"default-{name}-mpijob")
    except errors.NotFound:
        return None


async def report(objects: ObjectStore, work: dict[str, Any], status: dict[str, Any], *, unschedulable: int = 0) -> None:
    """The agent's Work status: applied, the member MPIJob's status, pods its scheduler cannot place."""
    entry: dict[str, Any] = {
        "identifier": {"group": "kubeflow.org", "version": "v1", "kind": "MPIJob", "namespace": "default",
                       "name": work["spec"]["workload"]["manifests"][0]["metadata"]["name"], "ordinal": 0},
        "status": status,
        "health": "Healthy",
    }
    if unschedulable:
        entry["unschedulable"] = {"pods": unschedulable, "message": "pod group has 1 of 3 pods"}
    work_status = {
        "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
                        "lastTransitionTime": "2024-05-01T10:00:00Z",
                        "observedGeneration": work["metadata"]["generation"]}],
        "manifestStatuses": [entry],
    }
    await objects.update_status(objects.registry.require(WORK_API, "Work"), {**work, "status": work_status})


async def hub_status(objects: ObjectStore, name: str) -> dict[str, Any]:
    job = await objects.get(objects.registry.require("kubeflow.org/v1", "MPIJob"), namespace="default", name=name)
    return dict(job.get("status") or {})


def succeeded(status: dict[str, Any]) -> bool:
    return any(c.get("type") == "Succeeded" and c.get("status") == "True" for c in status.get("conditions") or ())


@pytest.mark.parametrize("finished_first", [True, False], ids=["succeeded-then-pending", "same-report"])
async def test_a_finished_gang_stays_where_it_ran(
    objects: ObjectStore, manager: ControllerManager, finished_first: bool
) -> None:
    await put_cluster(objects, "onprem", node_shape(1, gpus=8))
    await put_cluster(objects, "cloud", node_shape(1, gpus=8, product="NVIDIA-H100-80GB-HBM3"), provider="aws",
                      pricing={"NVIDIA-H100-80GB-HBM3": 4.1, A100: 4.1})
    await settled(manager)
    rt_policy = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(rt_policy, propagation_policy("tiered", kind="MPIJob", api_version="kubeflow.org/v1"))
    await objects.create(objects.registry.require("kubeflow.org/v1", "MPIJob"), mpijob())
    assert await eventually(lambda: placed(objects, "allreduce"), what="the MPIJob placed") == {"onprem": 3}
    work = await eventually(lambda: work_in(objects, "onprem", "allreduce"), what="its Work")

    if finished_first:
        await report(objects, work, SUCCEEDED)
        await eventually(lambda: _succeeded_on_hub(objects), what="the hub MPIJob Succeeded")
        work = await eventually(lambda: work_in(objects, "onprem", "allreduce"), what="its Work")
    # The member recreated a worker: Pending, unplaceable; its copy says Running again.
    await report(objects, work, SUCCEEDED if not finished_first else RUNNING_AGAIN, unschedulable=1)
    await settled(manager)
    # Twice the unschedulable grace period, and more: nothing moves.
    await asyncio.sleep(FAST.unschedulable_grace_seconds * 3)
    await settled(manager)
    assert await placed(objects, "allreduce") == {"onprem": 3}
    assert await work_in(objects, "cloud", "allreduce") is None
    if finished_first:
        assert succeeded(await hub_status(objects, "allreduce")), await hub_status(objects, "allreduce")


async def _succeeded_on_hub(objects: ObjectStore) -> bool:
    return succeeded(await hub_status(objects, "allreduce"))


async def test_a_running_gang_the_member_cannot_place_still_moves(objects: ObjectStore, manager: ControllerManager) -> None:
    """The guard is about finished work only: the same report about a running job moves it."""
    await put_cluster(objects, "onprem", node_shape(1, gpus=8))
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.1})
    await settled(manager)
    rt_policy = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(rt_policy, propagation_policy("tiered", kind="MPIJob", api_version="kubeflow.org/v1"))
    await objects.create(objects.registry.require("kubeflow.org/v1", "MPIJob"), mpijob())
    assert await eventually(lambda: placed(objects, "allreduce"), what="the MPIJob placed") == {"onprem": 3}
    work = await eventually(lambda: work_in(objects, "onprem", "allreduce"), what="its Work")
    await report(objects, work, RUNNING_AGAIN, unschedulable=1)

    async def moved() -> bool:
        return await placed(objects, "allreduce") == {"cloud": 3}

    await eventually(moved, what="the running MPIJob moved to the cloud")


@pytest.mark.parametrize(
    ("previous", "decided", "moved"),
    [
        ({"onprem": 3}, {"cloud": 3}, {"onprem": 3}),  # a gang moved whole
        ({"onprem": 4, "cloud": 2}, {"onprem": 2, "l4": 4}, {"onprem": 2, "cloud": 2}),
        ({"onprem": 4}, {"onprem": 2}, {}),  # a scale-down moves nothing
        ({"onprem": 4}, {"onprem": 4, "cloud": 2}, {}),  # a scale-up moves nothing
        ({"onprem": 4, "cloud": 4}, {"onprem": 1, "l4": 2}, {"cloud": 2}),  # partly a scale-down: the largest loss
        ({}, {"onprem": 3}, {}),  # first placement
    ],
)
def test_replicas_moved(previous: dict[str, int], decided: dict[str, int], moved: dict[str, int]) -> None:
    """What a decision moved, for the ReplicasMoved Event every move gets."""
    assert replicas_moved(previous, decided) == moved
