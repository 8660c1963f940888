"""Kueue's reclaimable Pods of a running Job at the hub: once its members report enough Pods
succeeded that fewer completions remain than its parallelism, its Workload's
``status.reclaimablePods`` counts the Pods that will not run again and their quota admits the next
waiting workload; a Job of parallelism 1 reclaims nothing (as Kueue's). A JobSet's replicated
Jobs that succeeded give back their Pods' quota the same way, and so do a TrainJob's, its
runtime's replicated Jobs read from its ``jobsStatus``."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.timestamps import format_time
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, node_shape, propagation_policy, put_cluster, queued_workload, settled
from .test_admission import GPU, KUEUE, PLACEMENT, condition, create, kueue_obj, team_queue
from .test_admission_partial import queue
from .test_admission_podsets import JOBSET, pod
from .test_admission_preemption import WORK, admitted, job
from .test_admission_trainjob import API as TRAINER
from .test_admission_trainjob import runtime, trainjob
from .test_finished_jobs import T0

pytestmark = pytest.mark.waiting


async def one_queue(objects: ObjectStore, manager: ControllerManager, gpus: int) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    await create(objects, queue("team", gpus))
    await create(objects, kueue_obj("LocalQueue", "team", "default", spec={"clusterQueue": "team"}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)


async def report(objects: ObjectStore, name: str, *, kind: tuple[str, str] = ("batch", "Job"), version: str = "",
                 **status: Any) -> None:
    """The member's agent reports its copy of the job with this status."""
    work = await eventually(lambda: get_work(objects, f"default-{name}-{kind[1].lower()}"), what=f"{name}'s Work")
    entry = {
        "identifier": {"group": kind[0], "version": version or ("v1" if kind[0] == "batch" else "v1alpha2"), "kind": kind[1],
                       "namespace": "default", "name": name, "ordinal": 0},
        "status": status, "health": "Healthy",
    }
    applied = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
               "lastTransitionTime": format_time(T0), "observedGeneration": work["metadata"]["generation"]}
    await objects.update_status(objects.registry.require(WORK, "Work"),
                                {**work, "status": {"conditions": [applied], "manifestStatuses": [entry]}})


async def get_work(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    works = (await objects.list(objects.registry.require(WORK, "Work"), namespace="gpufed-es-onprem")).items
    return next((w for w in works if w["metadata"]["name"] == name), None)


def sized(name: str, *, completions: int, parallelism: int) -> dict[str, Any]:
    obj = job(name, "team", pods=parallelism)
    obj["spec"]["completions"] = completions
    return obj


async def succeeded(objects: ObjectStore, name: str, count: int) -> dict[str, Any] | None:
    """The hub's Job once its status (aggregated from the members) has ``count`` Pods succeeded."""
    obj = await objects.get(objects.registry.require("batch/v1", "Job"), namespace="default", name=name)
    return obj if (obj.get("status") or {}).get("succeeded") == count else None


async def reclaimable(objects: ObjectStore, name: str) -> list[dict[str, Any]] | None:
    wl = await queued_workload(objects, "Job", name)
    return ((wl or {}).get("status") or {}).get("reclaimablePods")


async def test_a_finishing_jobs_pods_that_will_not_run_again_free_their_quota(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await one_queue(objects, manager, gpus=2)
    await create(objects, sized("wide", completions=4, parallelism=2))
    await eventually(lambda: admitted(objects, "wide"), what="wide admitted with the queue's 2 GPUs")
    await create(objects, sized("next", completions=1, parallelism=1))
    await eventually(lambda: queued_workload(objects, "Job", "next"), what="next's Workload")
    await report(objects, "wide", succeeded=2, active=2)
    await eventually(lambda: succeeded(objects, "wide", 2), what="the member's counts on the hub's Job")
    await settled(manager)
    assert await reclaimable(objects, "wide") is None  # 2 completions left: both Pods run again
    assert await admitted(objects, "next") is None

    await report(objects, "wide", succeeded=3, active=1)
    assert await eventually(lambda: reclaimable(objects, "wide"), what="wide's reclaimablePods") == [{"name": "main", "count": 1}]
    assert await eventually(lambda: admitted(objects, "next"), what="next admitted in the GPU wide gave back") == "team"
    cq = await objects.get(objects.registry.require(KUEUE, "ClusterQueue"), namespace=None, name="team")
    assert cq["status"]["flavorsReservation"][0]["resources"][0]["total"] == "2"  # 1 of wide's, 1 of next's


async def test_a_job_of_parallelism_1_reclaims_nothing(objects: ObjectStore, manager: ControllerManager) -> None:
    await one_queue(objects, manager, gpus=1)
    await create(objects, sized("serial", completions=2, parallelism=1))
    await eventually(lambda: admitted(objects, "serial"), what="serial admitted")
    await create(objects, sized("next", completions=1, parallelism=1))
    await eventually(lambda: queued_workload(objects, "Job", "next"), what="next's Workload")
    # All its completions in, not yet Complete: with a parallelism above 1 its Pod would be reclaimable.
    await report(objects, "serial", succeeded=2)
    await eventually(lambda: succeeded(objects, "serial", 2), what="the member's counts on the hub's Job")
    await settled(manager)
    assert await reclaimable(objects, "serial") is None
    assert await admitted(objects, "next") is None


async def test_a_jobsets_succeeded_jobs_free_their_pods_quota(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    await create(objects, team_queue("team", 4))
    await create(objects, kueue_obj("LocalQueue", "team", "default", spec={"clusterQueue": "team"}))
    for kind, api_version in (("JobSet", JOBSET), ("Job", "batch/v1")):
        await create(objects, propagation_policy(kind.lower(), kind=kind, api_version=api_version, placement=PLACEMENT))
    await settled(manager)
    await create(objects, {
        "apiVersion": JOBSET, "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {"replicatedJobs": [
            {"name": "leader", "replicas": 1, "template": {"spec": {"template": pod("leader", {"cpu": "1"})}}},
            {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": pod("worker", {GPU: "1"})}}},
        ]},
    })

    async def train_admitted() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "JobSet", "train")
        return wl if condition(wl, "Admitted").get("status") == "True" else None

    await eventually(train_admitted, what="the JobSet admitted with the queue's 4 GPUs")
    await create(objects, sized("next", completions=2, parallelism=2))
    await eventually(lambda: queued_workload(objects, "Job", "next"), what="next's Workload")
    await settled(manager)
    assert await admitted(objects, "next") is None
    await report(objects, "train", kind=("jobset.x-k8s.io", "JobSet"), replicatedJobsStatus=[
        {"name": "leader", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0},
        {"name": "workers", "ready": 1, "succeeded": 1, "failed": 0, "active": 1, "suspended": 0}])

    async def train_reclaimable() -> list[dict[str, Any]] | None:
        wl = await queued_workload(objects, "JobSet", "train")
        return ((wl or {}).get("status") or {}).get("reclaimablePods")

    assert await eventually(train_reclaimable, what="the JobSet's reclaimablePods") == [{"name": "workers", "count": 2}]
    await eventually(lambda: admitted(objects, "next"), what="next admitted in the 2 GPUs of the succeeded worker Job")


async def test_a_trainjobs_succeeded_initializer_frees_its_pods_quota(objects: ObjectStore, manager: ControllerManager) -> None:
    """Kueue's TrainJob ``ReclaimablePods``: per replicated Job of its runtime, the Pods of its
    succeeded child Jobs (``jobsStatus``); none while no child Job has succeeded."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    await create(objects, team_queue("team-a", 8))
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, propagation_policy("training", kind="TrainJob", api_version=TRAINER, placement=PLACEMENT))
    await create(objects, runtime())
    await settled(manager)
    await create(objects, trainjob("t1", 2))

    async def started() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "TrainJob", "t1")
        return wl if condition(wl, "Admitted").get("status") == "True" else None

    await eventually(started, what="the TrainJob admitted")
    entries = [{"name": "dataset-initializer", "ready": 0, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0},
               {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
    await report(objects, "t1", kind=("trainer.kubeflow.org", "TrainJob"), version="v1alpha1", jobsStatus=entries)

    async def reclaimable(active: int) -> tuple[list[dict[str, Any]]] | None:
        """The Workload's reclaimable Pods, once the hub's TrainJob has ``active`` child Jobs."""
        hub = await objects.get(objects.registry.require(TRAINER, "TrainJob"), namespace="default", name="t1")
        if sum(e.get("active", 0) for e in (hub.get("status") or {}).get("jobsStatus") or ()) != active:
            return None
        wl = await queued_workload(objects, "TrainJob", "t1")
        return (((wl or {}).get("status") or {}).get("reclaimablePods", []),)

    await eventually(lambda: reclaimable(2), what="the running TrainJob's status")
    await settled(manager)
    assert await reclaimable(2) == ([],)
    entries[0] = {"name": "dataset-initializer", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    await report(objects, "t1", kind=("trainer.kubeflow.org", "TrainJob"), version="v1alpha1", jobsStatus=entries)

    async def freed() -> list[dict[str, Any]] | None:
        pods = await reclaimable(1)
        return pods[0] if pods else None

    assert await eventually(freed, what="the TrainJob's reclaimablePods") == [{"name": "dataset-initializer", "count": 1}]
