"""The hub never promises a cluster more than its reported free capacity minus reservations.

Three ways that went wrong under load (1,000 workloads on 10 members): a capacity report
taken after a Work was applied but before the member bound its pods released the
reservation, so the same GPUs were promised again; decisions made while another worker's
decision was still being written did not see its reservation; and replicas a member could
not place, with no room elsewhere at the grace period's end, were never looked at again.
Each test here fails without its fix.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.timestamps import format_time
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.hub import hub_registry
from controlplane.storage import EtcdStore

from .conftest import FAST
from .fleet import (
    A100,
    bound_pod,
    deployment,
    eventually,
    node_shape,
    propagation_policy,
    put_cluster,
    settled,
)

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"


def later(seconds: float) -> str:
    """A report time ``seconds`` after now (the hub stamps its decisions with the wall clock)."""
    return format_time(datetime.now(UTC) + timedelta(seconds=seconds))


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


async def placed(objects: ObjectStore, workload: str) -> dict[str, int] | None:
    rt = objects.registry.require(WORK_API, "ResourceBinding")
    try:
        binding = await objects.get(rt, namespace="default", name=f"{workload}-deployment")
    except errors.NotFound:
        return None
    clusters = (binding.get("spec") or {}).get("clusters")
    return {t["name"]: t["replicas"] for t in clusters} if clusters else None


async def work_in(objects: ObjectStore, cluster: str, workload: str) -> dict[str, Any] | None:
    rt = objects.registry.require(WORK_API, "Work")
    try:
        return await objects.get(rt, namespace=f"gpufed-es-{cluster}", name=f"default-{workload}-deployment")
    except errors.NotFound:
        return None


async def report_applied(
    objects: ObjectStore, work: dict[str, Any], *, workload: str, unschedulable: int = 0, at: str | None = None
) -> None:
    """The agent's Work status right after the apply (``at``, default now): Applied, no pod ready yet."""
    replicas = work["spec"]["workload"]["manifests"][0]["spec"]["replicas"]
    entry: dict[str, Any] = {
        "identifier": {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "default",
                       "name": workload, "ordinal": 0},
        "status": {"replicas": replicas},
        "health": "Unhealthy",
    }
    if unschedulable:
        entry["unschedulable"] = {"pods": unschedulable, "message": "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."}
    status = {
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
             "lastTransitionTime": at or later(0), "observedGeneration": work["metadata"]["generation"]},
        ],
        "manifestStatuses": [entry],
    }
    await objects.update_status(objects.registry.require(WORK_API, "Work"), {**work, "status": status})


async def test_a_report_without_the_applied_pods_keeps_their_gpus_promised(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "onprem", node_shape(1, gpus=4), pods=[])
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.1}, pods=[])
    await settled(manager)
    await create(objects, propagation_policy("tiered"))
    await create(objects, deployment("first", replicas=1, gpus=4))
    assert await eventually(lambda: placed(objects, "first"), what="first placed") == {"onprem": 1}

    # The member applied the Work, and its next report came before its scheduler bound the pod:
    # the 4 GPUs still look free, but they are taken.
    work = await eventually(lambda: work_in(objects, "onprem", "first"), what="first's Work")
    await report_applied(objects, work, workload="first")
    await settled(manager)
    await put_cluster(objects, "onprem", node_shape(1, gpus=4), report_time=later(30), pods=[])
    await settled(manager)
    await create(objects, deployment("second", replicas=1, gpus=4))
    assert await eventually(lambda: placed(objects, "second"), what="second placed") == {"cloud": 1}

    # Once a report shows the pod bound, the report itself accounts for it and the promise goes:
    # when the pod is gone again, the next workload gets the free GPUs.
    await put_cluster(objects, "onprem", node_shape(1, gpus=0), report_time=later(60), pods=[bound_pod("first", gpus=4)])
    await settled(manager)
    await put_cluster(objects, "onprem", node_shape(1, gpus=4), report_time=later(90), pods=[])
    await settled(manager)
    await create(objects, deployment("third", replicas=1, gpus=4))
    assert await eventually(lambda: placed(objects, "third"), what="third placed") == {"onprem": 1}


@pytest.fixture
async def etcd_objects(etcd_endpoint: str) -> AsyncIterator[ObjectStore]:
    """A hub store on real etcd: every write really waits, so decisions interleave as in a hub."""
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/{uuid.uuid4().hex}") as store:
        objs = ObjectStore(store, hub_registry())
        await objs.bootstrap()
        yield objs


@pytest.mark.timeout(120)
async def test_decisions_written_at_the_same_time_do_not_share_gpus(etcd_objects: ObjectStore) -> None:
    objects = etcd_objects
    await put_cluster(objects, "onprem", node_shape(2, gpus=1))
    await put_cluster(objects, "cloud", node_shape(8, gpus=8), provider="aws", pricing={A100: 4.1})
    await create(objects, propagation_policy("tiered"))
    names = [f"w{index:02d}" for index in range(24)]
    async with ControllerManager(objects, settings=replace(FAST, workers=4)) as manager:
        await settled(manager)
        await asyncio.gather(*(create(objects, deployment(name, replicas=1)) for name in names))

        async def all_placed() -> list[dict[str, int]] | None:
            got = [await placed(objects, name) for name in names]
            return [p for p in got if p] if all(got) else None

        decisions = await eventually(all_placed, what="every workload placed")
    on_prem = sum(p.get("onprem", 0) for p in decisions)
    assert on_prem == 2, decisions  # exactly its 2 GPUs: none promised twice, none left unused
    assert sum(p.get("cloud", 0) for p in decisions) == len(names) - 2


async def test_unschedulable_replicas_wait_then_move_when_room_appears(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "onprem", node_shape(6, gpus=1))
    await put_cluster(objects, "cloud", node_shape(1, gpus=4), provider="aws", pricing={A100: 4.1})
    await settled(manager)
    await create(objects, propagation_policy("tiered"))
    await create(objects, deployment("train", replicas=10))
    assert await eventually(lambda: placed(objects, "train"), what="train placed") == {"onprem": 6, "cloud": 4}

    # The on-prem member cannot place 2 pods; after the grace period nothing else has room.
    work = await eventually(lambda: work_in(objects, "onprem", "train"), what="the on-prem Work")
    await report_applied(objects, work, workload="train", unschedulable=2)

    async def waiting() -> list[str] | None:
        rt = objects.registry.require(WORK_API, "ResourceBinding")
        binding = await objects.get(rt, namespace="default", name="train-deployment")
        entry: dict[str, Any] = next(
            (e for e in (binding.get("status") or {}).get("explanation") or () if e["cluster"] == "onprem"), {}
        )
        reasons = [r for r in entry.get("reasons") or () if "unschedulable" in r]
        return reasons or None

    reasons = await eventually(waiting, what="the explanation to say the replicas wait")
    assert "2 replica(s) unschedulable" in reasons[0] and "no other cluster can take them" in reasons[0]
    assert await placed(objects, "train") == {"onprem": 6, "cloud": 4}

    # The cloud's agent reports a bigger pool: the 2 replicas move there, and the binding says why.
    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws", pricing={A100: 4.1}, report_time=later(30))

    async def moved() -> dict[str, int] | None:
        got = await placed(objects, "train")
        return got if got == {"onprem": 4, "cloud": 6} else None

    await eventually(moved, what="2 replicas moved to the cloud")
    reasons = await eventually(waiting, what="the explanation of the move")
    assert any("moved elsewhere" in r for r in reasons), reasons
    assert not any("no other cluster can take them" in r for r in reasons), reasons
