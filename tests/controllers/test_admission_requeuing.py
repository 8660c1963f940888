"""Kueue's waitForPodsReady at the hub: an admitted Job whose pods never become ready is evicted
after the timeout (its Job suspended again, its Works gone), waits out the requeuing backoff
(``Requeued=False``, ``requeueState``), is admitted again (``Requeued=True``, BackoffFinished),
and past the requeuing limit is deactivated; made active again, it is queued at once.

The hub runs with a 1 s timeout and a 2 s backoff (its flags; Kueue's defaults are 300 s and 60 s),
and no member runs the Job's pods, so they never become ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controlplane.admission.metrics import QueueMetrics
from controlplane.admission.requeuing import WaitForPodsReady
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster, queued_workload, settled
from .test_admission import KUEUE, PLACEMENT, condition, create, get, kueue_obj, team_queue
from .test_admission_preemption import job, works_of

pytestmark = pytest.mark.waiting

SETTINGS = replace(FAST, wait_for_pods_ready=WaitForPodsReady(
    timeout_seconds=1, backoff_base_seconds=2, backoff_max_seconds=2, backoff_limit_count=1,
))


@pytest.fixture
async def slow_manager(objects: ObjectStore, registry: CollectorRegistry) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=SETTINGS, queue_metrics=QueueMetrics(registry)) as running:
        yield running


async def team_a_on_one_cluster(objects: ObjectStore, manager: ControllerManager) -> None:
    """One cluster of 16 GPUs, a flavor on it, ClusterQueue and LocalQueue team-a (8 GPUs), Jobs propagated."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    await create(objects, team_queue("team-a", 8))
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)


async def workload(objects: ObjectStore) -> dict[str, Any]:
    return await queued_workload(objects, "Job", "slow") or {"spec": {}, "status": {}}


async def conditions_since(
    objects: ObjectStore, ctype: str, resource_version: str, last: dict[str, Any],
) -> list[dict[str, Any]]:
    """The ``ctype`` condition of each write of ``last`` after ``resource_version``, up to ``last``."""
    seen: list[dict[str, Any]] = []
    rt = objects.registry.require(KUEUE, "Workload")
    async with asyncio.timeout(10):
        async for event in objects.watch(rt, namespace="default", resource_version=resource_version):
            if event.object["metadata"]["name"] == last["metadata"]["name"]:
                seen.append(condition(event.object, ctype))
                if event.object["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"]:
                    break
    return seen


async def test_a_job_whose_pods_never_get_ready_is_requeued_with_backoff_then_deactivated(
    objects: ObjectStore, slow_manager: ControllerManager, registry: CollectorRegistry
) -> None:
    await team_a_on_one_cluster(objects, slow_manager)
    await create(objects, job("slow", "team-a"))

    async def evicted_by_timeout() -> dict[str, Any] | None:
        wl = await workload(objects)
        return wl if condition(wl, "Evicted").get("reason") == "PodsReadyTimeout" and condition(wl, "Evicted")["status"] == "True" else None

    wl = await eventually(evicted_by_timeout, what="the first PodsReady timeout")
    assert wl["status"]["requeueState"]["count"] == 1 and wl["status"]["requeueState"]["requeueAt"]
    assert "admission" not in wl["status"]
    evicted = condition(wl, "Evicted")
    assert evicted["message"] == f"Exceeded the PodsReady timeout default/{wl['metadata']['name']}"
    requeued = condition(wl, "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("False", "PodsReadyTimeout")
    assert (condition(wl, "QuotaReserved")["status"], condition(wl, "QuotaReserved")["reason"]) == ("False", "Pending")
    assert condition(wl, "PodsReady")["reason"] == "WaitForStart"

    async def explained() -> str | None:
        hub_job = await get(objects, "batch/v1", "Job", "slow")
        message = str(condition(hub_job, "Propagated").get("message", ""))
        return message if "PodsReady timeout(s))" in message else None

    message = await eventually(explained, what="the Job's Propagated condition naming the backoff")
    assert message.startswith(f"evicted: Exceeded the PodsReady timeout default/{wl['metadata']['name']}")
    assert f"requeued at {wl['status']['requeueState']['requeueAt']} (backoff after 1 PodsReady timeout(s))" in message

    # After the backoff it is queued and admitted again; the count stays, the time goes.
    async def readmitted() -> dict[str, Any] | None:
        wl = await workload(objects)
        return wl if condition(wl, "Admitted").get("status") == "True" else None

    wl = await eventually(readmitted, what="admitted again after the backoff")
    readmitted_at = wl["metadata"]["resourceVersion"]
    requeued = condition(wl, "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("True", "BackoffFinished")
    assert wl["status"]["requeueState"] == {"count": 1}
    assert condition(wl, "Evicted")["message"].startswith("Previously: Exceeded the PodsReady timeout")

    # The second timeout is past backoffLimitCount (1): deactivated, not requeued.
    async def deactivated() -> dict[str, Any] | None:
        wl = await workload(objects)
        return wl if wl["spec"].get("active") is False and condition(wl, "Evicted").get("status") == "True" else None

    wl = await eventually(deactivated, what="deactivated past the requeuing limit")
    # As Kueue 0.10 and later write it (v1beta1 and v1beta2 alike): the transient
    # DeactivationTarget is gone once the eviction is written.
    message = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    for ctype in ("Evicted", "Requeued"):
        got = condition(wl, ctype)
        assert (got["reason"], got["message"]) == ("DeactivatedDueToRequeuingLimitExceeded", message)
    assert (condition(wl, "Evicted")["status"], condition(wl, "Requeued")["status"]) == ("True", "False")
    assert condition(wl, "DeactivationTarget") == {}
    # On the way, Kueue's first step: the Workload marked as the target of a deactivation.
    targets = [c for c in await conditions_since(objects, "DeactivationTarget", readmitted_at, wl) if c]
    assert targets and {(c["status"], c["reason"], c["message"]) for c in targets} == {
        ("True", "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries")}
    assert "requeueState" not in wl["status"] and "admission" not in wl["status"]
    beta2 = await queued_workload(objects, "Job", "slow", version="v1beta2")
    assert condition(beta2, "Evicted")["reason"] == "DeactivatedDueToRequeuingLimitExceeded"

    async def stopped() -> dict[str, Any] | None:
        hub_job = await get(objects, "batch/v1", "Job", "slow")
        return hub_job if hub_job and hub_job["spec"]["suspend"] is True and not await works_of(objects, "slow") else None

    await eventually(stopped, what="the Job suspended at the hub and its Works gone")
    await settled(slow_manager)
    wl = await workload(objects)
    assert condition(wl, "Admitted")["status"] == "False" and wl["spec"]["active"] is False
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    reasons = [e["reason"] for e in events if e["involvedObject"]["name"] == wl["metadata"]["name"]]
    assert "EvictedDueToPodsReadyTimeout" in reasons and "EvictedDueToDeactivatedDueToRequeuingLimitExceeded" in reasons
    evictions = "kueue_evicted_workloads_total"
    assert registry.get_sample_value(evictions, {"cluster_queue": "team-a", "reason": "PodsReadyTimeout"}) == 1
    assert registry.get_sample_value(
        evictions, {"cluster_queue": "team-a", "reason": "DeactivatedDueToRequeuingLimitExceeded"}) == 1

    # Made active again (as a Kueue user does), it is queued at once.
    wl["spec"]["active"] = True
    await objects.update(objects.registry.require(KUEUE, "Workload"), wl)
    wl = await eventually(readmitted, what="admitted again once active")
    assert (condition(wl, "Requeued")["status"], condition(wl, "Requeued")["reason"]) == ("True", "Reactivated")


async def admitted_and_started(objects: ObjectStore, manager: ControllerManager, name: str) -> dict[str, Any]:
    """Team A's fleet and a 2-pod Job ``name`` in its queue, once admitted and started."""
    await team_a_on_one_cluster(objects, manager)
    await create(objects, job(name, "team-a", pods=2))

    async def started() -> dict[str, Any] | None:
        obj = await get(objects, "batch/v1", "Job", name)
        return obj if obj is not None and obj["spec"].get("suspend") is False else None

    return await eventually(started, what=f"{name} started")


async def test_a_job_whose_pods_get_ready_is_timed_in_kueues_ready_histograms(
    objects: ObjectStore, registry: CollectorRegistry
) -> None:
    """Kueue's ``kueue_ready_wait_time_seconds`` and ``kueue_admitted_until_ready_wait_time_seconds``
    (and the LocalQueue ones) observe a workload once, when its ``PodsReady`` turns True."""
    settings = replace(SETTINGS, wait_for_pods_ready=replace(SETTINGS.wait_for_pods_ready, timeout_seconds=600))
    async with ControllerManager(objects, settings=settings, queue_metrics=QueueMetrics(registry)) as manager:
        obj = await admitted_and_started(objects, manager, "quick")
        cq, lq = {"cluster_queue": "team-a"}, {"name": "team-a", "namespace": "default"}
        assert registry.get_sample_value("kueue_ready_wait_time_seconds_count", cq) is None
        jobs = objects.registry.require("batch/v1", "Job")
        obj["status"] = {**(obj.get("status") or {}), "ready": 2, "active": 2}
        await objects.update_status(jobs, obj)  # its pods ready in a member

        async def ready() -> dict[str, Any] | None:
            wl = await queued_workload(objects, "Job", "quick")
            return wl if condition(wl, "PodsReady").get("status") == "True" else None

        await eventually(ready, what="PodsReady=True")
        await settled(manager)
        for metric in ("kueue_ready_wait_time_seconds_count", "kueue_admitted_until_ready_wait_time_seconds_count"):
            assert registry.get_sample_value(metric, cq) == 1
        for metric in ("kueue_local_queue_ready_wait_time_seconds_count",
                       "kueue_local_queue_admitted_until_ready_wait_time_seconds_count"):
            assert registry.get_sample_value(metric, lq) == 1
        assert registry.get_sample_value("kueue_ready_wait_time_seconds_bucket", {**cq, "le": "+Inf"}) == 1

        # Another write of a status that stays ready is not a second observation.
        obj = await get(objects, "batch/v1", "Job", "quick")
        assert obj is not None
        obj["status"]["active"] = 1
        obj["status"]["succeeded"] = 1
        await objects.update_status(jobs, obj)
        await settled(manager)
        assert registry.get_sample_value("kueue_ready_wait_time_seconds_count", cq) == 1


async def test_a_job_whose_pods_lose_readiness_waits_for_recovery_then_is_evicted(
    objects: ObjectStore, registry: CollectorRegistry
) -> None:
    """Kueue's ``recoveryTimeout``: a Job whose pods were all ready (``PodsReady`` True, reason
    ``Started``) and lose readiness gets ``PodsReady`` False with reason ``WaitForRecovery``, and is
    evicted by the PodsReady timeout once it has waited that long (3 s here; the start timeout is
    10 minutes, so only the recovery's can evict it). The wait is read from the conditions' own
    times, not from when the test happens to look: on a loaded machine the eviction may already
    have come by the time the test sees readiness lost."""
    pods_ready = replace(SETTINGS.wait_for_pods_ready, timeout_seconds=600, recovery_timeout_seconds=RECOVERY_SECONDS)
    async with ControllerManager(objects, settings=replace(SETTINGS, wait_for_pods_ready=pods_ready),
                                 queue_metrics=QueueMetrics(registry)) as manager:
        obj = await admitted_and_started(objects, manager, "flaky")
        jobs = objects.registry.require("batch/v1", "Job")
        obj["status"] = {**(obj.get("status") or {}), "ready": 2, "active": 2}
        await objects.update_status(jobs, obj)

        async def pods_ready_is(status: str) -> dict[str, Any] | None:
            wl = await queued_workload(objects, "Job", "flaky")
            return wl if condition(wl, "PodsReady").get("status") == status else None

        wl = await eventually(lambda: pods_ready_is("True"), what="PodsReady=True")
        assert condition(wl, "PodsReady")["reason"] == "Started"
        obj = await get(objects, "batch/v1", "Job", "flaky")
        assert obj is not None
        obj["status"]["ready"] = 1  # one pod failed in its member
        await objects.update_status(jobs, obj)
        wl = await eventually(lambda: pods_ready_is("False"), what="PodsReady=False")
        waiting = condition(wl, "PodsReady")
        assert (waiting["reason"], waiting["message"]) == ("WaitForRecovery", "At least one pod has failed, waiting for recovery")
        if condition(wl, "Evicted").get("status") != "True":
            assert condition(wl, "Admitted")["status"] == "True"

        async def evicted() -> dict[str, Any] | None:
            wl = await workload_named(objects, "flaky")
            return wl if condition(wl, "Evicted").get("status") == "True" else None

        wl = await eventually(evicted, what="evicted after the recovery timeout")
        assert (condition(wl, "Evicted")["reason"], condition(wl, "Evicted")["message"]) == (
            "PodsReadyTimeout", f"Exceeded the PodsReady timeout default/{wl['metadata']['name']}")
        assert wl["status"]["requeueState"]["count"] == 1
        waited = _at(condition(wl, "Evicted")["lastTransitionTime"]) - _at(waiting["lastTransitionTime"])
        assert waited >= timedelta(seconds=RECOVERY_SECONDS), waited


RECOVERY_SECONDS = 3


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def workload_named(objects: ObjectStore, name: str) -> dict[str, Any]:
    return await queued_workload(objects, "Job", name) or {"spec": {}, "status": {}}
