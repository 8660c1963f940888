"""Kueue's partial admission at the hub: a Job with ``kueue.x-k8s.io/job-min-parallelism`` that
does not fit at its parallelism is admitted with the most pods that fit, runs (and is propagated)
with that parallelism, holds that much quota, and gets its own parallelism back when evicted; a
Job without the annotation waits."""

from __future__ import annotations

import asyncio
from typing import Any, Unpack

import pytest

from controlplane.apiserver.objects import ObjectStore, WriteArgs
from controlplane.controllers.admissiongate import hold_queued_workload
from controlplane.controllers.manager import ControllerManager
from controlplane.hub import hub_registry
from controlplane.objectclient import ResourceType
from controlplane.storage import MemoryStore

from .conftest import FAST
from .fleet import (
    eventually,
    node_shape,
    propagation_policy,
    put_cluster,
    queued_workload,
    queued_workload_name,
    settled,
)
from .test_admission import GPU, KUEUE, PLACEMENT, condition, create, get, kueue_obj
from .test_admission_preemption import WORK, admitted, job
from .test_admission_stopping import stop

pytestmark = pytest.mark.waiting


def queue(name: str, gpus: int) -> dict[str, Any]:
    return kueue_obj("ClusterQueue", name, spec={
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "onprem", "resources": [{"name": GPU, "nominalQuota": gpus}]}]}],
    })


async def two_queues_of_3_gpus(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    for name in ("partial", "strict"):
        await create(objects, queue(name, 3))
        await create(objects, kueue_obj("LocalQueue", name, "default", spec={"clusterQueue": name}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)


async def running_with(objects: ObjectStore, name: str, parallelism: int) -> dict[str, Any] | None:
    """The Job unsuspended at ``parallelism``, and propagated with that many pods."""
    obj = await get(objects, "batch/v1", "Job", name)
    binding = await get(objects, WORK, "ResourceBinding", f"{name}-job")
    if obj is None or obj["spec"].get("suspend") is not False or obj["spec"].get("parallelism") != parallelism:
        return None
    clusters = ((binding or {}).get("spec") or {}).get("clusters") or []
    return obj if sum(c["replicas"] for c in clusters) == parallelism else None


async def test_a_job_with_min_parallelism_runs_with_the_pods_that_fit(objects: ObjectStore, manager: ControllerManager) -> None:
    await two_queues_of_3_gpus(objects, manager)
    wide = job("wide", "partial")
    wide["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "2"}
    await create(objects, wide)
    await create(objects, job("whole", "strict"))

    obj = await eventually(lambda: running_with(objects, "wide", 3), what="wide running 3 of its 4 pods")
    assert obj["spec"]["completions"] == 4  # kept: only job-completions-equal-parallelism moves it
    wl = await queued_workload(objects, "Job", "wide")
    assert wl is not None
    assert [(p["count"], p["minCount"]) for p in wl["spec"]["podSets"]] == [(4, 2)]
    assignment = wl["status"]["admission"]["podSetAssignments"][0]
    assert (assignment["count"], assignment["resourceUsage"]) == (3, {GPU: "3"})
    assert condition(wl, "Admitted")["message"] == "The workload is admitted"

    async def usage(name: str) -> str | None:
        cq = await get(objects, KUEUE, "ClusterQueue", name, None)
        reserved = ((cq or {}).get("status") or {}).get("flavorsReservation") or []
        return reserved[0]["resources"][0]["total"] if reserved else None

    assert await eventually(lambda: usage("partial"), what="partial's usage") == "3"

    # Without the annotation the same Job waits for all its 4 GPUs.
    async def whole_waits() -> dict[str, Any] | None:
        reserved = condition(await queued_workload(objects, "Job", "whole"), "QuotaReserved")
        return reserved if reserved.get("status") == "False" else None

    reserved = await eventually(whole_waits, what="whole waiting")
    assert "request > maximum capacity (4 > 3)" in reserved["message"]
    whole = await get(objects, "batch/v1", "Job", "whole")
    assert whole is not None and (whole["spec"]["suspend"], whole["spec"]["parallelism"]) == (True, 4)

    # Evicted (its ClusterQueue drained), the Job is suspended with its own parallelism back, and
    # its Workload still asks for 4; running again, it is admitted with 3 again.
    await stop(objects, "ClusterQueue", "partial", "HoldAndDrain")

    async def suspended_whole() -> dict[str, Any] | None:
        obj = await get(objects, "batch/v1", "Job", "wide")
        wl = await queued_workload(objects, "Job", "wide")
        evicted = condition(wl, "Evicted").get("status") == "True"
        return obj if obj and evicted and obj["spec"].get("suspend") is True and obj["spec"]["parallelism"] == 4 else None

    await eventually(suspended_whole, what="wide suspended at parallelism 4")
    await settled(manager)
    wl = await queued_workload(objects, "Job", "wide")
    assert wl is not None and [(p["count"], p["minCount"]) for p in wl["spec"]["podSets"]] == [(4, 2)]
    await stop(objects, "ClusterQueue", "partial", "None")
    await eventually(lambda: running_with(objects, "wide", 3), what="wide running 3 pods again")


async def test_a_drained_job_that_had_started_takes_its_new_flavors_node_labels(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """A Job the hub suspends loses ``status.startTime``, as kube's Job controller clears it on
    suspension, so that when it is admitted again the pod template's scheduling directives may
    change (kube refuses a template change of a Job that has started): here the flavor's node
    labels changed while its queue was drained."""
    objects.check_creates(hold_queued_workload)  # as the hub's API creates Jobs
    await two_queues_of_3_gpus(objects, manager)
    await create(objects, job("ran", "partial", pods=2))
    started = await eventually(lambda: running_with(objects, "ran", 2), what="ran running")
    assert "nodeSelector" not in started["spec"]["template"]["spec"]  # the flavor's label is a cluster's
    jobs = objects.registry.require("batch/v1", "Job")
    started["status"] = {**(started.get("status") or {}), "startTime": "2026-12-05T10:00:00Z", "active": 2}
    await objects.update_status(jobs, started)  # its pods started in a member

    await stop(objects, "ClusterQueue", "partial", "HoldAndDrain")

    async def suspended() -> dict[str, Any] | None:
        obj = await get(objects, "batch/v1", "Job", "ran")
        return obj if obj is not None and obj["spec"].get("suspend") is True else None

    obj = await eventually(suspended, what="ran suspended")
    assert "startTime" not in await eventually(
        lambda: _status_without_start(objects, "ran"), what="ran's startTime cleared")
    flavor = await get(objects, KUEUE, "ResourceFlavor", "onprem", None)
    assert flavor is not None
    flavor["spec"]["nodeLabels"] = {"gpufed.io/pool": "onprem", "example.com/gpu-pool": "a100"}  # a node label
    await objects.update(objects.registry.require(KUEUE, "ResourceFlavor"), flavor)
    await stop(objects, "ClusterQueue", "partial", "None")


    async def unsuspended() -> dict[str, Any] | None:
        obj = await get(objects, "batch/v1", "Job", "ran")
        return obj if obj is not None and obj["spec"].get("suspend") is False else None

    obj = await eventually(unsuspended, what="ran admitted and unsuspended again")
    assert obj["spec"]["template"]["spec"]["nodeSelector"] == {"example.com/gpu-pool": "a100"}


async def _status_without_start(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    obj = await get(objects, "batch/v1", "Job", name)
    status = (obj or {}).get("status") or {}
    return status if "startTime" not in status else None


class _JobStartsHeld(ObjectStore):
    """The hub's store, where a write that starts a Job (``spec.suspend: false``) waits for
    ``started``: the admission controller has admitted the Job's Workload but not started it."""

    started: asyncio.Event

    async def update(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, name: str | None = None,
        subresource: str | None = None, **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        if (rt.api_version, rt.kind) == ("batch/v1", "Job") and subresource is None and (obj.get("spec") or {}).get("suspend") is False:
            await self.started.wait()
        return await super().update(rt, obj, namespace=namespace, name=name, subresource=subresource, **options)


async def test_an_admitted_job_propagates_only_once_started_with_its_admitted_count() -> None:
    """Between its Workload's admission and the write that starts it, a Job still has its own
    parallelism and no flavor labels; the detector waits for that write, so that a member is never
    given a count (and the completions it divides to) that the next write changes."""
    async with MemoryStore() as store:
        objects = _JobStartsHeld(store, hub_registry(), garbage_collection=True)
        objects.started = asyncio.Event()
        await objects.bootstrap()
        objects.check_creates(hold_queued_workload)
        async with ControllerManager(objects, settings=FAST) as manager:
            await two_queues_of_3_gpus(objects, manager)
            wide = job("wide", "partial")
            wide["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "2"}
            await create(objects, wide)
            assert await eventually(lambda: admitted(objects, "wide"), what="wide admitted") == "partial"

            async def waiting_to_start() -> dict[str, Any] | None:
                obj = await get(objects, "batch/v1", "Job", "wide")
                propagated = condition(obj, "Propagated")
                return propagated if "waiting for the Job to be started" in propagated.get("message", "") else None

            propagated = await eventually(waiting_to_start, what="wide held until started")
            assert propagated["status"] == "False"
            wl_name = await queued_workload_name(objects, "Job", "wide")
            assert propagated["message"].startswith(f"admitted by ClusterQueue partial (Workload default/{wl_name})")
            assert await get(objects, WORK, "ResourceBinding", "wide-job") is None
            stored = await get(objects, "batch/v1", "Job", "wide")
            assert stored is not None and (stored["spec"]["suspend"], stored["spec"]["parallelism"]) == (True, 4)

            objects.started.set()
            await eventually(lambda: running_with(objects, "wide", 3), what="wide propagated with 3 pods once started")
