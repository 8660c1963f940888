"""Fleet preemption at the hub: team A borrows team B's idle quota; team B's in-quota Job then
reclaims it — A's borrowing Job is evicted wherever it runs (suspended again, its binding and
Works gone, its Workload Evicted and back in the queue, an Event naming the preemptor) and B's
Job is admitted in its place."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from controlplane.apis.kueue_conversion import cluster_queue_to_v1beta1
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.objectclient import ObjectClient

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
from .test_admission import GPU, KUEUE, PLACEMENT, condition, create, get, kueue_obj, team_queue

pytestmark = pytest.mark.waiting

WORK = "work.gpufed.io/v1alpha1"


class OneEventPerTurn:
    """The store, with each watch handing over its events one per turn of the event loop (as a
    loaded hub's etcd watch does): a controller may run between two events of one batch of writes."""

    def __init__(self, objects: ObjectStore) -> None:
        self._objects = objects

    def __getattr__(self, name: str) -> Any:
        return getattr(self._objects, name)

    async def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for event in self._objects.watch(*args, **kwargs):
            yield event
            await asyncio.sleep(0)


@pytest.fixture(params=["as-delivered", "one-event-per-turn"])
async def manager(objects: ObjectStore, request: pytest.FixtureRequest) -> AsyncIterator[ControllerManager]:
    """Both ways: the admission cycle must not decide again from a cache that holds some of its
    last cycle's writes and not the others (it evicted a second and a third Workload for one
    preemptor when it did)."""
    client = objects if request.param == "as-delivered" else cast(ObjectClient, OneEventPerTurn(objects))
    async with ControllerManager(client, settings=FAST) as running:
        yield running


def job(name: str, queue: str, pods: int = 4) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"parallelism": pods, "completions": pods, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "registry.local/train:1", "resources": {"limits": {GPU: "1"}}}]}}},
    }


async def admitted(objects: ObjectStore, name: str) -> str | None:
    wl = await queued_workload(objects, "Job", name)
    if condition(wl, "Admitted").get("status") != "True":
        return None
    return str(((wl or {}).get("status") or {})["admission"]["clusterQueue"])


async def works_of(objects: ObjectStore, name: str) -> list[str]:
    works = (await objects.list(objects.registry.require(WORK, "Work"))).items
    return [w["metadata"]["name"] for w in works if w["metadata"]["name"] == f"default-{name}-job"]


async def team_a_borrows(objects: ObjectStore, manager: ControllerManager, spec: dict[str, Any]) -> None:
    """An on-prem cluster; teams A and B with 8 GPUs each in one cohort (``spec`` added to both
    ClusterQueues); team A's three 4-GPU Jobs admitted, the third borrowing B's idle quota."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    for team in ("team-a", "team-b"):
        cq = team_queue(team, 8)
        cq["spec"].update(spec)
        await create(objects, cq)
        await create(objects, kueue_obj("LocalQueue", team, "default", spec={"clusterQueue": team}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)
    for name in ("a1", "a2", "a3"):  # 12 GPUs: 8 of team A's quota, 4 borrowed from idle team B
        await create(objects, job(name, "team-a"))
        assert await eventually(lambda n=name: admitted(objects, n), what=f"{name} admitted") == "team-a"  # type: ignore[misc]


async def test_an_in_quota_job_preempts_a_borrowing_one(objects: ObjectStore, manager: ControllerManager) -> None:
    await team_a_borrows(objects, manager, {"preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}})

    async def a3_bound() -> list[str] | None:
        return await works_of(objects, "a3") or None

    await eventually(a3_bound, what="a3's Work")
    await create(objects, job("b1", "team-b"))  # the 4 GPUs nobody borrows
    assert await eventually(lambda: admitted(objects, "b1"), what="b1 admitted") == "team-b"
    await create(objects, job("b2", "team-b"))  # within B's nominal quota: reclaims what A borrowed
    assert await eventually(lambda: admitted(objects, "b2"), what="b2 admitted after preempting") == "team-b"

    async def a3_evicted() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "a3")
        return wl if condition(wl, "Evicted").get("status") == "True" else None

    wl = await eventually(a3_evicted, what="a3's Workload evicted")
    evicted, preempted = condition(wl, "Evicted"), condition(wl, "Preempted")
    b2 = await queued_workload_name(objects, "Job", "b2")
    assert evicted["reason"] == "Preempted" and f"Workload: default/{b2}" in evicted["message"]
    assert "due to reclamation within the cohort" in evicted["message"]
    assert (preempted["status"], preempted["reason"]) == ("True", "InCohortReclamation")
    requeued = condition(wl, "Requeued")  # as Kueue: back in the queue at once, no backoff
    assert (requeued["status"], requeued["reason"]) == ("True", "Preempted") and "requeueState" not in wl["status"]
    assert "admission" not in wl["status"]
    reserved = condition(wl, "QuotaReserved")
    assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
    for other in ("a1", "a2"):
        assert await admitted(objects, other) == "team-a"

    async def a3_stopped() -> dict[str, Any] | None:
        # Writers in no set order: the job controller suspends the Job; the detector deletes its
        # binding (the Works go with it) and then, in a write of its own that is retried when
        # another write of the Job wins the race, says why in the Job's Propagated condition.
        obj = await get(objects, "batch/v1", "Job", "a3")
        gone = await get(objects, WORK, "ResourceBinding", "a3-job") is None and not await works_of(objects, "a3")
        told = condition(obj, "Propagated").get("message", "").startswith("evicted: ")
        return obj if gone and told and obj and obj["spec"].get("suspend") is True else None

    a3 = await eventually(a3_stopped, what="a3 suspended, its binding and Works gone, its Propagated condition saying why")
    propagated = condition(a3, "Propagated")
    assert (propagated["status"], propagated["reason"]) == ("False", "WaitingForQuota")
    assert "evicted: Preempted to accommodate" in propagated["message"] and f"Workload: default/{b2}" in propagated["message"]
    await settled(manager)
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    a3 = await queued_workload_name(objects, "Job", "a3")
    told = [e["message"] for e in events if e["involvedObject"]["name"] == a3 and e["reason"] == "Preempted"]
    assert told and f"default/{b2}" in told[0]
    assert await works_of(objects, "b2")
    cq_a = await get(objects, KUEUE, "ClusterQueue", "team-a", None)
    assert cq_a is not None and (cq_a["status"]["pendingWorkloads"], cq_a["status"]["admittedWorkloads"]) == (1, 2)

    # Once team B's Job goes, a3 is admitted again: the eviction is history, and it propagates anew.
    await objects.delete(objects.registry.require("batch/v1", "Job"), namespace="default", name="b2")
    assert await eventually(lambda: admitted(objects, "a3"), what="a3 admitted again") == "team-a"
    wl = await queued_workload(objects, "Job", "a3")
    evicted = condition(wl, "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("False", "QuotaReserved")
    assert evicted["message"].startswith("Previously: Preempted to accommodate")
    assert condition(wl, "Preempted")["status"] == "False"
    await eventually(a3_bound, what="a3's Work again")


async def test_the_preemptor_gets_what_its_evictions_freed(objects: ObjectStore, manager: ControllerManager) -> None:
    """Team A borrows all of team B's 8 GPUs (a4 last). Team B's older b0 wants 10 GPUs: more than
    its nominal quota, it cannot preempt. b2 (4, within B's quota) reclaims a4's. The next cycle
    decides b2 first: a4 does not borrow the freed GPUs back before b2 (to be evicted again)."""
    await team_a_borrows(objects, manager, {"preemption": {"reclaimWithinCohort": "Any"}})
    await create(objects, job("a4", "team-a"))
    assert await eventually(lambda: admitted(objects, "a4"), what="a4 admitted") == "team-a"
    await create(objects, job("b0", "team-b", pods=10))
    await create(objects, job("b2", "team-b"))
    assert await eventually(lambda: admitted(objects, "b2"), what="b2 admitted after preempting") == "team-b"
    await settled(manager)
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    # One eviction, no readmission: without the claim a4 (and then a3) borrowed the GPUs back and
    # were evicted again.
    a4, b2 = [await queued_workload_name(objects, "Job", name) for name in ("a4", "b2")]
    assert [e["involvedObject"]["name"] for e in events if e["reason"] == "Preempted"] == [a4]
    assert [e["involvedObject"]["name"] for e in events if e["reason"] == "Admitted"].count(a4) == 1
    evicted = condition(await queued_workload(objects, "Job", "a4"), "Evicted")
    assert evicted["status"] == "True" and f"Workload: default/{b2}" in evicted["message"]
    assert await admitted(objects, "a4") is None and await admitted(objects, "b0") is None
    for name in ("a1", "a2", "a3"):
        assert await admitted(objects, name) == "team-a"


async def test_a_subtree_takes_back_its_cohort_quota_from_another_subtree(objects: ObjectStore, manager: ControllerManager) -> None:
    """Hierarchical cohorts with fair sharing off: under org, research holds 8 GPUs of its own and
    prod none. team-a (in prod, no quota) borrows all 8; team-b (in research, no quota either)
    reclaims them although it borrows itself — the quota is its subtree's, which Kueue's tree rule
    gives it first — and team-a's most recent Job is evicted, ``InCohortReclamation``."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    quota = team_queue("unused", 8)["spec"]["resourceGroups"]
    for name, spec in (("org", {}), ("prod", {"parentName": "org"}), ("research", {"parentName": "org", "resourceGroups": quota})):
        await create(objects, {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
    for team, cohort in (("team-a", "prod"), ("team-b", "research")):
        cq = team_queue(team, 0)
        cq["spec"].update(cohort=cohort, preemption={"reclaimWithinCohort": "Any"})
        await create(objects, cq)
        await create(objects, kueue_obj("LocalQueue", team, "default", spec={"clusterQueue": team}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)
    for name in ("a1", "a2"):
        await create(objects, job(name, "team-a"))
        assert await eventually(lambda n=name: admitted(objects, n), what=f"{name} admitted") == "team-a"  # type: ignore[misc]
    await create(objects, job("b1", "team-b"))
    assert await eventually(lambda: admitted(objects, "b1"), what="b1 admitted after preempting") == "team-b"
    wl = await queued_workload(objects, "Job", "a2")
    preempted = condition(wl, "Preempted")
    assert (condition(wl, "Evicted").get("status"), preempted.get("reason")) == ("True", "InCohortReclamation")
    assert await admitted(objects, "a1") == "team-a"


@pytest.mark.parametrize(("preference", "a1_flavor", "b1_flavor"), [
    ("BorrowingOverPreemption", "cloud", "onprem"),
    ("PreemptionOverBorrowing", "onprem", "cloud"),
])
async def test_a_v1beta2_preference_decides_between_reclaiming_and_borrowing(
    objects: ObjectStore, manager: ControllerManager, preference: str, a1_flavor: str, b1_flavor: str,
) -> None:
    """Team A owns 4 GPUs of onprem, team B 4 of cloud, in one cohort. B's b1 takes onprem first,
    borrowing A's idle quota. A's a1 then either borrows B's idle cloud quota (borrowing over
    preemption: b1 keeps onprem) or reclaims its onprem quota from b1 (preemption over borrowing:
    b1 is evicted and admitted again in its own cloud quota). A's ClusterQueue is stored as a
    v1beta2 write stores it (the preference in its annotation)."""
    for pool in ("onprem", "cloud"):
        await put_cluster(objects, pool, node_shape(2, gpus=8), labels={"gpufed.io/pool": pool}, pods=[])
        await create(objects, kueue_obj("ResourceFlavor", pool, spec={"nodeLabels": {"gpufed.io/pool": pool}}))

    def queue(team: str, onprem: int, cloud: int, **spec: Any) -> dict[str, Any]:
        flavors = [{"name": f, "resources": [{"name": GPU, "nominalQuota": n}]} for f, n in (("onprem", onprem), ("cloud", cloud))]
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": team}, "spec": {
            "namespaceSelector": {}, "cohortName": "fleet", "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}], **spec}}

    fungibility = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": preference}
    await create(objects, cluster_queue_to_v1beta1(
        queue("team-a", 4, 0, preemption={"reclaimWithinCohort": "Any"}, flavorFungibility=fungibility)))
    await create(objects, cluster_queue_to_v1beta1(queue("team-b", 0, 4)))
    for team in ("team-a", "team-b"):
        await create(objects, kueue_obj("LocalQueue", team, "default", spec={"clusterQueue": team}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)

    async def flavor_of(name: str) -> str | None:
        wl = await queued_workload(objects, "Job", name)
        if condition(wl, "Admitted").get("status") != "True":
            return None
        return str((wl or {})["status"]["admission"]["podSetAssignments"][0]["flavors"][GPU])

    await create(objects, job("b1", "team-b"))
    assert await eventually(lambda: flavor_of("b1"), what="b1 admitted") == "onprem"
    await create(objects, job("a1", "team-a"))
    assert await eventually(lambda: flavor_of("a1"), what="a1 admitted") == a1_flavor
    assert await eventually(lambda: flavor_of("b1"), what="b1 admitted") == b1_flavor
    evicted = condition(await queued_workload(objects, "Job", "b1"), "Evicted")
    if b1_flavor == "onprem":
        assert evicted == {}
    else:
        assert "Preempted to accommodate" in evicted["message"] and "due to reclamation within the cohort" in evicted["message"]
