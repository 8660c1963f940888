"""Kueue's pod integration at the hub: a Pod created with a queue name gets Kueue's scheduling gate
``kueue.x-k8s.io/admission`` (its webhook), keeps it while its Workload waits, loses it when the
Workload is admitted (with the flavor's node labels merged into its nodeSelector), and the Pod a
member gets never carries the gate; kube's rule holds: a gate may not be added back. While held,
the Pod says ``PodScheduled=False`` (``SchedulingGated``), as kube-scheduler marks a gated pod."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.admissiongate import hold_queued_workload
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, eventually, propagation_policy, queued_workload, settled
from .test_admission import GPU, PLACEMENT, condition, create, get, kueue_obj, solo_fleet
from .test_admission_checks import UPDATE, fleet_with_check, set_state
from .test_pod_replica import placed

pytestmark = pytest.mark.waiting

KUEUE_GATE = {"name": "kueue.x-k8s.io/admission"}


def queued_pod(name: str, *, gates: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "registry.local/train:1", "resources": {"limits": {GPU: "1"}}}]}
    if gates:
        spec["schedulingGates"] = gates
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec, "metadata": {
        "name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "solo-lq"}}}


async def solo_queue(objects: ObjectStore, manager: ControllerManager) -> None:
    """One cluster of A100s, a ClusterQueue of 1 GPU whose flavor names the GPU product, no LocalQueue yet."""
    objects.check_creates(hold_queued_workload)  # as the hub's API creates Pods
    await solo_fleet(objects, gpus=1)
    await create(objects, propagation_policy("pods", kind="Pod", api_version="v1", placement=PLACEMENT))
    await settled(manager)


async def test_a_queued_pod_is_gated_until_admitted_and_members_never_see_the_gate(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await solo_queue(objects, manager)
    created = await create(objects, queued_pod("p1", gates=[{"name": "example.com/mine"}]))
    assert created["spec"]["schedulingGates"] == [{"name": "example.com/mine"}, KUEUE_GATE]

    async def waiting() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Pod", "p1")
        return wl if condition(wl, "QuotaReserved").get("reason") == "Inadmissible" else None

    await eventually(waiting, what="p1's Workload waiting for its LocalQueue")
    await settled(manager)
    held = await get(objects, "v1", "Pod", "p1")
    assert held is not None and held["spec"]["schedulingGates"] == [{"name": "example.com/mine"}, KUEUE_GATE]
    assert "nodeSelector" not in held["spec"]
    assert await placed(objects, "p1") is None
    # As kube-scheduler marks a gated pod (`kubectl get pod` says SchedulingGated).
    gated = condition(held, "PodScheduled")
    assert (gated["status"], gated["reason"], gated["message"]) == (
        "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")

    await create(objects, kueue_obj("LocalQueue", "solo-lq", "default", spec={"clusterQueue": "solo"}))
    works = await eventually(lambda: placed(objects, "p1"), what="p1 placed once admitted")
    started = await get(objects, "v1", "Pod", "p1")
    assert started is not None and started["spec"]["schedulingGates"] == [{"name": "example.com/mine"}]
    assert started["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": A100}  # the admitted flavor's
    assert condition(await queued_workload(objects, "Pod", "p1"), "Admitted")["status"] == "True"
    (manifest,) = works["onprem"]["spec"]["workload"]["manifests"]
    assert manifest["spec"]["schedulingGates"] == [{"name": "example.com/mine"}]  # the user's own gate only
    assert manifest["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == A100

    # kube's rule: after create, scheduling gates may only be removed.
    regated = {**started, "spec": {**started["spec"], "schedulingGates": [{"name": "example.com/mine"}, KUEUE_GATE]}}
    with pytest.raises(errors.Invalid) as refused:
        await objects.update(objects.registry.require("v1", "Pod"), regated)
    assert "only deletion is allowed, but found new scheduling gate 'kueue.x-k8s.io/admission'" in str(refused.value)


async def test_a_pod_without_a_queue_name_is_not_gated(objects: ObjectStore, manager: ControllerManager) -> None:
    await solo_queue(objects, manager)
    plain = queued_pod("plain")
    del plain["metadata"]["labels"]
    created = await create(objects, plain)
    assert "schedulingGates" not in created["spec"]
    assert (await eventually(lambda: placed(objects, "plain"), what="the plain Pod placed")).keys() == {"onprem"}


async def test_a_pod_its_queue_cannot_admit_stays_gated(objects: ObjectStore, manager: ControllerManager) -> None:
    """A Pod whose nodeSelector no flavor of its ClusterQueue matches is never admitted: it keeps
    Kueue's gate and is not placed."""
    await solo_queue(objects, manager)
    await create(objects, kueue_obj("LocalQueue", "solo-lq", "default", spec={"clusterQueue": "solo"}))
    other = queued_pod("h100")
    other["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    await create(objects, other)

    async def inadmissible() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Pod", "h100")
        return wl if condition(wl, "QuotaReserved").get("status") == "False" else None

    await eventually(inadmissible, what="the H100 Pod not admitted in the A100 flavor")
    await settled(manager)
    held = await get(objects, "v1", "Pod", "h100")
    assert held is not None and held["spec"]["schedulingGates"] == [KUEUE_GATE]
    assert await placed(objects, "h100") is None


async def test_a_queued_pod_bound_to_a_node_is_refused_as_kube_refuses_it(objects: ObjectStore, manager: ControllerManager) -> None:
    """Kueue's webhook gates the Pod before kube validates it: a Pod with ``nodeName`` cannot be
    gated, so it is not created."""
    await solo_queue(objects, manager)
    bound = queued_pod("bound")
    bound["spec"]["nodeName"] = "node-1"
    with pytest.raises(errors.Invalid) as refused:
        await create(objects, bound)
    assert str(refused.value) == 'Pod "bound" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared'
    assert await get(objects, "v1", "Pod", "bound") is None


async def test_a_ready_checks_pod_set_updates_start_the_pod_and_a_conflict_keeps_it_gated(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """As a Job: a Ready check's podSetUpdates are merged into the Pod as its gate goes; one that
    contradicts the Pod is Kueue's FailedToStart, and the Pod keeps its gate."""
    objects.check_creates(hold_queued_workload)
    await fleet_with_check(objects, manager)
    await create(objects, propagation_policy("pods", kind="Pod", api_version="v1", placement=PLACEMENT))
    for name, selector in (("fits", None), ("clash", {"nvidia.com/gpu.product": "H100"})):
        queued = queued_pod(name)
        queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-a"
        if selector:
            queued["spec"]["nodeSelector"] = selector
        await create(objects, queued)

        async def reserved(name: str = name) -> dict[str, Any] | None:
            wl = await queued_workload(objects, "Pod", name)
            return wl if condition(wl, "QuotaReserved").get("status") == "True" and wl["status"].get("admissionChecks") else None

        await eventually(reserved, what=f"{name}'s quota reserved, its check pending")
        await set_state(objects, "Pod", name, "budget", "Ready", podSetUpdates=[UPDATE])

    await eventually(lambda: placed(objects, "fits"), what="the Pod started with the check's updates")
    started = await get(objects, "v1", "Pod", "fits")
    assert started is not None and "schedulingGates" not in started["spec"]
    assert started["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": A100}
    assert started["spec"]["tolerations"] == UPDATE["tolerations"]
    assert started["metadata"]["labels"]["budget.example.com/tier"] == "gold"

    async def failed() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Pod", "clash")
        return wl if condition(wl, "Finished").get("status") == "True" else None

    finished = condition(await eventually(failed, what="the clashing Pod's Workload finished"), "Finished")
    assert finished["reason"] == "FailedToStart" and "conflict for key=nvidia.com/gpu.product" in finished["message"]
    await settled(manager)
    held = await get(objects, "v1", "Pod", "clash")
    assert held is not None and held["spec"]["schedulingGates"] == [KUEUE_GATE]
    assert await placed(objects, "clash") is None
