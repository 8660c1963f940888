"""Kueue's managed Pods at the hub: a queued Pod is marked as Kueue's pod webhook marks it (label
and finalizer ``kueue.x-k8s.io/managed``), its Workload carries Kueue's ``kueue.x-k8s.io/job-uid``,
and a started Pod whose Workload is evicted is stopped as Kueue's pod controller stops it (it
cannot be gated again): ``TerminationTarget=True`` with Kueue's reason, an Event ``Stopped``, the
Pod deleted. The finalizer goes once the Pod is deleted or finishes; members never get it."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.kueuepods import check_managed_label
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, queued_workload, settled
from .test_admission import condition, create, get, kueue_obj
from .test_admission_pods import KUEUE_GATE, queued_pod, solo_queue
from .test_admission_stopping import stop
from .test_pod_replica import placed
from .test_tier_return_loop import events_of

pytestmark = pytest.mark.waiting

MANAGED = "kueue.x-k8s.io/managed"
POD = ("v1", "Pod")


async def started_pod(objects: ObjectStore, manager: ControllerManager, name: str, **meta: Any) -> dict[str, Any]:
    """A queued Pod (``meta`` added to its metadata) admitted, started and placed."""
    await solo_queue(objects, manager)
    await create(objects, kueue_obj("LocalQueue", "solo-lq", "default", spec={"clusterQueue": "solo"}))
    pod = queued_pod(name)
    pod["metadata"].update(meta)
    await create(objects, pod)
    await eventually(lambda: placed(objects, name), what=f"{name} admitted and placed")
    started = await get(objects, *POD, name)
    assert started is not None and "schedulingGates" not in started["spec"]
    return started


async def test_a_queued_pod_is_marked_managed_and_its_workload_names_its_uid(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    started = await started_pod(objects, manager, "p1", finalizers=["example.com/keep"])
    assert started["metadata"]["labels"][MANAGED] == "true"
    assert {"example.com/keep", MANAGED} <= set(started["metadata"]["finalizers"])
    wl = await queued_workload(objects, "Pod", "p1")
    assert wl is not None and wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": started["metadata"]["uid"]}
    works = await placed(objects, "p1")
    assert works is not None
    (manifest,) = works["onprem"]["spec"]["workload"]["manifests"]
    # A member without Kueue: neither Kueue's marks nor the hub's finalizers.
    assert "finalizers" not in manifest["metadata"]
    assert MANAGED not in manifest["metadata"].get("labels", {})
    assert "kueue.x-k8s.io/queue-name" not in manifest["metadata"].get("labels", {})


async def test_an_evicted_pod_is_stopped_as_kueue_stops_it(objects: ObjectStore, manager: ControllerManager) -> None:
    """Drained (``HoldAndDrain``), the started Pod gets ``TerminationTarget`` with reason
    ``WorkloadEvictedDueTo<the Evicted reason>``, an Event ``Stopped`` and is deleted; a finalizer
    of its own keeps it ``Terminating`` without Kueue's, and without it the Pod goes, with its
    Workload and its Works."""
    await started_pod(objects, manager, "p1", finalizers=["example.com/keep"])
    await stop(objects, "ClusterQueue", "solo", "HoldAndDrain")

    async def terminating() -> dict[str, Any] | None:
        pod = await get(objects, *POD, "p1")
        return pod if pod is not None and pod["metadata"].get("finalizers") == ["example.com/keep"] else None

    pod = await eventually(terminating, what="p1 stopped, Kueue's finalizer removed")
    assert pod["metadata"].get("deletionTimestamp")
    target = condition(pod, "TerminationTarget")
    assert (target["status"], target["reason"], target["message"]) == (
        "True", "WorkloadEvictedDueToClusterQueueStopped", "The ClusterQueue is stopped")
    assert "schedulingGates" not in pod["spec"]  # never gated again (kube forbids it)
    assert await events_of(objects, "Stopped") == ["The ClusterQueue is stopped"]
    await eventually(lambda: _gone(objects), what="p1's Workload deleted")

    del pod["metadata"]["finalizers"]
    await objects.update(objects.registry.require(*POD), pod)
    await settled(manager)
    assert await get(objects, *POD, "p1") is None
    assert await placed(objects, "p1") is None


async def _gone(objects: ObjectStore) -> bool:
    return await queued_workload(objects, "Pod", "p1") is None


async def test_a_finished_pod_loses_the_finalizer(objects: ObjectStore, manager: ControllerManager) -> None:
    started = await started_pod(objects, manager, "p1")
    await objects.update_status(objects.registry.require(*POD), {**started, "status": {"phase": "Succeeded"}})

    async def finalized() -> dict[str, Any] | None:
        pod = await get(objects, *POD, "p1")
        return pod if pod is not None and MANAGED not in pod["metadata"].get("finalizers", []) else None

    assert (await eventually(finalized, what="p1's finalizer removed"))["status"]["phase"] == "Succeeded"
    wl = await queued_workload(objects, "Pod", "p1")
    assert wl is not None and condition(wl, "Finished")["status"] == "True"
    assert condition(await get(objects, *POD, "p1") or {}, "TerminationTarget") == {}  # finished, not stopped


async def test_a_gated_pod_deleted_goes_and_a_started_one_without_workload_is_stopped(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """Deleting a held Pod is not held up by Kueue's finalizer; a started Pod whose Workload is
    deleted is stopped (``NoMatchingWorkload``), as Kueue stops a job it finds no Workload for."""
    await started_pod(objects, manager, "p1", finalizers=["example.com/keep"])
    held = queued_pod("held")
    held["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}  # no flavor for it
    await create(objects, held)
    wl = await eventually(lambda: queued_workload(objects, "Pod", "held"), what="held's Workload")
    await settled(manager)
    pod = await get(objects, *POD, "held")
    assert pod is not None and pod["spec"]["schedulingGates"] == [KUEUE_GATE] and pod["metadata"]["finalizers"] == [MANAGED]
    await objects.delete(objects.registry.require(*POD), namespace="default", name="held")
    await settled(manager)
    assert await get(objects, *POD, "held") is None
    assert await queued_workload(objects, "Pod", "held") is None

    wl = await queued_workload(objects, "Pod", "p1")
    assert wl is not None
    await objects.delete(objects.registry.require("kueue.x-k8s.io/v1beta1", "Workload"), namespace="default", name=wl["metadata"]["name"])

    async def stopped() -> dict[str, Any] | None:
        pod = await get(objects, *POD, "p1")
        return pod if pod is not None and condition(pod, "TerminationTarget") else None

    target = condition(await eventually(stopped, what="p1 stopped without its Workload"), "TerminationTarget")
    assert (target["reason"], target["message"]) == ("NoMatchingWorkload", "Missing Workload; unable to restore pod templates")




async def test_the_managed_label_can_only_be_true(objects: ObjectStore, manager: ControllerManager) -> None:
    """Kueue's pod webhook refuses any other value of ``kueue.x-k8s.io/managed``, on create (a Pod
    with no queue name too) and on update."""
    objects.admit_writes(check_managed_label)  # as the hub's API admits writes
    started = await started_pod(objects, manager, "p1")
    plain = queued_pod("plain")
    plain["metadata"]["labels"] = {MANAGED: "false"}
    with pytest.raises(errors.WebhookDenied) as refused:
        await create(objects, plain)
    assert str(refused.value) == ('admission webhook "vpod.kb.io" denied the request: '
                                  "metadata.labels[kueue.x-k8s.io/managed]: Forbidden: managed label value can only be 'true'")
    started["metadata"]["labels"][MANAGED] = "no"
    with pytest.raises(errors.WebhookDenied, match="managed label value can only be 'true'"):
        await objects.update(objects.registry.require(*POD), started)
