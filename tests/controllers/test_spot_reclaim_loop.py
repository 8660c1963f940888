"""Spot reclaims through the federation loop in one process: the lost replicas move at once, a
second reclaim within the window sends them to non-spot capacity, the binding keeps the count,
and the workload gets a SpotReclaimed Event per reclaim."""

from __future__ import annotations

import copy
import json
from typing import Any

from controlplane.apis.constants import LABEL_BINDING, LABEL_WORK_NAMESPACE
from controlplane.apis.spot import ANNOTATION_SPOT_RECLAIMS
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, deployment, eventually, node_shape, propagation_policy, put_cluster, settled

WORK_API = "work.gpufed.io/v1alpha1"
CLUSTER_API = "cluster.gpufed.io/v1alpha1"


def rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


async def spot_cluster(objects: ObjectStore, name: str, *, nodes: int, price: float) -> None:
    """A gcp cluster whose ``nodes`` nodes (4 GPUs each) are all spot, as its agent reports (one
    status write, so the hub never sees it without its spot nodes)."""
    cluster_rt = rt(objects, CLUSTER_API, "Cluster")
    try:
        current = await objects.get(cluster_rt, name=name)
    except errors.NotFound:
        current = await put_cluster(objects, name, provider="gcp", pricing={A100: price})
    status = copy.deepcopy(current["status"])
    status["nodeShapes"] = [{**node_shape(nodes, gpus=4), "spot": True}] if nodes else []
    status["nodeSummary"] = {"total": max(nodes, 1), "ready": nodes, "spot": max(nodes, 1)}
    await objects.update_status(cluster_rt, {**current, "status": status})


async def placement(objects: ObjectStore) -> dict[str, int]:
    try:
        binding = await objects.get(rt(objects, WORK_API, "ResourceBinding"), namespace="default", name="infer-deployment")
    except errors.NotFound:
        return {}
    return {t["name"]: t["replicas"] for t in binding["spec"].get("clusters") or ()}


async def reclaim(objects: ObjectStore, cluster: str, *, pods: int, node: str, time: str) -> None:
    """What the agent writes for ``cluster``'s Work after a reclaim took ``pods`` of its pods."""
    async def current() -> dict[str, Any] | None:
        listed = await objects.list(rt(objects, WORK_API, "Work"), namespace=f"gpufed-es-{cluster}",
                                    label_selector=f"{LABEL_BINDING}=infer-deployment,{LABEL_WORK_NAMESPACE}=default")
        return listed.items[0] if listed.items else None

    work = await eventually(current, what=f"the Work in {cluster}")
    entry = {
        "identifier": {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "default", "name": "infer",
                       "ordinal": 0},
        "health": "Healthy",
        "reclaimed": {"pods": pods, "nodes": [node], "time": time},
    }
    await objects.update_status(rt(objects, WORK_API, "Work"), {**work, "status": {"manifestStatuses": [entry]}})


async def test_reclaimed_replicas_move_and_a_second_reclaim_goes_to_non_spot(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await spot_cluster(objects, "spot-a", nodes=1, price=0.35)
    await spot_cluster(objects, "spot-b", nodes=1, price=0.40)
    await put_cluster(objects, "ondemand", node_shape(2, gpus=4), provider="aws", pricing={A100: 4.1})
    await settled(manager)
    policy = propagation_policy("gpu")
    await objects.create(rt(objects, policy["apiVersion"], policy["kind"]), policy)
    app = deployment("infer", replicas=2)
    await objects.create(rt(objects, "apps/v1", "Deployment"), app)

    async def placed(expected: dict[str, int]) -> bool | None:
        now = await placement(objects)
        return True if now == expected else None

    await eventually(lambda: placed({"spot-a": 2}), what="both replicas on the cheapest spot cluster")

    # First reclaim: the replicas go to the next cheapest cluster, spot or not.
    await spot_cluster(objects, "spot-a", nodes=0, price=0.35)
    await reclaim(objects, "spot-a", pods=2, node="spot-a-0", time="2024-05-01T10:00:00Z")
    await eventually(lambda: placed({"spot-b": 2}), what="the replicas on spot-b")

    # Second reclaim within the hour: non-spot capacity first, though spot-a has room again.
    await spot_cluster(objects, "spot-a", nodes=1, price=0.35)
    await spot_cluster(objects, "spot-b", nodes=0, price=0.40)
    await reclaim(objects, "spot-b", pods=2, node="spot-b-0", time="2024-05-01T10:01:00Z")
    await eventually(lambda: placed({"ondemand": 2}), what="the replicas on the on-demand cluster")
    await settled(manager)

    binding = await objects.get(rt(objects, WORK_API, "ResourceBinding"), namespace="default", name="infer-deployment")
    history = json.loads(binding["metadata"]["annotations"][ANNOTATION_SPOT_RECLAIMS])
    assert history["count"] == 2
    assert [(r["cluster"], r["replicas"]) for r in history["recent"]] == [("spot-a", 2), ("spot-b", 2)]
    events = [e for e in (await objects.list(rt(objects, "v1", "Event"), namespace="default")).items
              if e["reason"] == "SpotReclaimed"]
    messages = sorted(e["message"] for e in events)
    assert len(messages) == 2, messages
    assert "spot node(s) spot-b-0 of cluster spot-b reclaimed: 2 replica(s) replaced" in messages[1]
    assert "preferring non-spot capacity" in messages[1] and "preferring" not in messages[0]

