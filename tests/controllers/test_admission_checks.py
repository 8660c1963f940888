"""Kueue's admission checks at the hub: a Job whose ClusterQueue names an AdmissionCheck gets
quota (QuotaReserved) and the check ``Pending``, and stays suspended and unpropagated until the
check's controller sets it ``Ready`` (a status write, as ``kubectl patch --subresource=status``
does), and starts with the check's ``podSetUpdates`` in its pod template (its own back when
evicted); ``Retry`` evicts it back to its queue with the check reset to ``Pending`` (after
``requeueAfterSeconds``); ``Rejected`` deactivates it. A ClusterQueue naming a missing or inactive check is inactive, as in Kueue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Unpack

import pytest
from prometheus_client import CollectorRegistry

from controlplane.apis.timestamps import parse_time
from controlplane.apiserver.objects import ObjectStore, WriteArgs
from controlplane.controllers.manager import ControllerManager
from controlplane.hub import hub_registry
from controlplane.objectclient import ResourceType
from controlplane.storage import MemoryStore

from .conftest import FAST
from .fleet import (
    A100,
    eventually,
    node_shape,
    propagation_policy,
    put_cluster,
    queued_workload,
    queued_workload_name,
    settled,
)
from .test_admission import KUEUE, PLACEMENT, condition, create, get, kueue_obj, team_queue
from .test_admission_metrics import metered, value  # noqa: F401 (fixture)
from .test_admission_preemption import job, works_of
from .test_admission_stopping import active

pytestmark = pytest.mark.waiting


def check(name: str) -> dict[str, Any]:
    return kueue_obj("AdmissionCheck", name, spec={"controllerName": "example.com/budget"})


async def set_active(objects: ObjectStore, name: str, status: str) -> None:
    """What the check's controller does when it is ready to decide (``Active``)."""
    obj = await get(objects, KUEUE, "AdmissionCheck", name, None)
    assert obj is not None
    obj["status"] = {
        "conditions": [
            {
                "type": "Active",
                "status": status,
                "reason": "Ready",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    await objects.update_status(objects.registry.require(KUEUE, "AdmissionCheck"), obj)


async def set_state(
    objects: ObjectStore, kind: str, name: str, check_name: str, state: str, message: str = "", **extra: Any
) -> None:
    """``kubectl patch workload <wl> --subresource=status`` for the Workload of ``kind``/``name``:
    the check's controller decides."""
    wl = await queued_workload(objects, kind, name)
    assert wl is not None
    for s in wl["status"]["admissionChecks"]:
        if s["name"] == check_name:
            s.update(state=state, message=message, lastTransitionTime="2026-01-01T00:00:01Z", **extra)
    await objects.update_status(objects.registry.require(KUEUE, "Workload"), wl)


async def fleet_with_check(
    objects: ObjectStore, manager: ControllerManager, *, active_check: bool = True
) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(
        objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}})
    )
    await create(objects, check("budget"))
    if active_check:
        await set_active(objects, "budget", "True")
    queue = team_queue("team-a", 8)
    queue["spec"]["admissionChecks"] = ["budget"]
    await create(objects, queue)
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)


async def workload(objects: ObjectStore) -> dict[str, Any]:
    return await queued_workload(objects, "Job", "a1") or {"spec": {}, "status": {}}


async def reserved_with_checks(objects: ObjectStore) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        wl = await workload(objects)
        return (
            wl
            if condition(wl, "QuotaReserved").get("status") == "True" and wl["status"].get("admissionChecks")
            else None
        )

    return await eventually(probe, what="quota reserved, checks pending")


async def test_a_job_runs_only_once_its_admission_check_is_ready(
    objects: ObjectStore,
    metered: ControllerManager,  # noqa: F811
    registry: CollectorRegistry,
) -> None:
    manager = metered
    await fleet_with_check(objects, manager)
    await create(objects, job("a1", "team-a"))
    wl = await reserved_with_checks(objects)
    [state] = wl["status"]["admissionChecks"]
    assert (state["name"], state["state"], state["message"]) == ("budget", "Pending", "")
    assert state["lastTransitionTime"]
    assert condition(wl, "Admitted") == {}
    await settled(manager)
    hub_job = await get(objects, "batch/v1", "Job", "a1")
    assert hub_job is not None and hub_job["spec"]["suspend"] is True
    assert await works_of(objects, "a1") == []
    wl_name = await queued_workload_name(objects, "Job", "a1")
    assert (
        f"waiting for admission checks (Workload default/{wl_name}): budget (Pending)"
        in condition(hub_job, "Propagated")["message"]
    )
    assert value(registry, "kueue_quota_reserved_workloads_total", cluster_queue="team-a") == 1
    assert not value(registry, "kueue_admitted_workloads_total", cluster_queue="team-a")
    assert value(registry, "kueue_reserving_active_workloads", cluster_queue="team-a") == 1
    assert value(registry, "kueue_admitted_active_workloads", cluster_queue="team-a") == 0
    cq = await get(objects, KUEUE, "ClusterQueue", "team-a", None)
    assert cq is not None and (cq["status"]["reservingWorkloads"], cq["status"]["admittedWorkloads"]) == (
        1,
        0,
    )
    # The LocalQueue's usage, as Kueue's cache fills it: every flavor and resource of its ClusterQueue,
    # the quota reserved in flavorsReservation, the admitted workloads' in flavorUsage (none yet).
    lq = await get(objects, KUEUE, "LocalQueue", "team-a")
    reserved_totals = [
        {"name": f["name"], "resources": [{"name": r["name"], "total": r["total"]} for r in f["resources"]]}
        for f in cq["status"]["flavorsReservation"]
    ]
    assert any(r["total"] != "0" for f in reserved_totals for r in f["resources"])
    assert lq is not None and lq["status"]["flavorsReservation"] == reserved_totals
    assert [r["total"] for f in lq["status"]["flavorUsage"] for r in f["resources"]] == ["0"] * len(
        [r for f in reserved_totals for r in f["resources"]]
    )
    # The ClusterQueue's flavorsUsage likewise counts only admitted workloads (Kueue's AdmittedUsage).
    assert [r["total"] for f in cq["status"]["flavorsUsage"] for r in f["resources"]] == ["0"] * len(
        [r for f in reserved_totals for r in f["resources"]]
    )

    await set_state(objects, "Job", "a1", "budget", "Ready")

    async def admitted() -> dict[str, Any] | None:
        wl = await workload(objects)
        return wl if condition(wl, "Admitted").get("status") == "True" else None

    wl = await eventually(admitted, what="admitted once its check is ready")
    assert (condition(wl, "Admitted")["reason"], condition(wl, "Admitted")["message"]) == (
        "Admitted",
        "The workload is admitted",
    )
    assert await eventually(lambda: works_of(objects, "a1"), what="a1 propagated")
    hub_job = await get(objects, "batch/v1", "Job", "a1")
    assert hub_job is not None and hub_job["spec"]["suspend"] is False
    assert value(registry, "kueue_admitted_workloads_total", cluster_queue="team-a") == 1
    assert (
        value(registry, "kueue_local_queue_admitted_workloads_total", name="team-a", namespace="default") == 1
    )
    assert value(registry, "kueue_quota_reserved_workloads_total", cluster_queue="team-a") == 1
    await settled(manager)
    assert value(registry, "kueue_admitted_active_workloads", cluster_queue="team-a") == 1
    lq = await get(objects, KUEUE, "LocalQueue", "team-a")
    assert lq is not None and (lq["status"]["reservingWorkloads"], lq["status"]["admittedWorkloads"]) == (
        1,
        1,
    )
    assert lq["status"]["flavorUsage"] == lq["status"]["flavorsReservation"] == reserved_totals
    cq = await get(objects, KUEUE, "ClusterQueue", "team-a", None)
    assert cq is not None and cq["status"]["flavorsUsage"] == cq["status"]["flavorsReservation"]


async def test_retry_evicts_and_requeues_with_the_check_pending_again(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await fleet_with_check(objects, manager)
    await create(objects, job("a1", "team-a"))
    first = await reserved_with_checks(objects)
    await set_state(objects, "Job", "a1", "budget", "Retry", "no budget this hour")

    async def requeued() -> dict[str, Any] | None:
        wl = await workload(objects)
        [state] = wl["status"]["admissionChecks"]
        return wl if state["state"] == "Pending" and state["message"] else None

    wl = await eventually(requeued, what="evicted by the check and its state reset")
    [state] = wl["status"]["admissionChecks"]
    assert (state["message"], state.get("retryCount")) == (
        "Reset to Pending after eviction. Previously: Retry",
        1,
    )
    evicted = condition(wl, "Evicted")  # readmitted at once, the eviction is history
    assert "At least one admission check is false" in evicted["message"]
    assert (
        evicted["status"] == "True"
        or evicted["message"] == "Previously: At least one admission check is false"
    )
    # Back in line at once: its quota is reserved again, and it waits for the check again.
    again = await reserved_with_checks(objects)
    assert condition(again, "Admitted").get("status") != "True"
    assert (
        condition(again, "QuotaReserved")["lastTransitionTime"]
        >= condition(first, "QuotaReserved")["lastTransitionTime"]
    )
    assert condition(again, "Requeued")["status"] == "True"
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    wl_name = await queued_workload_name(objects, "Job", "a1")
    assert any(
        e["reason"] == "EvictedDueToAdmissionCheck" and e["involvedObject"]["name"] == wl_name for e in events
    )


async def test_rejected_deactivates_the_workload(objects: ObjectStore, manager: ControllerManager) -> None:
    await fleet_with_check(objects, manager)
    await create(objects, job("a1", "team-a"))
    await reserved_with_checks(objects)
    await set_state(objects, "Job", "a1", "budget", "Rejected", "over budget")

    async def deactivated() -> dict[str, Any] | None:
        wl = await workload(objects)
        return (
            wl
            if wl["spec"].get("active") is False and condition(wl, "Evicted").get("status") == "True"
            else None
        )

    wl = await eventually(deactivated, what="deactivated by the rejection")
    evicted = condition(wl, "Evicted")
    assert (evicted["reason"], evicted["message"]) == (
        "DeactivatedDueToAdmissionCheck",
        "The workload is deactivated due to Admission check(s): budget, were rejected",
    )
    assert "admission" not in wl["status"]
    await settled(manager)
    assert "admission" not in (await workload(objects))["status"]  # not admitted again
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    [warning] = [e for e in events if e["reason"] == "AdmissionCheckRejected"]
    assert (warning["type"], warning["message"]) == (
        "Warning",
        "Deactivating workload because AdmissionCheck for budget was Rejected: over budget",
    )


async def test_a_cluster_queue_with_a_missing_or_inactive_check_admits_nothing(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await fleet_with_check(objects, manager, active_check=False)
    assert await active(objects, "ClusterQueue", "team-a") == (
        "False",
        "AdmissionCheckInactive",
        "Can't admit new workloads: references inactive AdmissionCheck(s): [budget].",
    )
    await create(objects, job("a1", "team-a"))
    await settled(manager)
    assert condition(await workload(objects), "QuotaReserved").get("status") == "False"
    checks_rt = objects.registry.require(KUEUE, "AdmissionCheck")
    await objects.delete(checks_rt, name="budget")
    await settled(manager)
    # Kept by Kueue's finalizer while team-a names it; without it (as a user may take it off) it goes.
    kept = await get(objects, KUEUE, "AdmissionCheck", "budget", namespace=None)
    assert kept is not None and kept["metadata"]["deletionTimestamp"]
    assert kept["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    await objects.update(checks_rt, {**kept, "metadata": {**kept["metadata"], "finalizers": []}})
    await settled(manager)
    assert await active(objects, "ClusterQueue", "team-a") == (
        "False",
        "AdmissionCheckNotFound",
        "Can't admit new workloads: references missing AdmissionCheck(s): [budget].",
    )
    await create(objects, check("budget"))
    await set_active(objects, "budget", "True")
    await reserved_with_checks(objects)
    await settled(manager)
    assert await active(objects, "ClusterQueue", "team-a") == ("True", "Ready", "Can admit new workloads")


UPDATE = {
    "name": "main",
    "labels": {"budget.example.com/tier": "gold"},
    "annotations": {"budget.example.com/cost": "12"},
    "nodeSelector": {"nvidia.com/gpu.product": A100},
    "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
}


async def test_a_ready_checks_pod_set_updates_start_the_job_and_eviction_restores_its_template(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await fleet_with_check(objects, manager)
    await create(objects, job("a1", "team-a"))
    await reserved_with_checks(objects)
    queued = await get(objects, "batch/v1", "Job", "a1")
    assert queued is not None
    own_labels = queued["spec"]["template"]["metadata"]["labels"]  # kube's job-name and controller-uid
    await set_state(objects, "Job", "a1", "budget", "Ready", podSetUpdates=[UPDATE])

    async def started() -> dict[str, Any] | None:
        obj = await get(objects, "batch/v1", "Job", "a1")
        return obj if obj and obj["spec"].get("suspend") is False else None

    template = (await eventually(started, what="the Job started"))["spec"]["template"]
    assert template["metadata"] == {
        "labels": {**own_labels, **UPDATE["labels"]},
        "annotations": UPDATE["annotations"],
    }
    assert (template["spec"]["nodeSelector"], template["spec"]["tolerations"]) == (
        UPDATE["nodeSelector"],
        UPDATE["tolerations"],
    )

    async def propagated() -> dict[str, Any] | None:
        works = (await objects.list(objects.registry.require("work.gpufed.io/v1alpha1", "Work"))).items
        manifests = [
            w["spec"]["workload"]["manifests"][0] for w in works if w["metadata"]["name"] == "default-a1-job"
        ]
        return manifests[0] if manifests else None

    manifest = await eventually(propagated, what="a1 propagated")
    assert manifest["spec"]["template"]["metadata"]["annotations"] == UPDATE["annotations"]
    assert manifest["spec"]["template"]["spec"]["nodeSelector"] == UPDATE["nodeSelector"]
    binding = await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "a1-job")
    assert (
        binding is not None
        and binding["spec"]["replicaRequirements"]["nodeSelector"] == UPDATE["nodeSelector"]
    )

    await set_state(objects, "Job", "a1", "budget", "Retry", "no budget this hour")

    template = (await eventually(lambda: restored(objects), what="the Job suspended with its template back"))[
        "spec"
    ]["template"]
    assert template["metadata"] == {"labels": own_labels}
    assert "nodeSelector" not in template["spec"] and "tolerations" not in template["spec"]


async def restored(objects: ObjectStore) -> dict[str, Any] | None:
    """Job a1 suspended, and its pod template without the check's podSetUpdates (the suspension
    and the restore are two writes)."""
    obj = await get(objects, "batch/v1", "Job", "a1")
    if not obj or obj["spec"].get("suspend") is not True:
        return None
    return None if "nodeSelector" in obj["spec"]["template"]["spec"] else obj


class _RestoreLosesARace(ObjectStore):
    """The hub's store, where another writer changes a Job just before the admission controller
    writes its pod template back: that write conflicts, once."""

    raced = False

    async def update(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        spec = obj.get("spec") or {}
        if (
            (rt.api_version, rt.kind) == ("batch/v1", "Job")
            and subresource is None
            and not self.raced
            and spec.get("suspend") is True
            and "nodeSelector" not in spec["template"]["spec"]
        ):
            stored = await self.get(rt, namespace=obj["metadata"]["namespace"], name=obj["metadata"]["name"])
            if stored["spec"].get("suspend") is True and "nodeSelector" in stored["spec"]["template"]["spec"]:
                self.raced = True  # the write that takes the podSetUpdates off a suspended Job
                stored["metadata"].setdefault("annotations", {})["example.com/touched"] = "yes"
                await super().update(rt, stored)  # the other writer
        return await super().update(
            rt, obj, namespace=namespace, name=name, subresource=subresource, **options
        )


async def test_a_template_restore_that_loses_a_race_is_taken_again_on_the_latest_job() -> None:
    """A stop is three writes (suspend, startTime, template); a restore that conflicts with
    another writer is written again on the latest Job: once the Job is suspended no later sync
    would take it, and the waiting Workload would take the podSetUpdates as the Job's own (and
    restore them on every later stop)."""
    async with MemoryStore() as store:
        objects = _RestoreLosesARace(store, hub_registry(), garbage_collection=True)
        await objects.bootstrap()
        async with ControllerManager(objects, settings=FAST) as manager:
            await fleet_with_check(objects, manager)
            await create(objects, job("a1", "team-a"))
            await reserved_with_checks(objects)
            await set_state(objects, "Job", "a1", "budget", "Ready", podSetUpdates=[UPDATE])
            await eventually(lambda: works_of(objects, "a1"), what="a1 propagated")
            await set_state(objects, "Job", "a1", "budget", "Retry", "no budget this hour")

            await eventually(lambda: restored(objects), what="the Job's template back after the conflict")
            assert objects.raced
            await settled(manager)
            wl = await workload(objects)
            pod_template = wl["spec"]["podSets"][0]["template"]
            assert "nodeSelector" not in pod_template["spec"], pod_template
            assert "budget.example.com/tier" not in pod_template["metadata"].get("labels", {})


async def test_a_conflicting_pod_set_update_fails_the_job_to_start(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await fleet_with_check(objects, manager)
    queued = job("a1", "team-a")
    queued["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "H100"}
    await create(objects, queued)
    await reserved_with_checks(objects)
    await set_state(objects, "Job", "a1", "budget", "Ready", podSetUpdates=[UPDATE])

    async def failed() -> dict[str, Any] | None:
        wl = await workload(objects)
        return wl if condition(wl, "Finished").get("status") == "True" else None

    finished = condition(await eventually(failed, what="the Workload finished: FailedToStart"), "Finished")
    assert (finished["reason"], finished["message"]) == (
        "FailedToStart",
        f"invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for key=nvidia.com/gpu.product, value1=H100, value2={A100}",
    )
    await settled(manager)
    hub_job = await get(objects, "batch/v1", "Job", "a1")
    assert hub_job is not None and hub_job["spec"]["suspend"] is True
    assert hub_job["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "H100"}
    assert await works_of(objects, "a1") == []
    wl_name = await queued_workload_name(objects, "Job", "a1")
    assert (
        f"failed to start (Workload default/{wl_name}): invalid admission check"
        in condition(hub_job, "Propagated")["message"]
    )
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    assert [
        e["message"]
        for e in events
        if e["reason"] == "FinishedWorkload" and e["involvedObject"]["name"] == "a1"
    ] == [
        f"Workload 'default/{wl_name}' is declared finished"
    ]  # on the Job, as Kueue's job reconciler says it


async def test_retry_with_requeue_after_seconds_holds_the_workload_until_requeue_at(
    objects: ObjectStore,
    manager: ControllerManager,
) -> None:
    await fleet_with_check(objects, manager)
    await create(objects, job("a1", "team-a"))
    await reserved_with_checks(objects)
    before = datetime.now(UTC)
    await set_state(objects, "Job", "a1", "budget", "Retry", "no budget this hour", requeueAfterSeconds=3600)

    async def held() -> dict[str, Any] | None:
        wl = await workload(objects)
        return wl if condition(wl, "Requeued").get("status") == "False" else None

    wl = await eventually(held, what="evicted and held out of its queue")
    requeued = condition(wl, "Requeued")
    assert (requeued["reason"], requeued["message"]) == (
        "AdmissionCheck",
        "At least one admission check is false",
    )
    requeue_at = parse_time(wl["status"]["requeueState"]["requeueAt"])
    assert before + timedelta(seconds=3599) <= requeue_at <= datetime.now(UTC) + timedelta(seconds=3600)
    [state] = wl["status"]["admissionChecks"]
    assert (state["state"], state["requeueAfterSeconds"], state["retryCount"]) == ("Pending", 3600, 1)
    await settled(manager)
    wl = await workload(objects)
    assert "admission" not in wl["status"] and condition(wl, "QuotaReserved")["status"] == "False"
    hub_job = await get(objects, "batch/v1", "Job", "a1")
    assert (
        hub_job is not None
        and f"requeued at {wl['status']['requeueState']['requeueAt']}"
        in condition(hub_job, "Propagated")["message"]
    )
