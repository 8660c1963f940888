"""Fleet admission with Kueue's API at the hub: a queued workload gets a Workload, is held (no
binding) until its ClusterQueue admits it, borrows a cohort's idle quota, waits with Kueue's
reason beyond it, is admitted when quota frees, and is placed where its flavor says."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import (
    A100,
    deployment,
    eventually,
    node_shape,
    propagation_policy,
    put_cluster,
    queued_workload,
    queued_workload_name,
    settled,
)

pytestmark = pytest.mark.waiting

KUEUE = "kueue.x-k8s.io/v1beta1"
GPU = "nvidia.com/gpu"
PLACEMENT = {"replicaScheduling": {"replicaSchedulingType": "Divided"}}


def kueue_obj(kind: str, name: str, namespace: str | None = None, **body: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": KUEUE, "kind": kind, "metadata": meta, **body}


def team_queue(name: str, gpus: int, *, flavor: str = "onprem") -> dict[str, Any]:
    return kueue_obj("ClusterQueue", name, spec={
        "namespaceSelector": {}, "cohort": "fleet",
        "resourceGroups": [{
            "coveredResources": ["cpu", GPU],
            "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 100}, {"name": GPU, "nominalQuota": gpus}]}],
        }],
    })


async def solo_fleet(objects: ObjectStore, *, gpus: int) -> None:
    """One cluster of A100s and a ClusterQueue ``solo`` of ``gpus`` GPUs whose flavor names the GPU product."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "a100", spec={"nodeLabels": {"nvidia.com/gpu.product": A100}}))
    await create(objects, kueue_obj("ClusterQueue", "solo", spec={
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "a100", "resources": [{"name": GPU, "nominalQuota": gpus}]}]}],
    }))


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    api_version, kind = obj["apiVersion"], obj["kind"]
    return await objects.create(objects.registry.require(api_version, kind), obj)


async def get(objects: ObjectStore, api_version: str, kind: str, name: str, namespace: str | None = "default") -> dict[str, Any] | None:
    try:
        return await objects.get(objects.registry.require(api_version, kind), namespace=namespace, name=name)
    except errors.NotFound:
        return None


def queued(name: str, queue: str, *, replicas: int = 4) -> dict[str, Any]:
    obj = deployment(name, replicas=replicas)
    obj["metadata"]["labels"] = {"app": name, "kueue.x-k8s.io/queue-name": queue}
    return obj


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return dict(cond)
    return {}


async def setup_fleet(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws", labels={"gpufed.io/pool": "cloud"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    await create(objects, team_queue("team-a", 8))
    await create(objects, team_queue("team-b", 8))
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, kueue_obj("LocalQueue", "team-b", "default", spec={"clusterQueue": "team-b"}))
    await create(objects, propagation_policy("all", placement=PLACEMENT))
    await settled(manager)


async def admitted_in(objects: ObjectStore, name: str) -> str | None:
    wl = await queued_workload(objects, "Deployment", name)
    if condition(wl, "Admitted").get("status") != "True":
        return None
    return str(((wl or {}).get("status") or {})["admission"]["clusterQueue"])


def admitted_probe(objects: ObjectStore, name: str) -> Callable[[], Awaitable[str | None]]:
    return lambda: admitted_in(objects, name)


async def placed(objects: ObjectStore, name: str) -> dict[str, int] | None:
    binding = await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", f"{name}-deployment")
    clusters = ((binding or {}).get("spec") or {}).get("clusters")
    return {t["name"]: t["replicas"] for t in clusters} if clusters else None


async def test_borrow_wait_and_admit_when_quota_frees(objects: ObjectStore, manager: ControllerManager) -> None:
    await setup_fleet(objects, manager)
    for name in ("a1", "a2", "a3"):  # 12 GPUs: 8 of team A's quota, 4 borrowed from idle team B
        await create(objects, queued(name, "team-a"))
        assert await eventually(admitted_probe(objects, name), what=f"{name} admitted") == "team-a"
    wl = await queued_workload(objects, "Deployment", "a1")
    assert wl is not None
    assert wl["spec"]["queueName"] == "team-a"
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 4)]
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "onprem", GPU: "onprem"}
    # Placed by the policy, only where the flavor's cluster label matches.
    assert await eventually(lambda: placed(objects, "a3"), what="a3 placed") == {"onprem": 4}
    binding = await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "a3-deployment")
    assert binding is not None
    assert binding["spec"]["placement"]["clusterAffinity"]["labelSelector"]["matchLabels"] == {"gpufed.io/pool": "onprem"}

    async def usage_written() -> dict[str, Any] | None:
        cq = await get(objects, KUEUE, "ClusterQueue", "team-a", None)
        status = (cq or {}).get("status") or {}
        return status if status.get("admittedWorkloads") == 3 else None

    status = await eventually(usage_written, what="team-a's usage")
    gpu = next(r for r in status["flavorsReservation"][0]["resources"] if r["name"] == GPU)
    assert (gpu["total"], gpu["borrowed"]) == ("12", "4")

    # Team B gets the 4 GPUs nobody borrows; its second Job waits with Kueue's reason, unbound.
    await create(objects, queued("b1", "team-b"))
    assert await eventually(lambda: admitted_in(objects, "b1"), what="b1 admitted") == "team-b"
    await create(objects, queued("b2", "team-b"))

    async def b2_waiting() -> dict[str, Any] | None:
        cond = condition(await queued_workload(objects, "Deployment", "b2"), "QuotaReserved")
        return cond if cond.get("status") == "False" else None

    reserved = await eventually(b2_waiting, what="b2 waiting")
    assert reserved["reason"] == "Pending"
    assert f"insufficient unused quota for {GPU} in flavor onprem, 4 more needed" in reserved["message"]
    await settled(manager)
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    told = {(e["involvedObject"]["name"], e["reason"]) for e in events if e["involvedObject"]["kind"] == "Workload"}
    b1, b2 = [await queued_workload_name(objects, "Deployment", name) for name in ("b1", "b2")]
    assert {(b1, "QuotaReserved"), (b1, "Admitted"), (b2, "Pending")} <= told
    assert await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "b2-deployment") is None
    propagated = condition(await get(objects, "apps/v1", "Deployment", "b2"), "Propagated")
    assert (propagated["status"], propagated["reason"]) == ("False", "WaitingForQuota")
    assert "4 more needed" in propagated["message"]
    cq_b = await get(objects, KUEUE, "ClusterQueue", "team-b", None)
    assert cq_b is not None and cq_b["status"]["pendingWorkloads"] == 1
    lq_b = await get(objects, KUEUE, "LocalQueue", "team-b")
    assert lq_b is not None and (lq_b["status"]["pendingWorkloads"], lq_b["status"]["admittedWorkloads"]) == (1, 1)

    # While it waits, its Workload follows it: scaled to 2 replicas, it needs 2 GPUs.
    deployments = objects.registry.require("apps/v1", "Deployment")
    b2 = await objects.get(deployments, namespace="default", name="b2")
    b2["spec"]["replicas"] = 2
    await objects.update(deployments, b2)

    async def b2_follows() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Deployment", "b2")
        cond = condition(wl, "QuotaReserved")
        return cond if wl and wl["spec"]["podSets"][0]["count"] == 2 and "2 more needed" in cond.get("message", "") else None

    await eventually(b2_follows, what="b2's Workload at 2 pods, 2 GPUs short")

    # Team A's borrowing workload goes: its Workload with it, and team B's waiting one is admitted and placed.
    await objects.delete(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="a3")

    async def a3_gone() -> bool:
        return await queued_workload(objects, "Deployment", "a3") is None

    await eventually(a3_gone, what="a3's Workload deleted")
    assert await eventually(lambda: admitted_in(objects, "b2"), what="b2 admitted") == "team-b"
    assert await eventually(lambda: placed(objects, "b2"), what="b2 placed") == {"onprem": 2}


async def test_a_queued_job_stays_suspended_until_admitted(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "a100", spec={"nodeLabels": {"nvidia.com/gpu.product": A100}}))
    cq = kueue_obj("ClusterQueue", "solo", spec={
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "a100", "resources": [{"name": GPU, "nominalQuota": 2}]}]}],
    })
    await create(objects, cq)
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "solo-lq"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "registry.local/train:1", "resources": {"limits": {GPU: "2"}}}]}}},
    }
    await create(objects, job)

    async def suspended_waiting() -> dict[str, Any] | None:
        obj = await get(objects, "batch/v1", "Job", "train")
        wl = await queued_workload(objects, "Job", "train")
        cond = condition(wl, "QuotaReserved")
        return obj if obj and obj["spec"].get("suspend") is True and cond.get("reason") == "Inadmissible" else None

    await eventually(suspended_waiting, what="the Job suspended, its Workload waiting for a LocalQueue")

    async def shown_suspended() -> dict[str, Any] | None:
        # kube's Job controller's condition, which `kubectl get jobs` shows as STATUS Suspended:
        # no member runs the held Job, so the hub sets it.
        obj = await get(objects, "batch/v1", "Job", "train")
        return obj if condition(obj, "Suspended").get("status") == "True" else None

    held = await eventually(shown_suspended, what="the held Job's Suspended condition")
    assert {k: v for k, v in condition(held, "Suspended").items() if k != "lastTransitionTime"} == {
        "type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended",
    }
    wl = await queued_workload(objects, "Job", "train")
    assert condition(wl, "QuotaReserved")["message"] == "LocalQueue solo-lq doesn't exist"
    assert await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "train-job") is None

    await create(objects, kueue_obj("LocalQueue", "solo-lq", "default", spec={"clusterQueue": "solo"}))

    async def running() -> dict[str, Any] | None:
        obj = await get(objects, "batch/v1", "Job", "train")
        return obj if obj and obj["spec"].get("suspend") is False else None

    obj = await eventually(running, what="the Job unsuspended")
    assert obj["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": A100}

    async def bound() -> dict[str, Any] | None:
        # The detector may first see the admitted Job as its informer had it (before the
        # unsuspending write): the binding follows the Job's nodeSelector on the next event.
        binding = await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "train-job")
        selector = ((binding or {}).get("spec") or {}).get("replicaRequirements", {}).get("nodeSelector")
        return binding if selector else None

    binding = await eventually(bound, what="the Job's binding with the flavor's node labels")
    assert binding["spec"]["replicaRequirements"]["nodeSelector"] == {"nvidia.com/gpu.product": A100}
    # Claimed, it is resumed (kube's JobResumed), until its members' conditions replace the hub's.
    assert condition(await get(objects, "batch/v1", "Job", "train"), "Suspended").get("status") != "True"


_TEMPLATE = {"spec": {"containers": [{"name": "main", "image": "registry.local/train:1", "resources": {"requests": {"cpu": "1"}}}]}}


def _training(container: str) -> dict[str, Any]:
    """_TEMPLATE with the container the training operator's webhook requires of a kind."""
    return {"spec": {"containers": [{**_TEMPLATE["spec"]["containers"][0], "name": container}]}}

_QUEUED = {"labels": {"kueue.x-k8s.io/queue-name": "main"}, "namespace": "default"}


def _suspended_condition(status: dict[str, Any]) -> dict[str, Any]:
    found = condition({"status": status}, "Suspended")
    return {k: v for k, v in found.items() if k != "lastTransitionTime"}


@pytest.mark.parametrize(
    ("job", "shown", "wanted"),
    [
        pytest.param(  # as Kueue's sample-pytorchjob.yaml, its LocalQueue "main" missing
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pytorch-simple", **_QUEUED},
             "spec": {"pytorchReplicaSpecs": {
                 role: {"replicas": 1, "restartPolicy": "OnFailure", "template": _training("pytorch")} for role in ("Master", "Worker")}}},
            _suspended_condition,
            {"type": "Suspended", "status": "True", "reason": "PyTorchJobSuspended", "message": "PyTorchJob pytorch-simple is suspended."},
            id="PyTorchJob: the training operator's condition",
        ),
        pytest.param(
            {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf-mnist", **_QUEUED},
             "spec": {"tfReplicaSpecs": {
                 role: {"replicas": 1, "restartPolicy": "OnFailure", "template": _training("tensorflow")} for role in ("PS", "Worker")}}},
            _suspended_condition,
            {"type": "Suspended", "status": "True", "reason": "TFJobSuspended", "message": "TFJob tf-mnist is suspended."},
            id="TFJob: the training operator's condition",
        ),
        pytest.param(
            {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rayjob-sample", **_QUEUED},
             "spec": {"entrypoint": "python sample_code.py", "rayClusterSpec": {
                 "headGroupSpec": {"rayStartParams": {}, "template": _TEMPLATE},
                 "workerGroupSpecs": [{"groupName": "small-group", "replicas": 1, "rayStartParams": {}, "template": _TEMPLATE}]}}},
            lambda status: status.get("jobDeploymentStatus"),
            "Suspended",
            id="RayJob: KubeRay's jobDeploymentStatus",
        ),
        pytest.param(  # as Kueue's sample-jobset.yaml
            {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "sleep-job", **_QUEUED},
             "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
                 "parallelism": 1, "completions": 1, "template": {**_TEMPLATE, "spec": {**_TEMPLATE["spec"], "restartPolicy": "Never"}}}}}]}},
            _suspended_condition,
            {"type": "Suspended", "status": "True", "reason": "SuspendedJobs", "message": "jobset is suspended"},
            id="JobSet: the JobSet controller's condition",
        ),
        pytest.param(
            {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "raycluster-sample", **_QUEUED},
             "spec": {"headGroupSpec": {"rayStartParams": {}, "template": _TEMPLATE},
                      "workerGroupSpecs": [{"groupName": "small-group", "replicas": 1, "rayStartParams": {}, "template": _TEMPLATE}]}},
            lambda status: (status.get("state"), condition({"status": status}, "RayClusterSuspended").get("status")),
            ("suspended", "True"),
            id="RayCluster: KubeRay's state and RayClusterSuspended condition",
        ),
    ],
)
async def test_a_held_job_shows_the_suspension_its_controller_would(
    objects: ObjectStore, manager: ControllerManager, job: dict[str, Any], shown: Callable[[dict[str, Any]], Any], wanted: Any,
) -> None:
    await create(objects, job)

    async def held() -> dict[str, Any] | None:
        obj = await get(objects, job["apiVersion"], job["kind"], job["metadata"]["name"])
        return obj if obj and shown(obj.get("status") or {}) == wanted else None

    await eventually(held, what=f"the held {job['kind']} shown suspended")
