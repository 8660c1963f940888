"""Fleet admission with fair sharing on (``--kueue-fair-sharing``): ClusterQueues and Cohorts
report their weighted share (in their status and as Kueue's ``kueue_*_weighted_share`` gauges), and a queue reclaiming its quota preempts by fair share — the
evicted Workload says ``InCohortFairSharing`` ("Fair Sharing within the cohort"), as Kueue does."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from controlplane.admission.core import INFINITE_SHARE
from controlplane.admission.metrics import QueueMetrics
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, queued_workload
from .test_admission import KUEUE, condition, create, get
from .test_admission_preemption import admitted, job, team_a_borrows

COHORT = "kueue.x-k8s.io/v1alpha1"


@pytest.fixture
async def fair_manager(objects: ObjectStore, registry: CollectorRegistry) -> AsyncIterator[ControllerManager]:
    settings = dataclasses.replace(FAST, kueue_fair_sharing=True)
    async with ControllerManager(objects, settings=settings, queue_metrics=QueueMetrics(registry)) as running:
        yield running


async def share(objects: ObjectStore, api_version: str, kind: str, name: str) -> int | None:
    obj = await get(objects, api_version, kind, name, namespace=None)
    value = (((obj or {}).get("status") or {}).get("fairSharing") or {}).get("weightedShare")
    return value if isinstance(value, int) else None


async def test_fair_sharing_reports_shares_and_preempts_by_share(
    objects: ObjectStore, fair_manager: ControllerManager, registry: CollectorRegistry
) -> None:
    await create(objects, {"apiVersion": COHORT, "kind": "Cohort", "metadata": {"name": "fleet"}, "spec": {"parentName": "org"}})
    await team_a_borrows(objects, fair_manager, {"preemption": {"reclaimWithinCohort": "Any"}, "fairSharing": {"weight": "1"}})

    async def a_share() -> int | None:
        return await share(objects, KUEUE, "ClusterQueue", "team-a") or None

    # 4 borrowed of the 16 the cohort could lend: 250 per thousand.
    assert await eventually(a_share, what="team-a's weighted share") == 250
    assert await share(objects, KUEUE, "ClusterQueue", "team-b") == 0
    assert await share(objects, COHORT, "Cohort", "fleet") == 0  # the cohort as a whole borrows nothing
    assert registry.get_sample_value("kueue_cluster_queue_weighted_share", {"cluster_queue": "team-a"}) == 250
    assert registry.get_sample_value("kueue_cluster_queue_weighted_share", {"cluster_queue": "team-b"}) == 0
    assert registry.get_sample_value("kueue_cohort_weighted_share", {"cohort": "fleet"}) == 0

    for name in ("b1", "b2"):  # team B takes its 8 back: b2 needs a3's borrowed GPUs
        await create(objects, job(name, "team-b"))
    assert await eventually(lambda: admitted(objects, "b2"), what="b2 admitted") == "team-b"
    a3: dict[str, Any] | None = await queued_workload(objects, "Job", "a3")
    preempted = condition(a3, "Preempted")
    assert preempted.get("reason") == "InCohortFairSharing"
    assert "due to Fair Sharing within the cohort" in str(preempted.get("message"))
    assert condition(a3, "QuotaReserved").get("status") == "False"

    async def a_share_back() -> int | None:
        value = await share(objects, KUEUE, "ClusterQueue", "team-a")
        return None if value != 0 else 1

    await eventually(a_share_back, what="team-a no longer borrows")


async def test_a_weight_zero_queue_that_borrows_reports_kueues_infinite_share(
    objects: ObjectStore, fair_manager: ControllerManager, registry: CollectorRegistry
) -> None:
    await team_a_borrows(objects, fair_manager, {"fairSharing": {"weight": "0"}})

    async def a_share() -> float | None:
        return registry.get_sample_value("kueue_cluster_queue_weighted_share", {"cluster_queue": "team-a"}) or None

    assert await eventually(a_share, what="team-a's weighted share") == float(INFINITE_SHARE)  # as Kueue sets it
    assert await share(objects, KUEUE, "ClusterQueue", "team-a") == INFINITE_SHARE
    assert 'kueue_cluster_queue_weighted_share{cluster_queue="team-a"} 9.223372036854776e+18' in (
        generate_latest(registry).decode()
    )
