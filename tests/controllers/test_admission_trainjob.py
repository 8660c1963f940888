"""Kueue's admission of a Kubeflow Trainer TrainJob at the hub: created with a queue name it is
stored suspended, gets a Workload whose pod sets are its runtime's replicated Jobs, waits for
quota, and once admitted is unsuspended with its flavor's node labels in Kueue's runtime patch
(and so in its Work); evicted (its queue drained), it is suspended again with the patch emptied."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, eventually, node_shape, propagation_policy, put_cluster, queued_workload, settled
from .test_admission import GPU, PLACEMENT, condition, create, get, kueue_obj, team_queue

API = "trainer.kubeflow.org/v1alpha1"
WORK = "work.gpufed.io/v1alpha1"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
KUEUE_MANAGER = "kueue.x-k8s.io/manager"


def step(name: str, ancestor: str, resources: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "template": {"metadata": {"labels": {ANCESTOR: ancestor}}, "spec": {"template": {"spec": {
        "containers": [{"name": name if ancestor != "trainer" else "node", "image": "train:1", "resources": resources}]}}}}}


def runtime() -> dict[str, Any]:
    return {"apiVersion": API, "kind": "TrainingRuntime", "metadata": {"name": "torch", "namespace": "default"}, "spec": {
        "mlPolicy": {"numNodes": 2},
        "template": {"spec": {"replicatedJobs": [
            step("dataset-initializer", "dataset-initializer", {"requests": {"cpu": "1"}}),
            step("node", "trainer", {"limits": {GPU: "1"}}),
        ]}},
    }}


def trainjob(name: str, gpus_per_node: int) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
            "spec": {"runtimeRef": {"name": "torch", "kind": "TrainingRuntime"},
                     "trainer": {"resourcesPerNode": {"limits": {GPU: str(gpus_per_node)}}}}}


def kueue_jobs(obj: dict[str, Any]) -> list[dict[str, Any]] | None:
    for patch in obj["spec"].get("runtimePatches") or ():
        if patch["manager"] == KUEUE_MANAGER:
            return patch["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs")
    return None


async def test_a_queued_trainjob_waits_for_quota_then_starts_with_its_flavor_in_kueues_runtime_patch(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={
        "nodeLabels": {"gpufed.io/pool": "onprem", "nvidia.com/gpu.product": A100}}))
    await create(objects, team_queue("team-a", 8))
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, propagation_policy("training", kind="TrainJob", api_version=API, placement=PLACEMENT))
    await create(objects, runtime())
    await settled(manager)
    await create(objects, trainjob("first", 4))  # 2 nodes of 4 GPUs: the whole quota

    async def admitted(name: str) -> dict[str, Any] | None:
        wl = await queued_workload(objects, "TrainJob", name)
        return wl if condition(wl, "Admitted").get("status") == "True" else None

    wl = await eventually(lambda: admitted("first"), what="the first TrainJob admitted")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("dataset-initializer", 1), ("node", 2)]
    assert wl["spec"]["podSets"][1]["template"]["spec"]["containers"][0]["resources"]["requests"] == {GPU: "4"}
    assert wl["metadata"]["name"].startswith("trainjob-first-")

    async def started(name: str) -> dict[str, Any] | None:
        obj = await get(objects, API, "TrainJob", name)
        return obj if obj and obj["spec"].get("suspend") is False else None

    first = await eventually(lambda: started("first"), what="the first TrainJob started")
    selector = {"nvidia.com/gpu.product": A100}  # the cluster label places it; the node label selects nodes
    assert kueue_jobs(first) == [
        {"name": name, "template": {"spec": {"template": {"spec": {"nodeSelector": selector}}}}}
        for name in ("dataset-initializer", "node")]

    async def propagated() -> dict[str, Any] | None:
        works = (await objects.list(objects.registry.require(WORK, "Work"))).items
        manifests = [w["spec"]["workload"]["manifests"][0] for w in works if w["metadata"]["name"] == "default-first-trainjob"]
        return manifests[0] if manifests and manifests[0]["spec"].get("suspend") is False else None

    assert kueue_jobs(await eventually(propagated, what="the started TrainJob in its Work")) == kueue_jobs(first)

    # A second one waits for the quota the first holds, suspended, with no Work.
    await create(objects, trainjob("second", 1))

    async def waiting() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "TrainJob", "second")
        return wl if condition(wl, "QuotaReserved").get("status") == "False" else None

    await eventually(waiting, what="the second TrainJob waiting for quota")
    await settled(manager)
    second = await get(objects, API, "TrainJob", "second")
    assert second is not None and second["spec"]["suspend"] is True and kueue_jobs(second) is None

    # The queue drained: the first is suspended with Kueue's patch emptied.
    queues = objects.registry.require("kueue.x-k8s.io/v1beta1", "ClusterQueue")
    queue = await objects.get(queues, namespace=None, name="team-a")
    await objects.update(queues, {**queue, "spec": {**queue["spec"], "stopPolicy": "HoldAndDrain"}})

    async def stopped() -> dict[str, Any] | None:
        obj = await get(objects, API, "TrainJob", "first")
        return obj if obj and obj["spec"].get("suspend") is True and kueue_jobs(obj) is None else None

    await eventually(stopped, what="the first TrainJob suspended, its patch emptied")
    # The first gone and the queue running again, the second is admitted and started.
    await objects.delete(objects.registry.require(API, "TrainJob"), namespace="default", name="first")
    queue = await objects.get(queues, namespace=None, name="team-a")
    await objects.update(queues, {**queue, "spec": {k: v for k, v in queue["spec"].items() if k != "stopPolicy"}})
    second = await eventually(lambda: started("second"), what="the second TrainJob started")
    assert [job["name"] for job in kueue_jobs(second) or ()] == ["dataset-initializer", "node"]


async def test_a_queued_trainjob_gets_its_workload_once_its_runtime_exists(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await create(objects, team_queue("team-a", 8))
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await settled(manager)
    await create(objects, trainjob("early", 1))
    await settled(manager)
    assert await queued_workload(objects, "TrainJob", "early") is None  # its pod sets are its runtime's
    await create(objects, runtime())

    async def made() -> dict[str, Any] | None:
        return await queued_workload(objects, "TrainJob", "early")

    wl = await eventually(made, what="the Workload made once the runtime exists")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("dataset-initializer", 1), ("node", 2)]
