"""A Workload deactivated by hand (``spec.active: false``), as Kueue's workload controller treats
it: admitted, it is evicted (``Evicted`` and ``Requeued=False`` with reason ``Deactivated``), its
quota released for the queue's next workload, its Job suspended and its Works gone; made active
again, it is requeued (``Reactivated``). A pending one gets ``Evicted`` alone, with no Event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controlplane.admission.metrics import QueueMetrics
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, queued_workload, settled
from .test_admission import KUEUE, condition, create, get
from .test_admission_preemption import admitted, job, works_of
from .test_admission_requeuing import team_a_on_one_cluster

pytestmark = pytest.mark.waiting

DEACTIVATED = "The workload is deactivated"


@pytest.fixture
async def counted(objects: ObjectStore, registry: CollectorRegistry) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=FAST, queue_metrics=QueueMetrics(registry)) as running:
        yield running


async def set_active(objects: ObjectStore, name: str, active: bool) -> None:
    wl = await queued_workload(objects, "Job", name)
    assert wl is not None
    wl["spec"]["active"] = active
    await objects.update(objects.registry.require(KUEUE, "Workload"), wl)


async def events_of(objects: ObjectStore, name: str) -> list[tuple[str, str]]:
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    return [(e["reason"], e["message"]) for e in events if e["involvedObject"]["name"] == name]


async def test_an_admitted_workload_deactivated_by_hand_is_evicted_and_requeued_once_active(
    objects: ObjectStore, counted: ControllerManager, registry: CollectorRegistry,
) -> None:
    await team_a_on_one_cluster(objects, counted)  # 8 GPUs
    await create(objects, job("train", "team-a", pods=8))
    assert await eventually(lambda: admitted(objects, "train"), what="train admitted") == "team-a"
    await eventually(lambda: works_of(objects, "train"), what="train propagated")
    await create(objects, job("next", "team-a", pods=8))  # waits: the queue is full
    await settled(counted)
    assert await admitted(objects, "next") is None

    await set_active(objects, "train", False)

    async def evicted() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "train")
        return wl if condition(wl, "Evicted").get("status") == "True" else None

    wl = await eventually(evicted, what="train evicted once deactivated")
    name = wl["metadata"]["name"]
    got = {c: condition(wl, c) for c in ("Evicted", "Requeued", "QuotaReserved", "Admitted")}
    assert {c: (v["status"], v["reason"], v["message"]) for c, v in got.items()} == {
        "Evicted": ("True", "Deactivated", DEACTIVATED),
        "Requeued": ("False", "Deactivated", DEACTIVATED),
        "QuotaReserved": ("False", "Pending", DEACTIVATED),
        "Admitted": ("False", "NoReservation", "The workload has no reservation"),
    }
    assert "admission" not in wl["status"] and wl["spec"]["active"] is False

    # Its quota is the next workload's; its Job is stopped and its member's copy withdrawn.
    assert await eventually(lambda: admitted(objects, "next"), what="next admitted in the freed quota") == "team-a"

    async def stopped() -> dict[str, Any] | None:
        hub_job = await get(objects, "batch/v1", "Job", "train")
        return hub_job if hub_job and hub_job["spec"]["suspend"] is True and not await works_of(objects, "train") else None

    await eventually(stopped, what="train suspended at the hub and its Works gone")
    assert ("EvictedDueToDeactivated", DEACTIVATED) in await events_of(objects, name)
    assert ("Stopped", DEACTIVATED) in await events_of(objects, "train")
    assert registry.get_sample_value(
        "kueue_evicted_workloads_total", {"cluster_queue": "team-a", "reason": "Deactivated"}) == 1

    # Active again: back in its queue (behind ``next``, which holds the quota now).
    await set_active(objects, "train", True)

    async def requeued() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "train")
        return wl if condition(wl, "Requeued").get("status") == "True" else None

    wl = await eventually(requeued, what="train requeued once active")
    assert (condition(wl, "Requeued")["reason"], condition(wl, "Requeued")["message"]) == (
        "Reactivated", "The workload was reactivated")
    assert condition(wl, "QuotaReserved")["status"] == "False"


async def test_a_pending_workload_deactivated_is_marked_evicted_without_an_event(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await team_a_on_one_cluster(objects, manager)
    await create(objects, job("big", "team-a", pods=9))  # more than the queue's 8 GPUs: pending
    await settled(manager)
    assert condition(await queued_workload(objects, "Job", "big"), "QuotaReserved")["status"] == "False"

    await set_active(objects, "big", False)

    async def evicted() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "big")
        return wl if condition(wl, "Evicted").get("status") == "True" else None

    wl = await eventually(evicted, what="big marked evicted once deactivated")
    assert (condition(wl, "Evicted")["reason"], condition(wl, "Evicted")["message"]) == ("Deactivated", DEACTIVATED)
    assert condition(wl, "Requeued") == {}  # as Kueue: a Workload that held no quota is not requeued
    await settled(manager)
    assert not [r for r, _ in await events_of(objects, wl["metadata"]["name"]) if r.startswith("EvictedDueTo")]


async def test_a_deactivation_target_any_controller_writes_deactivates_the_workload(
    objects: ObjectStore, counted: ControllerManager,
) -> None:
    """As Kueue's workload controller: ``DeactivationTarget=True`` on an active Workload, whoever
    wrote it, sets ``spec.active: false``; the eviction names the condition's reason."""
    await team_a_on_one_cluster(objects, counted)
    await create(objects, job("train", "team-a", pods=8))
    assert await eventually(lambda: admitted(objects, "train"), what="train admitted") == "team-a"

    wl = await queued_workload(objects, "Job", "train")
    assert wl is not None
    name = wl["metadata"]["name"]
    wl["status"]["conditions"].append({
        "type": "DeactivationTarget", "status": "True", "reason": "MaintenanceWindow",
        "message": "the node pool is being drained", "lastTransitionTime": "2026-01-01T00:00:00Z",
    })
    await objects.update_status(objects.registry.require(KUEUE, "Workload"), wl)

    async def evicted() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "train")
        return wl if condition(wl, "Evicted").get("status") == "True" else None

    wl = await eventually(evicted, what="train evicted once marked for deactivation")
    reason, message = "DeactivatedDueToMaintenanceWindow", f"{DEACTIVATED} due to the node pool is being drained"
    assert wl["spec"]["active"] is False
    assert [(condition(wl, c)["status"], condition(wl, c)["reason"], condition(wl, c)["message"])
            for c in ("Evicted", "Requeued")] == [("True", reason, message), ("False", reason, message)]
    assert condition(wl, "DeactivationTarget") == {} and "admission" not in wl["status"]
    assert (f"EvictedDueTo{reason}", message) in await events_of(objects, name)
