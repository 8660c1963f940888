"""The federation loop end to end in one process: workload + policy -> binding -> Works ->
status back, deletion, explanation, and a restart that changes nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.constants import FINALIZER_WORKLOAD, LABEL_BINDING, LABEL_WORK_NAMESPACE
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import A100, TIERED, deployment, eventually, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

BINDING_API = "work.gpufed.io/v1alpha1"


def rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


async def get_or_none(objects: ObjectStore, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
    try:
        return await objects.get(rt(objects, api_version, kind), namespace=namespace, name=name)
    except errors.NotFound:
        return None


async def works_by_cluster(objects: ObjectStore, binding: str = "train-deployment") -> dict[str, dict[str, Any]]:
    listed = await objects.list(rt(objects, BINDING_API, "Work"), label_selector=f"{LABEL_BINDING}={binding},{LABEL_WORK_NAMESPACE}=default")
    return {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}


def replicas_of(works: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {name: w["spec"]["workload"]["manifests"][0]["spec"]["replicas"] for name, w in works.items()}


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] == ctype:
            return dict(cond)
    return None


async def onprem_and_cloud(objects: ObjectStore, *, onprem_free: int = 6) -> None:
    await put_cluster(objects, "onprem", node_shape(onprem_free, gpus=1))
    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws", pricing={A100: 4.1})


async def apply(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(rt(objects, obj["apiVersion"], obj["kind"]), obj)


async def binding_of(objects: ObjectStore, name: str = "train-deployment") -> dict[str, Any] | None:
    return await get_or_none(objects, BINDING_API, "ResourceBinding", "default", name)


async def test_policy_claims_workload_into_one_binding(objects: ObjectStore, manager: ControllerManager) -> None:
    await onprem_and_cloud(objects)
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("train", replicas=3))

    binding = await eventually(lambda: binding_of(objects), what="binding")
    spec = binding["spec"]
    assert spec["policy"] == {"kind": "PropagationPolicy", "name": "gpu-tiered", "namespace": "default"}
    assert spec["replicas"] == 3
    assert spec["replicaRequirements"]["resourceRequest"] == {"cpu": "1", "nvidia.com/gpu": "1"}
    assert spec["placement"] == TIERED
    assert spec["resource"]["kind"] == "Deployment" and spec["resource"]["name"] == "train"

    async def claimed() -> dict[str, Any] | None:
        hub = await get_or_none(objects, "apps/v1", "Deployment", "default", "train")
        cond = condition(hub, "Propagated")
        return hub if cond and cond["status"] == "True" else None

    hub = await eventually(claimed, what="Propagated=True")
    assert FINALIZER_WORKLOAD in hub["metadata"]["finalizers"]
    assert condition(hub, "Propagated")["reason"] == "PolicyClaimed"  # type: ignore[index]
    assert "PropagationPolicy default/gpu-tiered" in condition(hub, "Propagated")["message"]  # type: ignore[index]


async def test_workload_no_policy_claims_stays_on_the_hub_with_a_condition(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await onprem_and_cloud(objects)
    await apply(objects, propagation_policy("only-jobs", kind="Job", api_version="batch/v1"))
    await apply(objects, deployment("train", replicas=2))

    async def unclaimed() -> dict[str, Any] | None:
        return condition(await get_or_none(objects, "apps/v1", "Deployment", "default", "train"), "Propagated")

    cond = await eventually(unclaimed, what="Propagated condition")
    assert (cond["status"], cond["reason"]) == ("False", "NoPolicyMatched")
    await settled(manager)
    assert await binding_of(objects) is None
    assert await works_by_cluster(objects) == {}


async def test_tiered_overflow_then_scale_down_removes_the_cloud_work(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await onprem_and_cloud(objects, onprem_free=6)
    await apply(objects, propagation_policy("gpu-tiered"))
    created = await apply(objects, deployment("train", replicas=10))

    async def split() -> dict[str, int] | None:
        placed = replicas_of(await works_by_cluster(objects))
        return placed if placed == {"onprem": 6, "cloud": 4} else None

    await eventually(split, what="Works onprem=6, cloud=4")
    works = await works_by_cluster(objects)
    assert set(works["onprem"]["metadata"]["labels"]) >= {LABEL_BINDING, LABEL_WORK_NAMESPACE}
    assert works["onprem"]["metadata"]["name"] == "default-train-deployment"

    scaled = copy.deepcopy(await objects.get(rt(objects, "apps/v1", "Deployment"), namespace="default", name="train"))
    assert scaled["metadata"]["uid"] == created["metadata"]["uid"]
    scaled["spec"]["replicas"] = 4
    await objects.update(rt(objects, "apps/v1", "Deployment"), scaled)

    async def shrunk() -> dict[str, int] | None:
        placed = replicas_of(await works_by_cluster(objects))
        return placed if placed == {"onprem": 4} else None

    await eventually(shrunk, what="cloud Work removed, onprem Work 4")


def pytorchjob(name: str, *, workers: int, gpus_per_worker: int) -> dict[str, Any]:
    def role(replicas: int, gpus: int) -> dict[str, Any]:
        resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1"}}
        return {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "pytorch", "image": "train:1", "resources": resources}]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Master": role(1, 0), "Worker": role(workers, gpus_per_worker)}},
    }


@pytest.mark.parametrize(
    ("workers", "expected"),
    [
        (3, {"big": 4}),  # 3 workers x 2 GPUs fit only on big's 8-GPU node
        (5, {}),  # 10 GPUs fit nowhere at once, even on empty nodes: nothing is placed, ever
    ],
)
async def test_gang_is_placed_whole_or_not_at_all(
    objects: ObjectStore, manager: ControllerManager, workers: int, expected: dict[str, int]
) -> None:
    # small has 6 free GPUs in total, one per node: no 2-GPU worker fits there.
    await put_cluster(objects, "small", node_shape(6, gpus=1))
    await put_cluster(objects, "big", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.0})
    await settled(manager)  # the scheduler knows both clusters' capacity before the job arrives
    await apply(objects, propagation_policy("gangs", kind="PyTorchJob", api_version="kubeflow.org/v1"))
    await apply(objects, pytorchjob("train", workers=workers, gpus_per_worker=2))

    async def decided() -> dict[str, Any] | None:
        binding = await binding_of(objects, "train-pytorchjob")
        return binding if condition(binding, "Scheduled") else None

    binding = await eventually(decided, what="a Scheduled condition")
    assert binding["spec"]["gang"] is True
    placed = {t["name"]: t["replicas"] for t in binding["spec"].get("clusters") or []}
    assert placed == expected
    scheduled = condition(binding, "Scheduled")
    assert scheduled is not None
    explanation = {e["cluster"]: e for e in binding["status"]["explanation"]}
    if expected:
        assert scheduled["status"] == "True"
        async def work_in_big() -> dict[str, int] | None:
            return replicas_of_jobs(await works_by_cluster(objects, "train-pytorchjob")) or None

        assert await eventually(work_in_big, what="the gang's Work") == {"big": workers}
    else:
        assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == (
            "False", "NeverFits", "can never fit: its 6 pods need 10 nvidia.com/gpu together; the largest cluster has 8"
        )
        assert not explanation["big"]["chosen"] and not explanation["small"]["chosen"]
        assert any("gang does not fit" in r for r in explanation["big"]["reasons"])
        await settled(manager)
        assert await works_by_cluster(objects, "train-pytorchjob") == {}


def replicas_of_jobs(works: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {
        name: w["spec"]["workload"]["manifests"][0]["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
        for name, w in works.items()
    }


def images(work: dict[str, Any]) -> list[str]:
    manifest = work["spec"]["workload"]["manifests"][0]
    return [c["image"] for c in manifest["spec"]["template"]["spec"]["containers"]]


async def test_override_policy_changes_the_image_only_in_the_cloud_work(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await onprem_and_cloud(objects)
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(
        objects,
        {
            "apiVersion": "policy.gpufed.io/v1alpha1",
            "kind": "OverridePolicy",
            "metadata": {"name": "cloud-mirror", "namespace": "default"},
            "spec": {
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                "overrideRules": [
                    {
                        "targetCluster": {"clusterNames": ["cloud"]},
                        "overriders": {
                            "imageOverrider": [{"component": "Registry", "operator": "replace", "value": "mirror.aws.example"}]
                        },
                    }
                ],
            },
        },
    )
    await apply(objects, deployment("train", replicas=10, image="registry.local/train:1"))

    async def both() -> dict[str, dict[str, Any]] | None:
        works = await works_by_cluster(objects)
        return works if set(works) == {"onprem", "cloud"} and images(works["cloud"]) != images(works["onprem"]) else None

    works = await eventually(both, what="two Works with different images")
    assert images(works["cloud"]) == ["mirror.aws.example/train:1"]
    assert images(works["onprem"]) == ["registry.local/train:1"]


async def report_work_status(objects: ObjectStore, work: dict[str, Any], *, ready: int, unschedulable: int = 0) -> None:
    """What the agent writes back: Applied at the current generation and the member Deployment's status."""
    manifest = work["spec"]["workload"]["manifests"][0]
    replicas = manifest["spec"]["replicas"]
    entry: dict[str, Any] = {
        "identifier": {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "default", "name": "train", "ordinal": 0},
        "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": replicas},
        "health": "Healthy" if ready == replicas else "Unhealthy",
    }
    if unschedulable:
        entry["unschedulable"] = {"pods": unschedulable, "message": "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."}
    status = {
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "all 1 manifest(s) applied",
             "lastTransitionTime": "2024-05-01T10:00:00Z", "observedGeneration": work["metadata"]["generation"]},
        ],
        "manifestStatuses": [entry],
    }
    await objects.update_status(rt(objects, BINDING_API, "Work"), {**work, "status": status})


async def test_member_statuses_sum_into_the_hub_deployment(objects: ObjectStore, manager: ControllerManager) -> None:
    await onprem_and_cloud(objects)
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("train", replicas=10))
    works = await eventually(lambda: _two_works(objects), what="two Works")
    await report_work_status(objects, works["onprem"], ready=6)
    await report_work_status(objects, works["cloud"], ready=3)

    async def summed() -> dict[str, Any] | None:
        hub = await get_or_none(objects, "apps/v1", "Deployment", "default", "train")
        return hub if ((hub or {}).get("status") or {}).get("readyReplicas") == 9 else None

    hub = await eventually(summed, what="readyReplicas 9 on the hub")
    assert hub["status"]["replicas"] == 10
    assert condition(hub, "Propagated") is not None  # the detector's condition survives the merge
    binding = await binding_of(objects)
    assert condition(binding, "FullyApplied")["status"] == "True"  # type: ignore[index]
    aggregated = {a["clusterName"]: a for a in binding["status"]["aggregatedStatus"]}  # type: ignore[index]
    assert aggregated["onprem"]["applied"] and aggregated["onprem"]["health"] == "Healthy"
    assert aggregated["cloud"]["health"] == "Unhealthy"


async def _two_works(objects: ObjectStore) -> dict[str, dict[str, Any]] | None:
    works = await works_by_cluster(objects)
    return works if len(works) == 2 else None


@pytest.mark.parametrize("propagation", [None, "Foreground"])
async def test_deleting_the_workload_deletes_its_works_then_the_hub_object(
    objects: ObjectStore, manager: ControllerManager, propagation: str | None
) -> None:
    await onprem_and_cloud(objects)
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("train", replicas=10))
    await eventually(lambda: _two_works(objects), what="two Works")
    await eventually(
        lambda: _has_finalizer(objects), what="the propagation finalizer"
    )

    result = await objects.delete(
        rt(objects, "apps/v1", "Deployment"), namespace="default", name="train", propagation_policy=propagation
    )
    assert not result.deleted  # the finalizer holds it until the Works are gone (and the garbage collector's)

    async def gone() -> bool:
        hub = await get_or_none(objects, "apps/v1", "Deployment", "default", "train")
        return hub is None

    await eventually(gone, what="the hub Deployment to go")
    assert await works_by_cluster(objects) == {}
    assert await binding_of(objects) is None


async def _has_finalizer(objects: ObjectStore) -> bool:
    hub = await get_or_none(objects, "apps/v1", "Deployment", "default", "train")
    return FINALIZER_WORKLOAD in ((hub or {}).get("metadata") or {}).get("finalizers", [])


async def test_binding_explains_every_cluster(objects: ObjectStore, manager: ControllerManager) -> None:
    await onprem_and_cloud(objects, onprem_free=6)
    await put_cluster(objects, "cpu-only", node_shape(4, gpus=0))
    await settled(manager)  # the scheduler has seen all three clusters
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("train", replicas=10))

    async def explained() -> list[dict[str, Any]] | None:
        binding = await binding_of(objects)
        return ((binding or {}).get("status") or {}).get("explanation")

    explanation = {e["cluster"]: e for e in await eventually(explained, what="an explanation")}
    assert set(explanation) == {"onprem", "cloud", "cpu-only"}
    assert explanation["onprem"]["chosen"] and explanation["onprem"]["replicas"] == 6
    assert explanation["cloud"]["chosen"] and explanation["cloud"]["pricePerGpuHour"] == 4.1
    assert explanation["onprem"]["tier"] == 0 and explanation["cloud"]["tier"] == 1
    rejected = explanation["cpu-only"]
    assert not rejected["chosen"] and rejected["replicas"] == 0
    assert any("insufficient nvidia.com/gpu: need 1, 0 free" in r for r in rejected["reasons"]), rejected


async def test_unschedulable_replicas_move_after_the_grace_period(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await onprem_and_cloud(objects, onprem_free=6)
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("train", replicas=10))
    works = await eventually(lambda: _two_works(objects), what="two Works")
    # The member's scheduler cannot place 2 of onprem's 6 pods (the hub's view was optimistic).
    await report_work_status(objects, works["onprem"], ready=4, unschedulable=2)

    async def moved() -> dict[str, int] | None:
        placed = replicas_of(await works_by_cluster(objects))
        return placed if placed == {"onprem": 4, "cloud": 6} else None

    await eventually(moved, what="2 replicas moved from onprem to cloud")
    binding = await binding_of(objects)
    onprem = next(e for e in binding["status"]["explanation"] if e["cluster"] == "onprem")  # type: ignore[index]
    assert any("unschedulable" in r for r in onprem["reasons"])


async def snapshot_versions(objects: ObjectStore) -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for api_version, kind in (
        ("apps/v1", "Deployment"), (BINDING_API, "ResourceBinding"), (BINDING_API, "Work"), ("v1", "Event"),
        ("cluster.gpufed.io/v1alpha1", "Cluster"),
    ):
        for obj in (await objects.list(rt(objects, api_version, kind))).items:
            meta = obj["metadata"]
            out[(kind, meta.get("namespace") or "", meta["name"])] = meta["resourceVersion"]
    return out


async def test_a_restarted_manager_changes_nothing(objects: ObjectStore) -> None:
    await onprem_and_cloud(objects)
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("train", replicas=10))
    await apply(objects, deployment("idle", replicas=1, labels={"app": "idle"}, namespace="default") | {"apiVersion": "apps/v1"})
    async with ControllerManager(objects, settings=FAST) as first:
        works = await eventually(lambda: _two_works(objects), what="two Works")
        await report_work_status(objects, works["onprem"], ready=6)
        await report_work_status(objects, works["cloud"], ready=4)
        await eventually(lambda: _ready(objects, 10), what="readyReplicas 10")
        await settled(first, settle=0.3)
    before = await snapshot_versions(objects)
    assert ("Work", "gpufed-es-cloud", "default-train-deployment") in before

    async with ControllerManager(objects, settings=FAST) as second:
        await settled(second, settle=0.3)
    after = await snapshot_versions(objects)
    assert after == before


async def _ready(objects: ObjectStore, ready: int) -> bool:
    hub = await get_or_none(objects, "apps/v1", "Deployment", "default", "train")
    return ((hub or {}).get("status") or {}).get("readyReplicas") == ready


async def test_reserved_capacity_is_not_promised_twice(objects: ObjectStore, manager: ControllerManager) -> None:
    await onprem_and_cloud(objects, onprem_free=6)
    await settled(manager)
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("first", replicas=6))
    await eventually(lambda: _placed(objects, "first-deployment"), what="first placed")
    await apply(objects, deployment("second", replicas=6))
    # No new capacity report came: onprem's 6 GPUs are still promised to "first".
    assert await eventually(lambda: _placed(objects, "second-deployment"), what="second placed") == {"cloud": 6}
    assert await _placed(objects, "first-deployment") == {"onprem": 6}


async def _placed(objects: ObjectStore, name: str) -> dict[str, int] | None:
    binding = await binding_of(objects, name)
    clusters = ((binding or {}).get("spec") or {}).get("clusters")
    return {t["name"]: t["replicas"] for t in clusters} if clusters else None


async def test_a_partly_placed_binding_is_retried_when_capacity_appears(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await onprem_and_cloud(objects, onprem_free=6)
    await settled(manager)
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("train", replicas=30))

    async def unschedulable() -> dict[str, Any] | None:
        cond = condition(await binding_of(objects), "Scheduled")
        return cond if cond and cond["status"] == "False" else None

    cond = await eventually(unschedulable, what="Scheduled=False")
    assert cond["reason"] == "Unschedulable" and "8 of 30 replicas do not fit" in cond["message"]
    events = (await objects.list(rt(objects, "v1", "Event"), namespace="default")).items
    assert any(e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "train" for e in events)

    # The cloud's agent reports a bigger pool: the binding is scheduled again, without a spec change.
    await put_cluster(objects, "cloud", node_shape(3, gpus=8), provider="aws", pricing={A100: 4.1},
                      report_time="2024-05-01T10:05:00Z")

    async def placed() -> dict[str, int] | None:
        got = await _placed(objects, "train-deployment")
        return got if got == {"onprem": 6, "cloud": 24} else None

    await eventually(placed, what="all 30 replicas placed")
    assert condition(await binding_of(objects), "Scheduled")["status"] == "True"  # type: ignore[index]


async def test_a_job_goes_to_its_member_defaulted_without_the_hubs_selector(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """The hub stores the Job as kube would (defaults, a selector on its own uid); the Work
    carries the defaults and leaves the selector for the member to generate."""
    await onprem_and_cloud(objects)
    await apply(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1"))
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "registry.local/train:1", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        ]}}},
    }
    hub = await apply(objects, job)
    assert hub["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": hub["metadata"]["uid"]}}

    async def work() -> dict[str, Any] | None:
        works = await works_by_cluster(objects, "train-job")
        return next(iter(works.values()), None)

    manifest = (await eventually(work, what="a Work of the Job"))["spec"]["workload"]["manifests"][0]
    assert "selector" not in manifest["spec"]
    assert "labels" not in manifest["spec"]["template"].get("metadata", {})
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert manifest["spec"]["backoffLimit"] == 6 and manifest["spec"]["completionMode"] == "NonIndexed"
