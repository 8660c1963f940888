"""Fleet admission with fair sharing on (``--kueue-fair-sharing``): ClusterQueues and Cohorts
report their weighted share (in their status and as Kueue's ``kueue_*_weighted_share`` gauges), and a queue reclaiming its quota preempts by fair share — the
evicted Workload says ``InCohortFairSharing`` ("Fair Sharing within the cohort"), as Kueue does, and
only as the hub's ``--kueue-fair-sharing-preemption-strategies`` allow."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from controlplane.admission.core import INFINITE_SHARE
from controlplane.admission.core.fairsharing import PreemptionStrategy
from controlplane.admission.metrics import QueueMetrics
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster, queued_workload, settled
from .test_admission import KUEUE, PLACEMENT, condition, create, get, kueue_obj, team_queue
from .test_admission_preemption import admitted, job, team_a_borrows

pytestmark = pytest.mark.waiting

COHORT = "kueue.x-k8s.io/v1beta1"


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


@pytest.mark.parametrize(("strategies", "preempted"), [
    ((PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, PreemptionStrategy.LESS_THAN_INITIAL_SHARE), True),
    ((PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,), False),
])
async def test_the_hub_preempts_by_its_preemption_strategies(
    objects: ObjectStore, strategies: tuple[PreemptionStrategy, ...], preempted: bool,
) -> None:
    """Teams A 4, B 4 and C 8 GPUs in one cohort (16 to lend). A's greedy 12-GPU Job borrows 8
    (share 500); B holds its 4 and asks 2 more (it would borrow 2: share 125). Without greedy A
    would borrow nothing (share 0): 125 <= 0 fails LessThanOrEqualToFinalShare, 125 < 500 passes
    LessThanInitialShare. Kueue's default pair evicts greedy; the first strategy alone does not."""
    settings = dataclasses.replace(FAST, kueue_fair_sharing=True, kueue_fair_sharing_preemption_strategies=strategies)
    async with ControllerManager(objects, settings=settings) as manager:
        await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
        await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
        for team, gpus in (("team-a", 4), ("team-b", 4), ("team-c", 8)):
            cq = team_queue(team, gpus)
            cq["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
            await create(objects, cq)
            await create(objects, kueue_obj("LocalQueue", team, "default", spec={"clusterQueue": team}))
        await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
        await settled(manager)
        for name, team, pods in (("greedy", "team-a", 12), ("b1", "team-b", 4)):
            await create(objects, job(name, team, pods))
            assert await eventually(lambda n=name: admitted(objects, n), what=f"{name} admitted") == team  # type: ignore[misc]
        await create(objects, job("b2", "team-b", 2))
        if preempted:
            assert await eventually(lambda: admitted(objects, "b2"), what="b2 admitted") == "team-b"
            assert condition(await queued_workload(objects, "Job", "greedy"), "Preempted").get("reason") == "InCohortFairSharing"
        else:
            await settled(manager)
            assert await admitted(objects, "b2") is None
            assert await admitted(objects, "greedy") == "team-a"
