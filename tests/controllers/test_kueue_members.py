"""Members that run Kueue themselves (two-level admission): a Cluster with ``spec.kueue.enabled``
gets a queued workload with its ``kueue.x-k8s.io/queue-name`` label and a Job still suspended,
for the member's own Kueue to admit; any other member gets neither the label nor a suspended Job.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.cluster_v1alpha1 import runs_kueue
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.works import render_manifest
from controlplane.interpreter import interpreter_for
from policies.affinity import ClusterView

from .fleet import eventually, node_shape, propagation_policy, put_cluster, queued_workload, settled
from .test_admission import GPU, condition, create, get, kueue_obj, team_queue

QUEUE = "kueue.x-k8s.io/queue-name"
WORK = "work.gpufed.io/v1alpha1"
CLUSTER = "cluster.gpufed.io/v1alpha1"


def job(*, labels: dict[str, str], suspend: bool) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "labels": labels},
        "spec": {"parallelism": 2, "completions": 2, "suspend": suspend, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "train:1", "resources": {"limits": {GPU: "1"}}}]}}},
    }


def pytorchjob(*, labels: dict[str, str]) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "pytorch", "image": "train:1", "resources": {"limits": {GPU: "1"}}}]}}
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "ml", "labels": labels},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": pod},
                                         "Worker": {"replicas": 2, "template": copy.deepcopy(pod)}}},
    }


def deployment(*, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": "ml", "labels": labels},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "serve"}}, "template": {
            "metadata": {"labels": {"app": "serve"}}, "spec": {"containers": [{"name": "main", "image": "serve:1"}]}}},
    }


def suspend_of(manifest: dict[str, Any]) -> Any:
    spec = manifest["spec"]
    return spec["runPolicy"].get("suspend") if "runPolicy" in spec else spec.get("suspend")


@pytest.mark.parametrize(
    ("workload", "kueue_member", "labels", "suspend"),
    [
        # Admitted at the hub (unsuspended there): a Kueue member gets it queued and suspended ...
        pytest.param(job(labels={QUEUE: "team-a", "app": "t"}, suspend=False), True,
                     {QUEUE: "team-a", "app": "t"}, True, id="job-kueue-member"),
        # ... any other member without the label, running as the hub admitted it.
        pytest.param(job(labels={QUEUE: "team-a", "app": "t"}, suspend=False), False, {"app": "t"}, False,
                     id="job-plain-member"),
        pytest.param(job(labels={QUEUE: "team-a"}, suspend=False), False, None, False, id="only-label-dropped"),
        # Not queued at the hub: nothing to do in either kind of member.
        pytest.param(job(labels={"app": "t"}, suspend=False), True, {"app": "t"}, False, id="unqueued-kueue-member"),
        pytest.param(job(labels={"app": "t"}, suspend=False), False, {"app": "t"}, False, id="unqueued-plain-member"),
        # Kueue's other job kinds keep their flag elsewhere; a Deployment has none.
        pytest.param(pytorchjob(labels={QUEUE: "team-a"}), True, {QUEUE: "team-a"}, True, id="pytorchjob-kueue-member"),
        pytest.param(pytorchjob(labels={QUEUE: "team-a"}), False, None, None, id="pytorchjob-plain-member"),
        pytest.param(deployment(labels={QUEUE: "team-a"}), True, {QUEUE: "team-a"}, None, id="deployment-kueue-member"),
        pytest.param(deployment(labels={QUEUE: "team-a"}), False, None, None, id="deployment-plain-member"),
    ],
)
def test_the_queue_label_and_suspension_per_kind_of_member(
    workload: dict[str, Any], kueue_member: bool, labels: dict[str, str] | None, suspend: bool | None
) -> None:
    before = copy.deepcopy(workload)
    rendered = render_manifest(
        workload, interpreter=interpreter_for(workload["apiVersion"], workload["kind"]), replicas=2, shape=None,
        rules=(), cluster=ClusterView(name="m"), member_runs_kueue=kueue_member,
    )
    manifest = rendered.manifest
    assert manifest["metadata"].get("labels") == labels
    assert suspend_of(manifest) == suspend
    assert workload == before  # the hub's object is not touched


@pytest.mark.parametrize("kueue_member", [True, False])
def test_a_member_never_gets_the_hubs_kueue_scheduling_gate(kueue_member: bool) -> None:
    """A Pod the hub still gates (its queue label removed after create, say) reaches a member
    without Kueue's gate: a member's own Kueue gates it anew, another member has no Kueue to wait for."""
    gates = [{"name": "example.com/mine"}, {"name": "kueue.x-k8s.io/admission"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "labels": {QUEUE: "team-a"}},
           "spec": {"schedulingGates": gates, "containers": [{"name": "main", "image": "train:1"}]}}
    before = copy.deepcopy(pod)
    manifest = render_manifest(pod, interpreter=interpreter_for("v1", "Pod"), replicas=1, shape=None, rules=(),
                               cluster=ClusterView(name="m"), member_runs_kueue=kueue_member).manifest
    assert manifest["spec"]["schedulingGates"] == [{"name": "example.com/mine"}]
    assert pod == before
    only_kueues = copy.deepcopy(pod)
    only_kueues["spec"]["schedulingGates"] = gates[1:]
    manifest = render_manifest(only_kueues, interpreter=interpreter_for("v1", "Pod"), replicas=1, shape=None, rules=(),
                               cluster=ClusterView(name="m"), member_runs_kueue=kueue_member).manifest
    assert "schedulingGates" not in manifest["spec"]


@pytest.mark.parametrize("kueue_member", [True, False])
def test_kueues_marks_of_a_managed_pod_per_kind_of_member(kueue_member: bool) -> None:
    """The hub's finalizer ``kueue.x-k8s.io/managed`` never reaches a member (nothing there would
    remove it); the label of that name stays with the queue label for a member that runs Kueue
    (its webhook sets it anyway), and goes with it for any other member (no Kueue manages it there)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "main", "image": "train:1"}]}, "metadata": {
        "name": "p", "namespace": "ml", "finalizers": ["kueue.x-k8s.io/managed"],
        "labels": {QUEUE: "team-a", "kueue.x-k8s.io/managed": "true", "app": "train"}}}
    manifest = render_manifest(pod, interpreter=interpreter_for("v1", "Pod"), replicas=1, shape=None, rules=(),
                               cluster=ClusterView(name="m"), member_runs_kueue=kueue_member).manifest
    assert "finalizers" not in manifest["metadata"]
    expected = {QUEUE: "team-a", "kueue.x-k8s.io/managed": "true", "app": "train"} if kueue_member else {"app": "train"}
    assert manifest["metadata"]["labels"] == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"provider": "onprem", "kueue": {"enabled": True}}, True),
        ({"provider": "onprem", "kueue": {"enabled": False}}, False),
        ({"provider": "onprem", "kueue": {}}, False),
        ({"provider": "onprem"}, False),
    ],
)
def test_a_cluster_declares_that_it_runs_kueue(spec: dict[str, Any], expected: bool) -> None:
    assert runs_kueue({"spec": spec}) is expected


async def set_kueue(objects: ObjectStore, name: str, enabled: bool) -> None:
    rt = objects.registry.require(CLUSTER, "Cluster")
    cluster = await objects.get(rt, name=name)
    cluster["spec"]["kueue"] = {"enabled": enabled}
    await objects.update(rt, cluster)


async def test_a_cluster_refuses_unknown_kueue_fields(objects: ObjectStore) -> None:
    await put_cluster(objects, "onprem", node_shape(1, gpus=8), pods=[])
    rt = objects.registry.require(CLUSTER, "Cluster")
    cluster = await objects.get(rt, name="onprem")
    cluster["spec"]["kueue"] = {"enabled": True, "localQueue": "x"}
    with pytest.raises(errors.BadRequest) as refused:  # kube's strict decoding, as for any unknown field
        await objects.update(rt, cluster)
    assert 'unknown field "spec.kueue.localQueue"' in str(refused.value)


async def works_for(objects: ObjectStore, cluster: str) -> dict[str, Any] | None:
    work = await get(objects, WORK, "Work", "ml-train-job", namespace=f"gpufed-es-{cluster}")
    return work["spec"]["workload"]["manifests"][0] if work else None


async def test_the_works_of_an_admitted_job_per_kind_of_member(objects: ObjectStore, manager: ControllerManager) -> None:
    await create(objects, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    await put_cluster(objects, "onprem", node_shape(1, gpus=8), pods=[])
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pods=[])
    await set_kueue(objects, "onprem", True)
    await create(objects, kueue_obj("ResourceFlavor", "any"))
    await create(objects, team_queue("team-a", 8, flavor="any"))
    await create(objects, kueue_obj("LocalQueue", "team-a", "ml", spec={"clusterQueue": "team-a"}))
    everywhere = {"clusterAffinity": {"clusterNames": ["onprem", "cloud"]},
                  "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", namespace="ml", placement=everywhere))
    await settled(manager)
    await create(objects, job(labels={QUEUE: "team-a"}, suspend=False))

    async def both() -> tuple[dict[str, Any], dict[str, Any]] | None:
        onprem, cloud = await works_for(objects, "onprem"), await works_for(objects, "cloud")
        return (onprem, cloud) if onprem and cloud else None

    onprem, cloud = await eventually(both, what="the Job's Works in both clusters")
    wl = await queued_workload(objects, "Job", "train", "ml")
    assert condition(wl, "Admitted")["status"] == "True"
    hub_job = await get(objects, "batch/v1", "Job", "train", namespace="ml")
    assert hub_job is not None and hub_job["spec"]["suspend"] is False  # admitted at the hub
    assert onprem["metadata"]["labels"] == {QUEUE: "team-a"} and onprem["spec"]["suspend"] is True
    assert "labels" not in cloud["metadata"] and cloud["spec"]["suspend"] is False

    # A member that starts running Kueue gets its Work rewritten for its own queue.
    await set_kueue(objects, "cloud", True)

    async def cloud_queued() -> dict[str, Any] | None:
        manifest = await works_for(objects, "cloud")
        return manifest if manifest and manifest["spec"]["suspend"] is True else None

    cloud = await eventually(cloud_queued, what="the cloud Work for the member's Kueue")
    assert cloud["metadata"]["labels"] == {QUEUE: "team-a"}
