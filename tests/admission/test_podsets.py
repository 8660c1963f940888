"""Kueue's ``RunWithPodSetsInfo`` / ``RestorePodSetsInfo`` on every pod set of every kind the hub
starts by its suspend flag: each role's template gets its flavor's node labels and the Ready
checks' ``podSetUpdates`` for its pod set, and gets its own labels, annotations, nodeSelector and
tolerations back (from its Workload's pod set) when stopped."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.admission import checks, podsets
from controlplane.admission import objects as adm
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.base import PodTemplateKind

GPU = "nvidia.com/gpu"


def pod(app: str, *, gpus: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}],
                 "containers": [{"name": "main", "image": "train:1", "resources": {"limits": {GPU: str(gpus)}}}]},
    }


def ray_cluster_spec() -> dict[str, Any]:
    return {"headGroupSpec": {"template": pod("head", gpus=0)},
            "workerGroupSpecs": [{"groupName": "GPU-Workers", "replicas": 2, "template": pod("worker")}]}


KINDS: dict[str, tuple[dict[str, Any], set[str]]] = {
    "job": ({"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 2, "template": pod("train")}}, {"main"}),
    "jobset": ({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": [
        {"name": "leader", "replicas": 1, "template": {"spec": {"template": pod("leader", gpus=0)}}},
        {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": pod("worker")}}},
    ]}}, {"leader", "workers"}),
    "pytorchjob": ({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": pod("master")}, "Worker": {"replicas": 3, "template": pod("worker")},
    }}}, {"master", "worker"}),
    "mpijob": ({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "spec": {"mpiReplicaSpecs": {
        "Launcher": {"replicas": 1, "template": pod("launcher", gpus=0)}, "Worker": {"replicas": 2, "template": pod("worker")},
    }}}, {"launcher", "worker"}),
    "tfjob": ({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "spec": {"tfReplicaSpecs": {
        "PS": {"replicas": 1, "template": pod("ps", gpus=0)}, "Worker": {"replicas": 2, "template": pod("worker")},
        "Chief": {"template": pod("chief")},
    }}}, {"chief", "ps", "worker"}),
    "xgboostjob": ({"apiVersion": "kubeflow.org/v1", "kind": "XGBoostJob", "spec": {"xgbReplicaSpecs": {
        "Master": {"replicas": 1, "template": pod("master")}, "Worker": {"replicas": 2, "template": pod("worker")},
    }}}, {"master", "worker"}),
    "paddlejob": ({"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "spec": {"paddleReplicaSpecs": {
        "Master": {"replicas": 1, "template": pod("master")}, "Worker": {"replicas": 2, "template": pod("worker")},
    }}}, {"master", "worker"}),
    "jaxjob": ({"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "spec": {"jaxReplicaSpecs": {
        "Worker": {"replicas": 2, "template": pod("worker")},
    }}}, {"worker"}),
    "rayjob": ({"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"rayClusterSpec": ray_cluster_spec()}}, {"head", "gpu-workers"}),
    "raycluster": ({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": ray_cluster_spec()}, {"head", "gpu-workers"}),
}


def queued(obj: dict[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(obj), "metadata": {"name": "train", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "q"}}}


def admitted_workload(obj: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """The Workload of ``obj`` with one Ready check whose ``podSetUpdates`` name every pod set."""
    pod_sets = adm.pod_sets(obj)
    assert pod_sets is not None
    updates = [{"name": name, "labels": {"set": name}, "annotations": {"cost": "12"}, "nodeSelector": {"zone": "z1"},
                "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]} for name in sorted(names)]
    return {"spec": {"podSets": pod_sets},
            "status": {"admissionChecks": [{"name": "budget", "state": "Ready", "podSetUpdates": updates}]}}


@pytest.mark.parametrize("kind", KINDS)
def test_every_pod_set_starts_with_its_flavor_and_updates_and_is_restored(kind: str) -> None:
    obj, names = KINDS[kind]
    obj = queued(obj)
    before = copy.deepcopy(obj)
    assert podsets.startable(obj)
    workload = admitted_workload(obj, names)
    assert {ps["name"] for ps in workload["spec"]["podSets"]} == names == set(podsets.templates(obj))

    started = podsets.start(obj, workload, {name: {"pool": f"pool-{name}"} for name in names})

    assert obj == before  # the input is not changed
    templates = podsets.templates(started)
    assert set(templates) == names
    for name, template in templates.items():
        app = podsets.templates(obj)[name]["metadata"]["labels"]["app"]
        assert template["metadata"] == {"labels": {"app": app, "set": name}, "annotations": {"cost": "12"}}
        assert template["spec"]["nodeSelector"] == {"pool": f"pool-{name}", "zone": "z1"}
        assert template["spec"]["tolerations"] == [
            {"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
        assert template["spec"]["containers"] == podsets.templates(obj)[name]["spec"]["containers"]
    assert podsets.restore(started, workload) == obj


@pytest.mark.parametrize("kind", KINDS)
def test_a_pod_set_update_conflicting_with_a_roles_template_fails_the_start(kind: str) -> None:
    obj, names = KINDS[kind]
    obj = queued(obj)
    workload = admitted_workload(obj, names)
    name = sorted(names)[-1]
    podsets.templates(obj)[name]["spec"]["nodeSelector"] = {"zone": "z2"}
    with pytest.raises(checks.PodSetUpdateConflict) as err:
        podsets.start(obj, workload, {})
    assert str(err.value) == (
        "invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for key=zone, value1=z2, value2=z1")


@pytest.mark.parametrize("kind", KINDS)
def test_the_workload_keeps_each_roles_own_template_fields(kind: str) -> None:
    obj, _ = KINDS[kind]
    pod_sets = adm.pod_sets(queued(obj))
    assert pod_sets is not None
    for ps in pod_sets:
        own = podsets.templates(obj)[ps["name"]]
        assert ps["template"]["metadata"] == own["metadata"]
        assert ps["template"]["spec"]["tolerations"] == own["spec"]["tolerations"]


@pytest.mark.parametrize(("api_version", "kind"), [
    ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("v1", "ConfigMap"),
])
def test_kinds_without_a_suspend_flag_are_not_started_by_the_hub(api_version: str, kind: str) -> None:
    assert not podsets.startable({"apiVersion": api_version, "kind": kind, "spec": {}})


def test_a_single_template_kind_names_its_pod_set_main() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 2, "template": pod("serve")}}
    interpreter = interpreter_for("apps/v1", "Deployment")
    assert isinstance(interpreter, PodTemplateKind)
    assert [name for name, _ in interpreter.pod_set_slots(deployment)] == ["main"]


def test_each_pod_set_gets_its_own_flavors_node_labels_and_no_cluster_labels() -> None:
    admission = {"clusterQueue": "q", "podSetAssignments": [
        {"name": "head", "flavors": {"cpu": "cpu-only"}},
        {"name": "workers", "flavors": {"cpu": "cpu-only", GPU: "a100"}},
    ]}
    flavors = {"cpu-only": {"pool": "onprem", "node-type": "cpu"}, "a100": {"pool": "onprem", "nvidia.com/gpu.product": "A100"}}
    assert adm.node_labels_by_pod_set(admission, flavors, {"pool"}) == {
        "head": {"node-type": "cpu"},
        "workers": {"node-type": "cpu", "nvidia.com/gpu.product": "A100"},
    }
