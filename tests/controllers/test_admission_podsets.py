"""Kueue's start and stop of a queued job with several pod sets, at the hub: a JobSet is stored
suspended, and once admitted it is unsuspended with its flavor's node labels and its admission
check's ``podSetUpdates`` in every replicated Job's pod template (and so in its binding and its
Work); evicted, it is suspended again with every template its own again."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, eventually, node_shape, propagation_policy, put_cluster, queued_workload, settled
from .test_admission import GPU, PLACEMENT, condition, create, get, kueue_obj, team_queue
from .test_admission_checks import check, set_active, set_state

JOBSET = "jobset.x-k8s.io/v1alpha2"
WORK = "work.gpufed.io/v1alpha1"
ZONE = "example.com/zone"


def pod(app: str, resources: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "registry.local/train:1", "resources": {"limits": resources}}]}}


def jobset() -> dict[str, Any]:
    return {
        "apiVersion": JOBSET, "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {"replicatedJobs": [
            {"name": "leader", "replicas": 1, "template": {"spec": {"template": pod("leader", {"cpu": "1"})}}},
            {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": pod("worker", {GPU: "1"})}}},
        ]},
    }


def update(name: str) -> dict[str, Any]:
    return {"name": name, "labels": {"budget.example.com/set": name}, "annotations": {"budget.example.com/cost": "12"},
            "nodeSelector": {ZONE: "z1"}, "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}


def templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r["template"]["spec"]["template"] for r in obj["spec"]["replicatedJobs"]}


async def hub_jobset(objects: ObjectStore) -> dict[str, Any]:
    obj = await get(objects, JOBSET, "JobSet", "train")
    assert obj is not None
    return obj


async def test_a_jobset_starts_with_its_flavor_and_checks_in_every_replicated_job_and_is_restored(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    shape = node_shape(2, gpus=8)
    shape["labels"][ZONE] = "z1"
    await put_cluster(objects, "onprem", shape, labels={"gpufed.io/pool": "onprem"}, pods=[])
    # A cluster label (placement) and a node label (each pod set's nodeSelector).
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={
        "nodeLabels": {"gpufed.io/pool": "onprem", "nvidia.com/gpu.product": A100}}))
    await create(objects, check("budget"))
    await set_active(objects, "budget", "True")
    queue = team_queue("team-a", 8)
    queue["spec"]["admissionChecks"] = ["budget"]
    await create(objects, queue)
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, propagation_policy("jobsets", kind="JobSet", api_version=JOBSET, placement=PLACEMENT))
    await settled(manager)
    await create(objects, jobset())
    own = templates(await hub_jobset(objects))

    async def reserved() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "JobSet", "train")
        return wl if wl and wl.get("status", {}).get("admissionChecks") else None

    wl = await eventually(reserved, what="quota reserved, the check pending")
    assert [ps["name"] for ps in wl["spec"]["podSets"]] == ["leader", "workers"]
    queued = await hub_jobset(objects)
    assert queued["spec"]["suspend"] is True  # Kueue's JobSet webhook default

    await set_state(objects, "JobSet", "train", "budget", "Ready", podSetUpdates=[update("leader"), update("workers")])

    async def started() -> dict[str, Any] | None:
        obj = await get(objects, JOBSET, "JobSet", "train")
        return obj if obj and obj["spec"].get("suspend") is False else None

    started_templates = templates(await eventually(started, what="the JobSet started"))
    for name, template in started_templates.items():
        assert template["metadata"] == {
            "labels": {**own[name]["metadata"]["labels"], "budget.example.com/set": name},
            "annotations": {"budget.example.com/cost": "12"}}
        assert template["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": A100, ZONE: "z1"}
        assert template["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]

    async def propagated() -> dict[str, Any] | None:
        works = (await objects.list(objects.registry.require(WORK, "Work"))).items
        manifests = [w["spec"]["workload"]["manifests"][0] for w in works if w["metadata"]["name"] == "default-train-jobset"]
        return manifests[0] if manifests else None

    manifest = await eventually(propagated, what="the JobSet propagated")
    for name, template in templates(manifest).items():
        assert template["metadata"]["labels"]["budget.example.com/set"] == name
        assert template["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": A100, ZONE: "z1"}
    binding = await get(objects, WORK, "ResourceBinding", "train-jobset")
    assert binding is not None
    assert {c["name"]: c["replicaRequirements"]["nodeSelector"] for c in binding["spec"]["components"]} == {
        "leader": {"nvidia.com/gpu.product": A100, ZONE: "z1"}, "workers": {"nvidia.com/gpu.product": A100, ZONE: "z1"}}

    await set_state(objects, "JobSet", "train", "budget", "Retry", "no budget this hour")

    async def restored() -> dict[str, Any] | None:
        obj = await get(objects, JOBSET, "JobSet", "train")
        if not obj or obj["spec"].get("suspend") is not True:
            return None
        return None if any("nodeSelector" in t["spec"] for t in templates(obj).values()) else obj

    stopped = await eventually(restored, what="the JobSet suspended with its templates back")
    assert templates(stopped) == own
    await settled(manager)
    wl = await queued_workload(objects, "JobSet", "train")
    assert wl is not None and condition(wl, "Admitted").get("status") != "True"
    # The Workload keeps the JobSet's own templates, not the ones it started with.
    assert [copy.deepcopy(ps["template"]["metadata"]) for ps in wl["spec"]["podSets"]] == [
        {"labels": {"app": "leader"}}, {"labels": {"app": "worker"}}]
    assert (await hub_jobset(objects))["spec"]["suspend"] is True
