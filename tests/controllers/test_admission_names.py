"""Workload names at the hub are Kueue's (``<kind>-<name>-<hash>``), and a hub that already holds
Workloads under the names it gave before (``<kind>-<name>``) keeps working: a workload's Workload
is found by its owner reference, never made twice, and goes with its workload."""

from __future__ import annotations

from typing import Any

from controlplane.admission import objects as adm
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster, settled
from .test_admission import (
    GPU,
    KUEUE,
    PLACEMENT,
    condition,
    create,
    get,
    kueue_obj,
    placed,
    queued,
    team_queue,
)

NOW = "2026-01-01T00:00:00Z"


async def seed_fleet(objects: ObjectStore) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    await create(objects, team_queue("team-a", 8))
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, propagation_policy("all", placement=PLACEMENT))


async def workloads(objects: ObjectStore) -> list[dict[str, Any]]:
    return (await objects.list(objects.registry.require(KUEUE, "Workload"), namespace="default")).items


async def legacy_admitted_workload(objects: ObjectStore, deployment: dict[str, Any]) -> dict[str, Any]:
    """The Workload an older hub made and admitted for ``deployment``: named ``deployment-<name>``."""
    meta = deployment["metadata"]
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
    pod = {"spec": {"containers": [{"name": "main", "resources": {"requests": {GPU: "1"}}}]}}
    wl = kueue_obj("Workload", f"deployment-{meta['name']}", "default", spec={
        "queueName": "team-a", "priority": 0, "podSets": [{"name": "main", "count": 4, "template": pod}],
    })
    wl["metadata"]["ownerReferences"] = [owner]
    wl = await create(objects, wl)
    wl["status"] = {
        "admission": {"clusterQueue": "team-a", "podSetAssignments": [
            {"name": "main", "flavors": {GPU: "onprem"}, "resourceUsage": {GPU: "4"}, "count": 4}]},
        "conditions": [
            {"type": t, "status": "True", "reason": t, "message": "admitted by an older hub", "lastTransitionTime": NOW}
            for t in ("QuotaReserved", "Admitted")
        ],
    }
    return await objects.update_status(objects.registry.require(KUEUE, "Workload"), wl)


async def test_a_new_workload_gets_kueues_name(objects: ObjectStore, manager: ControllerManager) -> None:
    await seed_fleet(objects)
    deployment = await create(objects, queued("a1", "team-a"))

    async def named() -> list[str] | None:
        names = [str(wl["metadata"]["name"]) for wl in await workloads(objects)]
        return names or None

    names = await eventually(named, what="a1's Workload")
    assert names == [adm.workload_name_of(deployment)]
    assert names[0].startswith("deployment-a1-") and len(names[0]) == len("deployment-a1-") + 5


async def test_a_workload_admitted_under_the_old_name_keeps_its_admission(objects: ObjectStore) -> None:
    await seed_fleet(objects)
    deployment = await create(objects, queued("a1", "team-a"))
    legacy = await legacy_admitted_workload(objects, deployment)
    async with ControllerManager(objects, settings=FAST) as manager:
        assert await eventually(lambda: placed(objects, "a1"), what="a1 placed on its old admission") == {"onprem": 4}
        await settled(manager)
        assert [wl["metadata"]["name"] for wl in await workloads(objects)] == ["deployment-a1"]
        kept = await get(objects, KUEUE, "Workload", "deployment-a1")
        assert kept is not None and kept["metadata"]["uid"] == legacy["metadata"]["uid"]
        assert condition(kept, "Admitted")["status"] == "True"
        cq = await get(objects, KUEUE, "ClusterQueue", "team-a", None)
        assert cq is not None and cq["status"]["admittedWorkloads"] == 1

        # It follows its workload as a new one would: the workload deleted, the Workload goes.
        await objects.delete(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="a1")

        async def gone() -> bool:
            return not await workloads(objects)

        await eventually(gone, what="the old-named Workload deleted with its Deployment")
