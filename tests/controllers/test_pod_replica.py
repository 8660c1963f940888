"""A Pod is one replica, as Karmada's native interpreter has it: a ``Divided`` policy runs it in
one cluster (not a copy in every cluster, as for a kind without replicas), its binding carries its
requests, and a ``Duplicated`` policy still runs a copy in each."""

from __future__ import annotations

from typing import Any

from controlplane.apis.constants import LABEL_BINDING, LABEL_WORK_NAMESPACE
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, node_shape, propagation_policy, put_cluster, settled

BINDING_API = "work.gpufed.io/v1alpha1"


def pod(name: str) -> dict[str, Any]:
    resources = {"requests": {"cpu": "3", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "sleep", "image": "busybox", "resources": resources}]},
    }


async def placed(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    works = await objects.list(
        objects.registry.require(BINDING_API, "Work"), label_selector=f"{LABEL_BINDING}={name}-pod,{LABEL_WORK_NAMESPACE}=default",
    )
    return {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in works.items} or None


async def test_a_pod_under_a_divided_policy_runs_in_one_cluster(objects: ObjectStore, manager: ControllerManager) -> None:
    for cluster in ("member1", "member2", "member3"):
        await put_cluster(objects, cluster, node_shape(2, gpus=8), pods=[])
    await settled(manager)
    placement = {
        "clusterAffinity": {"clusterNames": ["member1", "member2", "member3"]},
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                              "weightPreference": {"dynamicWeight": "AvailableReplicas"}},
    }
    await objects.create(objects.registry.require("policy.karmada.io/v1alpha1", "PropagationPolicy"),
                         {**propagation_policy("pods", kind="Pod", api_version="v1", placement=placement),
                          "apiVersion": "policy.karmada.io/v1alpha1"})
    await objects.create(objects.registry.require("v1", "Pod"), pod("sleep"))

    works = await eventually(lambda: placed(objects, "sleep"), what="the Pod's Work")
    await settled(manager)
    works = await placed(objects, "sleep") or {}
    assert len(works) == 1, sorted(works)
    (manifest,) = next(iter(works.values()))["spec"]["workload"]["manifests"]
    assert (manifest["kind"], manifest["metadata"]["name"]) == ("Pod", "sleep")
    binding = await objects.get(objects.registry.require(BINDING_API, "ResourceBinding"), namespace="default", name="sleep-pod")
    assert binding["spec"]["replicas"] == 1
    assert binding["spec"]["replicaRequirements"]["resourceRequest"] == {"cpu": "3", "nvidia.com/gpu": "1"}
    assert [c["replicas"] for c in binding["spec"]["clusters"]] == [1]


async def test_a_pod_under_a_duplicated_policy_runs_in_each_cluster(objects: ObjectStore, manager: ControllerManager) -> None:
    for cluster in ("member1", "member2"):
        await put_cluster(objects, cluster, node_shape(2, gpus=8), pods=[])
    await settled(manager)
    placement = {"clusterAffinity": {"clusterNames": ["member1", "member2"]}, "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("pods", kind="Pod", api_version="v1", placement=placement))
    await objects.create(objects.registry.require("v1", "Pod"), pod("sleep"))

    async def both() -> dict[str, Any] | None:
        works = await placed(objects, "sleep")
        return works if works and len(works) == 2 else None

    works = await eventually(both, what="a Work per cluster")
    assert sorted(works) == ["member1", "member2"]
