"""Kueue's admission fair sharing at the hub (``--kueue-admission-fair-sharing``): a ClusterQueue
whose ``admissionScope.admissionMode`` is ``UsageBasedAdmissionFairSharing`` admits the workload
of the LocalQueue that consumed least lately, even when another was queued first; each of its
LocalQueues keeps its consumed resources in ``status.fairSharing.admissionFairSharingStatus``,
with an admission's entry penalty at once and the half-life decay at each sample."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.admission.core.admissionfairsharing import AdmissionFairSharing
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, node_shape, put_cluster, queued_workload, settled
from .test_admission import KUEUE, admitted_probe, condition, create, get, kueue_obj, queued, team_queue

#: Half-life 10 minutes, a sample every 5: a sample keeps 0.5 ** 0.5 of the old usage.
SETTINGS = AdmissionFairSharing(usage_half_life_seconds=600, usage_sampling_interval_seconds=300)
T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)


class Clock:
    """The controllers' time, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def afs_manager(objects: ObjectStore, clock: Clock) -> AsyncIterator[ControllerManager]:
    settings = dataclasses.replace(FAST, kueue_admission_fair_sharing=SETTINGS)
    async with ControllerManager(objects, settings=settings, clock=clock) as running:
        yield running


async def shared_queue(objects: ObjectStore, manager: ControllerManager, mode: str) -> None:
    """One ClusterQueue of 8 GPUs in ``mode`` behind two LocalQueues, heavy and light."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    cq = team_queue("shared", 8)
    cq["spec"]["admissionScope"] = {"admissionMode": mode}
    await create(objects, cq)
    for name in ("heavy", "light"):
        await create(objects, kueue_obj("LocalQueue", name, "default", spec={"clusterQueue": "shared"}))
    await settled(manager)


async def consumed(objects: ObjectStore, local_queue: str) -> dict[str, Any] | None:
    lq = await get(objects, KUEUE, "LocalQueue", local_queue)
    history = (((lq or {}).get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")
    return history if isinstance(history, dict) else None


async def waiting(objects: ObjectStore, name: str) -> bool | None:
    reserved = condition(await queued_workload(objects, "Deployment", name), "QuotaReserved")
    return True if reserved.get("status") == "False" else None


@pytest.mark.parametrize(("mode", "first"), [("UsageBasedAdmissionFairSharing", "l1"), ("NoAdmissionFairSharing", "h2")])
async def test_the_local_queue_that_consumed_more_waits_behind_the_other(
    objects: ObjectStore, afs_manager: ControllerManager, mode: str, first: str,
) -> None:
    await shared_queue(objects, afs_manager, mode)
    await create(objects, queued("h1", "heavy", replicas=8))  # heavy takes the whole quota
    assert await eventually(admitted_probe(objects, "h1"), what="h1 admitted") == "shared"
    await create(objects, queued("h2", "heavy", replicas=8))  # queued first ...
    await eventually(lambda: waiting(objects, "h2"), what="h2 waiting")
    await create(objects, queued("l1", "light", replicas=8))  # ... and light's after it
    await eventually(lambda: waiting(objects, "l1"), what="l1 waiting")
    await objects.delete(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="h1")
    assert await eventually(admitted_probe(objects, first), what=f"{first} admitted") == "shared"
    other = "h2" if first == "l1" else "l1"
    assert await waiting(objects, other)


async def test_consumed_resources_get_the_entry_penalty_at_once_then_decay_with_the_half_life(
    objects: ObjectStore, afs_manager: ControllerManager, clock: Clock,
) -> None:
    await create(objects, kueue_obj("LocalQueue", "held", "default", spec={"clusterQueue": "shared", "stopPolicy": "Hold"}))
    await shared_queue(objects, afs_manager, "UsageBasedAdmissionFairSharing")
    assert await consumed(objects, "held") is None  # as Kueue: a stopped LocalQueue is not sampled
    # Kueue's first sample: nothing consumed yet.
    assert await consumed(objects, "heavy") == {"consumedResources": {}, "lastUpdate": "2026-01-05T09:00:00Z"}
    assert await consumed(objects, "light") == {"consumedResources": {}, "lastUpdate": "2026-01-05T09:00:00Z"}
    await create(objects, queued("h1", "heavy", replicas=8))
    assert await eventually(admitted_probe(objects, "h1"), what="h1 admitted") == "shared"

    async def penalized() -> dict[str, Any] | None:
        history = await consumed(objects, "heavy")
        return history if history and history["consumedResources"] else None

    # The entry penalty: 8 GPUs and 8 cores times 1 - 0.5 ** (300 / 600) = 0.29289…: 2.343 each.
    assert await eventually(penalized, what="heavy's entry penalty") == {
        "consumedResources": {"cpu": "2343m", "nvidia.com/gpu": "2343m"}, "lastUpdate": "2026-01-05T09:00:00Z",
    }
    assert (await consumed(objects, "light") or {}).get("consumedResources") == {}

    # A sampling interval later: 2.343 * 0.70710678 = 1.656 of the history, 8 * 0.29289321 = 2.343 of what runs.
    clock.now = T0 + timedelta(seconds=300)
    await create(objects, kueue_obj("ResourceFlavor", "nudge", spec={}))  # any queue object runs the cycle

    async def sampled() -> dict[str, Any] | None:
        history = await consumed(objects, "heavy")
        return history if history and history["lastUpdate"] == "2026-01-05T09:05:00Z" else None

    assert (await eventually(sampled, what="heavy sampled"))["consumedResources"] == {"cpu": "3999m", "nvidia.com/gpu": "3999m"}
    assert (await consumed(objects, "light") or {}).get("consumedResources") == {}


async def test_an_admission_scope_needs_a_mode_of_any_name(objects: ObjectStore) -> None:
    """``admissionMode`` is required; Kueue's CRD names no values (its scheduler orders by usage
    only for UsageBasedAdmissionFairSharing), so another is kept."""
    cq = team_queue("shared", 8)
    cq["spec"]["admissionScope"] = {}
    with pytest.raises(errors.Invalid) as refused:
        await create(objects, cq)
    assert "spec.admissionScope.admissionMode: Required value" in str(refused.value)
    cq["spec"]["admissionScope"] = {"admissionMode": "Sometimes"}
    created = await create(objects, cq)
    assert created["spec"]["admissionScope"] == {"admissionMode": "Sometimes"}
