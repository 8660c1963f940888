"""The hub's status of an operator's kind (a Kubeflow training job, RayJob, RayCluster, JobSet,
LeaderWorkerSet) folded from what its member's operator writes, end to end in one process: the
member's status is reported in the Work as the agent reports it, the status controller writes the
hub object's status through the object layer, which checks it against the kind's served schema as
its CRD would (a status it refuses is never stored, and these tests wait for it in vain). Each
member status is written as the operator's Go types write it: a ``metav1.Condition`` (KubeRay's,
JobSet's, LeaderWorkerSet's) always has its ``message`` and ``lastTransitionTime``, an empty
message included; a training operator's ``JobCondition`` leaves an empty one out.

A held job's suspension (the conditions the hub writes while no member runs it) is
``test_admission.test_a_held_job_shows_the_suspension_its_controller_would``."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.errors import Conflict
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, node_shape, propagation_policy, put_cluster
from .test_federation_loop import BINDING_API, apply, get_or_none, rt, works_by_cluster

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def _template(container: str = "main", *, restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": container, "image": "registry.local/train:1",
                                            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"spec": spec}


def _ray_cluster_spec() -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {}, "template": _template("ray-head")},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                                  "rayStartParams": {}, "template": _template("ray-worker")}]}


def _condition(ctype: str, reason: str, message: str, *, status: str = "True") -> dict[str, Any]:
    """A ``metav1.Condition`` as Go writes it: message and lastTransitionTime always there."""
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": T0}


def _job_condition(ctype: str, reason: str, message: str) -> dict[str, Any]:
    """A training operator's ``JobCondition`` (kubeflow/training-operator's common types)."""
    return {"type": ctype, "status": "True", "reason": reason, "message": message,
            "lastUpdateTime": T1, "lastTransitionTime": T0}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": "default"}


#: (the hub workload, the status its member's operator writes, the hub status folded from it
#: without the hub's own Propagated condition).
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "PyTorchJob": (
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": _meta("train"),
         "spec": {"pytorchReplicaSpecs": {
             role: {"replicas": 1, "restartPolicy": "OnFailure", "template": _template("pytorch")}
             for role in ("Master", "Worker")}}},
        {"conditions": [_job_condition("Created", "PyTorchJobCreated", "PyTorchJob train is created."),
                        _job_condition("Running", "PyTorchJobRunning", "PyTorchJob default/train is running.")],
         "replicaStatuses": {"Master": {"active": 1, "selector": "training.kubeflow.org/job-name=train"},
                             "Worker": {"active": 1}},
         "startTime": T0, "lastReconcileTime": T1},
        {"replicaStatuses": {"Master": {"active": 1, "succeeded": 0, "failed": 0},
                             "Worker": {"active": 1, "succeeded": 0, "failed": 0}},
         "conditions": [
             {"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
              "message": "onprem: PyTorchJob train is created.", "lastTransitionTime": T0},
             {"type": "Running", "status": "True", "reason": "PyTorchJobRunning",
              "message": "onprem: PyTorchJob default/train is running.", "lastTransitionTime": T0}],
         "startTime": T0, "lastReconcileTime": T1},
    ),
    "RayJob": (
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": _meta("train"),
         "spec": {"entrypoint": "python train.py", "rayClusterSpec": _ray_cluster_spec()}},
        {"jobId": "train-x7k2p", "rayClusterName": "train-raycluster-8mzqv", "dashboardURL": "10.0.0.5:8265",
         "jobStatus": "RUNNING", "jobDeploymentStatus": "Running", "startTime": T0, "observedGeneration": 1,
         "succeeded": 0, "failed": 0,  # the CRD's defaults, in the member's status and the hub's
         "rayClusterStatus": {"state": "ready", "desiredWorkerReplicas": 1, "availableWorkerReplicas": 1,
                              "readyWorkerReplicas": 1, "minWorkerReplicas": 1, "maxWorkerReplicas": 1,
                              "conditions": [_condition("HeadPodReady", "HeadPodRunningAndReady", "")]}},
        {"jobId": "train-x7k2p", "rayClusterName": "train-raycluster-8mzqv", "dashboardURL": "10.0.0.5:8265",
         "jobStatus": "RUNNING", "jobDeploymentStatus": "Running", "startTime": T0, "observedGeneration": 1,
         "succeeded": 0, "failed": 0,  # the CRD's defaults, in the member's status and the hub's
         "rayClusterStatus": {"state": "ready", "desiredWorkerReplicas": 1, "availableWorkerReplicas": 1,
                              "readyWorkerReplicas": 1, "minWorkerReplicas": 1, "maxWorkerReplicas": 1,
                              "conditions": [_condition("HeadPodReady", "HeadPodRunningAndReady", "")]}},
    ),
    "RayCluster": (
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": _meta("train"), "spec": _ray_cluster_spec()},
        {"state": "ready", "desiredWorkerReplicas": 1, "availableWorkerReplicas": 1, "readyWorkerReplicas": 1,
         "minWorkerReplicas": 1, "maxWorkerReplicas": 1, "observedGeneration": 1,
         "head": {"podIP": "10.0.0.5", "serviceIP": "10.96.0.12"},
         "conditions": [_condition("HeadPodReady", "HeadPodRunningAndReady", ""),
                        _condition("RayClusterProvisioned", "AllPodRunningAndReadyFirstTime",
                                   "All Ray Pods are ready for the first time")]},
        {"desiredWorkerReplicas": 1, "availableWorkerReplicas": 1, "readyWorkerReplicas": 1,
         "minWorkerReplicas": 1, "maxWorkerReplicas": 1, "state": "ready",
         "head": {"podIP": "10.0.0.5", "serviceIP": "10.96.0.12"}},
    ),
    "JobSet": (
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta("train"),
         "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
             "parallelism": 1, "completions": 1, "template": _template(restart="Never")}}}]}},
        {"replicatedJobsStatus": [{"name": "workers", "ready": 2, "succeeded": 0, "failed": 0, "active": 2,
                                   "suspended": 0}],
         "restarts": 0,
         "conditions": [_condition("Suspended", "ResumeJobs", "jobset is resumed", status="False"),
                        _condition("StartupPolicyCompleted", "StartupPolicyCompleted", "")]},
        {"replicatedJobsStatus": [{"name": "workers", "ready": 2, "succeeded": 0, "failed": 0, "active": 2,
                                   "suspended": 0}],
         "conditions": [
             {"type": "Suspended", "status": "False", "reason": "ResumeJobs",
              "message": "onprem: jobset is resumed", "lastTransitionTime": T0},
             {"type": "StartupPolicyCompleted", "status": "True", "reason": "StartupPolicyCompleted",
              "message": "", "lastTransitionTime": T0}]},
    ),
    "LeaderWorkerSet": (
        {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": _meta("train"),
         "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": _template()}}},
        {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "hpaPodSelector": "leaderworkerset.sigs.k8s.io/name=train",
         "conditions": [_condition("Available", "AllGroupsReady", "All replicas are ready"),
                        _condition("Progressing", "GroupsProgressing", "", status="False")]},
        {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "hpaPodSelector": "leaderworkerset.sigs.k8s.io/name=train",
         "conditions": [
             {"type": "Available", "status": "True", "reason": "AllGroupsReady",
              "message": "onprem: All replicas are ready", "lastTransitionTime": T0},
             {"type": "Progressing", "status": "False", "reason": "GroupsProgressing",
              "message": "", "lastTransitionTime": T0}]},
    ),
}


async def _report(objects: ObjectStore, work: dict[str, Any], workload: dict[str, Any], status: dict[str, Any]) -> None:
    """What the agent writes back for the member's copy of ``workload``: Applied at the Work's
    generation, and the copy's status as its operator wrote it."""
    group, _, version = workload["apiVersion"].rpartition("/")
    identifier = {"group": group, "version": version, "kind": workload["kind"], "namespace": "default",
                  "name": workload["metadata"]["name"], "ordinal": 0}
    applied = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "all 1 manifest(s) applied",
               "lastTransitionTime": T0, "observedGeneration": work["metadata"]["generation"]}
    report = {"conditions": [applied], "manifestStatuses": [{"identifier": identifier, "status": status, "health": "Healthy"}]}
    await objects.update_status(rt(objects, BINDING_API, "Work"), {**work, "status": report})


@pytest.mark.parametrize("kind", list(CASES))
async def test_the_hub_stores_the_status_folded_from_its_members_operator(
    objects: ObjectStore, manager: ControllerManager, kind: str
) -> None:
    workload, member_status, folded = CASES[kind]
    await put_cluster(objects, "onprem", node_shape(8, gpus=8))
    await apply(objects, propagation_policy("operators", kind=kind, api_version=workload["apiVersion"]))
    await apply(objects, workload)
    binding = f"train-{kind.lower()}"

    async def one_work() -> dict[str, Any] | None:
        return (await works_by_cluster(objects, binding)).get("onprem")

    await _report(objects, await eventually(one_work, what=f"the {kind}'s Work"), workload, member_status)

    async def folded_in() -> dict[str, Any] | None:
        hub = await get_or_none(objects, workload["apiVersion"], kind, "default", "train")
        status = dict((hub or {}).get("status") or {})
        own = [c for c in status.get("conditions") or () if c["type"] == "Propagated"]
        theirs = [c for c in status.get("conditions") or () if c["type"] != "Propagated"]
        if theirs:
            status["conditions"] = theirs
        else:
            status.pop("conditions", None)
        return status if status == folded and [c["status"] for c in own] == ["True"] else None

    await eventually(folded_in, what=f"the {kind}'s status folded from its member's")


async def test_a_status_the_crd_defaults_is_compared_as_stored_and_not_written_again(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member that reports no ``succeeded``/``failed`` of a RayJob: the hub stores them as the
    CRD's defaults (0), and the status controller, folding the same report again, compares its fold
    with those defaults filled and writes nothing."""
    workload, member_status, _ = CASES["RayJob"]
    unreported = {k: v for k, v in member_status.items() if k not in ("succeeded", "failed")}
    await put_cluster(objects, "onprem", node_shape(8, gpus=8))
    await apply(objects, propagation_policy("operators", kind="RayJob", api_version=workload["apiVersion"]))
    await apply(objects, workload)

    async def one_work() -> dict[str, Any] | None:
        return (await works_by_cluster(objects, "train-rayjob")).get("onprem")

    await _report(objects, await eventually(one_work, what="the RayJob's Work"), workload, unreported)

    async def stored() -> dict[str, Any] | None:
        hub = await get_or_none(objects, workload["apiVersion"], "RayJob", "default", "train")
        status = (hub or {}).get("status") or {}
        return status if status.get("jobStatus") == "RUNNING" else None

    status = await eventually(stored, what="the RayJob's status folded")
    assert (status["succeeded"], status["failed"]) == (0, 0)  # the CRD's defaults, stored

    controller = manager.status
    assert controller is not None
    writes: list[str] = []
    update_status = controller.ctx.objects.update_status

    async def counted(rt: Any, obj: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        writes.append(obj["kind"])
        return await update_status(rt, obj, *args, **kwargs)

    monkeypatch.setattr(controller.ctx.objects, "update_status", counted)

    async def reconciled() -> bool | None:
        try:
            await controller.reconcile(("default", "train-rayjob"))
        except Conflict:  # the running manager wrote the binding first: its work queue retries, so does this
            return None
        return True

    await eventually(reconciled, what="a reconcile that is not raced by the running manager")
    assert "RayJob" not in writes
