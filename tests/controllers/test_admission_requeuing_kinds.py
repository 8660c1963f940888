"""Kueue's waitForPodsReady at the hub for a kind other than Job: a JobSet's rule is its
replicated Jobs' ready and succeeded Jobs (as its members report them) against the Jobs it runs.
Admitted with fewer ready, it is evicted after the timeout as a Job is (``Evicted`` and
``Requeued=False`` with reason ``PodsReadyTimeout``, ``requeueState``, the Event and the metric),
suspended again at the hub and its Works deleted; with all ready, its Workload gets
``PodsReady=True`` and keeps its quota. A Kueue pod group's rule is every Pod of the group ready:
none ready in time, its group's Workload is evicted the same way; one ready, ``PodsReady`` stays
False (``WaitForStart``); both, True. A TrainJob's rule is its JobSet's, read from its
``jobsStatus``: its runtime's Jobs, the initializers' included, ready or succeeded.

The hub runs with a 1 s timeout (its flag; Kueue's default is 300 s); the members' report is
written to the hub's JobSet status, as the status controller folds it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controlplane.admission.metrics import QueueMetrics
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import WAIT_SECONDS, eventually, propagation_policy, queued_workload, settled
from .test_admission import KUEUE, PLACEMENT, condition, create, get
from .test_admission_pod_groups import POD, _admitted, _ungated, group_pod, group_workload, team
from .test_admission_podsets import JOBSET, WORK, jobset
from .test_admission_requeuing import SETTINGS, team_a_on_one_cluster
from .test_admission_trainjob import API as TRAINER
from .test_admission_trainjob import runtime, trainjob

pytestmark = pytest.mark.waiting

LONG = replace(SETTINGS, wait_for_pods_ready=replace(SETTINGS.wait_for_pods_ready, timeout_seconds=600))
READY = {"phase": "Running", "containerStatuses": [{"name": "main", "ready": True, "state": {"running": {}}}]}


async def started_with(objects: ObjectStore, manager: ControllerManager, ready: list[int]) -> None:
    """JobSet ``train`` (a leader Job and 2 worker Jobs) admitted by team-a and started; then its
    members report ``ready`` Jobs of each replicated Job ready."""
    await team_a_on_one_cluster(objects, manager)
    await create(objects, propagation_policy("jobsets", kind="JobSet", api_version=JOBSET, placement=PLACEMENT))
    await settled(manager)
    await create(objects, jobset())

    async def started() -> dict[str, Any] | None:
        obj = await get(objects, JOBSET, "JobSet", "train")
        return obj if obj is not None and obj["spec"].get("suspend") is False else None

    obj = await eventually(started, what="the JobSet admitted and started")
    obj["status"] = {"replicatedJobsStatus": [
        {"name": name, "ready": count, "succeeded": 0, "failed": 0, "active": replicas, "suspended": 0}
        for name, count, replicas in zip(("leader", "workers"), ready, (1, 2), strict=True)
    ]}
    await objects.update_status(objects.registry.require(JOBSET, "JobSet"), obj)


async def test_a_jobset_whose_jobs_are_not_all_ready_in_time_is_evicted_and_requeued(
    objects: ObjectStore, registry: CollectorRegistry
) -> None:
    async with ControllerManager(objects, settings=SETTINGS, queue_metrics=QueueMetrics(registry)) as manager:
        await started_with(objects, manager, [1, 1])  # 2 of its 3 Jobs ready

        async def evicted_by_timeout() -> dict[str, Any] | None:
            wl = await queued_workload(objects, "JobSet", "train")
            evicted = condition(wl, "Evicted")
            return wl if (evicted.get("status"), evicted.get("reason")) == ("True", "PodsReadyTimeout") else None

        wl = await eventually(evicted_by_timeout, what="the JobSet's PodsReady timeout")
        name = wl["metadata"]["name"]
        assert condition(wl, "Evicted")["message"] == f"Exceeded the PodsReady timeout default/{name}"
        requeued = condition(wl, "Requeued")
        assert (requeued["status"], requeued["reason"]) == ("False", "PodsReadyTimeout")
        assert wl["status"]["requeueState"]["count"] == 1 and wl["status"]["requeueState"]["requeueAt"]
        assert "admission" not in wl["status"]
        ready = condition(wl, "PodsReady")
        assert (ready["status"], ready["reason"]) == ("False", "WaitForStart")

        async def stopped() -> dict[str, Any] | None:
            obj = await get(objects, JOBSET, "JobSet", "train")
            works = (await objects.list(objects.registry.require(WORK, "Work"))).items
            gone = not any(w["metadata"]["name"] == "default-train-jobset" for w in works)
            return obj if obj is not None and obj["spec"].get("suspend") is True and gone else None

        await eventually(stopped, what="the JobSet suspended at the hub and its Work gone")
        events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
        assert "EvictedDueToPodsReadyTimeout" in [e["reason"] for e in events if e["involvedObject"]["name"] == name]
        assert registry.get_sample_value(
            "kueue_evicted_workloads_total", {"cluster_queue": "team-a", "reason": "PodsReadyTimeout"}) == 1


async def test_a_jobset_whose_jobs_are_all_ready_keeps_its_quota(objects: ObjectStore, registry: CollectorRegistry) -> None:
    async with ControllerManager(objects, settings=LONG, queue_metrics=QueueMetrics(registry)) as manager:
        await started_with(objects, manager, [1, 2])

        async def ready() -> dict[str, Any] | None:
            wl = await queued_workload(objects, "JobSet", "train")
            return wl if condition(wl, "PodsReady").get("status") == "True" else None

        wl = await eventually(ready, what="PodsReady=True")
        assert condition(wl, "PodsReady")["reason"] == "Started"
        await settled(manager)
        wl = await queued_workload(objects, "JobSet", "train") or {}
        assert condition(wl, "Admitted")["status"] == "True" and condition(wl, "Evicted") == {}
        assert registry.get_sample_value("kueue_ready_wait_time_seconds_count", {"cluster_queue": "team-a"}) == 1


async def group_started(objects: ObjectStore, manager: ControllerManager) -> None:
    """A pod group of two one-GPU Pods, g0 and g1, admitted and ungated."""
    await team(objects, manager, gpus=2)
    for name in ("g0", "g1"):
        await create(objects, group_pod(name, total="2"))
    await eventually(lambda: _admitted(objects), what="the group admitted")
    for name in ("g0", "g1"):
        await eventually(lambda n=name: _ungated(objects, n), what=f"{name} ungated")


async def report(objects: ObjectStore, name: str, status: dict[str, Any]) -> None:
    """The members' report of Pod ``name`` folded into its hub status."""
    found = await get(objects, *POD, name)
    assert found is not None
    await objects.update_status(objects.registry.require(*POD), {**found, "status": {**found.get("status", {}), **status}})


async def test_a_pod_group_with_a_pod_not_ready_in_time_is_evicted_and_requeued(
    objects: ObjectStore, registry: CollectorRegistry
) -> None:
    async with ControllerManager(objects, settings=SETTINGS, queue_metrics=QueueMetrics(registry)) as manager:
        await team(objects, manager, gpus=2)
        rt = objects.registry.require(KUEUE, "Workload")
        since = (await objects.list(rt, namespace="default")).resource_version
        for name in ("g0", "g1"):  # no member reports them ready
            await create(objects, group_pod(name, total="2"))
        # Evicted, its Pods are stopped (deleted, as Kueue stops a Pod) and the Workload goes with
        # them: its writes are read from a watch.
        wl: dict[str, Any] = {}
        async with asyncio.timeout(WAIT_SECONDS):
            async for event in objects.watch(rt, namespace="default", resource_version=since):
                evicted = condition(event.object, "Evicted")
                if (evicted.get("status"), evicted.get("reason")) == ("True", "PodsReadyTimeout"):
                    wl = event.object
                    break
        assert condition(wl, "Evicted")["message"] == "Exceeded the PodsReady timeout default/grp"
        assert (condition(wl, "Requeued")["status"], condition(wl, "Requeued")["reason"]) == ("False", "PodsReadyTimeout")
        assert wl["status"]["requeueState"]["count"] == 1 and "admission" not in wl["status"]
        assert registry.get_sample_value(
            "kueue_evicted_workloads_total", {"cluster_queue": "team", "reason": "PodsReadyTimeout"}) == 1


async def test_a_pod_group_whose_pods_are_all_ready_gets_pods_ready(objects: ObjectStore, registry: CollectorRegistry) -> None:
    async with ControllerManager(objects, settings=LONG, queue_metrics=QueueMetrics(registry)) as manager:
        await group_started(objects, manager)
        await settled(manager)  # the hub's own status writes (Propagated) done
        await report(objects, "g0", READY)
        await settled(manager)
        ready = condition(await group_workload(objects), "PodsReady")
        assert (ready["status"], ready["reason"]) == ("False", "WaitForStart")
        await report(objects, "g1", READY)

        async def pods_ready() -> dict[str, Any] | None:
            wl = await group_workload(objects)
            return wl if condition(wl, "PodsReady").get("status") == "True" else None

        wl = await eventually(pods_ready, what="the group's PodsReady=True once both Pods are ready")
        assert condition(wl, "Admitted")["status"] == "True"


async def trainjob_started_with(objects: ObjectStore, manager: ControllerManager, jobs: list[dict[str, Any]]) -> None:
    """TrainJob ``train`` (a dataset initializer, then 2 nodes) admitted by team-a and started;
    then its members report ``jobs`` as its ``jobsStatus``."""
    await team_a_on_one_cluster(objects, manager)
    await create(objects, propagation_policy("training", kind="TrainJob", api_version=TRAINER, placement=PLACEMENT))
    await create(objects, runtime())
    await settled(manager)
    await create(objects, trainjob("train", 1))

    async def started() -> dict[str, Any] | None:
        obj = await get(objects, TRAINER, "TrainJob", "train")
        return obj if obj is not None and obj["spec"].get("suspend") is False else None

    obj = await eventually(started, what="the TrainJob admitted and started")
    obj["status"] = {"jobsStatus": [{"succeeded": 0, "failed": 0, "suspended": 0, "ready": 0, "active": 0, **job} for job in jobs]}
    await objects.update_status(objects.registry.require(TRAINER, "TrainJob"), obj)


async def test_a_trainjob_whose_initializer_has_not_succeeded_in_time_is_evicted(
    objects: ObjectStore, registry: CollectorRegistry,
) -> None:
    async with ControllerManager(objects, settings=SETTINGS, queue_metrics=QueueMetrics(registry)) as manager:
        # The trainer Job ready, but the initializer's Job neither ready nor succeeded.
        await trainjob_started_with(objects, manager, [{"name": "dataset-initializer", "active": 1},
                                                       {"name": "node", "ready": 1, "active": 1}])

        async def evicted_by_timeout() -> dict[str, Any] | None:
            wl = await queued_workload(objects, "TrainJob", "train")
            evicted = condition(wl, "Evicted")
            return wl if (evicted.get("status"), evicted.get("reason")) == ("True", "PodsReadyTimeout") else None

        wl = await eventually(evicted_by_timeout, what="the TrainJob's PodsReady timeout")
        assert (condition(wl, "Requeued")["status"], condition(wl, "Requeued")["reason"]) == ("False", "PodsReadyTimeout")

        async def suspended() -> dict[str, Any] | None:
            obj = await get(objects, TRAINER, "TrainJob", "train")
            return obj if obj is not None and obj["spec"].get("suspend") is True else None

        await eventually(suspended, what="the TrainJob suspended at the hub")


async def test_a_trainjob_whose_initializer_succeeded_and_trainer_is_ready_gets_pods_ready(
    objects: ObjectStore, registry: CollectorRegistry,
) -> None:
    async with ControllerManager(objects, settings=LONG, queue_metrics=QueueMetrics(registry)) as manager:
        await trainjob_started_with(objects, manager, [{"name": "dataset-initializer", "succeeded": 1},
                                                       {"name": "node", "ready": 1, "active": 1}])

        async def ready() -> dict[str, Any] | None:
            wl = await queued_workload(objects, "TrainJob", "train")
            return wl if condition(wl, "PodsReady").get("status") == "True" else None

        wl = await eventually(ready, what="PodsReady=True")
        assert condition(wl, "PodsReady")["reason"] == "Started"
        assert condition(wl, "Admitted")["status"] == "True" and condition(wl, "Evicted") == {}
