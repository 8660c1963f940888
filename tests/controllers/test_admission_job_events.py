"""Kueue's job reconciler's Events on a queued job at the hub, with Kueue's reasons and messages:
``CreatedWorkload``, ``Started``, ``Stopped`` (evicted, not admitted, no Workload),
``UpdatedWorkload`` (a held job's pod sets changed), ``UpdatedAdmissionCheck`` (pending checks'
messages) and ``FinishedWorkload``."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import (
    eventually,
    node_shape,
    propagation_policy,
    put_cluster,
    queued_workload,
    queued_workload_name,
    settled,
)
from .test_admission import KUEUE, PLACEMENT, condition, create, get, kueue_obj, team_queue
from .test_admission_checks import fleet_with_check, reserved_with_checks, set_state
from .test_admission_pod_stopping import POD, started_pod
from .test_admission_preemption import admitted, job
from .test_admission_stopping import stop

pytestmark = pytest.mark.waiting

JOB = ("batch/v1", "Job")


async def events_on(objects: ObjectStore, kind: str, name: str, reason: str) -> list[str]:
    """The message of each ``reason`` Event on ``kind`` ``name`` (one recorded again counts again)."""
    listed = await objects.list(objects.registry.require("v1", "Event"), namespace="default")
    return [str(e["message"]) for e in listed.items
            if e["reason"] == reason and e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name
            for _ in range(int(e.get("count") or 1))]


async def one_team(objects: ObjectStore, manager: ControllerManager, *queues: str) -> None:
    """An on-prem cluster and, per name in ``queues``, an 8-GPU ClusterQueue and its LocalQueue."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    for name in queues:
        await create(objects, team_queue(name, 8))
        await create(objects, kueue_obj("LocalQueue", name, "default", spec={"clusterQueue": name}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)


def held_job(name: str, queue: str, pods: int = 4) -> dict[str, Any]:
    """A queued Job as the hub's API stores it (Kueue's webhook default: suspended)."""
    obj = job(name, queue, pods)
    obj["spec"]["suspend"] = True
    return obj


def told(objects: ObjectStore, kind: str, name: str, reason: str, count: int) -> Any:
    async def probe() -> list[str] | None:
        messages = await events_on(objects, kind, name, reason)
        return messages if len(messages) >= count else None
    return probe


async def test_a_queued_job_is_told_its_workload_its_start_and_its_stop(objects: ObjectStore, manager: ControllerManager) -> None:
    await one_team(objects, manager, "team-a")
    await create(objects, held_job("a1", "team-a"))
    assert await eventually(lambda: admitted(objects, "a1"), what="a1 admitted") == "team-a"
    wl_name = await queued_workload_name(objects, "Job", "a1")
    assert await eventually(told(objects, "Job", "a1", "Started", 1), what="a1 started") == ["Admitted by clusterQueue team-a"]
    assert await events_on(objects, "Job", "a1", "CreatedWorkload") == [f"Created Workload: default/{wl_name}"]

    await stop(objects, "ClusterQueue", "team-a", "HoldAndDrain")
    assert await eventually(told(objects, "Job", "a1", "Stopped", 1), what="a1 stopped") == ["The ClusterQueue is stopped"]
    await stop(objects, "ClusterQueue", "team-a", "None")
    assert await eventually(told(objects, "Job", "a1", "Started", 2), what="a1 started again") == [
        "Admitted by clusterQueue team-a"] * 2
    await settled(manager)
    assert await events_on(objects, "Job", "a1", "Stopped") == ["The ClusterQueue is stopped"]
    assert await events_on(objects, "Job", "a1", "CreatedWorkload") == [f"Created Workload: default/{wl_name}"]


async def test_a_held_jobs_workload_follows_its_pods_and_a_job_started_by_hand_is_stopped(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """``UpdatedWorkload`` when a held job's pod sets change (a queue change alone says nothing, as
    Kueue updates only the queue name then); unsuspended by hand before it is admitted, it is
    stopped: ``Not admitted by cluster queue``."""
    await one_team(objects, manager, "team-a", "team-b")
    await create(objects, held_job("big", "team-a", pods=20))  # more than the cohort's 16 GPUs: it waits

    async def pending() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "big")
        return wl if condition(wl, "QuotaReserved").get("status") == "False" else None

    await eventually(pending, what="big waits for quota")
    wl_name = await queued_workload_name(objects, "Job", "big")
    held = await get(objects, *JOB, "big")
    assert held is not None
    held["spec"]["parallelism"] = 18
    await objects.update(objects.registry.require(*JOB), held)

    async def eighteen() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "big")
        return wl if wl and wl["spec"]["podSets"][0]["count"] == 18 else None

    await eventually(eighteen, what="big's Workload asks for 18 pods")
    assert await eventually(told(objects, "Job", "big", "UpdatedWorkload", 1), what="UpdatedWorkload") == [
        f"Updated not matching Workload for suspended job: default/{wl_name}"]

    held = await get(objects, *JOB, "big")
    assert held is not None
    held["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-b"
    await objects.update(objects.registry.require(*JOB), held)

    async def moved() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "big")
        return wl if wl and wl["spec"]["queueName"] == "team-b" else None

    await eventually(moved, what="big's Workload in team-b")
    await settled(manager)
    assert len(await events_on(objects, "Job", "big", "UpdatedWorkload")) == 1

    held = await get(objects, *JOB, "big")
    assert held is not None
    held["spec"]["suspend"] = False
    await objects.update(objects.registry.require(*JOB), held)
    assert await eventually(told(objects, "Job", "big", "Stopped", 1), what="big stopped") == ["Not admitted by cluster queue"]
    assert (await get(objects, *JOB, "big") or {})["spec"]["suspend"] is True


async def started_job(objects: ObjectStore, manager: ControllerManager) -> str:
    """Job ``a1`` of queue ``team-a`` admitted and started; its Workload's name."""
    await one_team(objects, manager, "team-a")
    await create(objects, held_job("a1", "team-a"))
    assert await eventually(lambda: admitted(objects, "a1"), what="a1 admitted") == "team-a"
    await eventually(told(objects, "Job", "a1", "Started", 1), what="a1 started")
    return await queued_workload_name(objects, "Job", "a1")


async def test_a_started_job_without_its_workload_is_stopped_then_queued_again(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    wl_name = await started_job(objects, manager)
    await objects.delete(objects.registry.require(KUEUE, "Workload"), namespace="default", name=wl_name)

    assert await eventually(told(objects, "Job", "a1", "Stopped", 1), what="a1 stopped") == [
        "Missing Workload; unable to restore pod templates"]
    assert await eventually(told(objects, "Job", "a1", "Started", 2), what="a1 admitted and started again") == [
        "Admitted by clusterQueue team-a"] * 2
    # Its new Workload (the same name: the Job's UID names it) was made once it was stopped.
    assert await events_on(objects, "Job", "a1", "CreatedWorkload") == [f"Created Workload: default/{wl_name}"] * 2


async def test_pending_admission_checks_messages_are_told_once_each(objects: ObjectStore, manager: ControllerManager) -> None:
    await fleet_with_check(objects, manager)
    await create(objects, held_job("a1", "team-a"))
    await reserved_with_checks(objects)
    await set_state(objects, "Job", "a1", "budget", "Pending", "waiting for budget approval")
    assert await eventually(told(objects, "Job", "a1", "UpdatedAdmissionCheck", 1), what="the check's message told") == [
        "budget: waiting for budget approval"]
    held = await get(objects, *JOB, "a1")
    assert held is not None
    held["metadata"]["labels"]["example.com/touched"] = "yes"  # another sync of the held Job
    await objects.update(objects.registry.require(*JOB), held)
    await settled(manager)
    assert await events_on(objects, "Job", "a1", "UpdatedAdmissionCheck") == ["budget: waiting for budget approval"]
    await set_state(objects, "Job", "a1", "budget", "Pending", "approved by 1 of 2")
    assert sorted(await eventually(told(objects, "Job", "a1", "UpdatedAdmissionCheck", 2), what="the new message told")) == [
        "budget: approved by 1 of 2", "budget: waiting for budget approval"]
    await set_state(objects, "Job", "a1", "budget", "Ready")
    assert await eventually(told(objects, "Job", "a1", "Started", 1), what="a1 started") == ["Admitted by clusterQueue team-a"]


async def test_a_queued_pod_is_told_its_start_and_its_finish(objects: ObjectStore, manager: ControllerManager) -> None:
    started = await started_pod(objects, manager, "p1")
    wl_name = await queued_workload_name(objects, "Pod", "p1")
    assert await eventually(told(objects, "Pod", "p1", "Started", 1), what="p1 started") == ["Admitted by clusterQueue solo"]
    assert await events_on(objects, "Pod", "p1", "CreatedWorkload") == [f"Created Workload: default/{wl_name}"]
    current = await get(objects, *POD, "p1")
    assert current is not None
    await objects.update_status(objects.registry.require(*POD), {**current, "status": {**started.get("status", {}), "phase": "Succeeded"}})
    assert await eventually(told(objects, "Pod", "p1", "FinishedWorkload", 1), what="p1's Workload finished") == [
        f"Workload 'default/{wl_name}' is declared finished"]
    await settled(manager)
    assert len(await events_on(objects, "Pod", "p1", "FinishedWorkload")) == 1
