"""A kind without replicas under a Divided policy goes whole to every cluster, one that joins later
included; a workload scaled to zero under the same policy keeps one cluster (the detector tells
them apart by the interpreter). A Duplicated workload reaches a cluster that joins later too."""

from __future__ import annotations

from typing import Any

from controlplane.apis.constants import LABEL_BINDING
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster

NS = "default"
CLUSTERS = {"onprem", "cloud", "edge"}
DIVIDED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}


async def _work_clusters(objects: ObjectStore, binding: str) -> set[str]:
    work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    listed = await objects.list(work_rt, label_selector=f"{LABEL_BINDING}={binding}")
    return {w["metadata"]["namespace"].removeprefix("gpufed-es-") for w in listed.items}


async def _scheduled(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")
    listed = await objects.list(rt, namespace=NS)
    found = next((b for b in listed.items if b["metadata"]["name"] == name), None)
    return found if found is not None and (found["spec"].get("clusters") or None) is not None else None


async def test_a_config_map_under_a_divided_policy_reaches_every_cluster(objects: ObjectStore) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws")
    await put_cluster(objects, "edge", node_shape(1))  # no GPU: a ConfigMap needs none
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policy_rt, propagation_policy("settings", kind="ConfigMap", api_version="v1", placement=DIVIDED))
    await objects.create(policy_rt, propagation_policy("serving", placement=DIVIDED))
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": NS}, "data": {"a": "1"}}
    async with ControllerManager(objects, settings=FAST):
        await objects.create(objects.registry.require("v1", "ConfigMap"), config_map)
        await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("idle", replicas=0))

        binding = await eventually(lambda: _scheduled(objects, "settings-configmap"), what="the ConfigMap scheduled")
        assert "replicaRequirements" not in binding["spec"]
        assert {c["name"] for c in binding["spec"]["clusters"]} == CLUSTERS

        async def everywhere() -> bool:
            return await _work_clusters(objects, "settings-configmap") == CLUSTERS

        await eventually(everywhere, what="a Work of the ConfigMap in every cluster")

        idle = await eventually(lambda: _scheduled(objects, "idle-deployment"), what="the Deployment scheduled")
        assert [c["replicas"] for c in idle["spec"]["clusters"]] == [0]  # scaled to zero: one cluster

        # A cluster that joins later gets the ConfigMap too (Karmada schedules such objects again);
        # the Deployment scaled to zero stays where it is.
        await put_cluster(objects, "late", node_shape(1))

        async def in_the_late_cluster() -> bool:
            return await _work_clusters(objects, "settings-configmap") == CLUSTERS | {"late"}

        await eventually(in_the_late_cluster, what="a Work of the ConfigMap in the cluster that joined")
        still = await _scheduled(objects, "idle-deployment")
        assert still is not None and still["spec"]["clusters"] == idle["spec"]["clusters"]



async def test_a_duplicated_workload_reaches_a_cluster_that_joins_with_all_its_replicas(objects: ObjectStore) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    duplicated = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    await objects.create(policy_rt, propagation_policy("serving", placement=duplicated))
    async with ControllerManager(objects, settings=FAST):
        await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("serve", replicas=2))
        binding = await eventually(lambda: _scheduled(objects, "serve-deployment"), what="the Deployment scheduled")
        assert binding["spec"]["clusters"] == [{"name": "onprem", "replicas": 2}]

        # A GPU cluster that joins later runs the full replicas too (Karmada reschedules Duplicated work);
        # the cluster it ran in keeps its replicas.
        await put_cluster(objects, "late", node_shape(1, gpus=8))

        async def in_both() -> dict[str, int] | None:
            found = await _scheduled(objects, "serve-deployment")
            placed = {c["name"]: c["replicas"] for c in found["spec"]["clusters"]} if found else {}
            return placed if placed == {"onprem": 2, "late": 2} else None

        await eventually(in_both, what="the Duplicated Deployment scheduled to the cluster that joined")

        async def works_in_both() -> bool:
            return await _work_clusters(objects, "serve-deployment") == {"onprem", "late"}

        await eventually(works_in_both, what="a Work of the Deployment in the cluster that joined")
