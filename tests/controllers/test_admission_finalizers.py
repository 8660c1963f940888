"""Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer at the hub: ClusterQueues, ResourceFlavors
and AdmissionChecks get it (those written before the hub kept it too); a ClusterQueue being deleted
stays, ``Terminating`` and admitting nothing, while a Workload holds quota in it, and a
ResourceFlavor while a ClusterQueue names it. The state is in the objects: a restarted hub
finishes what the last one started."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster, queued_workload, settled
from .test_admission import KUEUE, PLACEMENT, condition, create, get, kueue_obj, team_queue
from .test_admission_checks import fleet_with_check, reserved_with_checks, workload
from .test_admission_preemption import admitted, job

pytestmark = pytest.mark.waiting

FINALIZER = "kueue.x-k8s.io/resource-in-use"


async def cluster_scoped(objects: ObjectStore, kind: str, name: str) -> dict[str, Any] | None:
    return await get(objects, KUEUE, kind, name, namespace=None)


async def finalizers(objects: ObjectStore, kind: str, name: str) -> list[str] | None:
    obj = await cluster_scoped(objects, kind, name)
    return None if obj is None else list(obj["metadata"].get("finalizers") or [])


async def test_kueues_cluster_objects_get_the_finalizer_also_when_written_before(objects: ObjectStore) -> None:
    # Written before the controllers run (a hub upgraded from one without the finalizer).
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={}))
    await create(objects, team_queue("team-a", 8))
    async with ControllerManager(objects, settings=FAST) as manager:
        await create(objects, kueue_obj("AdmissionCheck", "budget", spec={"controllerName": "example.com/budget"}))
        await settled(manager)
        for kind, name in (("ResourceFlavor", "onprem"), ("ClusterQueue", "team-a"), ("AdmissionCheck", "budget")):
            assert await finalizers(objects, kind, name) == [FINALIZER], kind
        # Not in use: a delete goes through at once.
        await objects.delete(objects.registry.require(KUEUE, "AdmissionCheck"), name="budget")
        await settled(manager)
        assert await cluster_scoped(objects, "AdmissionCheck", "budget") is None


async def test_a_cluster_queue_in_use_terminates_once_its_workloads_are_gone(objects: ObjectStore) -> None:
    queues = objects.registry.require(KUEUE, "ClusterQueue")
    async with ControllerManager(objects, settings=FAST) as manager:
        await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
        await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
        await create(objects, team_queue("team-a", 8))
        await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
        await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
        await create(objects, job("a1", "team-a"))
        assert await eventually(lambda: admitted(objects, "a1"), what="a1 admitted") == "team-a"

        await objects.delete(queues, name="team-a")
        await objects.delete(objects.registry.require(KUEUE, "ResourceFlavor"), name="onprem")
        await create(objects, job("a2", "team-a"))  # 4 of 8 GPUs are free, but the queue is going
        await settled(manager)
        cq = await cluster_scoped(objects, "ClusterQueue", "team-a")
        assert cq is not None and cq["metadata"]["deletionTimestamp"] and cq["metadata"]["finalizers"] == [FINALIZER]
        active = condition(cq, "Active")
        assert (active["status"], active["reason"], active["message"]) == (
            "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating")
        assert await admitted(objects, "a1") == "team-a"  # what it admitted keeps running
        waiting = condition(await queued_workload(objects, "Job", "a2"), "QuotaReserved")
        assert (waiting["status"], waiting["reason"]) == ("False", "Inadmissible")
        assert await finalizers(objects, "ResourceFlavor", "onprem") == [FINALIZER]  # team-a still names it
        lq = condition(await get(objects, KUEUE, "LocalQueue", "team-a"), "Active")
        assert (lq["status"], lq["reason"]) == ("False", "ClusterQueueIsInactive")

    # A restarted hub reads where things stand from the objects.
    async with ControllerManager(objects, settings=FAST) as manager:
        await settled(manager)
        assert await finalizers(objects, "ClusterQueue", "team-a") == [FINALIZER]
        assert await admitted(objects, "a2") is None
        jobs = objects.registry.require("batch/v1", "Job")
        await objects.delete(jobs, namespace="default", name="a1")  # its last quota-holding workload goes
        await eventually(lambda: _absent(objects, "ClusterQueue", "team-a"), what="team-a deleted once nothing holds quota in it")
        await eventually(lambda: _absent(objects, "ResourceFlavor", "onprem"), what="the flavor deleted once no queue names it")
        await settled(manager)
        assert await admitted(objects, "a2") is None  # nothing admitted it meanwhile


async def test_a_reservation_waiting_for_checks_in_a_queue_being_deleted_is_given_up(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await fleet_with_check(objects, manager)
    await create(objects, job("a1", "team-a"))
    await reserved_with_checks(objects)
    await objects.delete(objects.registry.require(KUEUE, "AdmissionCheck"), name="budget")
    await objects.delete(objects.registry.require(KUEUE, "ClusterQueue"), name="team-a")

    # As Kueue: the reservation goes, so does the queue, then the check no queue names any more.
    await eventually(lambda: _absent(objects, "ClusterQueue", "team-a"), what="team-a deleted")
    await eventually(lambda: _absent(objects, "AdmissionCheck", "budget"), what="the check deleted")
    wl = await workload(objects)
    assert "admission" not in wl["status"]
    reserved = condition(wl, "QuotaReserved")
    assert (reserved["status"], reserved["reason"]) == ("False", "Inadmissible")
    assert condition(wl, "Admitted")["status"] == "False"


async def _absent(objects: ObjectStore, kind: str, name: str) -> bool | None:
    return True if await cluster_scoped(objects, kind, name) is None else None
